"""Executed chapters: a notebook download, the versions that ran them, a table of times.

Small additions to myst-nb and sphinx-book-theme (what each page's execution
is cached on is :mod:`page_cache`'s business):

* **Download as a notebook.**  myst-nb writes each executed page, outputs
  included, as ``<outdir>/../jupyter_execute/<page>.ipynb``, and the values
  its cells glued beside it (``<page>.glue.json``).  An
  ``html-page-context`` handler that runs before the theme's own writes the
  notebook a reader downloads into ``_sources/`` and names it in the page
  context, so the theme's button offers ``.ipynb`` next to the Markdown
  source.  The download is the executed notebook as Jupyter shows it
  (:mod:`notebook_download`): the site's own cells left out, the MyST of its
  Markdown turned into plain Markdown (glued values and figures pasted,
  names linked to the hosted site, ``executed_pages_site_url``), and a first
  cell that installs the package where it is missing
  (``executed_pages_install``).  A name the conversion cannot find (a glued
  value, an included file, a page or label) is a warning.
* **Launch links.**  With ``executed_pages_launch`` set, each executed page's
  header offers the theme's launch links (Colab, Binder) to its downloaded
  notebook.  Both services open notebooks from a GitHub repository only, and
  the download is written by the build, not kept in the repository: the
  links open ``<page>.ipynb`` on the branch ``executed_pages_launch`` names,
  to which the site's ``_sources/`` folder (the downloads) is published.  The
  theme's own launch buttons would open the page's Markdown source, which
  Colab cannot read, and copy the raw executed notebook over the download;
  they stay off.  The offline site only links to these services.
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

import notebook_download
import sphinx.builders
from runtime_trace import load_provider
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
    return str(load_provider(name)()) if name else ""


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
    """Write the notebook a reader downloads of a myst-nb page next to its source and offer it."""
    if app.builder.format != "html" or "kernelspec" not in app.env.metadata.get(pagename, {}):
        return
    if context.get("ipynb_source") or str(context.get("page_source_suffix", "")).endswith(".ipynb"):
        return
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.is_file():
        logger.warning(f"no executed notebook {executed} for {pagename}: its .ipynb download is missing")
        return
    content = _with_outputs(app, executed, pagename)
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.is_file() or target.read_text(encoding="utf-8") != content:
        target.write_text(content, encoding="utf-8")
    context["ipynb_source"] = f"{pagename}.ipynb"


def _with_outputs(app: Sphinx, executed: Path, pagename: str) -> str:
    """The downloaded notebook's text: the executed notebook, outputs kept, as Jupyter shows it.

    The cells a page removes (tagged ``remove-cell``) are the build's checks
    and the glue that feeds the page's text: they need the site's machinery,
    which a reader who downloads the notebook does not have, and teach
    nothing.  The download leaves them out, so that it runs where only the
    package is installed; what they glued is read first, and pasted where
    the page shows it (:func:`notebook_download.convert_notebook`).
    """
    import json

    import nbformat

    notebook = nbformat.read(executed, as_version=4)
    glue_file = executed.with_name(executed.stem + ".glue.json")
    glue = json.loads(glue_file.read_text(encoding="utf-8")) if glue_file.is_file() else None
    source = Path(app.env.doc2path(pagename)) if hasattr(app.env, "doc2path") else None
    context = notebook_download.Context(
        site=site_index(app),
        glue=notebook_download.glued_values(notebook, glue),
        docname=pagename,
        source_folder=source.parent if source is not None else None,
        substitutions=dict(getattr(app.config, "myst_substitutions", {}) or {}),
        streams_merged=bool(getattr(app.config, "nb_merge_streams", False)),
    )
    install = app.config.executed_pages_install
    cell = notebook_download.install_cell(**install) if install else None
    download = notebook_download.convert_notebook(notebook, context, install=cell)
    for problem in dict.fromkeys(context.problems):
        logger.warning(f"{pagename}.ipynb download: {problem}", location=pagename)
    return nbformat.writes(download)


def site_index(app: Sphinx) -> notebook_download.SiteIndex | None:
    """What the site documents and where, for the download's links; ``None`` without ``executed_pages_site_url``.

    Read once per process from the environment: each document's address and
    title, each label's section, each Python object this site documents,
    each glossary term, and the Python names of the other projects'
    inventories (intersphinx).
    """
    url = app.config.executed_pages_site_url
    if not url:
        return None
    index = getattr(app, "lt_site_index", None)
    if index is not None and index.url.rstrip("/") == url.rstrip("/"):
        return index
    env = app.env
    builder = app.builder

    def address(docname: str, anchor: str = "") -> str:
        return builder.get_target_uri(docname) + (f"#{anchor}" if anchor else "")

    pages = {
        docname: (address(docname), env.titles[docname].astext() if docname in env.titles else docname)
        for docname in env.found_docs
    }
    standard = env.get_domain("std")
    labels = {name: (address(docname, anchor), title) for name, (docname, anchor, title) in standard.labels.items()}
    terms = {name.lower(): address(docname, anchor) for (kind, name), (docname, anchor) in standard.objects.items()
             if kind == "term"}  # fmt: skip
    python = env.get_domain("py")
    objects = {name: address(entry.docname, entry.node_id) for name, entry in python.objects.items()}
    inventory: dict[str, str] = {}
    for kind, entries in (getattr(env, "intersphinx_inventory", None) or {}).items():
        if kind.startswith("py:"):
            for name, item in entries.items():
                # Sphinx 8.2+ keeps an item object; older releases a (project, version, uri, display name) tuple.
                inventory.setdefault(name, getattr(item, "uri", None) or item[2])
    index = notebook_download.SiteIndex(url, pages, labels, objects, terms, inventory)
    app.lt_site_index = index  # type: ignore[attr-defined]
    return index


def launch_links(launch: dict, pagename: str) -> list[dict[str, str]]:
    """The theme's launch buttons (Colab, Binder) for a page's downloaded notebook.

    Args:
        launch: ``executed_pages_launch``: ``repository_url`` (a GitHub repository), ``branch`` (where the
            downloads are published, the site's ``_sources/`` folders at its root), and the services'
            addresses, ``colab_url`` and ``binderhub_url`` (either may be left out).
        pagename: The page (``chapters/02_attention``).

    Returns:
        One button per service, as sphinx-book-theme's header buttons are described.

    Raises:
        ValueError: if the repository is not on GitHub (both services open notebooks from GitHub only).
    """
    from urllib.parse import quote

    repository = str(launch.get("repository_url", "")).rstrip("/").removesuffix(".git")
    match = re.match(r"^https://github\.com/(?P<owner>[^/]+)/(?P<name>[^/]+)$", repository)
    if match is None:
        raise ValueError(
            f"executed_pages_launch's repository_url must be a GitHub repository (https://github.com/owner/name), "
            f"got {repository!r}"
        )
    branch = quote(str(launch.get("branch") or "main"), safe="")
    path = quote(f"{pagename}.ipynb")
    buttons = []
    if launch.get("colab_url"):
        buttons.append(("Colab", "logo_colab.png", f"{launch['colab_url'].rstrip('/')}/github/{match['owner']}/"
                                                   f"{match['name']}/blob/{branch}/{path}"))  # fmt: skip
    if launch.get("binderhub_url"):
        buttons.append(("Binder", "logo_binder.svg", f"{launch['binderhub_url'].rstrip('/')}/v2/gh/{match['owner']}/"
                                                     f"{match['name']}/{branch}?urlpath=lab/tree/{path}"))  # fmt: skip
    return [
        {"type": "link", "text": text, "tooltip": f"Launch on {text}", "icon": f"_static/images/{icon}", "url": url}
        for text, icon, url in buttons
    ]


def offer_launch_links(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: object) -> None:
    """``html-page-context``: the launch links of a page whose notebook is offered, in the theme's header."""
    launch = app.config.executed_pages_launch
    if not launch or app.builder.format != "html" or not context.get("ipynb_source"):
        return
    buttons = launch_links(launch, context["ipynb_source"].removesuffix(".ipynb"))
    if buttons and isinstance(context.get("header_buttons"), list):
        context["header_buttons"].append(
            {
                "type": "group",
                "tooltip": "Launch interactive content",
                "icon": "fas fa-rocket",
                "buttons": buttons,
                "label": "launch-buttons",
            }
        )


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
    # A page's own CPU seconds where its kernel measured them (page_cache): what it costs on a busy machine too.
    metadata = getattr(app.env, "nb_metadata", {})
    cpu = {page: (metadata.get(page, {}).get("exec_data") or {}).get("cpu_seconds") for page, _, _ in rows}
    width = max(len(page) for page, _, _ in rows)
    lines = [f"{'page':<{width}}  {'status':<8}  {'seconds':>8}  {'CPU s':>8}"]
    for page, how, seconds in sorted(rows, key=lambda row: -(row[2] or 0)):
        shown = f"{seconds:8.2f}" if seconds is not None else "       -"
        cpu_shown = f"{cpu[page]:8.2f}" if cpu.get(page) is not None else "       -"
        lines.append(f"{page:<{width}}  {how:<8}  {shown}  {cpu_shown}")
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
    # The hosted site's address (the download's links), what its install cell installs, and its launch links.
    app.add_config_value("executed_pages_site_url", "", "html", types=frozenset({str}))
    app.add_config_value("executed_pages_install", {}, "html", types=frozenset({dict}))
    app.add_config_value("executed_pages_launch", {}, "html", types=frozenset({dict}))
    app.connect("config-inited", _note_start)
    app.connect("env-before-read-docs", read_executed_pages_alone)
    app.connect("env-updated", restore_chunks)
    app.connect("build-finished", restore_chunks)
    # Before sphinx-book-theme's header buttons (priority 501), which read "ipynb_source".
    app.connect("html-page-context", offer_executed_notebook, priority=450)
    # After the theme empties its list of header buttons (priority 500), before it fills it (501).
    app.connect("html-page-context", offer_launch_links, priority=501)
    app.connect("doctree-read", add_executed_with)
    app.connect("build-finished", report_execution_times)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
