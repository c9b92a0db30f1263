r"""Seeing attention: bertviz views and heatmaps of the attention weights.

Every attention layer computes, for each head, a matrix of weights

.. math::

    A = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{D}}\right) \in [0, 1]^{T \times S},

whose row :math:`i` says how much query token :math:`i` draws from each key
token (each row sums to 1).  A model with ``L`` layers of ``H`` heads makes
``L * H`` such matrices for every input, and looking at them is the quickest
way to get a feeling for what the heads do.  Chapter 3 of *Natural Language
Processing with Transformers* does it with Jesse Vig's `bertviz
<https://github.com/jessevig/bertviz>`_, which draws three interactive views:

*head view*
    the tokens in two columns, a line from query to key for every weight,
    one colour per head, for one layer at a time;
*model view*
    a thumbnail of every head of every layer;
*neuron view*
    one head opened up: the query and key vectors, their element-wise
    product, the dot products and the softmax.

This module turns attention weights into what bertviz expects and back into
plain pictures:

* :func:`head_view` and :func:`model_view` take the attentions of
  HuggingFace's :class:`transformers.BertModel` (``output_attentions=True``),
  of this package's models, or of an encoder-decoder (encoder, decoder and
  cross attentions), as one ``(B, H, T, S)`` tensor per layer, and return the
  view as an ``IPython.display.HTML`` object that a notebook displays and
  an executed page embeds.  :func:`view_arguments` and
  :func:`encoder_decoder_view_arguments` give the bertviz keyword arguments
  themselves.
* :func:`neuron_view` runs bertviz's own instrumented BERT (it needs the
  queries and keys, which no ordinary model returns) on the pretrained
  checkpoint, loaded by :func:`load_neuron_view_model`.
* :func:`plot_attention` and :func:`plot_attention_heads` draw the same
  weights as matplotlib heatmaps, for readers without JavaScript and for
  printed pages.
* :func:`plot_what_if` draws one matrix computed two ways (a mask on and
  off, the layer norm before or after) on one colour scale, and what
  separates them: the chapters' "what if" panels.
* :func:`show` shows the figures a script drew: in a window where there is
  a screen, as images where a notebook or the site's build collects them,
  and as PNG files beside the script where there is neither (a server, a
  container), saying where.
* :func:`plot_attention_patterns` draws masks side by side: who may attend
  to whom, as a family's code builds it (sliding windows, BigBird's blocks).
* :func:`plot_next_tokens` draws a language model's next-token
  distribution, as bars of its most likely tokens, once for each setting
  of sampling's filters (temperature, top-k, top-p), the tokens a filter
  removes greyed out.

Small pages
-----------
bertviz writes every weight into the page as JSON text with all 17 digits of
a double.  Three decimals are plenty for lines drawn with an opacity, and
they make a view about three times smaller, so every function here rounds the
weights (``decimals=3``) before handing them over.

>>> import torch
>>> weights = torch.softmax(torch.randn(1, 2, 3, 3), dim=-1)  # (B, H, T, S)
>>> args = view_arguments([weights, weights], ["[CLS]", "hi", "[SEP]"])
>>> len(args["attention"]), tuple(args["attention"][0].shape), args["html_action"]
(2, (1, 2, 3, 3), 'return')

Offline views
-------------
The HTML bertviz writes loads require.js, d3 and jQuery from a CDN: with no
network (or behind a strict content policy) a view draws an empty "Layer"
menu.  The package ships d3 5.7.0 and jQuery 2.2.4 (``static/``, with their
licences) and a small stand-in for require.js, and :func:`offline_html`
rewrites a view's HTML to use them: the CDN's ``<script>`` tag and
``require.config`` paths go, and one ``<script>`` with the two libraries
and the stand-in goes in front of the view (about 0.33 MB; a second view on
the same page finds them loaded and skips them).  The stand-in works where
the page has no module loader (JupyterLab, Notebook 7, Colab, an exported
page) and where it has a real require.js (the classic Notebook): there it
names the two modules for it.  Every view this module returns is rewritten
so; :func:`offline_views` does the same to bertviz's own views
(``bertviz.head_view(...)`` in a notebook), and runs when this module is
imported in a notebook.  The site serves the libraries from its own
``_static`` folder instead, and its build takes the inlined copies out of
its pages (Sphinx extension ``bertviz_offline``); browser tests check that
the views draw, on the site and in an exported notebook, with no network.

Where the source notebooks got it wrong
---------------------------------------
With ``transformers`` 5 a model loaded with the default (fused SDPA)
attention returns no attention weights at all, so ``output_attentions=True``
has nothing to show; :func:`~literate_transformer.core.checkpoints.load_hf_model` loads the
``"eager"`` implementation.  bertviz's neuron-view model only reads a
``pytorch_model.bin``; on a checkpoint that ships ``model.safetensors`` its
``from_pretrained`` returns ``None`` without an error, and a missing weight is
only logged, leaving it random.  :func:`load_neuron_view_model` loads the
weights itself and insists that every parameter is found.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .core.checkpoints import load_tokenizer, read_state_dict, resolve_checkpoint

__all__ = [
    "round_attention",
    "view_arguments",
    "encoder_decoder_view_arguments",
    "head_view",
    "model_view",
    "load_neuron_view_model",
    "neuron_view",
    "round_floats",
    "stable_view_id",
    "offline_html",
    "offline_views",
    "plot_attention",
    "plot_attention_heads",
    "plot_what_if",
    "plot_next_tokens",
    "plot_attention_patterns",
    "show",
]

#: Decimals kept in the weights written into a page (see "Small pages").
DEFAULT_DECIMALS = 3

# The marker in front of the neuron view's JSON parameters in bertviz's HTML.
_NEURON_PARAMS_MARKER = "window.bertviz_params = "


def _check_decimals(decimals: object) -> int:
    if not isinstance(decimals, int) or isinstance(decimals, bool) or decimals < 0:
        raise ValueError(f"decimals must be a non-negative int, got {decimals!r}")
    return decimals


def _attention_layers(attentions: object, name: str) -> list[Tensor]:
    """The per-layer tensors in ``attentions``, whatever container holds them."""
    # A model output (HuggingFace's or this package's BertModel's) carries them as .attentions.
    if not isinstance(attentions, Tensor) and hasattr(attentions, "attentions"):
        attentions = attentions.attentions
        if attentions is None:
            raise ValueError(f"{name}.attentions is None: run the model with output_attentions=True")
    if isinstance(attentions, Tensor):
        if attentions.dim() != 5:
            raise ValueError(
                f"{name} must be a sequence of (B, H, T, S) tensors, one per layer, or one (L, B, H, T, S) "
                f"tensor, got a tensor of shape {tuple(attentions.shape)}"
            )
        attentions = list(attentions.unbind(0))
    if not isinstance(attentions, Sequence) or isinstance(attentions, (str, bytes)):
        raise TypeError(
            f"{name} must be a sequence of (B, H, T, S) tensors, one per layer, got {type(attentions).__name__}"
        )
    layers = list(attentions)
    if not layers:
        raise ValueError(
            f"{name} is empty: run the model with output_attentions=True (and, for transformers models, "
            'attn_implementation="eager")'
        )
    for index, layer in enumerate(layers):
        if not isinstance(layer, Tensor):
            raise TypeError(f"{name}[{index}] must be a torch.Tensor, got {type(layer).__name__}")
        if not layer.is_floating_point():
            raise TypeError(f"{name}[{index}] must hold floating-point weights, got dtype {layer.dtype}")
        if layer.dim() != 4:
            raise ValueError(f"{name}[{index}] must have shape (B, H, T, S), got {tuple(layer.shape)}")
        if layer.shape != layers[0].shape:
            raise ValueError(
                f"all layers of {name} must have the same shape, got {tuple(layers[0].shape)} for layer 0 "
                f"and {tuple(layer.shape)} for layer {index}"
            )
    return layers


def round_attention(
    attentions: object,
    *,
    batch_index: int = 0,
    decimals: int = DEFAULT_DECIMALS,
    name: str = "attentions",
) -> list[Tensor]:
    """One example's attention weights, rounded, in the layout bertviz reads.

    Args:
        attentions: A sequence with one ``(B, H, T, S)`` tensor per layer (what
            ``output_attentions=True`` returns), a model output with an
            ``attentions`` attribute, or one ``(L, B, H, T, S)`` tensor.
        batch_index: Which example of the batch to keep (bertviz draws one).
        decimals: Decimals to keep.
        name: The argument's name, for error messages.

    Returns:
        A list with one ``(1, H, T, S)`` float64 CPU tensor per layer, rounded
        to ``decimals`` decimals (float64, so that the JSON text of a weight
        such as 0.125 is ``0.125`` and not ``0.125000001``).

    Raises:
        TypeError: if ``attentions`` holds something other than float tensors.
        ValueError: for a wrong shape, an empty sequence, a ``batch_index``
            outside the batch, or weights that are not finite.
    """
    decimals = _check_decimals(decimals)
    layers = _attention_layers(attentions, name)
    batch_size = layers[0].shape[0]
    if not isinstance(batch_index, int) or isinstance(batch_index, bool) or not 0 <= batch_index < batch_size:
        raise ValueError(
            f"batch_index must be an int in [0, {batch_size}) for a batch of {batch_size}, got {batch_index!r}"
        )
    rounded = []
    for layer in layers:
        # One example, kept 4-D as bertviz wants it: 1 x H x T x S, float64, on the CPU.
        example = layer.detach()[batch_index : batch_index + 1].to("cpu", torch.float64)
        if not bool(torch.isfinite(example).all()):
            raise ValueError(f"{name} holds NaN or infinite weights; check the attention mask")
        rounded.append(torch.round(example, decimals=decimals))
    return rounded


def _check_tokens(tokens: object, length: int, name: str, what: str) -> list[str]:
    if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Sequence):
        raise TypeError(f"{name} must be a list of token strings, got {type(tokens).__name__}")
    tokens = [str(token) for token in tokens]
    if len(tokens) != length:
        raise ValueError(f"{name} has {len(tokens)} tokens but the attention has {length} {what} positions")
    return tokens


def _check_layer_and_heads(layer: int | None, heads: Sequence[int] | None, num_layers: int, num_heads: int) -> None:
    if layer is not None and (not isinstance(layer, int) or not 0 <= layer < num_layers):
        raise ValueError(f"layer must be an int in [0, {num_layers}), got {layer!r}")
    if heads is not None:
        if isinstance(heads, int) or not all(isinstance(h, int) and 0 <= h < num_heads for h in heads):
            raise ValueError(f"heads must be a list of ints in [0, {num_heads}), got {heads!r}")


def view_arguments(
    attentions: object,
    tokens: Sequence[str],
    *,
    sentence_b_start: int | None = None,
    batch_index: int = 0,
    decimals: int = DEFAULT_DECIMALS,
) -> dict[str, Any]:
    """Keyword arguments for bertviz's ``head_view`` / ``model_view`` of a self-attention model.

    Args:
        attentions: One ``(B, H, T, T)`` tensor per layer (see :func:`round_attention`).
        tokens: The ``T`` tokens of the example, e.g. from
            ``tokenizer.convert_ids_to_tokens``.
        sentence_b_start: Position of the first token of the second sentence of a
            pair (where ``token_type_ids`` turns 1); bertviz then offers the
            A->A, A->B, B->A and B->B parts too.
        batch_index: Which example of the batch to draw.
        decimals: Decimals kept in the weights.

    Returns:
        ``attention``, ``tokens``, ``sentence_b_start`` and
        ``html_action="return"`` (so bertviz returns the HTML instead of
        displaying it).

    Raises:
        TypeError: for inputs of the wrong type.
        ValueError: when the tokens do not match the attention's length, the
            attention is not square, or ``sentence_b_start`` is not inside it.
    """
    layers = round_attention(attentions, batch_index=batch_index, decimals=decimals)
    _, _, query_length, key_length = layers[0].shape
    if query_length != key_length:
        raise ValueError(
            f"self-attention weights must be square (T == S), got T={query_length}, S={key_length}; "
            "use encoder_decoder_view_arguments for cross-attention"
        )
    tokens = _check_tokens(tokens, query_length, "tokens", "token")
    if sentence_b_start is not None and (
        not isinstance(sentence_b_start, int)
        or isinstance(sentence_b_start, bool)
        or not 0 < sentence_b_start < query_length
    ):
        raise ValueError(
            f"sentence_b_start must be an int in [1, {query_length}) (the position of sentence B's first token), "
            f"got {sentence_b_start!r}"
        )
    return {"attention": layers, "tokens": tokens, "sentence_b_start": sentence_b_start, "html_action": "return"}


def encoder_decoder_view_arguments(
    *,
    encoder_attentions: object = None,
    decoder_attentions: object = None,
    cross_attentions: object = None,
    encoder_tokens: Sequence[str] | None = None,
    decoder_tokens: Sequence[str] | None = None,
    batch_index: int = 0,
    decimals: int = DEFAULT_DECIMALS,
) -> dict[str, Any]:
    """Keyword arguments for bertviz's encoder-decoder views.

    Args:
        encoder_attentions: The encoder's self-attention, ``(B, H, S, S)`` per layer.
        decoder_attentions: The decoder's (causal) self-attention, ``(B, H, T, T)`` per layer.
        cross_attentions: The decoder's attention to the encoder, ``(B, H, T, S)`` per layer.
        encoder_tokens: The ``S`` source tokens.
        decoder_tokens: The ``T`` target tokens.
        batch_index: Which example of the batch to draw.
        decimals: Decimals kept in the weights.

    Returns:
        ``encoder_attention``, ``decoder_attention``, ``cross_attention``,
        ``encoder_tokens``, ``decoder_tokens`` (those given) and
        ``html_action="return"``.

    Raises:
        ValueError: when no attention is given, a token list is missing, or
            the shapes and token counts disagree.
    """
    if encoder_attentions is None and decoder_attentions is None and cross_attentions is None:
        raise ValueError("give at least one of encoder_attentions, decoder_attentions, cross_attentions")
    arguments: dict[str, Any] = {"html_action": "return"}
    for name, value, tokens_name, key_tokens_name in (
        ("encoder_attentions", encoder_attentions, "encoder_tokens", "encoder_tokens"),
        ("decoder_attentions", decoder_attentions, "decoder_tokens", "decoder_tokens"),
        ("cross_attentions", cross_attentions, "decoder_tokens", "encoder_tokens"),
    ):
        if value is None:
            continue
        layers = round_attention(value, batch_index=batch_index, decimals=decimals, name=name)
        _, _, query_length, key_length = layers[0].shape
        query_tokens = encoder_tokens if tokens_name == "encoder_tokens" else decoder_tokens
        key_tokens = encoder_tokens if key_tokens_name == "encoder_tokens" else decoder_tokens
        if query_tokens is None or key_tokens is None:
            missing = tokens_name if query_tokens is None else key_tokens_name
            raise ValueError(f"{name} needs {missing}")
        arguments[tokens_name] = _check_tokens(query_tokens, query_length, tokens_name, f"query positions in {name}:")
        arguments[key_tokens_name] = _check_tokens(key_tokens, key_length, key_tokens_name, f"key positions in {name}:")
        arguments[name[: -len("s")]] = layers
    return arguments


def _arguments(
    attentions: object,
    tokens: Sequence[str] | None,
    sentence_b_start: int | None,
    batch_index: int,
    decimals: int,
    **encoder_decoder: Any,
) -> dict[str, Any]:
    """bertviz's arguments from what :func:`head_view` or :func:`model_view` was given (the names they share)."""
    given = {key: value for key, value in encoder_decoder.items() if value is not None}
    if attentions is not None:
        if given:
            raise ValueError(
                "give either attentions and tokens (a self-attention model) or the encoder/decoder/cross "
                f"attentions and their tokens, not both (got attentions and {', '.join(sorted(given))})"
            )
        if tokens is None:
            raise ValueError("attentions needs tokens")
        return view_arguments(
            attentions, tokens, sentence_b_start=sentence_b_start, batch_index=batch_index, decimals=decimals
        )
    if sentence_b_start is not None:
        raise ValueError("sentence_b_start applies to a self-attention model's attentions only")
    return encoder_decoder_view_arguments(**encoder_decoder, batch_index=batch_index, decimals=decimals)


def head_view(
    attentions: object = None,
    tokens: Sequence[str] | None = None,
    *,
    sentence_b_start: int | None = None,
    encoder_attentions: object = None,
    decoder_attentions: object = None,
    cross_attentions: object = None,
    encoder_tokens: Sequence[str] | None = None,
    decoder_tokens: Sequence[str] | None = None,
    layer: int | None = None,
    heads: Sequence[int] | None = None,
    batch_index: int = 0,
    decimals: int = DEFAULT_DECIMALS,
) -> Any:
    """bertviz's head view: one layer at a time, a line per weight, a colour per head.

    Give either ``attentions`` and ``tokens`` (a self-attention model such as
    BERT, optionally a sentence pair with ``sentence_b_start``) or the
    encoder-decoder arguments (see :func:`encoder_decoder_view_arguments`).

    Args:
        attentions: One ``(B, H, T, T)`` tensor per layer.
        tokens: The ``T`` tokens.
        sentence_b_start: Position of sentence B's first token in a pair.
        encoder_attentions: See :func:`encoder_decoder_view_arguments`.
        decoder_attentions: See :func:`encoder_decoder_view_arguments`.
        cross_attentions: See :func:`encoder_decoder_view_arguments`.
        encoder_tokens: See :func:`encoder_decoder_view_arguments`.
        decoder_tokens: See :func:`encoder_decoder_view_arguments`.
        layer: The layer shown first (default 0).
        heads: The heads shown first (default all).
        batch_index: Which example of the batch to draw.
        decimals: Decimals kept in the weights.

    Returns:
        An ``IPython.display.HTML`` object; a notebook cell that ends with
        it displays the view.
    """
    # The arguments as given, before anything else is defined: the names both views share go to _arguments.
    given = {name: value for name, value in locals().items() if name not in ("layer", "heads")}
    from bertviz import head_view as bertviz_head_view

    arguments = _arguments(**given)
    first = next(value for key, value in arguments.items() if key.endswith("attention"))
    _check_layer_and_heads(layer, heads, len(first), first[0].shape[1])
    html = bertviz_head_view(**arguments, layer=layer, heads=list(heads) if heads is not None else None)
    html.data = offline_html(html.data)
    return stable_view_id(html)


def model_view(
    attentions: object = None,
    tokens: Sequence[str] | None = None,
    *,
    sentence_b_start: int | None = None,
    encoder_attentions: object = None,
    decoder_attentions: object = None,
    cross_attentions: object = None,
    encoder_tokens: Sequence[str] | None = None,
    decoder_tokens: Sequence[str] | None = None,
    batch_index: int = 0,
    decimals: int = DEFAULT_DECIMALS,
    display_mode: str = "light",
) -> Any:
    """bertviz's model view: a thumbnail of every head of every layer.

    Arguments as for :func:`head_view`; click a thumbnail to enlarge it.

    Args:
        attentions: One ``(B, H, T, T)`` tensor per layer.
        tokens: The ``T`` tokens.
        sentence_b_start: Position of sentence B's first token in a pair.
        encoder_attentions: See :func:`encoder_decoder_view_arguments`.
        decoder_attentions: See :func:`encoder_decoder_view_arguments`.
        cross_attentions: See :func:`encoder_decoder_view_arguments`.
        encoder_tokens: See :func:`encoder_decoder_view_arguments`.
        decoder_tokens: See :func:`encoder_decoder_view_arguments`.
        batch_index: Which example of the batch to draw.
        decimals: Decimals kept in the weights.
        display_mode: ``"light"`` (default, matches this site) or ``"dark"``.

    Returns:
        An ``IPython.display.HTML`` object.
    """
    given = {name: value for name, value in locals().items() if name != "display_mode"}
    from bertviz import model_view as bertviz_model_view

    if display_mode not in ("light", "dark"):
        raise ValueError(f'display_mode must be "light" or "dark", got {display_mode!r}')
    arguments = _arguments(**given)
    html = bertviz_model_view(**arguments, display_mode=display_mode)
    html.data = offline_html(html.data)
    return stable_view_id(html)


# ---------------------------------------------------------------------------
# The neuron view
# ---------------------------------------------------------------------------


def load_neuron_view_model(path_or_name: str | os.PathLike[str] | None = None) -> Any:
    """bertviz's instrumented BERT, with the pretrained checkpoint's weights.

    The neuron view needs each head's query and key vectors, which
    :class:`transformers.BertModel` does not return; bertviz ships its own copy
    of an early BERT implementation that does
    (``bertviz.transformers_neuron_view.BertModel``).  Its ``from_pretrained``
    only reads ``pytorch_model.bin`` and returns ``None`` for a folder that has
    ``model.safetensors`` only (the default checkpoint), so this function builds
    the model from ``config.json`` and loads the weights file itself, strictly:
    a parameter missing from the file is an error, not a random weight.

    Args:
        path_or_name: A checkpoint, resolved by
            :func:`literate_transformer.core.checkpoints.resolve_checkpoint`.

    Returns:
        The model, in evaluation mode, returning attention weights, queries and keys.

    Raises:
        FileNotFoundError: if the checkpoint cannot be found.
        RuntimeError: if the weights do not fit bertviz's model.
    """
    from bertviz.transformers_neuron_view.modeling_bert import BertConfig as NeuronBertConfig
    from bertviz.transformers_neuron_view.modeling_bert import BertModel as NeuronBertModel

    checkpoint = resolve_checkpoint(path_or_name)
    config = NeuronBertConfig.from_json_file(os.path.join(checkpoint.folder, "config.json"))
    config.output_attentions = True
    model = NeuronBertModel(config)
    state_dict = read_state_dict(checkpoint.weights_file)
    # Checkpoints of BertFor... models prefix the encoder's names with "bert.";
    # buffers such as position_ids are rebuilt by the model, not loaded.
    state_dict = {key.removeprefix("bert."): value for key, value in state_dict.items()}
    expected = set(model.state_dict())
    state_dict = {key: value for key, value in state_dict.items() if key in expected}
    missing = sorted(expected - set(state_dict))
    if missing:
        raise RuntimeError(
            f"{checkpoint.weights_file} does not fit bertviz's neuron-view BertModel: "
            f"{len(missing)} parameters are missing, e.g. {', '.join(missing[:3])}"
        )
    model.load_state_dict(state_dict, strict=True)
    return model.eval()


def round_floats(value: Any, decimals: int = DEFAULT_DECIMALS) -> Any:
    """Round every float inside nested lists and dicts (JSON data) to ``decimals``.

    >>> round_floats({"attn": [[0.123456, 1.0], [2, -0.0004]]})
    {'attn': [[0.123, 1.0], [2, -0.0]]}
    """
    decimals = _check_decimals(decimals)
    if isinstance(value, float):
        return round(value, decimals) if math.isfinite(value) else value
    if isinstance(value, list):
        return [round_floats(item, decimals) for item in value]
    if isinstance(value, dict):
        return {key: round_floats(item, decimals) for key, item in value.items()}
    return value


def neuron_view(
    sentence_a: str,
    sentence_b: str | None = None,
    *,
    layer: int = 0,
    head: int = 8,
    model: Any = None,
    tokenizer: Any = None,
    decimals: int = DEFAULT_DECIMALS,
    display_mode: str = "light",
) -> Any:
    """bertviz's neuron view: one head's queries, keys, their products and the softmax.

    Args:
        sentence_a: The sentence (or the first of a pair).
        sentence_b: The second sentence of a pair, if any.
        layer: The layer shown first (the source notebooks use layer 0).
        head: The head shown first (the source notebooks use head 8).
        model: A model from :func:`load_neuron_view_model` (loaded if ``None``).
        tokenizer: The checkpoint's tokenizer (loaded if ``None``).
        decimals: Decimals kept in the weights, queries and keys written into the page.
        display_mode: ``"light"`` (default) or ``"dark"``.

    Returns:
        An ``IPython.display.HTML`` object.

    Raises:
        ValueError: for an empty sentence, a layer or head out of range, or an
            unknown display mode.
    """
    from bertviz.neuron_view import show

    if not isinstance(sentence_a, str) or not sentence_a.strip():
        raise ValueError(f"sentence_a must be a non-empty string, got {sentence_a!r}")
    if sentence_b is not None and (not isinstance(sentence_b, str) or not sentence_b.strip()):
        raise ValueError(f"sentence_b must be None or a non-empty string, got {sentence_b!r}")
    if display_mode not in ("light", "dark"):
        raise ValueError(f'display_mode must be "light" or "dark", got {display_mode!r}')
    decimals = _check_decimals(decimals)
    if model is None:
        model = load_neuron_view_model()
    if tokenizer is None:
        tokenizer = load_tokenizer()
    num_layers, num_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    if not isinstance(layer, int) or not 0 <= layer < num_layers:
        raise ValueError(f"layer must be an int in [0, {num_layers}), got {layer!r}")
    if not isinstance(head, int) or not 0 <= head < num_heads:
        raise ValueError(f"head must be an int in [0, {num_heads}), got {head!r}")
    with torch.no_grad():
        html = show(
            model,
            "bert",
            tokenizer,
            sentence_a,
            sentence_b,
            display_mode=display_mode,
            layer=layer,
            head=head,
            html_action="return",
        )
    # bertviz writes the parameters as one JSON object after a marker; round its floats.
    start = html.data.find(_NEURON_PARAMS_MARKER)
    if start < 0:
        raise RuntimeError(
            "bertviz's neuron view HTML has no 'window.bertviz_params = ' line; is bertviz >= 1.4 installed?"
        )
    start += len(_NEURON_PARAMS_MARKER)
    params, end = json.JSONDecoder().raw_decode(html.data, start)
    html.data = offline_html(html.data[:start] + json.dumps(round_floats(params, decimals)) + html.data[end:])
    return stable_view_id(html)


# bertviz names each view's element "bertviz-" + a random uuid4, so two builds
# of the same page would differ in every view.
_VIEW_ID = re.compile(r"bertviz-[0-9a-f]{32}")
_views_made = itertools.count()


def stable_view_id(html: Any) -> Any:
    """Replace bertviz's random element id by one derived from the view itself.

    The id is a hash of the view's HTML (with the random id blanked out) and
    of how many views this process has made before, so the same notebook
    writes the same page on every build, and two identical views on one page
    (HuggingFace's weights and ours, say) still get different ids.

    Args:
        html: What bertviz returned with ``html_action="return"``.

    Returns:
        The same object, its ``data`` rewritten.

    Raises:
        ValueError: if the HTML does not hold exactly one bertviz id.
    """
    ids = set(_VIEW_ID.findall(html.data))
    if len(ids) != 1:
        raise ValueError(f"expected one bertviz element id in the view's HTML, found {len(ids)}")
    content = _VIEW_ID.sub("bertviz-", html.data) + f"#{next(_views_made)}"
    html.data = html.data.replace(ids.pop(), "bertviz-" + hashlib.sha256(content.encode()).hexdigest()[:32])
    return html


# ---------------------------------------------------------------------------
# Offline views
# ---------------------------------------------------------------------------
#: The package's copies of d3 and jQuery, and the loader that hands them to a view (see README.txt there).
STATIC = Path(__file__).resolve().parent / "static"
#: The attribute that marks the ``<script>`` this module puts in front of a view (the site's build removes it).
OFFLINE_SCRIPT_MARK = 'data-bertviz-offline="literate_transformer"'

# bertviz's <script src=".../require.min.js"> in front of each view (cdnjs today; any host).
_REQUIRE_TAG = re.compile(r"""<script[^>]*\bsrc=["'][^"']*/require(?:\.min)?\.js["'][^>]*>\s*</script>\s*""")
# ...and the addresses of d3 and jQuery it gives require.js: require.config({paths: {d3: '...', jquery: '...'}});
_REQUIRE_CONFIG = re.compile(
    r"""require\.config\(\s*\{\s*paths\s*:\s*\{\s*(?:(?:d3|jquery)\s*:\s*(["'])[^"']*\1\s*,?\s*){2}\}\s*,?\s*\}\s*\)\s*;?"""
)
# What marks bertviz's output in a notebook: a view's script, or the lone require.js tag it displays first.
_BERTVIZ_SCRIPT = re.compile(r"""requirejs\(\s*\[\s*["']jquery["']\s*,\s*["']d3["']\s*\]""")
_LONE_REQUIRE_TAG = re.compile(r"""\s*<script\s+src=["'][^"']*/require(?:\.min)?\.js["']\s*>\s*</script>\s*""")


@functools.cache
def _offline_script() -> str:
    """The ``<script>`` a view gets in front of it: jQuery and d3, evaluated once a page, and the loader."""
    jquery = (STATIC / "jquery.min.js").read_text(encoding="utf-8")
    d3 = (STATIC / "d3.min.js").read_text(encoding="utf-8")
    shim = (STATIC / "bertviz-require-shim.js").read_text(encoding="utf-8")
    # Inside a script element, "</script" would end it early; neither library holds it.
    if "</script" in jquery + d3 + shim:
        raise RuntimeError(f"a script in {STATIC} holds '</script': it cannot be inlined into a page")
    return (
        f'<script type="text/javascript" {OFFLINE_SCRIPT_MARK}>\n'
        "/* jQuery 2.2.4 (MIT) and d3 5.7.0 (BSD 3-Clause), shipped with literate_transformer, for the view below. */\n"
        "if (!(window.bertvizOfflineModules && window.bertvizOfflineModules.jquery && window.bertvizOfflineModules.d3)) {\n"
        # No module loader is shown to the libraries (define, module, exports undefined): each sets its global.
        "(function (define, module, exports) {\n"
        f"{jquery}\n{d3}\n"
        "}).call(window);\n"
        "}\n"
        f"{shim}\n"
        "</script>\n"
    )


def offline_html(html: str) -> str:
    """bertviz's HTML (or JavaScript) made to draw with the package's d3 and jQuery, asking no CDN for anything.

    The ``<script>`` tag that loads require.js from a CDN is replaced by one
    ``<script>`` holding the package's jQuery, d3 and loader (see "Offline
    views" above), and the ``require.config`` that points require.js at the
    CDN's d3 and jQuery is taken out.  Text that has neither is returned as
    it is.

    Args:
        html: A view's HTML, as bertviz writes it, or the JavaScript of one.

    Returns:
        The rewritten text.

    Raises:
        TypeError: if ``html`` is not a string.

    >>> html = '<script src="https://cdn.example/require.min.js"></script><div id="v"></div>'
    >>> html += "<script>require.config({paths: {d3: 'https://cdn.example/d3', jquery: 'https://cdn.example/jq'}});</script>"
    >>> rewritten = offline_html(html)
    >>> "cdn.example" in rewritten, rewritten.count(OFFLINE_SCRIPT_MARK), rewritten.endswith('<div id="v"></div><script></script>')
    (False, 1, True)
    """
    if not isinstance(html, str):
        raise TypeError(f"html must be a view's HTML as a str, got {type(html).__name__}")
    html = _REQUIRE_CONFIG.sub("", html)
    first = _REQUIRE_TAG.search(html)
    if first is None:
        return html
    # The libraries where the first require.js tag was (before the view's scripts); any other tag goes.
    rest = _REQUIRE_TAG.sub("", html[first.end() :])
    return html[: first.start()] + _offline_script() + rest


def _offline_printer(method: str) -> Any:
    """A display formatter for IPython's ``HTML`` or ``Javascript``: the object's own output, made offline if bertviz's.

    Only bertviz's outputs are rewritten (a view's script, or the lone
    require.js tag bertviz displays in front of a view): another library's
    use of require.js is left as it is.
    """

    def offline(data: Any) -> Any:
        if isinstance(data, str) and (_BERTVIZ_SCRIPT.search(data) or _LONE_REQUIRE_TAG.fullmatch(data)):
            return offline_html(data)
        return data

    def printer(obj: Any) -> Any:
        shown = getattr(obj, method)()
        if isinstance(shown, tuple):
            data, metadata = shown
            return offline(data), metadata
        return offline(shown)

    return printer


def offline_views(shell: Any = None) -> bool:
    """Make bertviz's own views draw offline in this notebook: every HTML or JavaScript output is rewritten.

    bertviz's ``head_view``, ``model_view`` and ``neuron_view``, called
    directly in a notebook, display the require.js tag, the view and its
    JavaScript as three outputs.  This registers display formatters for
    IPython's ``HTML`` and ``Javascript`` objects that pass each through
    :func:`offline_html` when they are bertviz's (a view's script, or the
    lone require.js tag bertviz displays first); any other output is shown
    as it is.  It runs when this module is imported in a notebook (an IPython
    kernel); calling it again changes nothing.

    Args:
        shell: The IPython shell; ``None``: the running one.

    Returns:
        Whether there was a shell to register the formatters with.
    """
    if shell is None:
        if "IPython" not in sys.modules:
            return False
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None:
            return False
    from IPython.display import HTML, Javascript

    formatters = shell.display_formatter.formatters
    formatters["text/html"].for_type(HTML, _offline_printer("_repr_html_"))
    formatters["application/javascript"].for_type(Javascript, _offline_printer("_repr_javascript_"))
    return True


# ---------------------------------------------------------------------------
# Heatmaps
# ---------------------------------------------------------------------------


def _as_matrix(weights: object, name: str, ndim: int) -> Any:
    import numpy as np

    if isinstance(weights, Tensor):
        weights = weights.detach().to("cpu", torch.float64).numpy()
    elif not isinstance(weights, np.ndarray):
        raise TypeError(f"{name} must be a torch.Tensor or numpy array, got {type(weights).__name__}")
    if weights.ndim != ndim:
        expected = "(T, S)" if ndim == 2 else "(H, T, S)"
        hint = " (select one head, e.g. attentions[layer][0, head])" if ndim == 2 and weights.ndim > 2 else ""
        raise ValueError(f"{name} must have shape {expected}, got {weights.shape}{hint}")
    return weights


def plot_attention(
    weights: object,
    tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    *,
    ax: Any = None,
    title: str | None = None,
    cmap: str = "Blues",
    annotate: bool = False,
    colorbar: bool = True,
    colorbar_label: str = "",
    vmin: float | None = 0.0,
    vmax: float | None = 1.0,
    axis_labels: tuple[str, str] = ("query", "key"),
) -> Any:
    """Draw one head's attention weights as a heatmap: queries down, keys across.

    Args:
        weights: A ``(T, S)`` tensor or array, e.g. ``attentions[layer][0, head]``.
        tokens: The ``T`` query tokens (rows).
        key_tokens: The ``S`` key tokens (columns); ``tokens`` when ``None``
            (self-attention).
        ax: A matplotlib ``Axes`` to draw into; a new figure when ``None``.
        title: Title of the plot.
        cmap: A matplotlib colormap name.
        annotate: Write each weight (two decimals) into its cell.
        colorbar: Draw a colour bar.
        colorbar_label: The colour bar's label (none by default).
        vmin: The value drawn in the lightest colour (``None``: the smallest value).
        vmax: The value drawn in the darkest colour (``None``: the largest value);
            the defaults 0 and 1 suit probabilities, ``None`` suits raw scores.
        axis_labels: The labels of the vertical and horizontal axes (the
            rows are the queries, the columns the keys).

    Returns:
        The matplotlib ``Axes``.

    Raises:
        TypeError: if ``weights`` is not a tensor or array.
        ValueError: if it is not 2-D or the token counts do not match it.
    """
    import matplotlib.pyplot as plt

    matrix = _as_matrix(weights, "weights", 2)
    query_tokens = _check_tokens(tokens, matrix.shape[0], "tokens", "query")
    key_tokens = _check_tokens(query_tokens if key_tokens is None else key_tokens, matrix.shape[1], "key_tokens", "key")
    if ax is None:
        size = max(3.0, 0.45 * max(matrix.shape) + 1.5)
        _, ax = plt.subplots(figsize=(size + (1.0 if colorbar else 0.0), size))
    image = ax.imshow(matrix, cmap=cmap, vmin=vmin, vmax=vmax)
    ax.set_xticks(range(len(key_tokens)), key_tokens, rotation=90)
    ax.set_yticks(range(len(query_tokens)), query_tokens)
    ax.set_ylabel(axis_labels[0])
    ax.set_xlabel(axis_labels[1])
    if title is not None:
        ax.set_title(title)
    if annotate:
        for row in range(matrix.shape[0]):
            for column in range(matrix.shape[1]):
                value = matrix[row, column]
                dark = image.norm(value) > 0.5
                ax.text(
                    column,
                    row,
                    f"{value:.2f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if dark else "black",
                )
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label=colorbar_label)
    return ax


def plot_attention_heads(
    weights: object,
    tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    *,
    ncols: int = 6,
    title: str | None = None,
    cmap: str = "Blues",
) -> Any:
    """Draw every head of one layer as a grid of small heatmaps (a static model view).

    Args:
        weights: An ``(H, T, S)`` tensor or array, e.g. ``attentions[layer][0]``.
        tokens: The ``T`` query tokens.
        key_tokens: The ``S`` key tokens (``tokens`` when ``None``).
        ncols: Heads per row.
        title: Title of the figure.
        cmap: A matplotlib colormap name.

    Returns:
        The matplotlib ``Figure``.
    """
    import matplotlib.pyplot as plt

    if not isinstance(ncols, int) or ncols < 1:
        raise ValueError(f"ncols must be a positive int, got {ncols!r}")
    matrices = _as_matrix(weights, "weights", 3)
    num_heads = matrices.shape[0]
    nrows = math.ceil(num_heads / ncols)
    figure, axes = plt.subplots(nrows, ncols, figsize=(2.2 * ncols, 2.7 * nrows), squeeze=False)
    for head, ax in enumerate(axes.flat):
        if head >= num_heads:
            ax.axis("off")
            continue
        plot_attention(matrices[head], tokens, key_tokens, ax=ax, cmap=cmap, colorbar=False, title=f"head {head}")
        ax.set_xlabel("")
        ax.set_ylabel("")
        ax.tick_params(labelsize=6)
        if head % ncols:
            ax.set_yticklabels([])
    if title is not None:
        figure.suptitle(title)
    figure.tight_layout()
    return figure


def plot_what_if(
    first: object,
    second: object,
    rows: Sequence[str],
    columns: Sequence[str] | None = None,
    *,
    names: tuple[str, str],
    title: str,
    value_label: str,
    axis_labels: tuple[str, str] = ("query", "key"),
    difference: object = None,
    difference_label: str = "|difference|",
    shared_scale: bool = True,
    annotate: bool = False,
) -> dict[str, Any]:
    """One matrix computed two ways, and the difference: three figures for a "what if" panel.

    The two variants are drawn on one colour scale, so that equal colours
    mean equal values across the two figures; the difference gets its own
    scale (from 0 to its largest entry), so that a small one is still seen.
    When one variant's values are a small fraction of the other's, one scale
    draws the small ones in the lightest colour, as if blank: give each
    variant its own scale (``shared_scale=False``, each from 0 to its own
    largest entry), and write the values into the cells (``annotate=True``)
    so that the figures still compare by number.

    Args:
        first: The ``(T, S)`` matrix of the first variant (tensor or array).
        second: The same matrix computed the second way; same shape.
        rows: Labels of the ``T`` rows.
        columns: Labels of the ``S`` columns (``rows`` when ``None``).
        names: What the two variants are called, e.g. ``("mask on", "mask off")``.
        title: What the matrix is; each figure's title starts with it.
        value_label: The colour bar's label.
        axis_labels: The labels of the vertical and horizontal axes.
        difference: The matrix to draw as the difference; ``|first - second|``
            when ``None`` (pass, say, the distance between two vectors when
            the matrix holds their norms).
        difference_label: The colour bar's label of the difference.
        shared_scale: One colour scale for both variants (``True``), or each its own.
        annotate: Write each value (two decimals) into its cell.

    Returns:
        ``{names[0]: figure, names[1]: figure, "difference": figure}``:
        matplotlib figures not registered with ``pyplot`` (a notebook shows
        them only where they are displayed or glued).

    Raises:
        TypeError: if a matrix is not a tensor or array.
        ValueError: if the matrices are not 2-D and of one shape, or the
            labels do not match them, or ``names`` is not two distinct names.
    """
    import numpy as np
    from matplotlib.figure import Figure

    first_matrix = _as_matrix(first, "first", 2)
    second_matrix = _as_matrix(second, "second", 2)
    if first_matrix.shape != second_matrix.shape:
        raise ValueError(f"first and second must have one shape, got {first_matrix.shape} and {second_matrix.shape}")
    if (
        not isinstance(names, tuple)
        or len(names) != 2
        or not all(isinstance(name, str) and name for name in names)
        or names[0] == names[1]
        or "difference" in names
    ):
        raise ValueError(f"names must be two distinct non-empty strings other than 'difference', got {names!r}")
    gap = np.abs(first_matrix - second_matrix) if difference is None else _as_matrix(difference, "difference", 2)
    if gap.shape != first_matrix.shape:
        raise ValueError(f"difference must have shape {first_matrix.shape}, got {gap.shape}")
    rows = _check_tokens(rows, first_matrix.shape[0], "rows", "row")
    columns = _check_tokens(rows if columns is None else columns, first_matrix.shape[1], "columns", "column")
    if not isinstance(shared_scale, bool) or not isinstance(annotate, bool):
        raise TypeError(f"shared_scale and annotate must be bools, got {shared_scale!r} and {annotate!r}")

    def scale(*matrices: Any) -> tuple[float, float]:
        return min(min(matrix.min() for matrix in matrices), 0.0), max(matrix.max() for matrix in matrices)

    scales = [scale(first_matrix, second_matrix)] * 2 if shared_scale else [scale(first_matrix), scale(second_matrix)]
    # A difference of exactly zero everywhere still needs a colour scale.
    difference_scale = (0.0, max(float(gap.max()), np.finfo(np.float32).tiny))
    # The three figures: what each is called, its matrix, colours, scale and colour bar label.
    panels = (
        (names[0], first_matrix, "Blues", scales[0], value_label),
        (names[1], second_matrix, "Blues", scales[1], value_label),
        ("difference", gap, "Reds", difference_scale, difference_label),
    )
    # What they share: the rows' and columns' labels, and the values written into the cells or not.
    heatmap = functools.partial(
        plot_attention, tokens=rows, key_tokens=columns, annotate=annotate, axis_labels=axis_labels
    )
    size = max(3.0, 0.42 * max(first_matrix.shape) + 1.6)
    figures = {}
    for name, matrix, cmap, (vmin, vmax), label in panels:
        # A Figure made directly, not by pyplot, is drawn only where it is glued or displayed.
        figures[name] = Figure(figsize=(size + 1.2, size), layout="constrained")
        ax = figures[name].add_subplot()
        heatmap(matrix, ax=ax, title=f"{title}: {name}", cmap=cmap, vmin=vmin, vmax=vmax, colorbar_label=label)
    return figures


def plot_next_tokens(
    scores: object,
    label: Any,
    settings: dict[str, dict[str, float]] | None = None,
    *,
    top: int = 10,
    title: str = "",
    figure: Any = None,
) -> Any:
    """A next-token distribution as bars of its ``top`` most likely tokens, once per setting of sampling's filters.

    Each panel applies one setting's filters in ``transformers``' order
    (:func:`~literate_transformer.book.decoding.filter_scores`: temperature,
    then top-k, then top-p) and draws the probability each token then has.
    A token top-k or top-p removed is drawn grey and hatched, at the
    probability it had at the panel's temperature, before top-k and top-p cut
    it: the distribution those two filters read, so that a grey bar and a blue
    one of the same panel compare at one temperature (a kept token's bar is
    taller than it was there, by the renormalisation over what was kept).
    The tokens and their order are those of the
    unfiltered distribution in every panel (a temperature keeps the order;
    top-k and top-p keep the most likely tokens).

    Args:
        scores: ``(V,)`` next-token scores (logits) of one position.
        label: The text of a token id (``tokenizer.decode``-like: ``label([id])``), or a list of ``V`` strings.
        settings: Panel title to the filters it applies (``{"temperature": 0.7}``, ``{"top_k": 5}``,
            ``{"top_p": 0.9}``); a filter a setting does not name is off (top-k too, which ``generate()`` applies
            by default).  ``None``: one panel, the distribution itself.
        top: How many of the most likely tokens to draw.
        title: The figure's title.
        figure: An empty matplotlib figure to draw into (``plt.figure()``, for a script that shows its figures
            with ``plt.show()``); ``None``: a new one, not registered with ``pyplot``, which a notebook shows where
            it is displayed.

    Returns:
        The figure.

    Raises:
        TypeError: for scores that are not a 1-d tensor of floats, or a ``label`` that is neither callable nor a list.
        ValueError: for an empty ``settings``, a filter it does not know, or ``top`` outside ``[1, V]``.
    """
    from matplotlib.figure import Figure

    from .book.decoding import filter_scores

    if not isinstance(scores, Tensor) or scores.dim() != 1 or not scores.is_floating_point():
        raise TypeError(f"scores must be a 1-d tensor of floats (one position's logits), got {scores!r:.80}")
    vocab_size = scores.shape[0]
    if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= vocab_size:
        raise ValueError(f"top must be an int in [1, {vocab_size}], got {top!r}")
    settings = {"distribution": {}} if settings is None else settings
    if not isinstance(settings, dict) or not settings:
        raise ValueError(f"settings must be a non-empty dict of panel title to filters, got {settings!r}")
    for name, filters in settings.items():
        unknown = set(filters) - {"temperature", "top_k", "top_p"}
        if unknown:
            raise ValueError(f"settings[{name!r}] names filters {sorted(unknown)}; known: temperature, top_k, top_p")
    if isinstance(label, (list, tuple)):
        words = label
        label = lambda ids: words[ids[0]]  # noqa: E731 (a list is read as a function of [id])
    if not callable(label):
        raise TypeError(f"label must be a function of a list of ids, or a list of strings, got {label!r:.80}")

    scores = scores.detach().float().cpu()
    before = scores.softmax(-1)
    shown = before.topk(top).indices.tolist()
    names = [repr(label([index]))[1:-1] for index in shown]
    if figure is None:
        figure = Figure(figsize=(max(4.0, 2.6 * len(settings) + 1.2), 3.4), layout="constrained")
    elif not isinstance(figure, Figure) or figure.axes:
        raise ValueError(f"figure must be an empty matplotlib Figure, got {figure!r:.80}")
    axes = figure.subplots(1, len(settings), sharey=True, squeeze=False)[0]
    for ax, (name, filters) in zip(axes, settings.items(), strict=True):
        filtered = filter_scores(scores[None], **{"top_k": 0, **filters})[0]
        after = filtered.softmax(-1)
        # What top-k and top-p read: the distribution at this panel's temperature.
        tempered = filter_scores(scores[None], top_k=0, temperature=filters.get("temperature", 1.0))[0].softmax(-1)
        kept = [bool(filtered[index] > -torch.inf) for index in shown]
        heights = [float(after[i]) if keep else float(tempered[i]) for i, keep in zip(shown, kept, strict=True)]
        bars = ax.bar(range(top), heights, color=["C0" if keep else "0.85" for keep in kept])
        for bar, keep in zip(bars, kept, strict=True):
            if not keep:
                bar.set_hatch("//")
                bar.set_edgecolor("0.55")
        ax.set_xticks(range(top), names, rotation=60, ha="right", fontsize="small")
        ax.set_title(name, fontsize="medium")
    axes[0].set_ylabel("probability")
    if title:
        figure.suptitle(title)
    return figure


def show(script: str | os.PathLike[str] | None = None) -> list[str]:
    """Show the open figures: a window with a screen; otherwise PNG files beside ``script``, their paths printed.

    ``plt.show()`` on a machine without a display (matplotlib's ``Agg``
    backend, chosen where there is no screen) shows nothing and says
    nothing.  Where the figures are collected anyway (a notebook's inline
    backend, sphinx-gallery's build), this is ``plt.show()``.

    Args:
        script: The script that drew them; the files are named ``<script>_<n>.png`` beside it.  ``None``: the
            script Python was started with (``sys.argv[0]``), or else ``figure_<n>.png`` in the current folder.

    Returns:
        The paths of the files written (none where the figures were shown).
    """
    import sys

    import matplotlib
    import matplotlib.pyplot as plt

    # matplotlib's backends that draw to files only (what it picks where there is no screen).
    headless = matplotlib.get_backend().lower() in ("agg", "cairo", "pdf", "pgf", "ps", "svg", "template")
    if not headless or "sphinx_gallery" in sys.modules:
        plt.show()
        return []
    if script is None and sys.argv and sys.argv[0].endswith(".py"):
        script = sys.argv[0]
    stem = os.path.splitext(os.fspath(script))[0] if script is not None else os.path.join(os.getcwd(), "figure")
    written = []
    for number in plt.get_fignums():
        # Numbered on from the script's earlier calls, so that a second call writes no file over the first's.
        _SAVED[stem] = _SAVED.get(stem, 0) + 1
        path = f"{stem}_{_SAVED[stem]}.png"
        plt.figure(number).savefig(path, dpi=100)
        written.append(path)
        print(f"no display: figure saved to {path}")
    plt.close("all")
    return written


#: How many figures :func:`show` has saved for each script, in this process.
_SAVED: dict[str, int] = {}


def plot_attention_patterns(
    patterns: dict[str, Tensor], title: str = "Who may attend to whom (darker: read more often)"
) -> Any:
    """Masks side by side, one panel each, queries down and keys across: the patterns the code builds, drawn.

    Every panel shares one colour scale, drawn as a bar beside them: how many times a query reads a key
    (0: never, 1 for a key a mask lets through; more where a pattern reads a key twice, as BigBird's
    evaluation mode reads its first block).

    Args:
        patterns: Panel titles and ``(T, S)`` masks: boolean (``True`` = may attend), additive (0 = may
            attend), or counts (how many times a query reads a key).
        title: The figure's title.

    Returns:
        A matplotlib figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import Normalize

    if not isinstance(patterns, dict) or not patterns:
        raise TypeError(f"patterns must be a non-empty dict of panel title to (T, S) mask, got {patterns!r:.80}")
    counts = {}
    for name, pattern in patterns.items():
        if not isinstance(pattern, Tensor) or pattern.dim() != 2:
            raise TypeError(f"patterns[{name!r}] must be a (T, S) tensor, got {pattern!r:.80}")
        if pattern.is_floating_point():
            pattern = pattern > torch.finfo(pattern.dtype).min / 2
        counts[name] = pattern.detach().cpu().long()
    most = max(max(int(values.max()), 1) for values in counts.values())
    # One scale for every panel: a count is the same blue wherever it is drawn.
    norm = Normalize(vmin=0, vmax=1.3 * most)
    fig, axes = plt.subplots(
        1, len(patterns), figsize=(3.2 * len(patterns) + 1.0, 3.6), layout="constrained", squeeze=False
    )
    for ax, (name, values) in zip(axes[0], counts.items(), strict=True):
        image = ax.imshow(values.numpy(), cmap="Blues", norm=norm, interpolation="nearest")
        ax.set_title(f"{name}\n{tuple(values.shape)}", fontsize=9)
        ax.set_xlabel("key")
        ax.set_ylabel("query")
    bar = fig.colorbar(image, ax=list(axes[0]), ticks=range(most + 1), shrink=0.8)
    bar.set_label("times the query reads the key")
    fig.suptitle(title)
    return fig


# In a notebook, bertviz's own views draw offline too (see offline_views).
offline_views()
