"""Let sphinx-codeautolink write its links into the pages on every core, not on one.

When a build ends, sphinx-codeautolink opens each page whose code it
resolved, parses the page's HTML and writes the links in (its
``link_html``), one page after another.  On this site that is some 140
pages and, on a two-core machine, about half a minute at the end of a clean
build with one core idle.

This extension runs the same ``link_html`` on the same pages, with the same
arguments, in a pool of forked processes, one per core, just before the
extension's own handler runs (``build-finished``, at an earlier priority).
The warnings a page raises in a worker (a code block it could not match)
are raised again in the build, so ``-W`` still fails on them.  The
extension's own handler then runs as before, writes its cache, and passes
over the pages already linked.  Where sphinx-codeautolink no longer has the
handler or the function this relies on, the extension says so in the log
and changes nothing.
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: What the forked workers read: set in the parent just before the pool forks, so nothing is pickled but names.
_JOB: dict[str, Any] = {}


class _Collected:
    """Stands in for sphinx-codeautolink's logger in a worker: keeps each warning to raise again in the build."""

    def __init__(self) -> None:
        self.warnings: list[tuple[str, dict[str, Any]]] = []

    def warning(self, message: str, **options: Any) -> None:
        self.warnings.append((message, {key: value for key, value in options.items() if key != "location"}))


def _link(doc: str) -> list[tuple[str, dict[str, Any]]]:
    from sphinx_codeautolink.extension import block

    collected = _Collected()
    block.logger = collected
    extension, options = _JOB["extension"], _JOB["options"]
    block.link_html(
        doc,
        _JOB["outdir"],
        extension.cache.transforms[doc],
        extension.inventory,
        extension.custom_blocks,
        extension.search_css_classes,
        **options,
    )
    return collected.warnings


def _codeautolink(app: Sphinx) -> Any:
    """The sphinx-codeautolink instance whose ``apply_links`` handles ``build-finished``, or ``None``.

    A handler another extension wrapped with :func:`functools.wraps` (the
    build's profile times every handler so) is unwrapped down to the bound
    method, and no further: the method's own ``__wrapped__`` (its
    ``print_exceptions`` decorator's) leads to the plain function, which knows
    no instance.
    """
    for listener in app.events.listeners.get("build-finished", []):
        handler = listener.handler
        while handler is not None:
            if getattr(handler, "__name__", "") == "apply_links" and hasattr(handler, "__self__"):
                return handler.__self__
            handler = getattr(handler, "__wrapped__", None)
    return None


def pages_to_link(extension: Any) -> list[str]:
    """The pages ``apply_links`` would link, in its order: those with code it resolved, read in this build."""
    return [
        doc
        for doc, transforms in extension.cache.transforms.items()
        if transforms and str(Path(doc)) in extension.outdated_docs
    ]


def link_in_parallel(app: Sphinx, exception: Exception | None) -> None:
    """``build-finished``, before sphinx-codeautolink's own handler: link its pages in a pool of processes."""
    extension = _codeautolink(app)
    if exception is not None or extension is None or getattr(extension, "do_nothing", True):
        if extension is None and exception is None:
            logger.info("codeautolink_parallel: sphinx-codeautolink's apply_links not found; unchanged")
        return
    import sphinx_codeautolink.extension as package  # its apply_links calls the link_html it imported
    from sphinx_codeautolink.extension import block

    pages = pages_to_link(extension)
    workers = min(len(pages), os.cpu_count() or 1)
    if workers < 2 or not hasattr(package, "link_html"):
        return
    _JOB.update(
        extension=extension,
        outdir=app.outdir,
        options={"builder_name": app.builder.name, "disable_link_titles": extension.disable_link_titles},
    )
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            results = pool.map(_link, pages, chunksize=1)
    finally:
        _JOB.clear()
    for doc, warnings in zip(pages, results, strict=True):
        for message, options in warnings:
            block.logger.warning(message, location=doc, **options)
    linked = set(pages)
    original = package.link_html

    def skip_linked(doc: str, *args: Any, **kwargs: Any) -> None:
        if doc not in linked:
            original(doc, *args, **kwargs)

    # The extension's own handler runs next, over the same pages: each is linked already.
    package.link_html = skip_linked
    app.connect("build-finished", lambda app, exception: setattr(package, "link_html", original), priority=900)


def setup(app: Sphinx) -> dict:
    app.connect("build-finished", link_in_parallel, priority=400)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
