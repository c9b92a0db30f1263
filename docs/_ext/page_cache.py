"""Executed pages: each page executes again only when what it ran changed.

myst-nb's ``cache`` mode keys a page's outputs on the page's own code cells,
so an edit of the package the page imports leaves stale outputs; keying
every page on the whole package instead executes every page again after any
edit.  This extension keys each page on what *its* run reached, recorded
while it ran (:mod:`lt_site.deps`):

* its code cells (and its kernel's name): an edit of the prose alone does
  not execute a page again;
* every file of the watched folders (``page_cache_sources``: the package,
  the site's tooling, the benchmark results) that the page's kernel
  imported or opened, each with a digest of its bytes;
* every installed distribution the kernel imported, with its version, and
  the sentence that names the versions and the device the pages run with
  (``page_cache_salt``, a ``module:function``).

The kernel records them itself: a first cell starts an audit hook on the
files it opens, a last cell prints the files of every module it imported;
both run around the page's own cells, in a copy of the notebook, and never
show on the page or in its download.  After a page executed, its outputs
and its record are stored in ``page_cache_root`` (one ``.ipynb`` and one
``.json`` per page, so the build's parallel readers never share a file).

Sphinx re-reads a page when a file it depends on is newer than the page's
last read; this extension tells Sphinx about every file a page's record
holds (``env.note_dependency``), and, at ``env-get-outdated``, about the
pages whose distributions or salt changed.  A page that Sphinx re-reads
executes again only if its record is no longer current: a touched but
unchanged file costs a read, not an execution.

While the build reads, every page that executes logs what made it execute
and how many are left::

    executing chapters/14_decoder_branch (2 of 3 to execute; literate_transformer/models/gemma2.py changed)

myst-nb's client for its ``cache`` mode is replaced by this one for the
build (``page_cache_root`` empty leaves myst-nb alone).  Kernels are forked
from one process that imported PyTorch and ``transformers`` once
(:mod:`forked_kernels`; ``page_cache_fork_kernels = False`` starts each
afresh), and shut down at once rather than asked to exit (a kernel that
imported PyTorch takes about two seconds to exit gracefully, and the pages
leave nothing for an exit to save).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from forked_kernels import PRELOAD, Zygote, kernel_manager_class
from lt_site.deps import Record, kernel_epilogue, kernel_prologue, read_cpu_seconds, read_epilogue
from runtime_trace import load_provider
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: The settings of this build, read by the client (myst-nb hands the client its own config only).  Set at
#: ``builder-inited``, before Sphinx starts the reading processes, which inherit it.
SETTINGS: dict[str, Any] = {}


def cells_digest(notebook: Any) -> str:
    """16 hex digits of SHA-256 over a notebook's code cells and its kernel's name: what executes."""
    digest = hashlib.sha256(notebook.get("metadata", {}).get("kernelspec", {}).get("name", "").encode())
    for cell in notebook.cells:
        if cell.cell_type == "code":
            digest.update(b"\0" + cell.source.encode())
    return digest.hexdigest()[:16]


def _stored(folder: Path, page: str) -> dict[str, Any]:
    try:
        return json.loads((folder / f"{page}.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def _write(path: Path, text: str) -> None:
    """Write through a temporary file, so that a reader never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


def why_stale(stored: dict[str, Any], cells: str, root: Path, salt: str) -> str | None:
    """Why a page must execute (``None`` when its stored outputs are current)."""
    if not stored:
        return "never executed"
    if stored.get("cells") != cells:
        return "its code cells changed"
    changes = Record.from_dict(stored.get("record", {})).changed(root, salt)
    if changes:
        shown = ", ".join(changes[:3]) + (f" and {len(changes) - 3} more" if len(changes) > 3 else "")
        return f"{shown} changed"
    return None


def _page_name(path: Path) -> str:
    """The page's name in the cache: its path under the source folder, without suffix."""
    return path.resolve().relative_to(Path(SETTINGS["srcdir"]).resolve()).with_suffix("").as_posix()


def _client_class():
    """myst-nb's client for the ``cache`` mode, keyed on what each page reached (built on first use)."""
    import nbformat
    from myst_nb.core.execute.base import ExecutionError, NotebookClientBase
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    class ReachedCacheClient(NotebookClientBase):
        """Reuse a page's outputs while its record is current; else execute it, recording what it reached."""

        def start_client(self) -> None:
            if self.path is None:
                raise ValueError("a page is executed from its file: it has none")
            folder, root, salt = Path(SETTINGS["root_cache"]), Path(SETTINGS["root"]), SETTINGS["salt"]
            page = _page_name(self.path)
            cells = cells_digest(self.notebook)
            stored = _stored(folder, page)
            reason = why_stale(stored, cells, root, salt)
            if reason is None:
                cached = nbformat.read(folder / f"{page}.ipynb", as_version=4)
                self._merge(cached)
                self.logger.info(f"Using its outputs of {stored['executed']}: nothing the page reached changed")
                self.exec_metadata = self._metadata(stored["executed_at"], stored["runtime"], stored.get("cpu_seconds"))
                return
            # Straight to the terminal: Sphinx replays a reading process's log only once its pages are read.
            print(f"executing {page} ({_progress(page)}; {reason})", file=sys.__stderr__, flush=True)
            copy = nbformat.reads(nbformat.writes(self.notebook), as_version=4)
            copy.cells = [
                nbformat.v4.new_code_cell(kernel_prologue()),
                *copy.cells,
                nbformat.v4.new_code_cell(kernel_epilogue()),
            ]
            cwd = str(self.path.parent.resolve())
            forked = {}
            if SETTINGS.get("zygote"):
                forked["kernel_manager_class"] = kernel_manager_class(SETTINGS["zygote"], _log_to_terminal)
            client = NotebookClient(
                copy,
                **forked,
                timeout=self.nb_config.execution_timeout,
                allow_errors=self.nb_config.execution_allow_errors,
                resources={"metadata": {"path": cwd}},
                # Killed, not asked to exit: a kernel with PyTorch loaded takes about 2 s to exit on its own.
                shutdown_kernel="immediate",
            )
            started = time.perf_counter()
            try:
                client.execute()
            except CellExecutionError as error:
                message = f"Executing notebook failed: {type(error).__name__}"
                if self.nb_config.execution_show_tb:
                    message += f"\n{error}"
                self.logger.warning(message, subtype="exec")
                if self.nb_config.execution_raise_on_error:
                    raise ExecutionError(str(self.path)) from error
                self.exec_metadata = {**self._metadata(time.time(), time.perf_counter() - started), "succeeded": False}
                self.exec_metadata.update(error=type(error).__name__, traceback=str(error))
                return
            runtime = time.perf_counter() - started
            reached = read_epilogue(copy.cells[-1].get("outputs", []))
            cpu_seconds = read_cpu_seconds(copy.cells[-1].get("outputs", []))
            copy.cells = copy.cells[1:-1]
            cell_seconds = [_cell_seconds(cell) for cell in copy.cells if cell.cell_type == "code"]
            self._merge(copy)
            record = Record.of(reached, root, SETTINGS["sources"], salt)
            now = time.time()
            # The outputs first, then the record that vouches for them.
            _write(folder / f"{page}.ipynb", nbformat.writes(self.notebook))
            stored = {
                "cells": cells,
                "record": record.as_dict(),
                "runtime": runtime,
                # The kernel's own CPU time: what the page costs, whatever else the machine was doing.
                "cpu_seconds": cpu_seconds,
                # Each code cell's wall seconds, in order (the build's profile names the costliest).
                "cell_seconds": cell_seconds,
                "executed_at": now,
                "executed": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)),
            }
            _write(folder / f"{page}.json", json.dumps(stored, indent=1, sort_keys=True))
            self.logger.info(f"Executed {page} in {runtime:.2f} seconds")
            self.exec_metadata = self._metadata(now, runtime, cpu_seconds)

        def _merge(self, executed: Any) -> None:
            """Give the page's code cells the outputs of ``executed`` (the same cells, executed)."""
            ours = [cell for cell in self.notebook.cells if cell.cell_type == "code"]
            theirs = [cell for cell in executed.cells if cell.cell_type == "code"]
            for cell, done in zip(ours, theirs, strict=True):
                cell.outputs = joined_streams(done.get("outputs", []))
                cell.execution_count = done.get("execution_count")
            for key in ("language_info", "widgets"):
                if key in executed.metadata:
                    self.notebook.metadata[key] = executed.metadata[key]

        def _metadata(self, mtime: float, runtime: float, cpu_seconds: float | None = None) -> dict[str, Any]:
            return {
                "mtime": mtime,
                "runtime": runtime,
                "cpu_seconds": cpu_seconds,
                "method": "cache",
                "succeeded": True,
                "error": None,
                "traceback": None,
            }

    return ReachedCacheClient


def _cell_seconds(cell: Any) -> float | None:
    """A code cell's wall seconds from the timestamps ``nbclient`` records (``None`` where it recorded none)."""
    from datetime import datetime

    timing = cell.get("metadata", {}).get("execution", {})
    started, replied = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (started and replied):
        return None
    start, end = (datetime.fromisoformat(stamp.replace("Z", "+00:00")) for stamp in (started, replied))
    return round((end - start).total_seconds(), 3)


def joined_streams(outputs: list[Any]) -> list[Any]:
    """The outputs with each run of consecutive stream outputs of one name joined into one, as a notebook shows
    them: a kernel flushes a cell's printing in pieces when it is slow between two prints, and myst-nb's own
    joining strips the pieces' ends (``"a"`` and ``"\\nb"`` would read as ``"a\\n\\nb"``)."""
    joined: list[Any] = []
    for output in outputs:
        previous = joined[-1] if joined else None
        if (
            output.get("output_type") == "stream"
            and previous is not None
            and previous.get("output_type") == "stream"
            and previous.get("name") == output.get("name")
        ):
            previous["text"] = previous["text"] + output["text"]
        else:
            joined.append(output)
    return joined


def _log_to_terminal(message: str) -> None:
    print(message, file=sys.__stderr__, flush=True)


def _progress(page: str) -> str:
    """``3 of 5 to execute``: this page's place among the pages the read found stale, in the order they started
    executing, counted across the build's reading processes (each takes the next number from a shared folder)."""
    planned = SETTINGS.get("planned", [])
    if page not in planned:
        return "1 more to execute"
    tickets = Path(SETTINGS["root_cache"], ".progress", str(SETTINGS["started"]))
    tickets.mkdir(parents=True, exist_ok=True)
    for number in range(1, len(planned) + 1):
        try:
            # Created or refused atomically: two processes starting at once take two numbers.
            os.close(os.open(tickets / str(number), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        return f"{number} of {len(planned)} to execute"
    return f"{len(planned)} of {len(planned)} to execute"


# ---------------------------------------------------------------------------
# The Sphinx glue
# ---------------------------------------------------------------------------
def salt_of(config: Any) -> str:
    """The sentence naming what executes the pages (``page_cache_salt``, ``module:function``), or ``""``."""
    name = getattr(config, "page_cache_salt", "")
    return str(load_provider(name)()) if name else ""


def configure(app: Sphinx) -> None:
    """``builder-inited``: replace myst-nb's cache client, and note this build's settings for it."""
    config = app.config
    if not config.page_cache_root or getattr(config, "nb_execution_mode", None) != "cache":
        return
    import myst_nb.core.execute as execute

    execute.NotebookClientCache = _client_class()
    SETTINGS.clear()
    # The progress numbers of earlier builds (see _progress).
    shutil.rmtree(Path(app.confdir, config.page_cache_root, ".progress"), ignore_errors=True)
    SETTINGS.update(
        root_cache=str(Path(app.confdir, config.page_cache_root)),
        root=str(Path(app.confdir, config.page_cache_checkout)),
        sources=[str(Path(app.confdir, folder)) for folder in config.page_cache_sources],
        srcdir=str(app.srcdir),
        salt=salt_of(config),
        started=time.time(),
        planned=[],
    )
    # A site whose pages execute code, with no page's outputs stored: every page will execute (a clean
    # build).  The zygote imports now, beside the trace, the proofs and the exports, rather than while the
    # first page waits for it.
    if config.page_cache_zygote_at_start and not any(Path(SETTINGS["root_cache"]).rglob("*.json")):
        start_zygote(app)


def outdated_pages(app: Sphinx, env: Any, added: set, changed: set, removed: set) -> list[str]:
    """``env-get-outdated``: the pages whose stored outputs are no longer current for a reason a file's time
    does not show (a distribution's version, the salt, a changed file that Sphinx did not see as newer)."""
    if not SETTINGS:
        return []
    folder, root = Path(SETTINGS["root_cache"]), Path(SETTINGS["root"])
    outdated = []
    for docname in sorted(env.found_docs - added - changed - removed):
        stored = _stored(folder, docname)
        if stored and not Record.from_dict(stored["record"]).is_current(root, SETTINGS["salt"]):
            outdated.append(docname)
    if added or changed or outdated:
        # Pages will be read: the zygote imports while the other handlers of this event run (the exports).
        start_zygote(app)
    return outdated


def start_zygote(app: Sphinx) -> None:
    """Start the kernels' zygote (:mod:`forked_kernels`), unless it runs or the build starts kernels afresh."""
    if not app.config.page_cache_fork_kernels or SETTINGS.get("zygote"):
        return
    try:
        SETTINGS["zygote"] = Zygote(tuple(app.config.page_cache_kernel_preload))
    except (OSError, RuntimeError) as error:
        logger.info(f"executed pages: each kernel starts afresh ({error})")


def plan(app: Sphinx, env: Any, docnames: list[str]) -> None:
    """``env-before-read-docs``: which of the pages about to be read will execute, logged once."""
    if not SETTINGS:
        return
    from myst_nb.core.read import create_nb_reader

    folder, root = Path(SETTINGS["root_cache"]), Path(SETTINGS["root"])
    planned, reused = [], 0
    for docname in docnames:
        path = Path(env.doc2path(docname))
        if path.suffix not in (".md", ".ipynb"):
            continue
        text = path.read_text(encoding="utf-8")
        reader = create_nb_reader(str(path), env.myst_config, env.mystnb_config, text)
        if reader is None:
            continue
        notebook = reader.read(text)
        if not any(cell.cell_type == "code" for cell in notebook.cells):
            continue
        if why_stale(_stored(folder, docname), cells_digest(notebook), root, SETTINGS["salt"]) is None:
            reused += 1
        else:
            planned.append(docname)
    SETTINGS["planned"] = planned
    if planned:
        # One warm process the pages' kernels fork from, stopped once every page is read.
        start_zygote(app)
    if planned or reused:
        logger.info(f"executed pages: {len(planned)} to execute, {reused} from their stored outputs")


def note_dependencies(app: Sphinx, doctree: Any) -> None:
    """``doctree-read``: the page depends on every file its record holds (Sphinx re-reads it when one is newer).

    The folders it listed are not Sphinx's dependencies (Sphinx takes a dependency that is not a file for a
    missing one, and would read the page again in every build): their names are in the record, which
    :func:`outdated_pages` checks.
    """
    if not SETTINGS:
        return
    stored = _stored(Path(SETTINGS["root_cache"]), app.env.docname)
    for name in stored.get("record", {}).get("files", {}):
        if not name.endswith("/"):
            app.env.note_dependency(str(Path(SETTINGS["root"], name)))


def stop_zygote(app: Sphinx, *args: Any) -> None:
    """``env-updated`` (every page read) and ``build-finished``: stop the zygote, if this build started one."""
    zygote = SETTINGS.pop("zygote", None)
    if zygote is not None:
        zygote.stop()


def costliest_cells(folder: Path, since: float, count: int = 8) -> list[tuple[float, str, str]]:
    """The ``count`` code cells that took longest among the pages executed since ``since``: ``(seconds, page,
    first line)``, from each page's record and stored notebook."""
    import nbformat

    cells = []
    for record in folder.rglob("*.json"):
        stored = _stored(folder, record.relative_to(folder).with_suffix("").as_posix())
        if stored.get("executed_at", -1) < since or not stored.get("cell_seconds"):
            continue
        page = record.relative_to(folder).with_suffix("").as_posix()
        notebook = nbformat.read(record.with_suffix(".ipynb"), as_version=4)
        sources = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
        for seconds, source in zip(stored["cell_seconds"], sources, strict=False):
            first = next((line for line in source.splitlines() if line and not line.startswith("%")), "")
            cells.append((seconds or 0.0, page, first[:60]))
    return sorted(cells, reverse=True)[:count]


def report_cells(app: Sphinx, exception: Exception | None) -> None:
    """``build-finished``: the costliest cells of the pages this build executed (wall seconds), in the log."""
    if exception is not None or not SETTINGS:
        return
    cells = costliest_cells(Path(SETTINGS["root_cache"]), SETTINGS["started"])
    if cells:
        logger.info("the costliest cells this build executed (wall seconds, page, first line):")
        for seconds, page, first in cells:
            logger.info(f"{seconds:7.1f}  {page:40}  {first}")


def setup(app: Sphinx) -> dict[str, object]:
    app.add_config_value("page_cache_root", "", "env", types=frozenset({str}))
    app.add_config_value("page_cache_checkout", "..", "env", types=frozenset({str}))
    app.add_config_value("page_cache_sources", [], "env", types=frozenset({list, tuple}))
    app.add_config_value("page_cache_salt", "", "env", types=frozenset({str}))
    # Kernels forked from one process that imported PyTorch and transformers once (forked_kernels).
    app.add_config_value("page_cache_fork_kernels", True, "", types=frozenset({bool}))
    app.add_config_value("page_cache_kernel_preload", list(PRELOAD), "", types=frozenset({list, tuple}))
    # True: a build with no page's outputs stored starts the zygote with the builder, not once a page is known
    # to execute (for a site whose pages execute code: a site with none would start it for nothing).
    app.add_config_value("page_cache_zygote_at_start", False, "", types=frozenset({bool}))
    # Before the trace (priority 400) and the gallery (500): in a clean build the zygote then imports beside
    # them, and is ready when the first page is read; after them, the first pages waited for its imports.
    app.connect("builder-inited", configure, priority=300)
    app.connect("env-get-outdated", outdated_pages, priority=100)
    app.connect("env-before-read-docs", plan)
    app.connect("doctree-read", note_dependencies)
    app.connect("env-updated", stop_zygote)
    app.connect("build-finished", stop_zygote)
    app.connect("build-finished", report_cells)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
