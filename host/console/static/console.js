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


// Times are drawn in the event's zone (UTC on hover). A person may ask for their own zone
// instead: the choice is kept in this browser and applied again after every live update.
var ZONE_KEY = "pageant.viewerZone";
var original = new WeakMap();
function showTimes(mine) {
  var full = new Intl.DateTimeFormat(undefined, {
    weekday: "short", year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short",
  });
  var clock = new Intl.DateTimeFormat(undefined, {
    hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false,
  });
  document.querySelectorAll("time[datetime][data-zone]").forEach(function (el) {
    if (!original.has(el)) original.set(el, el.textContent);
    var fmt = el.hasAttribute("data-clock") ? clock : full;
    el.textContent = mine ? fmt.format(new Date(el.getAttribute("datetime"))) : original.get(el);
  });
  var button = document.getElementById("zone-toggle");
  if (button) {
    button.setAttribute("aria-pressed", mine ? "true" : "false");
    button.textContent = mine ? "Show times in the event's zone" : "Show times in my zone";
  }
}
function viewerZone() {
  try { return window.localStorage.getItem(ZONE_KEY) === "mine"; } catch (e) { return false; }
}
document.addEventListener("DOMContentLoaded", function () {
  var slot = document.getElementById("zone-slot");
  if (slot && document.querySelector("time[data-zone]")) {
    var button = document.createElement("button");
    button.type = "button";
    button.id = "zone-toggle";
    button.addEventListener("click", function () {
      var mine = !viewerZone();
      try { window.localStorage.setItem(ZONE_KEY, mine ? "mine" : "event"); } catch (e) { /* kept for this page only */ }
      showTimes(mine);
    });
    slot.appendChild(button);
  }
  showTimes(viewerZone());
});
document.addEventListener("htmx:afterSwap", function () { showTimes(viewerZone()); });

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
