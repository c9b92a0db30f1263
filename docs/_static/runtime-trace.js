/* Runtime values beside the annotated source: the preview of a line's value on hover, focus or click.
 *
 * Each `.lt-rt` element holds its preview in a hidden `.lt-rt-preview` span.  One floating panel
 * (`.lt-rt-float`, role="tooltip") shows the preview of the element under the mouse or with the
 * focus, placed next to it; a click (or Enter, Space) pins it open until Escape or a click elsewhere.
 * A heatmap's values come in `data-heatmap` and are drawn on a canvas in the theme's primary colour.
 * The statistics are computed in float64 whatever the tensor's dtype (lt_site.trace.summarize), so that
 * a float32 tensor holding finfo.min (a masked score) has a finite mean; the preview says so.
 */
(function () {
  "use strict";
  document.documentElement.classList.add("lt-rt-js");
  // What the statistics are over, and in which precision (see lt_site.trace.summarize).
  var STATS_PREFIX = "over all values, in float64: ";
  var panel = null;
  var current = null;
  var pinned = false;

  function ensurePanel() {
    if (panel) return panel;
    panel = document.createElement("div");
    panel.className = "lt-rt-float";
    panel.id = "lt-rt-float";
    panel.setAttribute("role", "tooltip");
    panel.hidden = true;
    document.body.appendChild(panel);
    return panel;
  }

  function drawHeatmap(holder) {
    var rows = JSON.parse(holder.getAttribute("data-heatmap"));
    var cell = Math.max(4, Math.floor(144 / Math.max(rows.length, rows[0].length)));
    var canvas = document.createElement("canvas");
    canvas.width = rows[0].length * cell;
    canvas.height = rows.length * cell;
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", holder.getAttribute("aria-label") || "heatmap");
    var flat = [].concat.apply([], rows).filter(function (v) { return typeof v === "number"; });
    var low = Math.min.apply(null, flat), high = Math.max.apply(null, flat);
    var colour = getComputedStyle(document.documentElement).getPropertyValue("--pst-color-primary").trim() || "#1f77b4";
    var context = canvas.getContext("2d");
    rows.forEach(function (row, i) {
      row.forEach(function (value, j) {
        context.globalAlpha = high > low ? 0.08 + 0.92 * (value - low) / (high - low) : 0.5;
        context.fillStyle = colour;
        context.fillRect(j * cell, i * cell, cell, cell);
      });
    });
    holder.appendChild(canvas);
    var legend = document.createElement("span");
    legend.textContent = (holder.getAttribute("aria-label") || "") + " (light: " + low + ", dark: " + high + ")";
    holder.appendChild(legend);
  }

  function show(element) {
    var box = ensurePanel();
    current = element;
    box.innerHTML = element.querySelector(".lt-rt-preview").innerHTML;
    var stats = box.querySelector(".lt-rt-stats");
    if (stats && stats.textContent) stats.textContent = STATS_PREFIX + stats.textContent;
    box.querySelectorAll("[data-heatmap]").forEach(drawHeatmap);
    box.hidden = false;
    element.setAttribute("aria-describedby", box.id);
    place(element);
  }

  function place(element) {
    var box = panel;
    var rect = element.getBoundingClientRect();
    var top = rect.bottom + 4;
    if (top + box.offsetHeight > window.innerHeight) top = Math.max(4, rect.top - box.offsetHeight - 4);
    var left = Math.min(rect.left, window.innerWidth - box.offsetWidth - 8);
    box.style.top = top + "px";
    box.style.left = Math.max(4, left) + "px";
  }

  function hide() {
    if (!panel || !current) return;
    panel.hidden = true;
    current.setAttribute("aria-expanded", "false");
    current.removeAttribute("aria-describedby");
    current = null;
    pinned = false;
  }

  function toggle(element) {
    if (current === element && pinned) {
      hide();
      return;
    }
    hide();
    show(element);
    pinned = true;
    element.setAttribute("aria-expanded", "true");
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".lt-rt").forEach(function (element) {
      element.addEventListener("mouseenter", function () { if (!pinned) show(element); });
      element.addEventListener("mouseleave", function () { if (!pinned) hide(); });
      element.addEventListener("focus", function () { if (!pinned) show(element); });
      element.addEventListener("blur", function () { if (!pinned) hide(); });
      element.addEventListener("click", function (event) { event.stopPropagation(); toggle(element); });
      element.addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") { event.preventDefault(); toggle(element); }
        if (event.key === "Escape") hide();
      });
    });
    document.addEventListener("click", function () { if (pinned) hide(); });
    document.addEventListener("keydown", function (event) { if (event.key === "Escape") hide(); });
    // Scrolling moves a focused value's preview with it (focusing a value can itself scroll the page);
    // a preview opened by the mouse closes, since the pointer is no longer over its value.
    window.addEventListener("scroll", function () {
      if (!current || pinned) return;
      if (document.activeElement === current) place(current);
      else hide();
    }, { passive: true });
  });
})();
