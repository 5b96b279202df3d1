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
  if (button) {
    refocus = target.id;
    button.click();
  }
});

// While the editor's form is redrawn (an add, move or remove, or a kind changed) its fields
// are disabled, so nothing typed in the meantime is lost; afterwards the focus goes where the
// server says (data-focus: the moved step's button at its new place, or the sentence saying
// what changed), or back to the select whose change redrew the form.
var refocus = null;
// htmx:load fires on the new form once it is in the page (the old one, swapped out, is no
// longer there to carry an event); the cap meter's answers are not the form.
document.addEventListener("htmx:load", function (event) {
  var part = event.target;
  if (!part || part.id !== "editor-part") return;
  var id = refocus || part.getAttribute("data-focus");
  refocus = null;
  var target = id && (document.getElementById(id) || document.getElementById("notice"));
  if (!target) return;
  if (target.id === "notice") target.setAttribute("tabindex", "-1");
  target.focus();
});


// Every time on a page is drawn by the server in the page's one zone. "Show times in my zone"
// posts the browser's own zone, which only the browser knows; the server keeps the choice and
// draws every page in it.
function fillBrowserZone() {
  var zone = "";
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { zone = ""; }
  document.querySelectorAll("input[data-browser-zone]").forEach(function (el) { el.value = zone; });
}
document.addEventListener("DOMContentLoaded", fillBrowserZone);

// The editor warns before a page is left with changes that were not saved: any edit of
// its fields, and any form it drew after an add, move or remove (marked data-unsaved).
var edited = false;
function editorOf(target) {
  return target && target.closest ? target.closest("form#editor") : null;
}
document.addEventListener("input", function (event) { if (editorOf(event.target)) edited = true; });
document.addEventListener("change", function (event) { if (editorOf(event.target)) edited = true; });
document.addEventListener("submit", function (event) {
  if (event.target && event.target.id === "editor") {
    edited = false;
    event.target.removeAttribute("data-unsaved");
  }
});
window.addEventListener("beforeunload", function (event) {
  if (edited || document.querySelector("form#editor[data-unsaved]")) {
    event.preventDefault();
    event.returnValue = "";
  }
});
