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
