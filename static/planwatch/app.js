/* Planwatch, every page: an htmx extension that keeps socket pushes to what the page shows,
   and the live ticking of a running run's duration. */
(function () {
  "use strict";

  // A socket tells every watcher the same things; a page may not show them all (a runs list
  // filtered or paged, a trace without a task panel). Out-of-band parts whose target is not
  // on this page are dropped here, not handed to htmx, which reports each as an error.
  htmx.defineExtension("pw-known-targets", {
    transformResponse: function (text) {
      if (text.indexOf("hx-swap-oob") < 0) return text;
      var tpl = document.createElement("template");
      tpl.innerHTML = text;
      var kept = false, dropped = false;
      Array.prototype.slice.call(tpl.content.children).forEach(function (el) {
        var oob = el.getAttribute("hx-swap-oob");
        if (oob === null) { kept = true; return; }
        var selector = oob.indexOf(":") >= 0 ? oob.slice(oob.indexOf(":") + 1) : null;
        var target = selector ? document.querySelector(selector)
                              : (el.id && document.getElementById(el.id));
        if (target) kept = true;
        else { el.remove(); dropped = true; }
      });
      if (!dropped) return text;
      return kept ? tpl.innerHTML : "";
    },
  });

  // Seconds for people, as the server writes them (dashboard.web.presentation.waterfall.seconds_text).
  function secondsText(value) {
    if (value < 60) return value.toFixed(1) + " s";
    var whole = Math.round(value), rest = whole % 60;
    return Math.floor(whole / 60) + " min " + (rest < 10 ? "0" : "") + rest + " s";
  }

  // A run's working time (or its wait for people) ticks between the server's header renders.
  function tick() {
    document.querySelectorAll("[data-started]").forEach(function (el) {
      var started = Date.parse(el.dataset.started);
      if (!isNaN(started)) el.textContent = secondsText(Math.max(Date.now() - started, 0) / 1000);
    });
  }
  setInterval(tick, 1000);

  // A page marked data-title-count (the inbox) names the questions waiting in its tab's
  // title, "(3) Inbox · Planwatch", kept current with the navigation's live count.
  function titleCount() {
    var count = document.getElementById("nav-inbox-count");
    if (!count || !document.querySelector("[data-title-count]")) return;
    var n = parseInt(count.dataset.count || "0", 10) || 0;
    var title = (n ? "(" + n + ") " : "") + document.title.replace(/^\(\d+\) /, "");
    if (title !== document.title) document.title = title;
  }
  var nav = document.querySelector(".nav-inbox");
  if (nav) new MutationObserver(titleCount).observe(nav, {childList: true, subtree: true, attributes: true});
})();
