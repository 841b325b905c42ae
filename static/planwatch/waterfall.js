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

/* The axis's labels never meet: on each line (the ticks; the breaks' labels below them) a
   label that would touch one already shown is hidden, the axis's start and end first, then
   the breaks' labels, then the ticks between. The server spaces them for a phone's axis
   already; this keeps any width (a narrow window, a long "1 min 40 s") readable. Run when
   the page loads, when the axis is drawn again (a live run's batches) and on resize. */
(function () {
  "use strict";
  var GAP = 4;  // px between two labels of a line
  function declutter() {
    var axis = document.getElementById("wf-axis");
    if (!axis) return;
    var ticks = Array.prototype.slice.call(axis.querySelectorAll(".wf-tick"));
    var labels = Array.prototype.slice.call(axis.querySelectorAll(".wf-break-label"));
    var order = ticks.slice(0, 1).concat(ticks.slice(-1), labels, ticks.slice(1, -1));
    var kept = [];
    order.forEach(function (el) {
      if (kept.some(function (k) { return k.el === el; })) return;  // a one-tick axis
      el.classList.remove("is-crowded");
      var r = el.getBoundingClientRect();
      var meets = kept.some(function (k) {
        return r.left < k.r.right + GAP && k.r.left < r.right + GAP &&
               r.top < k.r.bottom && k.r.top < r.bottom;
      });
      if (meets) el.classList.add("is-crowded"); else kept.push({ el: el, r: r });
    });
  }
  var planned = false;
  function soon() {
    if (planned) return;
    planned = true;
    requestAnimationFrame(function () { planned = false; declutter(); });
  }
  document.addEventListener("htmx:oobAfterSwap", function (e) {
    var id = e.detail.target && e.detail.target.id;
    if (id === "wf-axis" || id === "trace-waterfall") soon();
  });
  document.addEventListener("htmx:afterSettle", soon);
  window.addEventListener("resize", soon);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", soon);
  else soon();
})();
