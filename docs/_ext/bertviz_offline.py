"""Make bertviz's attention views draw on this site with no CDN.

bertviz's ``head_view``, ``model_view`` and ``neuron_view`` return HTML that
loads require.js from cdnjs and asks it for d3 5.7.0 and jQuery 2.0.0 from
cdnjs too.  :mod:`literate_transformer.visualize` rewrites its views to ask
no CDN: it inlines the package's own d3, jQuery and loader in front of each
view (about 0.33 MB a view).  Executed pages embed a view's HTML as it is,
so this extension, for every page that holds a view:

1. removes the ``<script src=".../require.min.js">`` tags, and the scripts
   ``visualize`` inlined (the page loads the libraries once, in its head);
2. points any ``require.config`` paths left (a page executed before the
   package inlined them) at the site's own copies of d3 and jQuery
   (``_static/vendor/d3``, ``_static/vendor/jquery``, from npm, see the
   README.txt next to each), so no address of another host remains;
3. adds those copies and ``_static/bertviz-require-shim.js`` to the page's
   ``<head>``.  The shim defines ``require.config`` and ``requirejs`` over the
   ``d3`` and ``jQuery`` globals; the real require.js is not used because it
   defines an AMD ``define`` that makes scripts loaded after it (the theme's
   clipboard library, for one) register as anonymous modules and fail.  The
   shim is the package's own (``literate_transformer/static/``), the one its
   notebooks' views use; this extension copies it into ``_static``.

A page with views larger than ``bertviz_offline_max_page_bytes`` (default
1.5 MB) is reported as a warning, which fails a ``-W`` build: round the
weights (:mod:`literate_transformer.visualize` does) or show fewer views.

A view whose HTML still references another host after the rewrite (a newer
bertviz that loads something else) is a warning too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: Scripts added to the ``<head>`` of pages with views, in order (paths under ``_static``).
SCRIPTS = ("vendor/jquery/jquery.min.js", "vendor/d3/d3.min.js", "bertviz-require-shim.js")

#: The loader the views call, shipped with the package and copied into the site's ``_static``.
SHIM = Path(__file__).resolve().parents[2] / "literate_transformer" / "static" / "bertviz-require-shim.js"
# The <script> literate_transformer.visualize puts in front of a view: jQuery, d3 and the shim, inlined.
_INLINED = re.compile(
    r"""<script\b[^>]*\bdata-bertviz-offline=["']literate_transformer["'][^>]*>.*?</script>\s*""", re.DOTALL
)
# bertviz asks for require.js with a script tag in front of each view.
_REQUIRE_TAG = re.compile(r"""<script[^>]*\bsrc=["'][^"']*/require(?:\.min)?\.js["'][^>]*>\s*</script>""")
# ...and for d3 and jQuery through require.config({paths: {d3: '...', jquery: '...'}}).
_MODULE_PATHS = {
    "d3": re.compile(r"""(\bd3\s*:\s*)(["'])https?://[^"']*/d3(?:\.min)?\2"""),
    "jquery": re.compile(r"""(\bjquery\s*:\s*)(["'])https?://[^"']*/jquery(?:\.min)?\2"""),
}
_LOCAL_MODULES = {"d3": "vendor/d3/d3.min", "jquery": "vendor/jquery/jquery.min"}
# What marks a bertviz view in a page.
_VIEW_MARKER = re.compile(r"requirejs\(\s*\[\s*['\"]jquery['\"]")
# Any reference to another host inside a script tag or a require path.
_EXTERNAL = re.compile(r"""(?:src=|:\s*)["']https?://(?!127\.0\.0\.1|localhost)[^"']+["']""")


def count_views(html: str) -> int:
    """Number of bertviz views in ``html``."""
    return len(_VIEW_MARKER.findall(html))


def rewrite_views(html: str, static_prefix: str) -> str:
    """Remove bertviz's CDN require.js tags and the package's inlined libraries; point module paths at ``static_prefix``.

    Args:
        html: A page body holding bertviz views.
        static_prefix: The relative URL of the site's ``_static/`` folder as
            seen from the page, e.g. ``"../_static/"``.

    Returns:
        The rewritten HTML.
    """
    html = _INLINED.sub("", html)
    html = _REQUIRE_TAG.sub("", html)
    for module, pattern in _MODULE_PATHS.items():
        html = pattern.sub(
            lambda match, m=module: f"{match[1]}{match[2]}{static_prefix}{_LOCAL_MODULES[m]}{match[2]}", html
        )
    return html


def external_references(html: str) -> list[str]:
    """The addresses of other hosts that scripts in ``html`` would load (after rewriting)."""
    return _EXTERNAL.findall(html)


def _page_context(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    body = context.get("body")
    if not body or not count_views(body):
        return
    static_prefix = context["pathto"]("_static/", 1)
    body = rewrite_views(body, static_prefix)
    left = external_references(body)
    if left:
        logger.warning(
            "bertviz view on %s still loads from another host after rewriting: %s",
            pagename,
            ", ".join(left[:3]),
            location=pagename,
        )
    context["body"] = body
    for script in SCRIPTS:
        # Not deferred: the views' inline scripts run while the body is parsed and need these already.
        app.add_js_file(script, priority=450)


def oversized_pages(outdir: Path, limit: int) -> list[tuple[Path, int]]:
    """The HTML pages under ``outdir`` that hold a view and are larger than ``limit`` bytes."""
    found = []
    for path in sorted(Path(outdir).rglob("*.html")):
        size = path.stat().st_size
        if size > limit and count_views(path.read_text(encoding="utf-8", errors="replace")):
            found.append((path, size))
    return found


def _check_sizes(app: Sphinx, exception: Exception | None) -> None:
    # Reads the written pages (not state kept while writing), so parallel builds are checked too.
    if exception is not None or app.builder.format != "html":
        return
    limit = app.config.bertviz_offline_max_page_bytes
    for path, size in oversized_pages(Path(app.outdir), limit):
        logger.warning(
            "%s is %.2f MB, more than bertviz_offline_max_page_bytes (%.2f MB): show fewer or smaller views",
            path.relative_to(app.outdir),
            size / 1e6,
            limit / 1e6,
        )


def _serve_the_shim(app: Sphinx, config: Any) -> None:
    # A file named in html_static_path is copied into _static/ under its own name.
    if str(SHIM) not in map(str, config.html_static_path):
        config.html_static_path.append(str(SHIM))


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("bertviz_offline_max_page_bytes", 1_500_000, "html", types=frozenset({int}))
    app.connect("config-inited", _serve_the_shim)
    app.connect("html-page-context", _page_context)
    app.connect("build-finished", _check_sizes)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
