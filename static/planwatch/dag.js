/* Planwatch task DAG: draws each plan's dependencies as arrows (an SVG under the cards,
   from a task down to the tasks that wait for it) and moves focus to a task's details. */
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";

  function drawGroup(cols, index) {
    var old = cols.querySelector("svg.dag-edges");
    if (old) old.remove();
    var byId = {};
    cols.querySelectorAll(".task[data-tid]").forEach(function (t) { byId[t.dataset.tid] = t; });
    var svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "dag-edges");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("width", cols.scrollWidth);
    svg.setAttribute("height", cols.scrollHeight);
    var n = 0, origin = cols.getBoundingClientRect();
    // positions in the scrolled content of the plan's box, wherever each card sits
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
        var a = box(from), b = box(task);
        // rows by level: from the bottom of a task down to the top of one that waits for it
        var x1 = a.x, y1 = a.bottom, x2 = b.x, y2 = b.top;
        var dy = Math.max(8, (y2 - y1) / 2);
        var path = document.createElementNS(SVG, "path");
        path.setAttribute("d", "M" + x1 + "," + y1 + " C" + x1 + "," + (y1 + dy) + " " +
                          x2 + "," + (y2 - dy) + " " + x2 + "," + (y2 - 3));
        path.setAttribute("class", "edge from-" + from.dataset.status);
        path.setAttribute("marker-end", "url(#dag-arrow-" + index + ")");
        svg.appendChild(path);
        n += 1;
      });
    });
    if (!n) return;
    var defs = document.createElementNS(SVG, "defs");
    defs.innerHTML = '<marker id="dag-arrow-' + index + '" viewBox="0 0 6 6" refX="5" refY="3" ' +
      'markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L6,3 L0,6 z"/></marker>';
    svg.insertBefore(defs, svg.firstChild);
    cols.insertBefore(svg, cols.firstChild);
  }

  function drawAll() {
    document.querySelectorAll("#trace-dag .dag-levels").forEach(drawGroup);
  }
  var pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; drawAll(); });
  }

  document.addEventListener("DOMContentLoaded", drawAll);
  window.addEventListener("resize", schedule);
  document.addEventListener("htmx:oobAfterSwap", function (e) {
    var t = e.detail.target;
    if (t && (t.id === "trace-dag" || (t.classList && t.classList.contains("task")))) schedule();
  });
  document.addEventListener("htmx:afterSettle", function (e) {
    var t = e.detail.target;
    if (t && t.id === "trace-main") schedule();
    // a task's details arrived: take the reader (and the keyboard) there
    if (t && t.id === "task-detail") t.focus({ preventScroll: false });
  });
  window.planwatchDag = { draw: drawAll };
})();
