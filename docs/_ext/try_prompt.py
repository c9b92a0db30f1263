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
   ``_static/try/prompt``) of the built site ``decoder.json.gz``,
   ``decoder.onnx.gz`` and ``decoder.blocks.gz``, gzip-compressed once per
   export and cached.

When the page is not part of the build, none of this happens.

Steps 1, 3 and 4 are done by ``browser_export``, as for the "Try your own
sentence" page; this extension adds its options' defaults, the directive,
``facts_text`` (the pure function that writes the directive's paragraphs)
and one step of its own: the graph and the blocks are compressed before the
page is read, so that the page can state the size the reader downloads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from browser_export import ServedExport, megabytes
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


class _PromptExport(ServedExport):
    """The decoder's export, whose compressed graph and blocks are made (and their size known) before the page is read."""

    def __init__(self) -> None:
        super().__init__(
            "try_prompt",
            "decoder's browser export",
            "decoder.onnx.gz",
            "decoder.json.gz",
            other_files=[("blocks_path", "decoder.blocks.gz")],
        )
        # The compressed graph's and blocks' size of each build, by source folder (forked read workers inherit it).
        self._packed_bytes: dict[str, int] = {}

    def packed_bytes(self, srcdir: str | Path) -> int | None:
        """The size of the compressed graph and blocks of the build of ``srcdir``, once known."""
        return self._packed_bytes.get(str(srcdir))

    def outdated(self, app: Sphinx, env: Any, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
        """As for any export, then the files are compressed: now, so that the page can state the size downloaded."""
        outdated = super().outdated(app, env, added, changed, removed)
        if self.page_in_build(app):
            result = self.export_of(app.srcdir)
            packed = [self.packed_model(app, result), *self.packed_others(app, result).values()]
            self._packed_bytes[str(app.srcdir)] = sum(path.stat().st_size for path in packed)
        return outdated


# The page's export: made before pages are read, copied into the built site after the build.
_EXPORT = _PromptExport()


def facts_text(metadata: dict[str, Any], gzip_bytes: int | None = None) -> list[str]:
    """The page's sentences on what was exported and what the export measured.

    Args:
        metadata: The export's JSON file (``decoder.json``).
        gzip_bytes: The size of the compressed graph and blocks the page downloads, when known.

    Returns:
        Paragraphs of plain text.

    Raises:
        ValueError: if ``metadata`` lacks the fields of a decoder export.
    """
    keys = ("config", "model", "blocks", "weights", "check", "file")
    try:
        config, model, blocks, weights, check, file = (metadata[key] for key in keys)
    except KeyError as error:
        raise ValueError(f"metadata is not a decoder export's decoder.json: it has no {error}") from error
    formats = ", ".join(f"{count} {kind}" for kind, count in sorted(file["tensor_formats"].items()))
    download = f", {megabytes(gzip_bytes)} to download, compressed" if gzip_bytes else ""
    return [
        f"The model is the package's own LlamaForCausalLM with the weights of {file['name']} (SHA-256 "
        f"{file['sha256'][:12]}…; {config['parameters']:,} parameters, {config['num_hidden_layers']} layers, "
        f"{config['num_attention_heads']} query heads sharing {config['num_key_value_heads']} key/value heads, "
        f"hidden size {config['hidden_size']}, vocabulary of {config['vocab_size']} tokens), written as an ONNX "
        f"graph (opset {model['opset']}) of one step of generation with its cache.",
        f"The weights stay in the file's blocks as they are ({formats} tensors): {megabytes(blocks['bytes'])} of "
        f"blocks and {megabytes(model['bytes'])} of graph against the file's {megabytes(file['bytes'])}{download}. "
        f"The page turns the blocks into {megabytes(weights['bytes'])} of float32 numbers once, in a worker beside "
        "the page, when it loads the model, computing them as the package's reader does, and hands them to "
        "onnxruntime with the graph: the page multiplies by the package's weights, bit for bit.",
        f"What that leaves, measured when this site was built on {check['prompts']} prompts against the PyTorch "
        f"model: greedy ids {'equal' if check['greedy_ids_equal'] else 'DIFFERENT'} for "
        f"{', '.join(map(str, check['new_tokens']))} new tokens; next-token probabilities differ by at most "
        f"{check['max_abs_probability']:.1e}, scores by at most {check['max_abs_logit']:.1e}, attention "
        f"probabilities by at most {check['max_abs_attention']:.1e} (the order of the sums differs, not the "
        "numbers summed).",
    ]


class TryPromptFacts(SphinxDirective):
    """``try-prompt-facts``: what was exported and what the export measured, as paragraphs."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        result = _EXPORT.export_for_page(self.env)
        if result is None:
            raise self.error("try-prompt-facts: no decoder export (is this page try_prompt_page in conf.py?)")
        size = _EXPORT.packed_bytes(self.env.srcdir)
        return [nodes.paragraph(text=text) for text in facts_text(result.metadata, size)]


def setup(app: Sphinx) -> dict[str, Any]:
    # The model goes to _static/try/prompt: prompt.js looks for it in prompt/ beside itself.
    _EXPORT.add_config_values(
        app,
        page="try_prompt",
        exporter="lt_site.export_decoder:export_decoder_for_browser",
        output_dir="_static/try/prompt",
        scripts=["try/bpe.js", "try/sampling.js", "try/prompt.js"],
        css=["try/try.css", "try/prompt.css"],
    )
    app.add_directive("try-prompt-facts", TryPromptFacts)
    _EXPORT.connect(app)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
