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
        arrows.push({ a: box(from), b: box(task), status: from.dataset.status,
                      from: dep, to: tid });
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
      path.dataset.from = arrow.from;
      path.dataset.to = arrow.to;
      svg.appendChild(path);
    });
    var defs = document.createElementNS(SVG, "defs");
    defs.innerHTML = '<marker id="dag-arrow-' + index + '" viewBox="0 0 6 6" refX="5" refY="3" ' +
      'markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L6,3 L0,6 z"/></marker>';
    svg.insertBefore(defs, svg.firstChild);
    cols.insertBefore(svg, cols.firstChild);
  }

  /* A plan's arrows are drawn when it comes near the screen, not before: measuring every
     card of a 215-task plan when the page opened held a phone's main thread; the plans
     out of sight (and not laid out: content-visibility, trace.css) wait, marked stale. */
  var near = new Set();  // the plans on or near the screen
  var watcher = window.IntersectionObserver ? new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) {
      if (!entry.isIntersecting) { near.delete(entry.target); return; }
      near.add(entry.target);
      if (entry.target.dataset.stale !== "0") schedule(entry.target);
    });
  }, { rootMargin: "300px 0px" }) : null;
  function watch() {
    if (!watcher) return;
    document.querySelectorAll("#trace-dag .dag-levels").forEach(function (cols) {
      if (cols.dataset.watched) return;
      cols.dataset.watched = "1";
      watcher.observe(cols);
    });
  }

  var dirty = null;  // the plans to draw again (null: none; "all": every plan)
  function draw() {
    watch();
    var all = Array.prototype.slice.call(document.querySelectorAll("#trace-dag .dag-levels"));
    var which = dirty === "all" ? all : all.filter(function (c) { return dirty.has(c); });
    dirty = null;
    which = which.filter(function (cols) {
      var now = !watcher || near.has(cols);
      cols.dataset.stale = now ? "0" : "1";  // drawn when it comes near the screen
      return now;
    });
    which.map(measure).forEach(function (plan) { render(plan, all.indexOf(plan.cols)); });
    refresh();
  }

  /* What the reader asked the DAG to show, kept across live redraws: the statuses picked
     out in the legend (with each status's count of cards), the task chosen (with what it
     waits for and what waits for it), the plans folded. */
  var picked = {}, chosen = null, folded = {};
  function refresh() {
    var dag = document.getElementById("trace-dag");
    if (!dag) return;
    var cards = dag.querySelectorAll(".task[data-tid]"), counts = {};
    var filtering = Object.keys(picked).some(function (k) { return picked[k]; });
    cards.forEach(function (card) {
      var status = card.dataset.status;
      counts[status] = (counts[status] || 0) + 1;
      card.classList.toggle("dim-filter", filtering && !picked[status]);
    });
    dag.querySelectorAll(".dag-filter").forEach(function (chip) {
      var n = counts[chip.dataset.status] || 0;
      chip.querySelector(".dag-n").textContent = n;
      chip.setAttribute("aria-pressed", picked[chip.dataset.status] ? "true" : "false");
      chip.classList.toggle("is-zero", n === 0);
    });
    dag.querySelectorAll(".dag-group").forEach(function (group) {
      var fold = !!folded[group.id], button = group.querySelector(".dag-fold");
      group.classList.toggle("folded", fold);
      if (button) button.setAttribute("aria-expanded", fold ? "false" : "true");
      var note = group.querySelector(".dag-folded-n");
      if (note) note.textContent = fold ? "(" + group.querySelectorAll(".task").length + " tasks folded)" : "";
    });
    highlight(dag, cards);
  }

  // The chosen task, every task it waits for (upstream) and every task waiting for it
  // (downstream), through the whole plan tree; the rest dimmed.
  function highlight(dag, cards) {
    var deps = {}, waiters = {}, byId = {};
    cards.forEach(function (card) {
      var tid = card.dataset.tid;
      byId[tid] = card;
      deps[tid] = (card.dataset.deps || "").split(" ").filter(Boolean);
      deps[tid].forEach(function (d) { (waiters[d] = waiters[d] || []).push(tid); });
    });
    if (chosen && !byId[chosen]) chosen = null;
    function reach(start, next) {
      var seen = {}, todo = [start];
      while (todo.length) {
        (next[todo.pop()] || []).forEach(function (t) { if (!seen[t]) { seen[t] = true; todo.push(t); } });
      }
      return seen;
    }
    var up = chosen ? reach(chosen, deps) : {}, down = chosen ? reach(chosen, waiters) : {};
    dag.classList.toggle("has-chosen", !!chosen);
    cards.forEach(function (card) {
      var tid = card.dataset.tid;
      card.classList.toggle("is-chosen", tid === chosen);
      card.classList.toggle("is-up", !!up[tid]);
      card.classList.toggle("is-down", !!down[tid]);
    });
    dag.querySelectorAll(".dag-edges path[data-from]").forEach(function (path) {
      var a = path.dataset.from, b = path.dataset.to;
      var on = chosen && ((up[a] || a === chosen) && (up[b] || b === chosen) ||
                          (down[b] || b === chosen) && (down[a] || a === chosen));
      path.classList.toggle("on", !!on);
    });
  }

  document.addEventListener("click", function (e) {
    var el = e.target.closest && e.target.closest("#trace-dag .dag-filter, #trace-dag .dag-fold, #trace-dag .task[data-tid]");
    if (!el) return;
    if (el.classList.contains("dag-filter")) {
      picked[el.dataset.status] = !picked[el.dataset.status];
    } else if (el.classList.contains("dag-fold")) {
      var group = el.closest(".dag-group");
      folded[group.id] = !folded[group.id];
      if (!folded[group.id]) { refresh(); schedule(group.querySelector(".dag-levels")); return; }
    } else {
      chosen = chosen === el.dataset.tid ? null : el.dataset.tid;  // again: unchosen
    }
    refresh();
  });
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
