"""The theme's pages without the one script they do not need: Font Awesome's JavaScript.

pydata-sphinx-theme (which sphinx-book-theme extends) puts
``<script defer src="_static/scripts/fontawesome.js">`` in the ``<head>`` of
every page: 1.6 MB, the largest file a page of this site fetches after the
try page's model and runtime.  The theme says what it is for: "so that users
can add custom icons" as SVG.  This site adds none, and the theme's
stylesheet already draws every icon it uses (the search glass, the light and
dark switch, the download and full-screen buttons) with Font Awesome's web
fonts, which a browser fetches only when a page shows one of their icons
(about 0.1 MB each).

``docs/_templates/layout.html`` extends the theme's layout and filters its
``css`` block through :func:`without_script`, which this extension gives to
the templates.  A theme that stops loading the script changes nothing; one
that loads it some other way is caught by the site tests, which look for
the script's name in every built page.
"""

from __future__ import annotations

import re
from typing import Any

from markupsafe import Markup
from sphinx.application import Sphinx

#: The script left out of every page (its path under the output folder).
SCRIPT = "_static/scripts/fontawesome.js"


def without_script(html: str, path: str) -> Markup:
    """``html`` less every ``<script ... src=".../path?...">`` tag (the tags' other text kept).

    Args:
        html: A fragment of a page (the template's rendered block).
        path: The end of the script's address, without its query string.

    Returns:
        The fragment, as markup the template prints unescaped.

    Raises:
        TypeError: if ``path`` is not a string.
        ValueError: if ``path`` is empty.
    """
    if not isinstance(path, str):
        raise TypeError(f"path must be a str, got {type(path).__name__}")
    if not path:
        raise ValueError("path must name a script, got an empty string")
    tag = re.compile(
        r"""[ \t]*<script\b[^>]*\bsrc=["'][^"'?]*"""
        + re.escape(path)
        + r"""(?:\?[^"']*)?["'][^>]*>\s*</script>[ \t]*\n?"""
    )
    return Markup(tag.sub("", str(html)))


def _add_filter(app: Sphinx) -> None:
    if hasattr(app.builder, "templates"):
        app.builder.templates.environment.filters["without_script"] = without_script


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("builder-inited", _add_filter)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
