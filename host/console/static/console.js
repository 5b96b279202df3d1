// The web console's only script of its own. Everything works without it; it adds two things.
"use strict";

// Polling pauses while a person is typing into (or has focus in) a form inside a live
// part, so an update never throws away a half-written reason.
function pageantIdle() {
  var active = document.activeElement;
  return !(active && active.closest && active.closest("[data-keep], form"));
}
window.pageantIdle = pageantIdle;

// A select marked data-refresh (a schedule's kind, a gate's kind or trigger) updates the
// editor's form at once instead of waiting for the "Update the form" button.
document.addEventListener("change", function (event) {
  var target = event.target;
  if (!target || !target.matches || !target.matches("select[data-refresh]")) return;
  var button = target.form && target.form.querySelector("[data-refresh-button]");
  if (button) button.click();
});
