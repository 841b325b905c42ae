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

// After an answer the keyboard goes on: to the next open question, else to the status line
// that says what happened. A question that arrives a moment later (the run resumed and asked
// again) takes the focus if the operator has not moved it elsewhere meanwhile.
(function () {
  "use strict";
  let awaitingNext = false;
  const FIELDS = ".question input:not([type=hidden]):not([disabled]), .question textarea:not([disabled]), .question select:not([disabled])";
  function focusIn(section) {
    const field = section.querySelector(FIELDS);
    if (field) { field.focus(); awaitingNext = false; return true; }
    const status = section.querySelector(".flash, .empty[role=status]");
    if (status) status.focus();
    return false;
  }
  // on settle, not on swap: htmx binds the new form (hx-post) when it settles, and an Enter
  // in a form not yet bound would post it the old way, reloading the page
  document.addEventListener("htmx:afterSettle", (event) => {
    const target = event.detail.target;
    if (!target || !target.closest) return;
    const section = target.closest("#run-interrupts, [id$='-answers']") || target;
    const config = event.detail.requestConfig || {};
    if (config.verb === "post" && config.elt && config.elt.closest(".interrupt-forms, #run-interrupts, [id$='-answers']")) {
      awaitingNext = !focusIn(section);
      return;
    }
    // nobody is typing anywhere (focus on the page itself): the question is what to do next
    const onPage = !document.activeElement || document.activeElement === document.body;
    const idle = onPage || section.contains(document.activeElement);
    if ((awaitingNext ? idle : onPage) && section.querySelector(FIELDS)) focusIn(section);
  });
})();
