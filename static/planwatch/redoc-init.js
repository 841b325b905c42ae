/* Starts Redoc on the schema URL the page names; system fonts, so nothing is fetched from
   the internet. */
(function () {
  "use strict";
  var box = document.getElementById("redoc-container");
  var node = document.getElementById("redoc-settings");
  var settings = node ? JSON.parse(node.textContent) : {};
  var fonts = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
  settings.theme = Object.assign({ typography: { fontFamily: fonts, headings: { fontFamily: fonts } } },
                                 settings.theme || {});
  Redoc.init(box.dataset.schemaUrl, settings, box);
})();
