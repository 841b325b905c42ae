/* The waterfall is drawn again by the server with each batch of events: keep the reader's
   place in it (the groups they opened or closed, where they scrolled) across the swap. */
(function () {
  "use strict";
  var kept = null;
  function box() { return document.querySelector("#trace-waterfall .wf-box"); }
  document.addEventListener("htmx:oobBeforeSwap", function (e) {
    if (!e.detail.target || e.detail.target.id !== "trace-waterfall") return;
    var b = box();
    if (!b) return;
    var open = {};
    b.querySelectorAll("details.wf-group").forEach(function (d) { open[d.id] = d.open; });
    kept = { open: open, top: b.scrollTop, left: b.scrollLeft };
  });
  document.addEventListener("htmx:oobAfterSwap", function (e) {
    if (!kept || !e.detail.target || e.detail.target.id !== "trace-waterfall") return;
    var b = box(), was = kept;
    kept = null;
    if (!b) return;
    b.querySelectorAll("details.wf-group").forEach(function (d) {
      if (Object.prototype.hasOwnProperty.call(was.open, d.id)) d.open = was.open[d.id];
    });
    b.scrollTop = was.top;
    b.scrollLeft = was.left;
  });
})();
