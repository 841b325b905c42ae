/* The inbox's compact rows: open a question's form in place, keys (j/k, Enter, Escape),
   and select a group's runs (ages tick in app.js, on every page). */
(function () {
  "use strict";

  // on a phone the filters beyond the search fold behind "Filters" (open once opened, across
  // the swaps of the list each filter makes)
  var filtersOpen = false, PHONE = window.matchMedia("(max-width: 600px)");
  function foldFilters() {
    var form = document.querySelector(".inbox-filters"), toggle = form && form.querySelector(".filters-toggle");
    if (!toggle) return;
    toggle.hidden = false;
    var folded = PHONE.matches && !filtersOpen && !form.querySelector(".flash-error");
    form.classList.toggle("folded", folded);
    toggle.setAttribute("aria-expanded", folded ? "false" : "true");
  }
  document.addEventListener("click", function (e) {
    var toggle = e.target.closest && e.target.closest(".inbox-filters .filters-toggle");
    if (!toggle) return;
    filtersOpen = toggle.getAttribute("aria-expanded") !== "true";
    foldFilters();
  });
  document.addEventListener("DOMContentLoaded", foldFilters);
  document.addEventListener("htmx:afterSettle", foldFilters);
  if (PHONE.addEventListener) PHONE.addEventListener("change", foldFilters);
  foldFilters();

  function rowOf(link) { return document.getElementById(link.getAttribute("aria-controls")); }
  function close(link) {
    var row = rowOf(link);
    if (!row) return;
    row.hidden = true;
    link.setAttribute("aria-expanded", "false");
    link.focus();
  }
  // a second click on an open question closes it (before htmx fetches it again)
  document.addEventListener("click", function (e) {
    var link = e.target.closest && e.target.closest("a.inbox-question[aria-controls]");
    if (link && link.getAttribute("aria-expanded") === "true") {
      e.preventDefault(); e.stopPropagation(); close(link);
    }
  }, true);
  document.addEventListener("htmx:afterSwap", function (e) {
    var row = e.detail.target.closest && e.detail.target.closest(".inbox-open-row");
    if (!row) return;
    row.hidden = false;
    var link = document.querySelector('a[aria-controls="' + row.id + '"]');
    if (link) link.setAttribute("aria-expanded", "true");
    var field = row.querySelector(".question.pending .q-input input, .question.pending .q-input select, .question.pending .q-input textarea");
    if (field && e.detail.requestConfig && e.detail.requestConfig.verb === "get") field.focus();
  });
  document.addEventListener("change", function (e) {
    if (!e.target.classList || !e.target.classList.contains("select-group")) return;
    var form = "bulk-" + e.target.getAttribute("data-group");
    document.querySelectorAll('input[name="interrupt"][form="' + form + '"]').forEach(function (box) {
      box.checked = e.target.checked;
    });
  });
  function links() {
    return Array.prototype.slice.call(document.querySelectorAll("#inbox-table a.inbox-question"));
  }
  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    var typing = e.target.closest && e.target.closest("input, textarea, select, [contenteditable]");
    if (e.key === "Escape") {
      var open = e.target.closest && e.target.closest(".inbox-open-row");
      var link = open ? document.querySelector('a[aria-controls="' + open.id + '"]')
        : (e.target.matches && e.target.matches("a.inbox-question[aria-expanded=true]") ? e.target : null);
      if (link) { e.preventDefault(); close(link); }
      return;
    }
    if (typing || (e.key !== "j" && e.key !== "k")) return;
    var all = links();
    if (!all.length) return;
    var at = all.indexOf(document.activeElement);
    var next = e.key === "j" ? Math.min(all.length - 1, at + 1) : Math.max(0, at < 0 ? 0 : at - 1);
    e.preventDefault();
    all[next].focus();
    all[next].scrollIntoView({ block: "nearest" });
  });
})();
