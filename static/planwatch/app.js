/* Planwatch, every page: the live ticking of a running run's duration, the connection's
   state, and (below) how socket pushes are swapped in. */
(function () {
  "use strict";

  // Seconds for people, as the server writes them (dashboard.web.presentation.waterfall.seconds_text).
  function secondsText(value) {
    if (value < 60) return value.toFixed(1) + " s";
    var whole = Math.round(value), rest = whole % 60;
    return Math.floor(whole / 60) + " min " + (rest < 10 ? "0" : "") + rest + " s";
  }

  // The connection is part of the truth. While a page's socket is down it says so
  // ("Reconnecting…"), its clocks stop, and what it would post (an answer, a cancel) is kept
  // in its form with a note and sent once when the socket is back (the server refuses a
  // second answer); then it says it is live again and what it caught up.
  var live = { offline: false, queued: [], seqAtClose: null };
  htmx.config.wsReconnectDelay = function (retries) {  // capped: back within 5 s of the server
    return Math.min(5000, 250 * Math.pow(2, retries)) * (0.5 + Math.random() / 2);
  };
  // A socket the server closed "try again later" (4013: its database cannot be reached;
  // daphne sends no close code below 3000 but 1000, so not WebSocket's own 1013) connects
  // again after a pause, as htmx's extension does for 1012 and 1013: a run's page asks for
  // the events after its last one (trace.js) and so catches up with what the run did.
  var TRY_AGAIN_LATER = 4013;
  document.addEventListener("htmx:wsClose", function (e) {
    var closed = e.detail.event, wrapper = e.detail.socketWrapper, elt = e.target;
    if (!closed || closed.code !== TRY_AGAIN_LATER || !wrapper) return;
    var tries = elt.planwatchTries || 0;
    setTimeout(function () {
      if (!elt.isConnected) return;
      elt.planwatchTries = tries + 1;
      wrapper.reconnect();
    }, htmx.config.wsReconnectDelay(tries));
  });
  document.addEventListener("htmx:wsOpen", function (e) { e.target.planwatchTries = 0; });
  function seqNow() {
    var cursor = document.getElementById("trace-cursor");
    return cursor ? parseInt(cursor.dataset.lastSeq || "0", 10) : null;
  }
  function banner(text, kind) {
    var el = document.getElementById("live-banner");
    if (!el) {
      el = document.createElement("div");
      el.id = "live-banner";
      el.setAttribute("role", "status");
      el.setAttribute("aria-live", "polite");
      (document.getElementById("content") || document.body).prepend(el);
    }
    el.className = "live-banner live-" + kind;
    el.textContent = text;
    el.hidden = !text;
  }
  function note(form, text) {
    var el = form.querySelector(".offline-note");
    if (!el && text) {
      el = document.createElement("p");
      el.className = "offline-note";
      el.setAttribute("role", "alert");
      form.prepend(el);
    }
    if (el) { el.textContent = text; el.hidden = !text; }
  }
  // ``submit``: the button's value the post was sent with ("all", or one question's), sent
  // again with it
  // what a form holds, to put back should the page redraw the form meanwhile (a socket
  // that reconnects draws its section again, empty)
  function snapshot(form) {
    var values = [];
    if (form.tagName !== "FORM") return values;
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!el.name || el.type === "submit" || el.type === "button" ||
          el.name === "csrfmiddlewaretoken") return;
      if ((el.type === "checkbox" || el.type === "radio") && !el.checked) return;
      values.push([el.name, el.value]);
    });
    return values;
  }
  function keep(elt, text, submit) {
    var form = elt.closest("form") || elt;
    if (live.queued.indexOf(form) < 0) live.queued.push(form);
    form.planwatchKept = { action: form.getAttribute("hx-post") || "", values: snapshot(form) };
    if (submit) form.dataset.resendSubmit = submit; else delete form.dataset.resendSubmit;
    note(form, text || ("Not sent \u2014 the connection is lost. Kept here; it will be sent " +
                        "when the connection is back."));
  }
  function submitOf(config) {
    if (!config) return "";
    if (config.formData && config.formData.get) return config.formData.get("submit") || "";
    return (config.parameters && config.parameters.submit) || "";
  }
  // what was kept goes once, each with the button it was sent with (and its answer key:
  // the server applies an answer sent twice once)
  function resend() {
    var queued = live.queued;
    live.queued = [];
    // the server answers again: what was kept goes now, even while the page's socket is
    // still reconnecting (its back-off may lag the server by many seconds)
    live.resending = queued.length;
    queued.forEach(function (kept) {
      var form = kept, was = kept.planwatchKept, submit = kept.dataset.resendSubmit;
      var extra = null;
      delete kept.dataset.resendSubmit;
      if (!form.isConnected) {  // drawn again meanwhile: the same form, its values put back
        form = was && was.action ? document.querySelector(
          'form[hx-post="' + was.action.replace(/["\\]/g, "") + '"]') : null;
        if (!form) { live.resending -= 1; return; }
        was.values.forEach(function (pair) {
          var field = form.elements.namedItem(pair[0]);
          if (field && field.type !== "checkbox" && field.type !== "radio" &&
              "value" in field) field.value = pair[1];
        });
      }
      note(form, "");
      if (submit && form.tagName === "FORM") {
        extra = document.createElement("input");
        extra.type = "hidden";
        extra.name = "submit";
        extra.value = submit;
        form.appendChild(extra);
        form.addEventListener("htmx:configRequest", function gone() {
          form.removeEventListener("htmx:configRequest", gone);
          if (extra.isConnected) extra.remove();
        });
      }
      htmx.trigger(form, form.tagName === "FORM" ? "submit" : "click");
    });
  }
  document.addEventListener("htmx:wsClose", function () {
    if (live.offline || !document.querySelector("[ws-connect]")) return;
    live.offline = true;
    live.seqAtClose = seqNow();
    document.body.classList.add("is-offline");
    banner("Reconnecting\u2026 This page is not live: its clocks are stopped, and what you " +
           "send is kept until the connection is back.", "off");
    if (window.planwatchOutage) window.planwatchOutage.failed(false);  // what is down?
  });
  document.addEventListener("htmx:wsOpen", function () {
    if (!live.offline) return;
    live.offline = false;
    document.body.classList.remove("is-offline");
    banner("Live again.", "on");
    if (!window.planwatchOutage || !window.planwatchOutage.isDown()) resend();
    setTimeout(function () {  // the replay of what was missed has come in meanwhile
      var now = seqNow(), caught = now !== null && live.seqAtClose !== null
        ? now - live.seqAtClose : null;
      if (!live.offline) {
        banner("Live again" + (caught ? " \u2014 caught up " + caught + " event" +
               (caught === 1 ? "" : "s") + " missed." : "."), "on");
      }
    }, 1500);
    setTimeout(function () { if (!live.offline) banner("", "on"); }, 8000);
  });
  // a post while the socket is down is not sent (it would fail or go unseen): kept
  document.addEventListener("htmx:beforeRequest", function (e) {
    var verb = (e.detail.requestConfig && e.detail.requestConfig.verb) || "";
    if (live.offline && verb.toLowerCase() === "post") {
      if (live.resending > 0) { live.resending -= 1; return; }  // sent again: let it go
      e.preventDefault();
      keep(e.detail.elt);
    }
  });
  // the server went away before the socket noticed, or it answered that it cannot serve
  // the post now (its database cannot be reached: a 503 in words): kept too, with what the
  // server said, never dropped silently; sent again when the server answers (outage.js)
  function failedPost(e, text) {
    var config = e.detail.requestConfig || {};
    if ((config.verb || "").toLowerCase() !== "post") return;
    // the element that sent it (a swap's event names its target, the section around it)
    keep(config.elt || e.detail.elt, text, submitOf(config));
  }
  document.addEventListener("htmx:sendError", function (e) {
    failedPost(e, "Not saved \u2014 the server cannot be reached. Your text is kept here " +
                  "and sent again when the server answers.");
  });
  document.addEventListener("htmx:timeout", function (e) {
    failedPost(e, "Not saved yet \u2014 the server did not answer in time. Your text is " +
                  "kept here and sent again when the server answers.");
  });
  // an answer of "cannot serve it now" (a 503 naming the database, a gateway's 502/504) is
  // no error of the page: nothing is swapped (the form keeps its text), the page says why
  document.addEventListener("htmx:beforeSwap", function (e) {
    var xhr = e.detail.xhr, status = xhr ? xhr.status : 0;
    if (!window.planwatchOutage || !window.planwatchOutage.unreachable(status)) return;
    e.detail.shouldSwap = false;
    e.detail.isError = false;
    var said = status === 503 && xhr.responseText && xhr.responseText.length < 400 &&
      !/^\s*</.test(xhr.responseText) ? xhr.responseText.trim() + " " : "";
    failedPost(e, (said || "Not saved \u2014 the server could not serve it (" + status +
                   "). ") + "Your text is kept here and sent again when the server answers.");
    window.planwatchOutage.failed(true);
  });
  // /readyz answers 200: the server and its database serve again, whatever the page's
  // socket says meanwhile (it may still be reconnecting)
  document.addEventListener("planwatch:back", resend);
  htmx.config.timeout = 20000;  // a request the server holds longer is not left hanging

  // A run's working time (or its wait for people) ticks between the server's header renders;
  // not while the page is not live (it cannot know what happened meanwhile).
  function tick() {
    if (live.offline) return;
    document.querySelectorAll("[data-started]").forEach(function (el) {
      var started = Date.parse(el.dataset.started);
      if (!isNaN(started)) el.textContent = secondsText(Math.max(Date.now() - started, 0) / 1000);
    });
  }
  setInterval(tick, 1000);

  // A question's age, "asked 40 s ago", stays true on every page that shows one (the run's
  // questions, the inbox), as the server writes it (dashboard.web.templatetags age_text).
  function age(seconds) {
    var s = Math.max(0, Math.floor(seconds));
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min";
    if (s < 86400) {
      var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
      return m ? h + " h " + m + " min" : h + " h";
    }
    return Math.floor(s / 86400) + " d";
  }
  function ages() {
    var now = Date.now();
    document.querySelectorAll("[data-since]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("data-since"));
      if (!isNaN(t)) {
        var text = age((now - t) / 1000);
        if (el.textContent !== text) el.textContent = text;
      }
    });
  }
  setInterval(ages, 1000);

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

/* A socket message's partials, swapped in order, each with its own settle record, a slice
   of the main thread at a time; a partial marked data-swap-first (the run's header and its
   buttons: the newest copy is the whole truth) is shown at once, ahead of the rows still
   queued, and replaces its queued older copies.
   Why not the extension's own swap: htmx-ext-ws (2.0.4, the newest) swaps all of a
   message's partials with one shared record, and htmx's oobSwap fires htmx:oobAfterSwap on
   every element that record holds so far: n partials fired ~n²/2 events, each through every
   listener of the page (a 215-task plan's live trace: 155,633 events for 1,907 partials).
   And a large batch swapped in one go held the main thread for seconds, the header's final
   status waiting behind it. The extension's handler stands down for the messages this one
   takes (htmx:wsBeforeMessage cancelled): those of a socket whose element names this
   extension (hx-ext="ws,pw-live").
   A socket tells every watcher the same things, and a page may not show them all (a runs
   list filtered or paged, a trace without a task panel): a partial whose target is not on
   the page when its turn comes is dropped, not handed to htmx, which reports each as an
   error. */
(function () {
  "use strict";
  var SLICE_MS = 40;
  var api = null, queue = [], pumping = false;
  htmx.defineExtension("pw-live", { init: function (internal) { api = internal; } });
  function target(child) {
    var oob = api.getAttributeValue(child, "hx-swap-oob") || "true", at = oob.indexOf(":");
    return at >= 0 ? document.querySelector(oob.slice(at + 1))
                   : child.id && document.getElementById(child.id);
  }
  function swap(socketElt, child) {
    if (!socketElt.isConnected || !target(child)) return;
    var settle = api.makeSettleInfo(socketElt);
    api.oobSwap(api.getAttributeValue(child, "hx-swap-oob") || "true", child, settle);
    api.settleImmediately(settle.tasks);
  }
  function pump() {
    var start = performance.now();
    while (queue.length) {
      queue.shift().run();
      if (queue.length && performance.now() - start > SLICE_MS) {
        setTimeout(pump, 0);  // let the page breathe (input, paint), then go on
        return;
      }
    }
    pumping = false;
  }
  /* Everything received swapped now (before a reconnect reads the page's last event). */
  function flush() { while (queue.length) queue.shift().run(); }
  window.planwatchLive = { flush: flush };
  document.addEventListener("htmx:wsBeforeMessage", function (e) {
    if (!api || e.defaultPrevented || !/\bpw-live\b/.test(e.target.getAttribute("hx-ext") || "")) {
      return;
    }
    e.preventDefault();
    var socketElt = e.target, message = e.detail.message;
    Array.from(api.makeFragment(message).children).forEach(function (child) {
      if (child.id && child.hasAttribute("data-swap-first")) {
        queue = queue.filter(function (job) { return job.id !== child.id; });
        swap(socketElt, child);
        return;
      }
      queue.push({ id: child.id, run: function () { swap(socketElt, child); } });
    });
    queue.push({ id: "", run: function () {
      api.triggerEvent(socketElt, "htmx:wsAfterMessage",
                       { message: message, socketWrapper: e.detail.socketWrapper });
    } });
    if (!pumping) { pumping = true; pump(); }
  });
})();

/* An element that loads its detail when clicked carries data-get (the URL) and data-into
   (where the answer goes: a selector, or "next <selector>" for the first later sibling that
   matches), and data-once to load it only once. One handler for all of them: a live batch of
   hundreds of timeline events, task cards or waterfall bars swaps in without htmx
   processing each element (hx-get on each cost a 215-task plan's page seconds). */
(function () {
  "use strict";
  function into(el) {
    var where = el.dataset.into || "";
    if (where.indexOf("next ") === 0) {
      for (var s = el.nextElementSibling; s; s = s.nextElementSibling) {
        if (s.matches(where.slice(5))) return s;
      }
      return null;
    }
    return where ? document.querySelector(where) : el;
  }
  document.addEventListener("click", function (e) {
    var el = e.target.closest && e.target.closest("[data-get]");
    if (!el || el.dataset.loaded) return;
    var target = into(el);
    if (!target) return;
    if (el.hasAttribute("data-once")) el.dataset.loaded = "1";
    if (el.tagName !== "SUMMARY") e.preventDefault();  // a summary still opens its details
    htmx.ajax("GET", el.dataset.get, { source: el, target: target, swap: "innerHTML" });
  });
})();
