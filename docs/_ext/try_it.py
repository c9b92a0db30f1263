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
   ``model/model.onnx.gz`` (gzip-compressed once per export and cached:
   gzip saves about 5 % of the graph's 34 MB of int8/int4 codes, and makes
   the 0.3 MB of the JSON file, most of it the vocabulary, 0.1 MB).

The page draws its head view itself (``try.js``: the tokens as SVG text, the
lines on one canvas), so it loads neither bertviz's script nor the d3 and
jQuery that script needs.

When the page is not part of the build, none of this happens.

Steps 1, 3 and 4 are done by ``browser_export``, as for the "Try your own
prompt" page; this extension adds its options' defaults, the directive, and
``facts_text``, the pure function that writes the directive's paragraphs
(tested on its own).
"""

from __future__ import annotations

from typing import Any

from browser_export import ServedExport, megabytes
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

# The page's export: made before pages are read, copied into the built site after the build.
_EXPORT = ServedExport("try_it", "browser export", "model/model.onnx.gz", "model/model.json.gz")


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
        f"is {megabytes(model['bytes'])} instead of {megabytes(weights['float32_bytes'])}, and "
        f"{megabytes(model['gzip_bytes'])} to download, compressed.",
        f"What that costs, measured when this site was built on {check['texts']} texts, against BertModel.forward "
        f"in float32: attention probabilities differ by at most {check['max_abs_attention']:.1e}, numbers of the "
        f"last hidden state by at most {check['max_abs_last_hidden_state']:.1e}.",
    ]


class TryItFacts(SphinxDirective):
    """``try-it-facts``: what the export did to the weights and what it measured, as paragraphs."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        result = _EXPORT.export_for_page(self.env)
        if result is None:
            raise self.error("try-it-facts: no browser export (is this page try_it_page in conf.py?)")
        return [nodes.paragraph(text=text) for text in facts_text(result.metadata)]


def setup(app: Sphinx) -> dict[str, Any]:
    # The exporter is named in conf.py; the scripts are the tokenizer, then the page.
    _EXPORT.add_config_values(
        app,
        page="try",
        exporter="",
        output_dir="_static/try",
        scripts=["try/wordpiece.js", "try/try.js"],
        css=["try/try.css"],
    )
    app.add_directive("try-it-facts", TryItFacts)
    _EXPORT.connect(app)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
