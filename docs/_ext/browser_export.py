"""What the site's "try it" pages share: a browser export made at build time and served by the site.

The "Try your own sentence" page (``try_it``) and the "Try your own prompt"
page (``try_prompt``) each run one of the package's models in the reader's
browser, and their extensions do the same work for it, each with the options
named after it (``<prefix>_page``, ``<prefix>_exporter`` ...).  A
:class:`ServedExport`, made with that prefix, does that work:

1. before pages are read, it makes sure the browser export exists: it calls
   ``<prefix>_exporter`` (a ``"module:function"`` name) with a cache folder
   outside the source tree (``<prefix>_cache_dir``, default
   ``_build/<prefix>`` next to the output folder), logs whether the export
   was cached or made, and remembers it for the page's directive; a new
   export makes Sphinx read the page again.  With
   ``<prefix>_in_own_process``, a build whose cache folder holds no export yet
   (a clean build) runs the exporter in a process of its own, started when
   the builder starts, beside the build's other work before the pages are
   read (the gallery, the proofs), and takes its result just before the pages
   are read; a later build, whose export is most likely cached, checks it in
   the build's own process, without starting an interpreter for it;
2. it adds the page's stylesheets and scripts (``<prefix>_css``,
   ``<prefix>_scripts``, paths under ``_static``) to that page only,
   deferred, in order;
3. after the build, it copies the graph and the JSON file (and any other
   file of the export it is told of), gzip-compressed once per export and
   cached, into ``<prefix>_output_dir`` of the built site.

When the page is not part of the build, none of this happens.  Each
extension keeps what is its own: the defaults of its options, and the
directive that writes onto its page what the export did and measured.

This module is not an extension itself (it has no ``setup``): the two
extensions import it.  The pure helpers (``gzip_once``,
``copy_if_changed``, ``megabytes``) come first, each tested on its own.
"""

from __future__ import annotations

import gzip
import importlib
import shutil
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from forked_kernels import submit_in_background, worker_context
from long_lived import freeze, freeze_survivors
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------
# Pure helpers
# ---------------------------------------------------------------------------
def gzip_once(source: Path, target: Path, key: str) -> Path:
    """Write ``target`` = ``source`` gzip-compressed (level 9, no timestamp), unless done for ``key``.

    ``key`` (e.g. the export's digest) is stored in ``target.key`` next to
    the file; when it matches, nothing is compressed again.

    Returns:
        ``target``.

    Raises:
        FileNotFoundError: if ``source`` does not exist.
    """
    source, target = Path(source), Path(target)
    if not source.is_file():
        raise FileNotFoundError(f"cannot compress {source}: no such file")
    stamp = target.with_name(target.name + ".key")
    if target.is_file() and stamp.is_file() and stamp.read_text() == key:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    # mtime=0 and no file name in the header: the same input gives the same bytes.
    with open(source, "rb") as raw, open(partial, "wb") as out:
        with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=out, mtime=0) as packed:
            shutil.copyfileobj(raw, packed, 1 << 20)
    partial.replace(target)
    stamp.write_text(key)
    return target


def copy_if_changed(source: Path, target: Path) -> bool:
    """Copy ``source`` to ``target`` unless ``target`` has the same size and modification time.

    Returns:
        Whether the file was copied.
    """
    source, target = Path(source), Path(target)
    if target.is_file():
        a, b = source.stat(), target.stat()
        if a.st_size == b.st_size and int(a.st_mtime) == int(b.st_mtime):
            return False
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
    return True


def megabytes(count: int) -> str:
    """A size in bytes as the pages print it: ``"36.8 MB"``."""
    return f"{count / 1e6:.1f} MB"


# ---------------------------------------------------------------------------
# Sphinx glue
# ---------------------------------------------------------------------------
class ServedExport:
    """One page's browser export: made (or found cached) before the page is read, copied into the site after.

    An export is what the exporter returns: an object with ``onnx_path``,
    ``metadata_path``, ``metadata`` (the JSON file's content), ``digest`` and
    ``cached``.

    Args:
        prefix: The extension's name, which starts the names of its options and its lines in the build's log.
        what: What the export is called in the log and in errors (``"browser export"``).
        onnx_file: Where the compressed graph goes, under ``<prefix>_output_dir``.
        metadata_file: Where the compressed JSON file goes, under ``<prefix>_output_dir``.
        other_files: The export's other files: ``(attribute, served)``, the attribute of the export that holds
            the file's path, and where the compressed file goes, under ``<prefix>_output_dir``.
    """

    def __init__(
        self, prefix: str, what: str, onnx_file: str, metadata_file: str, other_files: Sequence[tuple[str, str]] = ()
    ) -> None:
        self.prefix = prefix
        self.what = what
        self.onnx_file = onnx_file
        self.metadata_file = metadata_file
        self.other_files = tuple(other_files)
        # The export of each build, by source folder (set before pages are read; forked read workers inherit it).
        self._exports: dict[str, Any] = {}
        # The export under way in a process of its own, by source folder: (executor, future).
        self._pending: dict[str, tuple[ProcessPoolExecutor, Any]] = {}

    def add_config_values(
        self, app: Sphinx, *, page: str, exporter: str, output_dir: str, scripts: Sequence[str], css: Sequence[str]
    ) -> None:
        """Declare the extension's options, ``<prefix>_page`` and the rest, with these defaults."""
        # The page that runs the model ("" turns the extension off).
        self._add(app, "page", page, "env", str)
        # The function that writes (or finds cached) the browser export into a folder.
        self._add(app, "exporter", exporter, "env", str)
        # Where the export is cached, relative to conf.py ("" = _build/<prefix> next to the output folder).
        self._add(app, "cache_dir", "", "env", str)
        # Export in a process of its own, started with the builder, beside the build's other work.
        self._add(app, "in_own_process", False, "", bool)
        # What that process imports before its work, once for every such process (forked_kernels.worker_context).
        self._add(app, "preload", [], "", list, tuple)
        # Where the model goes in the built site (the page's scripts find it there).
        self._add(app, "output_dir", output_dir, "html", str)
        # The page's scripts, in order, and its stylesheets (paths under _static).
        self._add(app, "scripts", list(scripts), "html", list, tuple)
        self._add(app, "css", list(css), "html", list, tuple)

    def connect(self, app: Sphinx) -> None:
        """Run this export's steps on Sphinx's events: before pages are read, for each page, after the build."""
        app.connect("builder-inited", self.start, priority=150)
        app.connect("env-get-outdated", self.outdated)
        app.connect("html-page-context", self.page_context)
        app.connect("build-finished", self.copy_files)

    def export_of(self, srcdir: str | Path) -> Any | None:
        """The export of the build of ``srcdir`` (``None`` before it is made, or when the page is not built)."""
        return self._exports.get(str(srcdir))

    def export_for_page(self, env: BuildEnvironment) -> Any | None:
        """The export, for the page being read: the page is read again whenever a new export rewrites its JSON file."""
        result = self.export_of(env.srcdir)
        if result is not None:
            env.note_dependency(str(result.metadata_path))
        return result

    def page_in_build(self, app: Sphinx) -> bool:
        """Whether ``<prefix>_page`` is set and is a page of this build."""
        page = self._option(app, "page")
        return bool(page) and page in app.env.found_docs

    def cache_dir(self, app: Sphinx) -> Path:
        """Where the export is cached: ``<prefix>_cache_dir`` (relative to conf.py), else ``_build/<prefix>``."""
        configured = self._option(app, "cache_dir")
        return Path(app.confdir, configured) if configured else Path(app.outdir).parent / self.prefix

    def start(self, app: Sphinx) -> None:
        """``builder-inited``: with ``<prefix>_in_own_process`` and no export made yet, start the exporter in a
        process of its own.

        The pages are not found yet: the page's source file says whether it is part of the build.
        """
        page = self._option(app, "page")
        if not (self._option(app, "in_own_process") and page and self._page_source(app, page)):
            return
        if (self.cache_dir(app) / Path(self.metadata_file).name).is_file():
            return  # an export was made before: checked (most likely found cached) in this process
        spec = self._checked_spec(self._option(app, "exporter"))  # a malformed name fails here, in this process
        logger.info("%s: checking the %s in %s, in a process of its own", self.prefix, self.what, self.cache_dir(app))
        # A new interpreter, not a copy of this one (forked_kernels.worker_context).
        executor = ProcessPoolExecutor(max_workers=1, mp_context=worker_context(self._option(app, "preload")))
        self._pending[str(app.srcdir)] = (
            executor,
            submit_in_background(executor, run_exporter, spec, self.cache_dir(app)),
        )

    def ensure_export(self, app: Sphinx) -> Any:
        """Export (or find the cached export) into the cache folder; remember it for this build."""
        pending = self._pending.pop(str(app.srcdir), None)
        try:
            if pending is not None:
                executor, future = pending
                try:
                    result = future.result()
                finally:
                    executor.shutdown()
            else:
                exporter = self._load_exporter(self._option(app, "exporter"))
                logger.info("%s: checking the %s in %s", self.prefix, self.what, self.cache_dir(app))
                result = exporter(self.cache_dir(app))
        except Exception as error:
            raise ExtensionError(f"{self.prefix}: the {self.what} failed: {error}") from error
        logger.info("%s: %s (digest %s)", self.prefix, "cached" if result.cached else "exported", result.digest[:12])
        self._exports[str(app.srcdir)] = result
        return result

    def packed_model(self, app: Sphinx, result: Any) -> Path:
        """The export's graph, gzip-compressed once per export in the cache folder."""
        return gzip_once(result.onnx_path, self.cache_dir(app) / Path(self.onnx_file).name, result.digest)

    def packed_others(self, app: Sphinx, result: Any) -> dict[str, Path]:
        """The export's other files, each gzip-compressed once per export in the cache folder, by served name."""
        return {
            served: gzip_once(getattr(result, attribute), self.cache_dir(app) / Path(served).name, result.digest)
            for attribute, served in self.other_files
        }

    def outdated(self, app: Sphinx, env: Any, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
        """``env-get-outdated``: make sure of the export before pages are read (so the directive finds the numbers).

        Returns:
            The page, when the export is new (so that it is read again); else nothing.
        """
        if not self.page_in_build(app):
            return []
        result = self.ensure_export(app)
        return [] if result.cached else [self._option(app, "page")]

    def page_context(
        self, app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
    ) -> None:
        """``html-page-context``: the page's stylesheets and scripts, on that page only."""
        if pagename != self._option(app, "page"):
            return
        for css in self._option(app, "css"):
            app.add_css_file(css)
        for script in self._option(app, "scripts"):
            # Deferred scripts run in order once the page is parsed; the model waits until the reader asks for it.
            app.add_js_file(script, loading_method="defer")

    def copy_files(self, app: Sphinx, exception: Exception | None) -> None:
        """``build-finished``: the compressed graph, JSON file and other files, into the built site (HTML only)."""
        if exception is not None or app.builder.format != "html" or not self.page_in_build(app):
            return
        result = self.export_of(app.srcdir) or self.ensure_export(app)
        target = Path(app.outdir, self._option(app, "output_dir"))
        copy_if_changed(self.packed_model(app, result), target / self.onnx_file)
        packed_metadata = gzip_once(
            result.metadata_path, self.cache_dir(app) / Path(self.metadata_file).name, result.digest
        )
        copy_if_changed(packed_metadata, target / self.metadata_file)
        for served, packed in self.packed_others(app, result).items():
            copy_if_changed(packed, target / served)
        logger.info("%s: model for %s copied to %s", self.prefix, self._option(app, "page"), target)

    def _add(self, app: Sphinx, name: str, default: Any, rebuild: str, *types: type) -> None:
        app.add_config_value(f"{self.prefix}_{name}", default, rebuild, types=frozenset(types))

    def _page_source(self, app: Sphinx, page: str) -> bool:
        suffixes = app.config.source_suffix
        return any(Path(app.srcdir, page + suffix).is_file() for suffix in suffixes)

    def _option(self, app: Sphinx, name: str) -> Any:
        return getattr(app.config, f"{self.prefix}_{name}")

    def _checked_spec(self, spec: str) -> str:
        module_name, _, function_name = spec.partition(":")
        if not module_name or not function_name:
            raise ExtensionError(f"{self.prefix}_exporter must be 'module:function', got {spec!r}")
        return spec

    def _load_exporter(self, spec: str) -> Any:
        return import_function(self._checked_spec(spec))


def import_function(spec: str) -> Any:
    """The function a ``"module:function"`` name names."""
    module_name, _, function_name = spec.partition(":")
    return getattr(importlib.import_module(module_name), function_name)


def run_exporter(spec: str, folder: Path) -> Any:
    """What the process of its own runs: the exporter ``"module:function"``, on ``folder``."""
    exporter = import_function(spec)
    # What the exporter imports lives as long as this process, and the process as long as the export
    # (long_lived.py).
    freeze()
    freeze_survivors()
    return exporter(folder)
