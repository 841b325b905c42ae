/* Starts Redoc on the schema URL the page names; system fonts, so nothing is fetched from
   the internet. */
(function () {
  "use strict";
  var box = document.getElementById("redoc-container");
  // Redoc's sidebar footer always loads Redocly's logo from their CDN (no option turns it
  // off); offline that is a failed request. It gets Planwatch's own icon instead.
  var setAttribute = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (name, value) {
    if (this.tagName === "IMG" && name === "src" && /^https:\/\/cdn\.redoc\.ly\//.test(value)) {
      value = box.dataset.logo;
    }
    return setAttribute.call(this, name, value);
  };
  var src = Object.getOwnPropertyDescriptor(HTMLImageElement.prototype, "src");
  Object.defineProperty(HTMLImageElement.prototype, "src", {
    get: src.get, configurable: true, enumerable: src.enumerable,
    set: function (value) {
      src.set.call(this, /^https:\/\/cdn\.redoc\.ly\//.test(value) ? box.dataset.logo : value);
    },
  });
  var node = document.getElementById("redoc-settings");
  var settings = node ? JSON.parse(node.textContent) : {};
  var fonts = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
  settings.theme = Object.assign({ typography: { fontFamily: fonts, headings: { fontFamily: fonts } } },
                                 settings.theme || {});
  Redoc.init(box.dataset.schemaUrl, settings, box);
})();
