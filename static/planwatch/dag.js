/* Planwatch task DAG: draws each plan's dependencies as arrows (an SVG under the cards,
   from a task down to the tasks that wait for it) and moves focus to a task's details.
   Only the plans whose cards changed are drawn again, and every plan is measured before
   any is drawn: drawing one plan's arrows and then measuring the next laid the page out
   once per plan (a 215-task plan's live page spent most of its DAG time there). */
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";

  // Where each arrow of a plan goes, in the scrolled content of the plan's box (reads only).
  function measure(cols) {
    var byId = {}, arrows = [];
    cols.querySelectorAll(".task[data-tid]").forEach(function (t) { byId[t.dataset.tid] = t; });
    var origin = cols.getBoundingClientRect();
    function box(el) {
      var r = el.getBoundingClientRect();
      return { x: (r.left + r.right) / 2 - origin.left + cols.scrollLeft,
               top: r.top - origin.top + cols.scrollTop, bottom: r.bottom - origin.top + cols.scrollTop };
    }
    Object.keys(byId).forEach(function (tid) {
      var task = byId[tid];
      (task.dataset.deps || "").split(" ").forEach(function (dep) {
        var from = byId[dep];
        if (!from) return;  // a dependency outside this plan is named in the task's details
        arrows.push({ a: box(from), b: box(task), status: from.dataset.status });
      });
    });
    return { cols: cols, arrows: arrows, width: cols.scrollWidth, height: cols.scrollHeight };
  }

  // The plan's arrows as its SVG (writes only).
  function render(plan, index) {
    var cols = plan.cols, old = cols.querySelector("svg.dag-edges");
    if (old) old.remove();
    if (!plan.arrows.length) return;
    var svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "dag-edges");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("width", plan.width);
    svg.setAttribute("height", plan.height);
    plan.arrows.forEach(function (arrow) {
      // rows by level: from the bottom of a task down to the top of one that waits for it
      var x1 = arrow.a.x, y1 = arrow.a.bottom, x2 = arrow.b.x, y2 = arrow.b.top;
      var dy = Math.max(8, (y2 - y1) / 2);
      var path = document.createElementNS(SVG, "path");
      path.setAttribute("d", "M" + x1 + "," + y1 + " C" + x1 + "," + (y1 + dy) + " " +
                        x2 + "," + (y2 - dy) + " " + x2 + "," + (y2 - 3));
      path.setAttribute("class", "edge from-" + arrow.status);
      path.setAttribute("marker-end", "url(#dag-arrow-" + index + ")");
      svg.appendChild(path);
    });
    var defs = document.createElementNS(SVG, "defs");
    defs.innerHTML = '<marker id="dag-arrow-' + index + '" viewBox="0 0 6 6" refX="5" refY="3" ' +
      'markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L6,3 L0,6 z"/></marker>';
    svg.insertBefore(defs, svg.firstChild);
    cols.insertBefore(svg, cols.firstChild);
  }

  var dirty = null;  // the plans to draw again (null: none; "all": every plan)
  function draw() {
    var all = Array.prototype.slice.call(document.querySelectorAll("#trace-dag .dag-levels"));
    var which = dirty === "all" ? all : all.filter(function (c) { return dirty.has(c); });
    dirty = null;
    which.map(measure).forEach(function (plan) { render(plan, all.indexOf(plan.cols)); });
  }
  function schedule(plan) {  // null: every plan
    var first = dirty === null;
    if (!plan || dirty === "all") dirty = "all";
    else (dirty = dirty || new Set()).add(plan);
    if (first) requestAnimationFrame(draw);
  }
  function drawAll() { dirty = "all"; draw(); }

  document.addEventListener("DOMContentLoaded", drawAll);
  window.addEventListener("resize", function () { schedule(null); });
  document.addEventListener("htmx:oobAfterSwap", function (e) {
    // e.detail.target: what the partial replaced or went into; e.target: what came in
    var t = e.detail.target, el = e.target;
    if (!t) return;
    if (t.id === "trace-dag") { schedule(null); return; }
    if (!el.classList) return;
    if (el.classList.contains("task")) schedule(el.closest(".dag-levels"));
    else if (el.classList.contains("dag-group")) schedule(el.querySelector(".dag-levels"));
  });
  document.addEventListener("htmx:afterSettle", function (e) {
    var t = e.detail.target;
    if (t && t.id === "trace-main") schedule(null);
    // a task's details arrived: take the reader (and the keyboard) there
    if (t && t.id === "task-detail") t.focus({ preventScroll: false });
  });
  window.planwatchDag = { draw: drawAll };
})();
