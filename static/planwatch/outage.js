/* Planwatch, every page: a banner while the server or its database cannot be reached.
   A request of the page that fails (no answer, a timeout, a 5xx) makes the page ask
   /readyz, every few seconds and only while something failed, what is down: the banner
   names it ("The database cannot be reached"), and goes once /readyz answers 200; then
   "planwatch:back" is dispatched on the document (what was kept is sent again, app.js).
   The 503 page of a request the database could not serve loads itself again then. */
(function () {
  "use strict";
  var POLL_MS = 2000;
  var state = { down: false, kept: false, polling: false, timer: null, what: "" };

  function banner(text, kind) {
    var el = document.getElementById("outage-banner");
    if (!el) {
      el = document.createElement("div");
      el.id = "outage-banner";
      el.setAttribute("role", "alert");
      (document.getElementById("content") || document.body).prepend(el);
    }
    el.className = "live-banner live-" + kind;
    el.textContent = text;
    el.hidden = !text;
  }

  function downText(answer) {
    var down = (answer && answer.down) || [];
    if (down.indexOf("database") >= 0) {
      return "The database cannot be reached. Nothing you send now can be saved: it is " +
             "kept on this page and sent again when the database answers.";
    }
    if (down.length) return "Planwatch is not ready (" + down.join(", ") + " down). What you " +
                            "send is kept and sent again when it is.";
    return "";
  }

  function showDown(text) {
    state.down = true;
    state.what = text;
    banner(text, "off");
    document.body.classList.add("is-unreachable");
  }

  function back() {
    var was = state.down, kept = state.kept;
    state.down = false;
    state.kept = false;
    if (state.timer) { clearTimeout(state.timer); state.timer = null; }
    document.body.classList.remove("is-unreachable");
    if (document.body.hasAttribute("data-outage-page")) { window.location.reload(); return; }
    if (was) {
      banner("Back: the server and its database answer again.", "on");
      setTimeout(function () { if (!state.down) banner("", "on"); }, 6000);
    }
    if (was || kept) document.dispatchEvent(new CustomEvent("planwatch:back"));
  }

  function poll() {
    state.timer = null;
    var done = false;
    var controller = window.AbortController ? new AbortController() : null;
    var guard = setTimeout(function () { if (controller) controller.abort(); }, POLL_MS * 2);
    fetch("/readyz", { cache: "no-store", credentials: "same-origin",
                       signal: controller ? controller.signal : undefined })
      .then(function (response) {
        return response.json().then(function (answer) { return [response.ok, answer]; },
                                    function () { return [response.ok, null]; });
      })
      .then(function (result) {
        done = true;
        if (result[0]) { back(); return; }
        showDown(downText(result[1]) || "The server answers, but is not ready.");
      }, function () {
        done = true;
        showDown("The server cannot be reached. What you send is kept on this page and " +
                 "sent again when it answers.");
      })
      .then(function () {
        clearTimeout(guard);
        state.polling = false;
        if (done && state.down && !state.timer) state.timer = setTimeout(poll, POLL_MS);
      });
  }

  /* Something failed: find out what (now), and keep asking while it stays down; ``kept``:
     the page kept something to send again once the server answers. */
  function failed(kept) {
    if (kept) state.kept = true;
    if (state.timer || state.polling) return;  // a poll is under way or planned
    state.polling = true;
    poll();
  }

  /* Whether a failed request's status says the server or its database could not serve
     it (no answer, a gateway's, a 503), as against a fault of this request (a 500). */
  function unreachable(status) { return status === 0 || (status >= 502 && status <= 504); }

  window.planwatchOutage = { failed: failed, unreachable: unreachable,
                             isDown: function () { return state.down; } };

  if (window.htmx) {
    document.addEventListener("htmx:sendError", function () { failed(true); });
    document.addEventListener("htmx:timeout", function () { failed(true); });
    document.addEventListener("htmx:responseError", function (e) {
      var status = e.detail.xhr ? e.detail.xhr.status : 0;
      if (unreachable(status) || status === 500) failed(unreachable(status));
    });
  }
  if (document.body && document.body.hasAttribute("data-outage-page")) {
    state.down = true;
    state.timer = setTimeout(poll, POLL_MS);
  }
})();
