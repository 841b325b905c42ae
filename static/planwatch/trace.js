/* Planwatch trace view: draws the graph with Mermaid, marks what the run did on it, and
   reconnects the run's socket from the last event the page rendered. */
(function () {
  "use strict";
  var trace = (window.planwatchTrace = { socket: null, drawn: false });

  function lastSeq() {
    // what the page received is swapped in first: its last event is the one asked after
    if (window.planwatchLive) window.planwatchLive.flush();
    var cursor = document.getElementById("trace-cursor");
    return cursor ? cursor.dataset.lastSeq : "0";
  }

  // Every (re)connect asks for the events after the last one on the page.
  var create = htmx.createWebSocket;
  htmx.createWebSocket = function (url) {
    var u = new URL(url, window.location.href);
    if (/^\/ws\/runs\/[0-9a-f-]+\/$/.test(u.pathname)) u.searchParams.set("after", lastSeq());
    trace.socket = create(u.toString());
    return trace.socket;
  };
  // A socket the page dropped on purpose (trace.drop) comes back like a lost one would.
  trace.drop = function (pauseMs) {
    trace.dropped = pauseMs || 100;
    trace.socket.close(4000, "dropped by the page");
  };
  document.addEventListener("htmx:wsClose", function (e) {
    var pause = trace.dropped;
    if (pause) {
      trace.dropped = 0;
      setTimeout(function () { e.detail.socketWrapper.reconnect(); }, pause);
    }
  });

  function draw() {
    var box = document.getElementById("trace-graph");
    var src = box && box.querySelector(".mermaid-src");
    var canvas = box && box.querySelector(".graph-canvas");
    if (!src || !canvas || canvas.dataset.drawn || !window.mermaid) return;
    canvas.dataset.drawn = "1";
    // Mermaid lays a graph out in one long task (0.5-1.5 s of main thread on this machine's
    // 215-task page): the picture of a graph's source is kept for the tab's session, so the
    // next run of the same graph opens without it
    var key = "planwatch-graph:" + hash(src.textContent), kept = null;
    try { kept = window.sessionStorage.getItem(key); } catch (e) { /* storage off */ }
    if (kept) { show(canvas, kept); return; }
    mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme: "neutral" });
    mermaid.render("trace-graph-svg", src.textContent).then(function (out) {
      try { window.sessionStorage.setItem(key, out.svg); } catch (e) { /* full or off */ }
      show(canvas, out.svg);
    });
  }

  function show(canvas, svg) {
    canvas.innerHTML = svg;
    canvas.querySelectorAll("g.node").forEach(function (g) {
      var m = /(?:^|-)n_(.+)-\d+$/.exec(g.id);
      if (m) { g.id = "node-" + m[1]; g.classList.add("gnode"); g.dataset.node = m[1]; }
    });
    trace.drawn = true;
    mark();
  }

  function hash(text) {  // djb2: a key per source, not a secret
    var h = 5381;
    for (var i = 0; i < text.length; i++) h = ((h << 5) + h + text.charCodeAt(i)) | 0;
    return (h >>> 0).toString(36) + "-" + text.length;
  }

  // Apply the server's marks (#trace-graph-state) to the drawn picture.
  function mark() {
    var el = document.getElementById("trace-graph-state");
    var canvas = document.querySelector("#trace-graph .graph-canvas");
    if (!el || !canvas || !trace.drawn) return;
    var state = JSON.parse(el.dataset.state);
    if (state.label) canvas.setAttribute("aria-label", state.label);
    canvas.querySelectorAll("g.gnode").forEach(function (g) {
      var name = g.dataset.node, visits = state.visits[name] || 0;
      g.classList.toggle("visited", visits > 0);
      g.classList.toggle("is-current", state.current === name);
      g.classList.toggle("has-failed", state.failed.indexOf(name) >= 0);
      g.dataset.visits = visits;
      var badge = g.querySelector("text.visits");
      if (visits > 0) {
        if (!badge) {
          var box = g.getBBox();
          badge = document.createElementNS("http://www.w3.org/2000/svg", "text");
          badge.setAttribute("class", "visits");
          badge.setAttribute("x", box.x + box.width - 2);
          badge.setAttribute("y", box.y + 2);
          g.appendChild(badge);
        }
        badge.textContent = "×" + visits;
      }
    });
    var taken = {};
    state.taken.forEach(function (edge) { taken["L_n_" + edge[0] + "_n_" + edge[1]] = true; });
    canvas.querySelectorAll("path[data-id]").forEach(function (p) {
      p.classList.toggle("taken", !!taken[p.dataset.id.replace(/_\d+$/, "")]);
    });
  }

  document.addEventListener("DOMContentLoaded", draw);
  document.addEventListener("htmx:afterSettle", draw);
  document.addEventListener("htmx:oobAfterSwap", function (e) {
    if (e.detail.target && e.detail.target.id === "trace-graph-state") mark();
  });
  trace.mark = mark;
})();

/* Replay: the chosen event's row is opened (server side) and scrolled into view; ← and →
   step by node run, Shift+← and Shift+→ by single event. */
(function () {
  "use strict";
  function showAt() {
    var main = document.getElementById("trace-main");
    if (!main || !main.dataset.at) return;
    var ev = document.getElementById("ev-" + main.dataset.at);
    var row = ev && (ev.closest(".grp") || ev);
    var box = document.getElementById("trace-timeline");
    if (!row || !box) return;
    var offset = row.getBoundingClientRect().top - box.getBoundingClientRect().top;
    box.scrollTop += offset - box.clientHeight / 3;
  }
  document.addEventListener("DOMContentLoaded", showAt);
  document.addEventListener("htmx:afterSettle", function (e) {
    if (e.detail.target && e.detail.target.id === "trace-main") showAt();
  });
  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    var tag = (e.target && e.target.tagName) || "";
    if (/^(INPUT|TEXTAREA|SELECT)$/.test(tag) || (e.target && e.target.isContentEditable)) return;
    var id = { ArrowLeft: "replay-prev", ArrowRight: "replay-next" }[e.key];
    if (id && e.shiftKey) id += "-event";
    var link = id && document.getElementById(id);
    if (!link || link.getAttribute("aria-disabled") === "true") return;
    e.preventDefault();
    link.click();
  });
})();

/* Timeline filters on a live page: rows the socket appends (or completes) are shown only
   when they match the page's node and kind filters, as the server chose the rows it drew. */
(function () {
  "use strict";
  function apply() {
    var box = document.getElementById("trace-timeline");
    if (!box || (!box.dataset.node && !box.dataset.kind)) return;
    box.querySelectorAll(".grp").forEach(function (row) {
      var sum = row.querySelector(".grp-sum");
      var kinds = ((sum && sum.dataset.kinds) || "").split(" ");
      var ok = (!box.dataset.node || row.dataset.node === box.dataset.node) &&
               (!box.dataset.kind || kinds.indexOf(box.dataset.kind) >= 0);
      row.hidden = !ok;
    });
    var none = document.getElementById("timeline-none");
    if (none) none.hidden = !!box.querySelector(".grp:not([hidden])");
  }
  document.addEventListener("htmx:oobAfterSwap", function (e) {
    var t = e.detail.target;
    if (t && (t.id === "trace-timeline" || /^grp-/.test(t.id || ""))) apply();
  });
})();

/* Live timeline: follows new rows while the reader is at the bottom; once they scroll away
   a pill counts what arrived below and brings them back. */
(function () {
  "use strict";
  var unseen = 0;
  function box() { return document.getElementById("trace-timeline"); }
  function atBottom(b) { return b.scrollHeight - b.scrollTop - b.clientHeight < 40; }
  function pill() { return document.getElementById("timeline-new"); }
  function showPill() {
    var p = pill();
    if (!p) return;
    p.hidden = unseen === 0;
    p.textContent = unseen + " new event" + (unseen === 1 ? "" : "s") + " ↓";
  }
  var follow = true;
  document.addEventListener("scroll", function (e) {
    var b = box();
    if (e.target !== b) return;
    follow = atBottom(b);
    if (follow) { unseen = 0; showPill(); }
  }, true);
  var added = 0;
  document.addEventListener("htmx:oobBeforeSwap", function (e) {
    var b = box();
    if (!b || e.detail.target !== b) return;
    follow = atBottom(b);
    added = e.detail.fragment ? e.detail.fragment.querySelectorAll("[data-seq]").length : 1;
  });
  document.addEventListener("htmx:oobAfterSwap", function (e) {
    var b = box();
    if (!b || e.detail.target !== b || document.getElementById("trace-main").dataset.at) return;
    if (follow) b.scrollTop = b.scrollHeight;
    else { unseen += added || 1; showPill(); }
  });
  document.addEventListener("click", function (e) {
    if (!e.target.closest || !e.target.closest("#timeline-new")) return;
    var b = box();
    b.scrollTop = b.scrollHeight;
    unseen = 0; follow = true; showPill();
    b.focus();
  });
  document.addEventListener("DOMContentLoaded", function () {
    var b = box();
    if (b && !document.getElementById("trace-main").dataset.at) b.scrollTop = b.scrollHeight;
  });
})();
