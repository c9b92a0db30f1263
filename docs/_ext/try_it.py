"""The "Try your own sentence" page: the model and its vocabulary, served by the site.

The page (``try_it_page``, default ``try``) runs the package's BERT in the
reader's browser.  For it, at build time, this extension

1. makes sure the browser export exists: it calls ``try_it_exporter`` (an
   ``"module:function"`` name, default
   ``lt_site.export:export_for_browser``) with a cache folder
   outside the source tree (``try_it_cache_dir``, default ``_build/try_it``
   next to the output folder).  The exporter skips the work when its digest
   (package source, checkpoint, settings, versions) matches, so an unchanged
   rebuild costs a hash; a changed package re-exports (about 20 s);
2. provides the ``try-it-facts`` directive, which writes onto the page what
   was done to the weights and the differences the export measured, from the
   export's JSON file (so the numbers are computed, never typed); a new
   export makes Sphinx read the page again;
3. adds the page's scripts and stylesheet (``try_it_scripts``,
   ``try_it_css``, paths under ``_static``) to that page only, deferred, in
   order;
4. after the build, copies into ``try_it_output_dir`` (default
   ``_static/try``) of the built site: ``model/model.json.gz`` and
   ``model/model.onnx.gz`` (gzip-compressed once per export and cached).

The page draws its head view itself (``try.js``: the tokens as SVG text, the
lines on one canvas), so it loads neither bertviz's script nor the d3 and
jQuery that script needs.

When the page is not part of the build, none of this happens.

The pure helpers (``gzip_once``, ``copy_if_changed``, ``facts_text``) are separate from the Sphinx glue below them, and each is
tested on its own.
"""

from __future__ import annotations

import gzip
import importlib
import shutil
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

# The export of each build, by source folder (set before pages are read; forked read workers inherit it).
_EXPORTS: dict[str, Any] = {}


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


def _megabytes(count: int) -> str:
    return f"{count / 1e6:.1f} MB"


def facts_text(metadata: dict[str, Any]) -> list[str]:
    """The page's sentences on what was exported, how the weights were shrunk and what that cost.

    Args:
        metadata: The export's JSON file (``model.json``).

    Returns:
        Paragraphs of plain text.

    Raises:
        ValueError: if ``metadata`` lacks the fields of a browser export.
    """
    try:
        config, model, weights, check = (metadata[key] for key in ("config", "model", "weights", "check"))
        sha256 = metadata["checkpoint"]["sha256"]
    except KeyError as error:
        raise ValueError(f"metadata is not a browser export's model.json: it has no {error}") from error
    return [
        f"The model is the package's own BertModel with the checkpoint's weights "
        f"({'SHA-256 ' + sha256[:12] + '…, ' if sha256 else ''}{config['num_hidden_layers']} layers, "
        f"{config['num_attention_heads']} heads, hidden size {config['hidden_size']}, vocabulary of "
        f"{config['vocab_size']} tokens), exported to ONNX (opset {model['opset']}) with its attention "
        "probabilities and its last hidden state as outputs.",
        f"Its {weights['shrunk_tensors']} weight matrices were shrunk from float32 to {weights['scheme']} of "
        f"{weights['block_size']} numbers ({weights['bits_per_weight']:g} bits per weight instead of 32): the graph "
        f"is {_megabytes(model['bytes'])} instead of {_megabytes(weights['float32_bytes'])}, and "
        f"{_megabytes(model['gzip_bytes'])} to download, compressed.",
        f"What that costs, measured when this site was built on {check['texts']} texts, against BertModel.forward "
        f"in float32: attention probabilities differ by at most {check['max_abs_attention']:.1e}, numbers of the "
        f"last hidden state by at most {check['max_abs_last_hidden_state']:.1e}.",
    ]


def _load_exporter(spec: str) -> Any:
    module_name, _, function_name = spec.partition(":")
    if not module_name or not function_name:
        raise ExtensionError(f"try_it_exporter must be 'module:function', got {spec!r}")
    return getattr(importlib.import_module(module_name), function_name)


# ---------------------------------------------------------------------------
# Sphinx glue
# ---------------------------------------------------------------------------
def _page_in_build(app: Sphinx) -> bool:
    page = app.config.try_it_page
    return bool(page) and page in app.env.found_docs


def _cache_dir(app: Sphinx) -> Path:
    configured = app.config.try_it_cache_dir
    return Path(app.confdir, configured) if configured else Path(app.outdir).parent / "try_it"


def _ensure_export(app: Sphinx) -> Any:
    """Export (or find the cached export) into the cache folder; remember it for this build."""
    exporter = _load_exporter(app.config.try_it_exporter)
    logger.info("try_it: checking the browser export in %s", _cache_dir(app))
    try:
        result = exporter(_cache_dir(app))
    except Exception as error:
        raise ExtensionError(f"try_it: the browser export failed: {error}") from error
    logger.info("try_it: %s (digest %s)", "cached" if result.cached else "exported", result.digest[:12])
    _EXPORTS[str(app.srcdir)] = result
    return result


def _outdated(app: Sphinx, env: Any, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
    # Before pages are read (so the directive finds the numbers); a new export re-reads the page.
    if not _page_in_build(app):
        return []
    result = _ensure_export(app)
    return [] if result.cached else [app.config.try_it_page]


class TryItFacts(SphinxDirective):
    """``try-it-facts``: what the export did to the weights and what it measured, as paragraphs."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        result = _EXPORTS.get(str(self.env.srcdir))
        if result is None:
            raise self.error("try-it-facts: no browser export (is this page try_it_page in conf.py?)")
        # Re-read this page whenever a new export rewrites the file.
        self.env.note_dependency(str(result.metadata_path))
        return [nodes.paragraph(text=text) for text in facts_text(result.metadata)]


def _page_context(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    if pagename != app.config.try_it_page:
        return
    for css in app.config.try_it_css:
        app.add_css_file(css)
    for script in app.config.try_it_scripts:
        # Deferred scripts run in order once the page is parsed; the model is only fetched on Run.
        app.add_js_file(script, loading_method="defer")


def _copy_files(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html" or not _page_in_build(app):
        return
    result = _EXPORTS.get(str(app.srcdir)) or _ensure_export(app)
    target = Path(app.outdir, app.config.try_it_output_dir)
    # The model, compressed once per export (34 MB of int8/int4 codes: gzip saves ~5 %).
    packed = gzip_once(result.onnx_path, _cache_dir(app) / "model.onnx.gz", result.digest)
    copy_if_changed(packed, target / "model" / "model.onnx.gz")
    # The vocabulary is most of the JSON file: compressed, 0.3 MB become 0.1 MB.
    packed_metadata = gzip_once(result.metadata_path, _cache_dir(app) / "model.json.gz", result.digest)
    copy_if_changed(packed_metadata, target / "model" / "model.json.gz")
    logger.info("try_it: model for %s copied to %s", app.config.try_it_page, target)


def setup(app: Sphinx) -> dict[str, Any]:
    # The page that runs the model ("" turns the extension off).
    app.add_config_value("try_it_page", "try", "env", types=frozenset({str}))
    # The function that writes (or finds cached) the browser export into a folder.
    app.add_config_value("try_it_exporter", "", "env", types=frozenset({str}))
    # Where the export is cached, relative to conf.py ("" = _build/try_it next to the output folder).
    app.add_config_value("try_it_cache_dir", "", "env", types=frozenset({str}))
    # Where the model goes in the built site (the page's scripts find it there).
    app.add_config_value("try_it_output_dir", "_static/try", "html", types=frozenset({str}))
    # The page's scripts, in order (paths under _static): the tokenizer, then the page.
    app.add_config_value(
        "try_it_scripts",
        [
            "try/wordpiece.js",
            "try/try.js",
        ],
        "html",
        types=frozenset({list, tuple}),
    )
    app.add_config_value("try_it_css", ["try/try.css"], "html", types=frozenset({list, tuple}))
    app.add_directive("try-it-facts", TryItFacts)
    app.connect("env-get-outdated", _outdated)
    app.connect("html-page-context", _page_context)
    app.connect("build-finished", _copy_files)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
