"""The "Try your own prompt" page: the trained decoder and its tokenizer, served by the site.

The page (``try_prompt_page``, default ``try_prompt``) runs the package's Llama
with SmolLM2-135M-Instruct's weights in the reader's browser.  For it, at
build time, this extension, as ``try_it`` does for the BERT page,

1. makes sure the browser export exists: it calls ``try_prompt_exporter``
   (``"module:function"``, default
   ``lt_site.export_decoder:export_decoder_for_browser``) with a cache folder
   outside the source tree (``try_prompt_cache_dir``, default
   ``_build/try_prompt`` next to the output folder).  The exporter skips the
   work when its digest (package source, exporter, the GGUF file's SHA-256,
   settings, versions) matches, so an unchanged rebuild costs a hash of the
   package's source; a changed package re-exports (about 10 s);
2. provides the ``try-prompt-facts`` directive, which writes onto the page
   what was exported and what the export measured, from the export's JSON
   file; a new export makes Sphinx read the page again;
3. adds the page's scripts and stylesheets (``try_prompt_scripts``,
   ``try_prompt_css``) to that page only, deferred, in order;
4. after the build, copies into ``try_prompt_output_dir`` (default
   ``_static/try/prompt``) of the built site ``decoder.json.gz`` and
   ``decoder.onnx.gz``, gzip-compressed once per export and cached.

When the page is not part of the build, none of this happens.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from try_it import copy_if_changed, gzip_once

logger = logging.getLogger(__name__)

# The export of each build, and its compressed graph's size, by source folder (set before pages are read; forked
# read workers inherit them).
_EXPORTS: dict[str, Any] = {}
_PACKED_BYTES: dict[str, int] = {}


def _megabytes(count: int) -> str:
    return f"{count / 1e6:.1f} MB"


def facts_text(metadata: dict[str, Any], gzip_bytes: int | None = None) -> list[str]:
    """The page's sentences on what was exported and what the export measured.

    Args:
        metadata: The export's JSON file (``decoder.json``).
        gzip_bytes: The size of the compressed graph the page downloads, when known.

    Returns:
        Paragraphs of plain text.

    Raises:
        ValueError: if ``metadata`` lacks the fields of a decoder export.
    """
    try:
        config, model, check, file = (metadata[key] for key in ("config", "model", "check", "file"))
    except KeyError as error:
        raise ValueError(f"metadata is not a decoder export's decoder.json: it has no {error}") from error
    formats = ", ".join(f"{count} {kind}" for kind, count in sorted(file["tensor_formats"].items()))
    download = f", {_megabytes(gzip_bytes)} to download, compressed" if gzip_bytes else ""
    return [
        f"The model is the package's own LlamaForCausalLM with the weights of {file['name']} (SHA-256 "
        f"{file['sha256'][:12]}…; {config['parameters']:,} parameters, {config['num_hidden_layers']} layers, "
        f"{config['num_attention_heads']} query heads sharing {config['num_key_value_heads']} key/value heads, "
        f"hidden size {config['hidden_size']}, vocabulary of {config['vocab_size']} tokens), written as an ONNX "
        f"graph (opset {model['opset']}) of one step of generation with its cache.",
        f"The graph keeps the file's blocks as they are ({formats} tensors): {_megabytes(model['bytes'])} against "
        f"the file's {_megabytes(file['bytes'])}{download}. onnxruntime turns them into float32 matrices once, "
        "when it loads the graph, with the two roundings the package's reader makes: the page multiplies by the "
        "package's weights, bit for bit.",
        f"What that leaves, measured when this site was built on {check['prompts']} prompts against the PyTorch "
        f"model: greedy ids {'equal' if check['greedy_ids_equal'] else 'DIFFERENT'} for "
        f"{', '.join(map(str, check['new_tokens']))} new tokens; next-token probabilities differ by at most "
        f"{check['max_abs_probability']:.1e}, scores by at most {check['max_abs_logit']:.1e}, attention "
        f"probabilities by at most {check['max_abs_attention']:.1e} (the order of the sums differs, not the "
        "numbers summed).",
    ]


def _load_exporter(spec: str) -> Any:
    module_name, _, function_name = spec.partition(":")
    if not module_name or not function_name:
        raise ExtensionError(f"try_prompt_exporter must be 'module:function', got {spec!r}")
    return getattr(importlib.import_module(module_name), function_name)


def _page_in_build(app: Sphinx) -> bool:
    page = app.config.try_prompt_page
    return bool(page) and page in app.env.found_docs


def _cache_dir(app: Sphinx) -> Path:
    configured = app.config.try_prompt_cache_dir
    return Path(app.confdir, configured) if configured else Path(app.outdir).parent / "try_prompt"


def _ensure_export(app: Sphinx) -> Any:
    exporter = _load_exporter(app.config.try_prompt_exporter)
    logger.info("try_prompt: checking the decoder's browser export in %s", _cache_dir(app))
    try:
        result = exporter(_cache_dir(app))
    except Exception as error:
        raise ExtensionError(f"try_prompt: the decoder's browser export failed: {error}") from error
    logger.info("try_prompt: %s (digest %s)", "cached" if result.cached else "exported", result.digest[:12])
    _EXPORTS[str(app.srcdir)] = result
    return result


def _packed_model(app: Sphinx, result: Any) -> Path:
    return gzip_once(result.onnx_path, _cache_dir(app) / "decoder.onnx.gz", result.digest)


def _outdated(app: Sphinx, env: Any, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
    if not _page_in_build(app):
        return []
    result = _ensure_export(app)
    # Compressed now, so that the page can state the size the reader downloads.
    _PACKED_BYTES[str(app.srcdir)] = _packed_model(app, result).stat().st_size
    return [] if result.cached else [app.config.try_prompt_page]


class TryPromptFacts(SphinxDirective):
    """``try-prompt-facts``: what was exported and what the export measured, as paragraphs."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        result = _EXPORTS.get(str(self.env.srcdir))
        if result is None:
            raise self.error("try-prompt-facts: no decoder export (is this page try_prompt_page in conf.py?)")
        self.env.note_dependency(str(result.metadata_path))
        size = _PACKED_BYTES.get(str(self.env.srcdir))
        return [nodes.paragraph(text=text) for text in facts_text(result.metadata, size)]


def _page_context(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    if pagename != app.config.try_prompt_page:
        return
    for css in app.config.try_prompt_css:
        app.add_css_file(css)
    for script in app.config.try_prompt_scripts:
        app.add_js_file(script, loading_method="defer")


def _copy_files(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html" or not _page_in_build(app):
        return
    result = _EXPORTS.get(str(app.srcdir)) or _ensure_export(app)
    target = Path(app.outdir, app.config.try_prompt_output_dir)
    copy_if_changed(_packed_model(app, result), target / "decoder.onnx.gz")
    packed_metadata = gzip_once(result.metadata_path, _cache_dir(app) / "decoder.json.gz", result.digest)
    copy_if_changed(packed_metadata, target / "decoder.json.gz")
    logger.info("try_prompt: model for %s copied to %s", app.config.try_prompt_page, target)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("try_prompt_page", "try_prompt", "env", types=frozenset({str}))
    app.add_config_value(
        "try_prompt_exporter", "lt_site.export_decoder:export_decoder_for_browser", "env", types=frozenset({str})
    )
    app.add_config_value("try_prompt_cache_dir", "", "env", types=frozenset({str}))
    # Where the model goes in the built site: prompt.js looks for it in prompt/ beside itself.
    app.add_config_value("try_prompt_output_dir", "_static/try/prompt", "html", types=frozenset({str}))
    app.add_config_value(
        "try_prompt_scripts",
        ["try/bpe.js", "try/sampling.js", "try/prompt.js"],
        "html",
        types=frozenset({list, tuple}),
    )
    app.add_config_value("try_prompt_css", ["try/try.css", "try/prompt.css"], "html", types=frozenset({list, tuple}))
    app.add_directive("try-prompt-facts", TryPromptFacts)
    app.connect("env-get-outdated", _outdated)
    app.connect("html-page-context", _page_context)
    app.connect("build-finished", _copy_files)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
