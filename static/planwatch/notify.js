/* Browser notifications of new questions: the navigation's inbox socket appends one
   [data-notice] per question asked (that this operator may answer) to #pw-notices; once the
   operator opted in ("Notify me in this browser", which asks the browser's permission),
   each becomes a Notification that opens the question when clicked. */
(function () {
  "use strict";
  var KEY = "planwatch.notify";
  function supported() { return "Notification" in window; }
  function on() {
    return supported() && Notification.permission === "granted" &&
      window.localStorage.getItem(KEY) === "on";
  }
  function label(button) {
    var state = button.parentNode.querySelector("[data-notify-state]");
    if (!supported()) {
      button.hidden = true;
      if (state) state.textContent = "This browser has no notifications.";
      return;
    }
    button.hidden = false;
    button.textContent = on() ? "Stop notifying me here" : "Notify me in this browser";
    if (state) {
      state.textContent = Notification.permission === "denied"
        ? "Notifications are blocked for this site in the browser's settings."
        : on() ? "New questions for you appear as notifications." : "";
    }
  }
  function toggle(button) {
    if (on()) {
      window.localStorage.removeItem(KEY);
      label(button);
      return;
    }
    Notification.requestPermission().then(function (permission) {
      if (permission === "granted") window.localStorage.setItem(KEY, "on");
      label(button);
    });
  }
  function show(box) {
    box.querySelectorAll("[data-notice]").forEach(function (el) {
      el.remove();
      if (!on()) return;
      var n = new Notification(el.getAttribute("data-title"), {
        body: el.getAttribute("data-body"), tag: el.getAttribute("data-tag")});
      n.onclick = function () {
        window.focus();
        window.location.href = el.getAttribute("data-url");
      };
    });
  }
  function labelAll() { document.querySelectorAll("[data-notify-optin]").forEach(label); }
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-notify-optin]");
    if (button) toggle(button);
  });
  document.addEventListener("htmx:afterSettle", labelAll);  // the inbox redrawn by a filter
  document.addEventListener("DOMContentLoaded", function () {
    labelAll();
    var box = document.getElementById("pw-notices");
    if (box) new MutationObserver(function () { show(box); }).observe(box, {childList: true});
  });
})();
