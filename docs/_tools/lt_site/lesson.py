"""The chapters' helpers: drawings, tables and glue that a hidden cell calls in one line.

A chapter shows the lines that teach; what only draws (a figure's
plumbing, an HTML table, the figures of a "what if" panel) or only checks
lives here, so that a cell shown open stays short and a reader who wants
the plumbing finds it in one place.  The chapters' kernels find this
package on the ``PYTHONPATH`` that ``docs/conf.py`` sets.

Nothing here computes what a chapter teaches: the computations stay on the
page, and these helpers receive their results.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch import nn

__all__ = ["glue_key", "glue_figures", "layer_rows", "HTML", "branch_tree", "describe_model", "branch_table"]


def glue_key(prefix: str, name: str) -> str:
    """``<prefix>-<name>``, spaces as dashes: the name a page's ``{glue:figure}`` asks for.

    >>> glue_key("padding", "mask on")
    'padding-mask-on'
    """
    return f"{prefix}-{name.replace(' ', '-')}"


def glue_figures(prefix: str, figures: Mapping[str, Any]) -> None:
    """Glue each figure under :func:`glue_key` ``(prefix, name)``, not displayed where the cell runs.

    The cell needs ``%matplotlib inline`` first (it registers the PNG formatter a glued figure is stored with).

    Args:
        prefix: The panel's prefix, e.g. ``"padding"``.
        figures: ``{name: figure}``, as :func:`~literate_transformer.visualize.plot_what_if` returns.
    """
    from myst_nb import glue

    for name, figure in figures.items():
        glue(glue_key(prefix, name), figure, display=False)


def layer_rows(num_layers: int) -> list[str]:
    """The row labels of a stack's vectors: the embeddings, then the output of each layer, numbered from 0.

    >>> layer_rows(3)
    ['embeddings', 'layer 0', 'layer 1', 'layer 2']
    """
    return ["embeddings"] + [f"layer {index}" for index in range(num_layers)]


@dataclass(frozen=True)
class HTML:
    """A piece of HTML that a notebook (and so the page) shows as HTML."""

    html: str

    def _repr_html_(self) -> str:
        return self.html


# ---------------------------------------------------------------------------
# Chapter 12: the family tree of the branches, and what each model chooses
# ---------------------------------------------------------------------------
#: (label, detail, x, y, link) of each box: the shared parts, the three branches and the models built on them.
TREE_NODES = {
    "parts": (
        "The shared parts",
        "attention · feed-forward · residual · embeddings · masks",
        505,
        34,
        "#meet-shared-parts",
    ),
    "encoder": ("Encoder-only", "bidirectional self-attention", 100, 128, "#meet-encoder-branch"),
    "decoder": ("Decoder-only", "causal self-attention", 330, 128, "14_decoder_branch.html"),
    "seq2seq": ("Encoder-decoder", "+ cross-attention", 745, 128, "#meet-encoder-decoder-branch"),
    "bert": ("BERT", "post-LN, segments", 100, 222, "#meet-bert"),
    "gpt2": ("GPT-2", "pre-LN, tied head", 330, 222, "14_decoder_branch.html#decoder-gpt-2"),
    "transformer": ("2017 transformer", "torch.nn.Transformer", 560, 222, "#meet-2017-transformer"),
    "bart": ("BART", "post-LN, shared table", 745, 222, "15_encoder_decoder_branch.html#seq2seq-bart"),
    "t5": ("T5", "relative bias, RMS norm", 925, 222, "15_encoder_decoder_branch.html#seq2seq-t5"),
}
TREE_EDGES = [
    ("parts", "encoder"),
    ("parts", "decoder"),
    ("parts", "seq2seq"),
    ("encoder", "bert"),
    ("decoder", "gpt2"),
    ("seq2seq", "transformer"),
    ("seq2seq", "bart"),
    ("seq2seq", "t5"),
]


def branch_tree(width: int = 1015, height: int = 262, box: tuple[int, int] = (170, 46)) -> HTML:
    """The family tree of chapter 12 as inline SVG; ``currentColor`` makes lines and text follow the page's colours.

    Each box links to the section that builds it.

    >>> tree = branch_tree()
    >>> tree.html.count("<a href=") == len(TREE_NODES) and "<title id=" in tree.html
    True
    """
    half_w, half_h = box[0] / 2, box[1] / 2
    title = "The family tree of the transformers built in this book"
    description = (
        "The shared parts branch into encoder-only (BERT), decoder-only (GPT-2) and encoder-decoder models "
        "(the 2017 transformer, BART, T5); each box links to its section."
    )
    lines = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
        f'style="max-width:{width}px;color:inherit" role="img" aria-labelledby="tree-title tree-desc">',
        f'<title id="tree-title">{title}</title>',
        f'<desc id="tree-desc">{description}</desc>',
    ]
    for parent, child in TREE_EDGES:
        (_, _, x1, y1, _), (_, _, x2, y2, _) = TREE_NODES[parent], TREE_NODES[child]
        lines.append(
            f'<line x1="{x1}" y1="{y1 + half_h}" x2="{x2}" y2="{y2 - half_h}" '
            'stroke="currentColor" stroke-opacity="0.5"/>'
        )
    for label, detail, x, y, link in TREE_NODES.values():
        w = half_w if len(detail) < 30 else 2.3 * half_w  # the root's box is wider
        lines += [
            f'<a href="{link}" aria-label="{html.escape(label)}: {html.escape(detail)}">',
            f'<rect x="{x - w}" y="{y - half_h}" width="{2 * w}" height="{box[1]}" rx="8" '
            'fill="currentColor" fill-opacity="0.06" stroke="currentColor"/>',
            f'<text x="{x}" y="{y - 3}" text-anchor="middle" font-size="15" font-weight="bold" '
            f'fill="currentColor">{html.escape(label)}</text>',
            f'<text x="{x}" y="{y + 15}" text-anchor="middle" font-size="11" '
            f'fill="currentColor">{html.escape(detail)}</text>',
            "</a>",
        ]
    return HTML("\n".join([*lines, "</svg>"]))


#: How the table names an activation of transformers' registry (chapter 6 defines both forms of GELU).
ACTIVATIONS = {"gelu": "GELU, exact: x·Φ(x) (gelu)", "gelu_new": "GELU, tanh form (gelu_new)", "relu": "ReLU (relu)"}


def _stacks(model: nn.Module) -> list[nn.Module]:
    """A model's stacks: the book's encoder, GPT-2's transformer, BART's encoder and decoder."""
    if hasattr(model, "transformer"):
        return [model.transformer]
    return [model.encoder, model.decoder] if hasattr(model, "decoder") else [model]


def _layers(stack: nn.Module) -> nn.ModuleList:
    return stack.layers if hasattr(stack, "layers") else stack.h


def describe_model(name: str, model: nn.Module) -> dict[str, str]:
    """One column of chapter 12's table: what the model chooses of the package's parts, read off its modules.

    Args:
        name: The model's name (``"GPT-2 small"`` marks the decoder-only one).
        model: The package's model: the book's encoder, ``GPT2LMHeadModel`` or ``BartForConditionalGeneration``.

    Returns:
        ``{row: value}``, in the table's order.
    """
    stacks = _stacks(model)
    first = stacks[0]
    positions = getattr(first, "wpe", None) or getattr(first, "embed_positions", None)
    positions = positions if positions is not None else first.embeddings.position_embeddings
    tokens = getattr(first, "wte", None) or getattr(first, "embed_tokens", None)
    tokens = tokens if tokens is not None else first.embeddings.token_embeddings
    offset = getattr(positions, "offset", 0)
    lm_head = getattr(model, "lm_head", None)
    tied = lm_head is not None and lm_head.weight is tokens.weight
    decoder_only = hasattr(model, "transformer")
    kinds = [
        "causal" + (" + cross-attention" if index else "") if index or decoder_only else "bidirectional"
        for index, _ in enumerate(stacks)
    ]
    names = [path for path, _ in first.named_modules()]
    final_norm = any(path in ("ln_f", "final_layer_norm", "layer_norm") for path in names)
    embedding_norm = any(path in ("layernorm_embedding", "embeddings.layer_norm") for path in names)
    unbiased = sorted(
        module_name
        for module_name, module in model.named_modules()
        if isinstance(module, nn.Linear) and module.bias is None
    )
    activation = getattr(model.config, "hidden_act", None) or model.config.activation_function
    return {
        "stacks (layers)": " + ".join(f"{type(stack).__name__} ({len(_layers(stack))})" for stack in stacks),
        "layer norm": "pre-LN" if _layers(first)[0].norm_first else "post-LN",
        "final layer norm": "yes" if final_norm else "no",
        "self-attention": " / ".join(kinds),
        "positions": f"learned, {positions.num_embeddings} rows" + (f", offset {offset}" if offset else ""),
        "segment embeddings": "yes" if any("token_type" in path for path in names) else "no",
        "embedding layer norm": "yes" if embedding_norm else "no",
        "token embeddings scaled": "×√E" if getattr(tokens, "embed_scale", 1.0) != 1.0 else "no",
        "LM head tied to the tokens": "—" if lm_head is None else ("yes" if tied else "no"),
        "activation": ACTIVATIONS.get(activation, activation),
        "linear layers without bias": ", ".join(unbiased) or "none",
    }


def branch_table(models: Mapping[str, nn.Module]) -> HTML:
    """Chapter 12's table: a column per model (:func:`describe_model`), a row per choice.

    >>> from literate_transformer import TransformerConfig, TransformerEncoder
    >>> config = TransformerConfig(vocab_size=10, hidden_size=8, num_attention_heads=2, intermediate_size=16)
    >>> table = branch_table({"tiny": TransformerEncoder(config, norm_first=False)})
    >>> "<th>layer norm</th><td>post-LN</td>" in table.html
    True
    """
    rows = {name: describe_model(name, model) for name, model in models.items()}
    header = "".join(f"<th>{html.escape(name)}</th>" for name in rows)
    body = "".join(
        f"<tr><th>{html.escape(field)}</th>"
        + "".join(f"<td>{html.escape(row[field])}</td>" for row in rows.values())
        + "</tr>"
        for field in next(iter(rows.values()))
    )
    return HTML(f'<table class="table"><thead><tr><th></th>{header}</tr></thead><tbody>{body}</tbody></table>')
