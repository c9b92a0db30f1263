/*
 * A require.js stand-in for bertviz's attention views, so that they draw with no CDN.
 *
 * bertviz's views start with require.config({paths: ...}) and ask requirejs
 * for the modules 'jquery' and 'd3'.  This file hands them the jQuery 2.2.4
 * and d3 5.7.0 loaded just before it: the site's own copies
 * (_static/vendor/, in the <head> of a page with views), or, in a notebook,
 * the copies that literate_transformer.visualize puts in front of each view.
 *
 * - Where the page has no AMD loader (this site, JupyterLab, Notebook 7,
 *   Colab, a notebook exported to HTML and opened offline), it defines
 *   requirejs: require.config is a no-op and requirejs calls back with those
 *   two.  No AMD `define` is created, so other scripts on the page (the
 *   theme's clipboard library, MathJax) keep working as they do without views.
 * - Where the page has a real require.js (the classic Notebook, a notebook
 *   exported to HTML and opened online), it gives it the two as the modules
 *   'jquery' and 'd3' (unless the page has them already), so that require.js
 *   finds them there instead of asking a CDN for them.
 *
 * Shipped with the package (literate_transformer/static/); the site's build
 * copies it into _static/ (docs/_ext/bertviz_offline.py).
 */
(function (window) {
  "use strict";
  var modules = window.bertvizOfflineModules || (window.bertvizOfflineModules = {});
  if (window.jQuery && !modules.jquery) {
    // Keep our jQuery private: restore whatever `$`/`jQuery` the page had before.
    modules.jquery = window.jQuery.noConflict(true);
  }
  if (window.d3 && !modules.d3) {
    modules.d3 = window.d3;
  }
  var loader = window.requirejs;
  if (loader && loader.bertvizShim) {
    return; // already installed; it reads the same modules
  }
  if (loader && typeof window.define === "function" && window.define.amd) {
    // A real require.js: name the modules for it (a named define is taken up by its next require call).
    Object.keys(modules).forEach(function (name) {
      if (!(loader.specified && loader.specified(name))) {
        window.define(name, [], function () {
          return modules[name];
        });
      }
    });
    return;
  }

  function requirejs(names, callback) {
    var resolved = names.map(function (name) {
      if (!Object.prototype.hasOwnProperty.call(modules, name)) {
        throw new Error("bertviz offline: no local copy of the module '" + name + "'");
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
