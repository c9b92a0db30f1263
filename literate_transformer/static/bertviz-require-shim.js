/*
 * A require.js stand-in for bertviz's attention views on this site.
 *
 * bertviz's views start with require.config({paths: ...}) and
 * requirejs(['jquery', 'd3'], callback).  The page's <head> loads the site's
 * own jQuery 2.2.4 and d3 5.7.0 (_static/vendor/) just before this file; here
 * require.config is a no-op and requirejs hands those two to the callback.
 * No AMD `define` is created, so other scripts on the page (the theme's
 * clipboard library, MathJax) keep working as they do without views.
 * Added by docs/_ext/bertviz_offline.py to pages that hold a view.
 */
(function (window) {
  "use strict";
  if (window.requirejs && window.requirejs.bertvizShim) {
    return; // already installed
  }
  var modules = {};
  if (window.jQuery) {
    // Keep our jQuery private: restore whatever `$`/`jQuery` the page had before.
    modules.jquery = window.jQuery.noConflict(true);
  }
  if (window.d3) {
    modules.d3 = window.d3;
  }

  function requirejs(names, callback) {
    var resolved = names.map(function (name) {
      if (!Object.prototype.hasOwnProperty.call(modules, name)) {
        throw new Error("bertviz offline: no local copy of the module '" + name + "' (expected in _static/vendor)");
      }
      return modules[name];
    });
    return callback.apply(window, resolved);
  }
  requirejs.config = function () {}; // the modules are already loaded
  requirejs.bertvizShim = true;
  window.requirejs = requirejs;
  window.require = requirejs;
})(window);
