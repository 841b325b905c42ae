// Answer forms: show 4xx replies (inline errors, "already answered", no permission) in place;
// a 400 (the form data was too large) goes to the form's status line, keeping the typed text.
document.addEventListener("htmx:beforeSwap", (event) => {
  const form = event.detail.requestConfig && event.detail.requestConfig.elt.closest(".interrupt-forms");
  const status = event.detail.xhr.status;
  if (!form || status < 400 || status >= 500) return;
  event.detail.shouldSwap = true;
  event.detail.isError = false;
  if (status === 400) {
    event.detail.target = form.querySelector(".form-status");
    event.detail.swapOverride = "innerHTML";
  }
});

// A render of a run's questions older than the one shown is not swapped in: an answer's
// reply, rendered before the run asked again, can come back after the live update that
// shows the next question (a loaded server), and would take that question away from under
// the operator's typing. The version is "newest question's id.questions closed".
(function () {
  "use strict";
  function version(text) {
    const m = /class="interrupts" data-run="([^"]*)" data-version="(\d+)\.(\d+)"/.exec(text || "");
    return m ? {run: m[1], newest: +m[2], closed: +m[3]} : null;
  }
  function older(a, b) {
    return a.newest < b.newest || (a.newest === b.newest && a.closed < b.closed);
  }
  // (htmx fires beforeSwap on the swap's target, in the document, so this runs before the
  // drafts' keeper below, registered after it)
  document.addEventListener("htmx:beforeSwap", (event) => {
    const status = event.detail.xhr.status;
    const target = event.detail.target;
    if (status >= 300 || !target || !target.querySelector) return;
    const shown = target.querySelector(".interrupts[data-version]");
    const coming = version(event.detail.serverResponse);
    if (!shown || !coming || shown.dataset.run !== coming.run) return;
    const [newest, closed] = (shown.dataset.version || "0.0").split(".").map(Number);
    if (older(coming, {newest: newest, closed: closed})) event.detail.shouldSwap = false;
  });
})();

// After an answer the keyboard goes on: to the next open question, else to the status line
// that says what happened. A question that arrives a moment later (the run resumed and asked
// again) takes the focus if the operator has not moved it elsewhere meanwhile.
(function () {
  "use strict";
  let awaitingNext = false;
  const FIELDS = ".question input:not([type=hidden]):not([disabled]), .question textarea:not([disabled]), .question select:not([disabled])";
  // the answer itself, never "Give to" (a lead's reassign list stands before it)
  const ANSWERS = ".question .q-input input:not([type=hidden]):not(:disabled), .question .q-input textarea:not(:disabled), .question .q-input select:not(:disabled)";
  function focusIn(section) {
    const field = section.querySelector(ANSWERS);
    if (field) { field.focus(); awaitingNext = false; return true; }
    const status = section.querySelector(".flash, .empty[role=status]");
    if (status) status.focus();
    return false;
  }
  // the questions come with the page: the first one takes the focus if nothing else has it
  document.addEventListener("DOMContentLoaded", () => {
    const section = document.getElementById("run-interrupts");
    const onPage = !document.activeElement || document.activeElement === document.body;
    if (section && onPage && section.querySelector(ANSWERS)) focusIn(section);
  });
  // on settle, not on swap: htmx binds the new form (hx-post) when it settles, and an Enter
  // in a form not yet bound would post it the old way, reloading the page
  document.addEventListener("htmx:afterSettle", (event) => {
    const target = event.detail.target;
    if (!target || !target.closest) return;
    const section = target.closest("#run-interrupts, [id$='-answers']") || target;
    const config = event.detail.requestConfig || {};
    // the operator is in a question's field (put back there by the drafts' keeper): stay
    const active = document.activeElement;
    if (active && active.matches && active.matches(FIELDS) && section.contains(active)) {
      awaitingNext = false;
      return;
    }
    if (config.verb === "post" && config.elt && config.elt.closest(".interrupt-forms, #run-interrupts, [id$='-answers']")) {
      awaitingNext = !focusIn(section);
      return;
    }
    // nobody is typing anywhere (focus on the page itself): the question is what to do next
    const onPage = !document.activeElement || document.activeElement === document.body;
    const idle = onPage || section.contains(document.activeElement);
    if ((awaitingNext ? idle : onPage) && section.querySelector(ANSWERS)) focusIn(section);
  });
})();

// Drafts survive live updates. A question's form is re-rendered whenever its run's questions
// change (another question answered here or in another tab, the run resumed and asked
// again): a question still open keeps its very element (typed text, caret, focus) when the
// same interrupt is still asked, or its typed value when the run asked it anew; a question
// answered elsewhere leaves "Answered by X: value" in its place.
(function () {
  "use strict";
  const drafts = new Map();   // question key -> {values, pk}: what was typed, by field index
  const kept = new Map();     // question key -> the element shown before the swap
  const notes = new Map();    // question key -> "Answered by X: value" shown in its place
  let focused = null;         // {key, index, start, end} of the field that had the focus
  let place = null;           // {selector, index, asked} of another control of the box that had it
  let fromPost = false;       // this swap answers this page's own post
  const FIELD = "input:not([type=hidden]), textarea, select";

  function fields(q) { return Array.prototype.slice.call(q.querySelectorAll(FIELD)); }
  function typed(q) {
    return fields(q).some((f) => f.tagName === "SELECT"
      ? Array.prototype.some.call(f.options, (o) => o.selected !== o.defaultSelected)
      : f.value !== f.defaultValue);
  }
  function remember(q) {
    if (!q.dataset.key) return;
    if (typed(q)) drafts.set(q.dataset.key, {values: fields(q).map((f) => f.value), pk: q.dataset.pk});
  }
  document.addEventListener("input", (e) => {
    const q = e.target.closest && e.target.closest(".question.pending[data-key]");
    if (q) remember(q);
  });
  document.addEventListener("change", (e) => {
    const q = e.target.closest && e.target.closest(".question.pending[data-key]");
    if (q) remember(q);
  });

  // Whether a swap into ``target`` can touch questions: it holds them, or is inside a box of
  // them (a live trace's timeline rows and waterfall bars cannot: not searched each batch).
  function holdsQuestions(target) {
    const boxes = document.querySelectorAll(".interrupts");
    for (let i = 0; i < boxes.length; i++) {
      if (target === boxes[i] || target.contains(boxes[i]) || boxes[i].contains(target)) return true;
    }
    return false;
  }

  // A control of the questions' box other than a question's field (the Answer button, a
  // question's Details, "I'm on it") as a selector and its rank among the box's matches:
  // the same control of the new render takes the focus back, so a live update that lands
  // while the keyboard is on the Answer button leaves it there, not on the page's body
  // (whose next Tab starts again from the top). A field is kept by ``focused``.
  function placeOf(target, active) {
    if (!active || active === document.body || !target.contains(active)) return null;
    const box = active.closest(".interrupts");
    if (!box || (active.matches(FIELD) && active.closest(".question.pending"))) return null;
    const selector = active.id ? "#" + CSS.escape(active.id)
      : active.tagName.toLowerCase()
        + (active.name ? '[name="' + CSS.escape(active.name) + '"]' : "")
        + Array.prototype.map.call(active.classList, (c) => "." + CSS.escape(c)).join("");
    return {selector: selector, index: Array.prototype.indexOf.call(box.querySelectorAll(selector), active),
            asked: askedIn(target)};
  }

  function askedIn(root) {  // the open questions under root, as "pk,pk"
    return Array.prototype.map.call(root.querySelectorAll(".question.pending[data-key]"),
                                    (q) => q.dataset.pk).join(",");
  }

  function before(target) {
    if (!target || !target.querySelectorAll || !holdsQuestions(target)) return;
    const active = document.activeElement;
    place = placeOf(target, active);
    target.querySelectorAll(".question.pending[data-key]").forEach((q, i) => {
      remember(q);
      kept.set(q.dataset.key, {node: q, index: i});
      if (active && q.contains(active)) {
        focused = {key: q.dataset.key, index: fields(q).indexOf(active),
                   start: active.selectionStart, end: active.selectionEnd};
      }
    });
  }

  function settle(root) {
    if (!root || !root.querySelectorAll) return;
    const container = root.matches && root.matches(".interrupts") ? root : root.querySelector(".interrupts");
    if (!container) return;
    const present = new Set();
    container.querySelectorAll(".question.pending[data-key]").forEach((q) => {
      const key = q.dataset.key;
      present.add(key);
      const old = kept.get(key);
      const errors = q.querySelector(".errorlist");
      if (old && old.node !== q && old.node.dataset.pk === q.dataset.pk && !errors && !fromPost) {
        q.replaceWith(old.node);  // the same open question: keep the element the user is in
        q = old.node;
      } else if (drafts.has(key) && !typed(q) && !errors) {
        const values = drafts.get(key).values;
        fields(q).forEach((f, i) => { if (values[i] !== undefined) f.value = values[i]; });
      }
      if (focused && focused.key === key) {
        const f = fields(q)[focused.index];
        if (f) {
          // this runs on swap: bind the new form now (htmx would on settle), so that an
          // Enter typed into the field meanwhile posts it as htmx does, not the old way
          const form = f.closest("form");
          if (form && window.htmx) htmx.process(form);
          f.focus();
          try { if (focused.start !== null) f.setSelectionRange(focused.start, focused.end); } catch (e) { /* not a text field */ }
        }
      }
    });
    // questions open here a moment ago and answered by someone else: say so in their place
    if (!fromPost) {
      kept.forEach((old, key) => {
        if (present.has(key) || !key.startsWith(container.dataset.run + ":")) return;
        const row = Array.prototype.slice.call(container.querySelectorAll("tr.audit-answered[data-key]"))
          .filter((r) => r.dataset.key === key).pop();
        if (row) notes.set(key, {text: "Answered by " + row.dataset.by + ": " + row.dataset.answer, index: old.index});
      });
    }
    notes.forEach((note, key) => {
      if (present.has(key) || !key.startsWith(container.dataset.run + ":")) { notes.delete(key); return; }
      container.querySelectorAll(".q-elsewhere").forEach((el) => { if (el.dataset.key === key) el.remove(); });
      const p = document.createElement("p");
      p.className = "q-elsewhere";
      p.setAttribute("role", "status");
      p.dataset.key = key;
      p.textContent = note.text;
      const questions = container.querySelectorAll(".question.pending");
      const next = questions[note.index];
      if (next) next.before(p);
      else if (questions.length) questions[questions.length - 1].after(p);
      else container.prepend(p);
    });
    kept.clear();
    // the keyboard was on another control of the box, which the swap took away: back to
    // it, when the same questions are asked (a new one takes the focus: afterSettle above)
    const lost = !document.activeElement || document.activeElement === document.body;
    if (place && lost && !fromPost && place.asked === askedIn(container)) {
      const same = container.querySelectorAll(place.selector);
      const control = same[Math.min(place.index, same.length - 1)];
      if (control && !control.matches(":disabled")) control.focus({preventScroll: true});
    }
    place = null;
    // a reply to this page's post may be older than the question being typed in (it came
    // back after the run asked again): the focus goes back there when the question does
    if (!(fromPost && focused && !present.has(focused.key))) focused = null;
    drafts.forEach((d, key) => { if (!present.has(key) && notes.has(key)) drafts.delete(key); });
  }

  document.addEventListener("htmx:beforeSwap", (e) => {
    if (!e.detail.shouldSwap) return;  // an older render, not swapped in (above)
    const config = e.detail.requestConfig || {};
    fromPost = config.verb === "post";
    before(e.detail.target);
  });
  document.addEventListener("htmx:afterSwap", (e) => { settle(e.detail.target); fromPost = false; });
  document.addEventListener("htmx:oobBeforeSwap", (e) => { fromPost = false; before(e.detail.target); });
  document.addEventListener("htmx:oobAfterSwap", (e) => settle(e.target));
})();
