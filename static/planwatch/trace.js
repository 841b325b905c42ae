/* Planwatch trace view: draws the graph with Mermaid, marks what the run did on it, and
   reconnects the run's socket from the last event the page rendered. */
(function () {
  "use strict";
  var trace = (window.planwatchTrace = { socket: null, drawn: false });

  function lastSeq() {
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
    mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme: "neutral" });
    mermaid.render("trace-graph-svg", src.textContent).then(function (out) {
      canvas.innerHTML = out.svg;
      canvas.querySelectorAll("g.node").forEach(function (g) {
        var m = /(?:^|-)n_(.+)-\d+$/.exec(g.id);
        if (m) { g.id = "node-" + m[1]; g.classList.add("gnode"); g.dataset.node = m[1]; }
      });
      trace.drawn = true;
      mark();
    });
  }

  // Apply the server's marks (#trace-graph-state) to the drawn picture.
  function mark() {
    var el = document.getElementById("trace-graph-state");
    var canvas = document.querySelector("#trace-graph .graph-canvas");
    if (!el || !canvas || !trace.drawn) return;
    var state = JSON.parse(el.dataset.state);
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
