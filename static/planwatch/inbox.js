/* The inbox's compact rows: open a question's form in place, keys (j/k, Enter, Escape),
   select a group's runs, and ages that stay true ("asked 40 s ago"). */
(function () {
  "use strict";
  function age(seconds) {
    var s = Math.max(0, Math.floor(seconds));
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min";
    if (s < 86400) {
      var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
      return m ? h + " h " + m + " min" : h + " h";
    }
    return Math.floor(s / 86400) + " d";
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-since]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("data-since"));
      if (!isNaN(t)) el.textContent = age((now - t) / 1000);
    });
  }
  setInterval(tick, 5000);

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
    var field = row.querySelector(".question.pending input, .question.pending select, .question.pending textarea");
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
