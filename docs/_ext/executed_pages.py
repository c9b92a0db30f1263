"""Executed chapters: a notebook download, the versions that ran them, a table of times.

Small additions to myst-nb and sphinx-book-theme (what each page's execution
is cached on is :mod:`page_cache`'s business):

* **Download as a notebook.**  myst-nb writes each executed page, outputs
  included, as ``<outdir>/../jupyter_execute/<page>.ipynb``.  The theme's
  download button offers that file only when launch buttons (Binder, Colab)
  are configured, which an offline site does not use.  An
  ``html-page-context`` handler that runs before the theme's own copies the
  executed notebook into ``_sources/`` and names it in the page context, so
  the button offers ``.ipynb`` next to the Markdown source.
* **What ran it.**  Every executed page (a chapter, a gallery example)
  ends with one line naming the library versions and the device its outputs
  were computed with, read in the build's own process by the function that
  ``executed_pages_environment`` names (``module:function``, returning the
  sentence).  The same text is part of every page's cache key
  (:mod:`page_cache`), so a page never shows outputs of other versions
  under this line.
* **Each executed page read on its own.**  Sphinx's parallel read (``-j``)
  cuts the sorted documents into consecutive chunks of about twenty, and a
  process reads one chunk at a time; a chunk that holds most of the chapters
  keeps one process busy long after the other has finished.  With
  ``executed_pages_read_alone`` (patterns of document names), every matching
  page is read as a chunk of its own, in the order of the first pattern it
  matches (list the pages that take longest first), then the other
  documents in Sphinx's chunks: the processes take the chunks as they free
  up, so the pages that take longest to execute are spread between them.
  Writing keeps Sphinx's chunks.
* **Execution times.**  At ``build-finished`` the build log gets one table
  with the execution time of every chapter (from myst-nb's execution
  metadata, saying whether it ran in this build or came from the cache) and
  of every gallery example (from the "Total running time" line
  sphinx-gallery writes into each example's page).
"""

from __future__ import annotations

import fnmatch
import functools
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import sphinx.builders
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.parallel import make_chunks as sphinx_make_chunks

logger = logging.getLogger(__name__)

_GALLERY_TIME = re.compile(r"Total running time of the script:\*\*\s*\(\s*(\d+)\s*minutes\s*([\d.]+)\s*seconds\)")


def _note_start(app: Sphinx, config: object) -> None:
    app.lt_build_started = time.time()  # type: ignore[attr-defined]


def executed_with(config: object) -> str:
    """The sentence naming what executes the pages (empty without ``executed_pages_environment``)."""
    name = getattr(config, "executed_pages_environment", "")
    if not name:
        return ""
    import importlib

    module, _, function = name.partition(":")
    return str(getattr(importlib.import_module(module), function)())


def add_executed_with(app: Sphinx, doctree: object) -> None:
    """``doctree-read``: end each executed chapter and gallery example with what executed it."""
    from docutils import nodes

    sentence = getattr(app, "lt_executed_with", None)
    if sentence is None:
        sentence = app.lt_executed_with = executed_with(app.config)  # type: ignore[attr-defined]
    if not sentence:
        return
    docname = app.env.docname
    gallery = getattr(app.config, "sphinx_gallery_conf", {}) or {}
    gallery_dirs = gallery.get("gallery_dirs", [])
    gallery_dirs = [gallery_dirs] if isinstance(gallery_dirs, str) else list(gallery_dirs)
    is_notebook = "kernelspec" in app.env.metadata.get(docname, {})
    is_example = any(docname.startswith(f"{folder}/plot_") for folder in gallery_dirs)
    if not (is_notebook or is_example):
        return
    footer = nodes.paragraph(classes=["lt-executed-with"])
    footer += nodes.Text(f"This page's outputs were computed with {sentence}.")
    doctree += footer


def offer_executed_notebook(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: object) -> None:
    """Copy the executed notebook of a myst-nb page next to its source and offer it for download."""
    if app.builder.format != "html" or "kernelspec" not in app.env.metadata.get(pagename, {}):
        return
    if context.get("ipynb_source") or str(context.get("page_source_suffix", "")).endswith(".ipynb"):
        return
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.is_file():
        logger.warning(f"no executed notebook {executed} for {pagename}: its .ipynb download is missing")
        return
    content = _with_outputs(app, executed)
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.is_file() or target.read_text(encoding="utf-8") != content:
        target.write_text(content, encoding="utf-8")
    context["ipynb_source"] = f"{pagename}.ipynb"


#: The tag of the cells that are the site's own (its checks, its glue): left out of a download.
SITE_CELL_TAG = "remove-cell"


def _with_outputs(app: Sphinx, executed: Path) -> str:
    """The executed notebook's text, with its outputs, less the site's own cells.

    The cells a page removes (tagged :data:`SITE_CELL_TAG`) are the build's
    checks and the glue that feeds the page's text: they need the site's
    machinery, which a reader who downloads the notebook does not have, and
    teach nothing.  The download leaves them out, so that it runs where only
    the package is installed.

    """
    import nbformat

    notebook = nbformat.read(executed, as_version=4)
    notebook.cells = [cell for cell in notebook.cells if SITE_CELL_TAG not in cell.get("metadata", {}).get("tags", [])]
    return nbformat.writes(notebook)


def execution_rows(app: Sphinx) -> list[tuple[str, str, float | None]]:
    """``(page, how, seconds)`` for every executed chapter and gallery example."""
    rows = []
    started = getattr(app, "lt_build_started", 0.0)
    metadata = getattr(app.env, "nb_metadata", {})
    for docname in sorted(metadata):
        data = metadata[docname].get("exec_data")
        if not data or docname not in app.env.found_docs:
            continue
        if not data.get("succeeded", True):
            how = "FAILED"
        elif data.get("method") == "cache" and data.get("mtime", 0) < started:
            how = "cached"
        else:
            how = "executed"
        rows.append((docname, how, data.get("runtime")))
    gallery = getattr(app.config, "sphinx_gallery_conf", {}) or {}
    gallery_dirs = gallery.get("gallery_dirs", [])
    for folder in [gallery_dirs] if isinstance(gallery_dirs, str) else gallery_dirs:
        for page in sorted((Path(app.srcdir) / folder).glob("*.rst")):
            match = _GALLERY_TIME.search(page.read_text(encoding="utf-8"))
            if match:
                seconds = 60 * int(match.group(1)) + float(match.group(2))
                # sphinx-gallery rewrites the page only when it runs the example again.
                how = "executed" if page.stat().st_mtime >= started else "cached"
                rows.append((f"{folder}/{page.stem}", how, seconds))
    return rows


def report_execution_times(app: Sphinx, exception: Exception | None) -> None:
    """Print the per-page execution time table at the end of the build."""
    rows = execution_rows(app)
    if not rows:
        return
    width = max(len(page) for page, _, _ in rows)
    lines = [f"{'page':<{width}}  {'status':<8}  {'seconds':>8}"]
    for page, how, seconds in sorted(rows, key=lambda row: -(row[2] or 0)):
        shown = f"{seconds:8.2f}" if seconds is not None else "       -"
        lines.append(f"{page:<{width}}  {how:<8}  {shown}")
    ran = sum(seconds or 0 for _, how, seconds in rows if how == "executed")
    total = sum(seconds or 0 for _, _, seconds in rows)
    lines.append(f"{len(rows)} pages; executed in this build: {ran:.2f} s; all pages when executed: {total:.2f} s")
    logger.info("\nexecution times (chapters by myst-nb, examples by sphinx-gallery)\n" + "\n".join(lines))


def balanced_chunks(
    docnames: Sequence[str], nproc: int, alone: Callable[[str], float | None], maxbatch: int = 10
) -> list[list[str]]:
    """The chunks of a parallel read: each document with a rank in a chunk of its own, the lowest rank first.

    Sphinx's ``ParallelTasks`` starts the first ``nproc`` chunks it is given at once, and then, as processes
    free up, the waiting chunk it was given *last* (``dict.popitem``).  So the list returned is: the first
    ``nproc`` chunks in order, then the others reversed, which makes the chunks *start* in the order
    wanted: the documents with a rank, lowest first, then the others in Sphinx's chunks.

    Args:
        docnames: The documents to read, sorted.
        nproc: The processes reading them.
        alone: A document's rank if it is read on its own (0 first), else ``None``.
        maxbatch: As in ``sphinx.util.parallel.make_chunks``, which chunks the other documents.

    Returns:
        The chunks, in the order they are to be given to ``ParallelTasks``: every document exactly once.
    """
    ranks = {docname: alone(docname) for docname in docnames}
    heavy = sorted((name for name in docnames if ranks[name] is not None), key=lambda name: ranks[name])
    light = [name for name in docnames if ranks[name] is None]
    starting = [[name] for name in heavy] + (sphinx_make_chunks(light, nproc, maxbatch) if light else [])
    return starting[:nproc] + starting[nproc:][::-1]


def read_executed_pages_alone(app: Sphinx, env: object = None, docnames: object = None) -> None:
    """``env-before-read-docs``: the parallel read hands each page ``executed_pages_read_alone`` names out alone.

    Only the read: writing a page is quick, and a chunk of its own per page would only cost a process each.
    """
    patterns = list(app.config.executed_pages_read_alone)
    if not patterns:
        return

    def alone(docname: str) -> float | None:
        # The first pattern a page matches is its rank (a stable sort keeps the names' order within it).
        return next((float(rank) for rank, pattern in enumerate(patterns) if fnmatch.fnmatch(docname, pattern)), None)

    # The builders' module imported make_chunks by name: it is the one to replace (until the read ends).
    sphinx.builders.make_chunks = functools.partial(balanced_chunks, alone=alone)


def restore_chunks(app: Sphinx, *args: object) -> None:
    """``env-updated`` (the read is over) and ``build-finished``: Sphinx's own chunks again."""
    sphinx.builders.make_chunks = sphinx_make_chunks


def setup(app: Sphinx) -> dict[str, object]:
    app.add_config_value("executed_pages_read_alone", [], "env", types=frozenset({list, tuple}))
    app.add_config_value("executed_pages_environment", "", "env", types=frozenset({str}))
    app.connect("config-inited", _note_start)
    app.connect("env-before-read-docs", read_executed_pages_alone)
    app.connect("env-updated", restore_chunks)
    app.connect("build-finished", restore_chunks)
    # Before sphinx-book-theme's header buttons (priority 501), which read "ipynb_source".
    app.connect("html-page-context", offer_executed_notebook, priority=450)
    app.connect("doctree-read", add_executed_with)
    app.connect("build-finished", report_execution_times)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
