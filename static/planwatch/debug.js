// The debug panel (breakpoints, "paused before/after", branches) is drawn for the viewer's
// permissions, so the socket does not push it: it reloads itself when the live header's
// status changes (a step lands, a breakpoint pauses the run, the run ends).
(function () {
  "use strict";
  function watch() {
    var status = document.getElementById("trace-status");
    var panel = document.getElementById("run-debug");
    if (!status || !panel || !window.htmx) { return; }
    var url = panel.getAttribute("data-src");
    var last = status.textContent.trim();
    new MutationObserver(function () {
      var now = (document.getElementById("trace-status") || status).textContent.trim();
      if (now === last) { return; }
      last = now;
      // the breakpoints stay unfolded if the reader had opened them
      var fold = document.getElementById("debug-breakpoints-fold");
      var open = !!(fold && fold.open);
      window.htmx.ajax("GET", url, {target: "#run-debug", swap: "outerHTML"}).then(function () {
        var again = document.getElementById("debug-breakpoints-fold");
        if (again && open) { again.open = true; }
      });
    }).observe(document.getElementById("trace-main") || document.body,
               {subtree: true, childList: true, characterData: true});
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", watch);
  } else {
    watch();
  }
})();
