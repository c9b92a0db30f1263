r"""The decoder: masked self-attention, encoder-decoder attention, and an encoder-decoder model.

The encoder (:mod:`literate_transformer.book.encoder`) turns a source sequence into
contextual vectors.  The *decoder* writes a target sequence one token at a
time, and each new token may depend on two things only: the target tokens
written so far, and the whole source.  A decoder layer therefore has three
sub-layers where an encoder layer has two:

1. **Masked (causal) self-attention** over the target: position :math:`i` may
   look at target positions :math:`j \le i` and never at later ones.
2. **Encoder-decoder attention** (cross-attention): queries come from the
   target, keys and values from the encoder's output.
3. The position-wise **feed-forward** network, exactly as in the encoder.

Each sub-layer sits inside a residual connection with its own layer norm
(``layer_norm_1``, ``layer_norm_2``, ``layer_norm_3``), in either of the two
arrangements the rest of this package uses (wired by
:mod:`~literate_transformer.core.residual`).  Writing :math:`x` for the target
hidden states and :math:`z` for the encoder's output:

.. math::

    \text{pre-LN (the book):}\quad
    \begin{aligned}
    x &\leftarrow x + \operatorname{SelfAttn}(\operatorname{LN}_1(x), M_\text{causal}) \\
    x &\leftarrow x + \operatorname{CrossAttn}(\operatorname{LN}_2(x), z, M_\text{source}) \\
    x &\leftarrow x + \operatorname{FFN}(\operatorname{LN}_3(x))
    \end{aligned}

.. math::

    \text{post-LN (the 2017 paper, BERT):}\quad
    \begin{aligned}
    x &\leftarrow \operatorname{LN}_1(x + \operatorname{SelfAttn}(x, M_\text{causal})) \\
    x &\leftarrow \operatorname{LN}_2(x + \operatorname{CrossAttn}(x, z, M_\text{source})) \\
    x &\leftarrow \operatorname{LN}_3(x + \operatorname{FFN}(x))
    \end{aligned}

The causal mask
---------------
During training the decoder sees the whole target at once (*teacher
forcing*): it is given ``[BOS] y1 y2 ... y(T-1)`` and must predict
``y1 y2 ... yT``, every position in parallel.  Nothing stops position
:math:`i` from simply copying token :math:`i+1` from its input, unless its
attention is forbidden to look ahead.  The look-ahead mask is
lower-triangular:

.. math::

    \operatorname{Attention}(Q, K, V) =
    \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{D}} + M\right) V,
    \qquad
    M_{ij} = \begin{cases} 0 & j \le i \\ -\infty & j > i \end{cases}

The notes on chapter 3 of *Natural Language Processing with Transformers*
stop at this point: they build the mask with ``torch.tril``, fill the masked
scores, and leave the decoder layer and the encoder-decoder sidebar unwritten;
this module writes the rest.
Here the :math:`-\infty` is ``torch.finfo(dtype).min`` (see
:mod:`literate_transformer.core.masks`): the source notebooks fill with
``float("-inf")``, which turns any row whose keys are all masked (a padded
target position) into NaN.  :class:`TransformerDecoder` builds the causal mask
itself (:func:`~literate_transformer.core.masks.causal_mask`) and combines it with
the target's padding mask; a test changes a *future* token and checks that
earlier positions do not move, and shows that the same check fails once the
mask is removed.

Sidebar: demystifying encoder-decoder attention
-----------------------------------------------
The book frames cross-attention as an exam: you (the decoder) must write the
next word, your neighbour (the encoder) holds the full text.  In equations it
is the attention of :mod:`~literate_transformer.book.attention` with one change:
the queries are projected from the decoder's states :math:`x \in
\mathbb{R}^{T \times E}`, the keys and values from the encoder's output
:math:`z \in \mathbb{R}^{S \times E}`:

.. math::

    Q = x W^Q,\quad K = z W^K,\quad V = z W^V,\qquad
    \operatorname{CrossAttn}(x, z) = \operatorname{softmax}\!\left(
    \frac{Q K^\top}{\sqrt{D}} + M_\text{source}\right) V .

What follows from that one change:

* **The weights are rectangular**, ``(B, H, T, S)``: one row per *target*
  position, one column per *source* token.  Row :math:`i` says where in the
  source the decoder looked while writing target token :math:`i + 1`; in a
  translation model these rows trace a soft word alignment, and in the
  reversal task of :mod:`~literate_transformer.book.training` they form an
  anti-diagonal (a test checks that the trained model's head-averaged
  weights peak at the mirrored source position).
* **No causal mask.**  The source is known in full before decoding starts,
  so every target position may look at every real source token; the only
  mask is the source's padding mask :math:`M_\text{source}`.
* **The output lives in the decoder's space.**  Each target position
  receives a weighted average of *source* value vectors, added to its own
  residual stream: this is the only path through which the source reaches
  the target.  Without it the decoder would be a language model that ignores
  its input.
* **Keys and values are computed once.**  :math:`K` and :math:`V` depend only
  on :math:`z`, which does not change while the target is written; during
  generation they are projected once per layer and reused at every step
  (:mod:`~literate_transformer.book.generation`), while the self-attention keys
  and values grow by one position per step.

HuggingFace's ``modeling_bert.py`` implements the same thing inside
``BertSelfAttention``: when ``encoder_hidden_states`` is passed, the ``key``
and ``value`` projections are applied to it instead of to the hidden states,
and ``BertLayer`` holds the sub-layer as ``crossattention`` (built when
``config.add_cross_attention`` is set).  PyTorch's
:class:`torch.nn.TransformerDecoderLayer` calls it ``multihead_attn`` and the
encoder output ``memory``.

Names across implementations
----------------------------
=========================  ===============================  ================================
this module                ``torch.nn.TransformerDecoder``  HuggingFace ``BertLayer``
=========================  ===============================  ================================
``self_attention``         ``self_attn``                    ``attention``
``cross_attention``        ``multihead_attn``               ``crossattention``
``feed_forward``           ``linear1``, ``linear2``         ``intermediate``, ``output``
``layer_norm_1/2/3``       ``norm1/2/3``                    ``LayerNorm`` of each sub-layer
``encoder_hidden_states``  ``memory``                       ``encoder_hidden_states``
=========================  ===============================  ================================

The tests map the weights of :class:`TransformerDecoderLayer` into
:class:`torch.nn.TransformerDecoderLayer` (and of :class:`TransformerDecoder`
into :class:`torch.nn.TransformerDecoder`), in both layer-norm arrangements,
with and without a source padding mask, and require the outputs to agree to
``1e-5``.

Shapes use the package legend: ``B`` batch, ``T`` target (query) length,
``S`` key length (source tokens for cross-attention, cached plus new target
tokens for self-attention), ``H`` heads, ``D`` head size, ``E`` hidden size,
``V`` vocabulary size.

>>> import torch
>>> from literate_transformer import TransformerConfig
>>> config = TransformerConfig(vocab_size=20, hidden_size=16, num_hidden_layers=2,
...                            num_attention_heads=2, intermediate_size=32)
>>> _ = torch.manual_seed(0)
>>> model = EncoderDecoderTransformer(config).eval()
>>> source = torch.tensor([[5, 6, 7, 8]])
>>> target = torch.tensor([[1, 9, 10]])
>>> output = model(source, target, output_attentions=True)
>>> output.logits.shape
torch.Size([1, 3, 20])
>>> output.cross_attentions[0].shape  # (B, H, T, S): target rows, source columns
torch.Size([1, 2, 3, 4])
>>> output.decoder_attentions[0][0, 0]  # causal: nothing above the diagonal
tensor([[1.0000, 0.0000, 0.0000],
        [...,    ...,    0.0000],
        [...,    ...,    ...]], grad_fn=<SelectBackward0>)
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from ..core.config import TransformerConfig, as_config
from ..core.masks import build_attention_mask
from ..core.outputs import LayerCache, LayerOutput, ModelOutput, Seq2SeqOutput
from ..core.residual import add_and_norm, sublayer_input
from ..core.validation import (
    Arguments,
    check_attention_mask,
    check_encoder_hidden_states,
    check_hidden_states,
    check_input_ids,
    check_labels,
    check_mask,
    check_norm_first,
    check_past_key_values,
    check_source_and_target,
    check_tensor,
    check_token_inputs,
    validate_with,
)
from ..parts.heads import IGNORE_INDEX
from ..parts.norms import make_norm
from ..parts.positions import position_ids as positions_of
from .attention import MultiHeadAttention
from .embeddings import Embeddings
from .encoder import TransformerEncoder, final_norm
from .feed_forward import FeedForward
from .generation import greedy_generate, new_tokens_for

__all__ = [
    "TransformerDecoderLayer",
    "TransformerDecoder",
    "EncoderDecoderModel",
    "check_family_decoder_inputs",
    "PreTrainedEncoderDecoderModel",
    "EncoderDecoderTransformer",
]


def _check_layer_cache(cache: object, name: str) -> LayerCache:
    if not isinstance(cache, LayerCache):
        raise TypeError(f"{name} must be a LayerCache, got {type(cache).__name__}")
    return cache


def _check_layer_inputs(layer: TransformerDecoderLayer, args: Arguments) -> None:
    hidden_states = check_hidden_states(args.hidden_states, layer.config.hidden_size)
    batch_size, target_length, _ = hidden_states.shape
    heads = layer.config.num_attention_heads
    past_length = 0
    if args.past_key_value is not None:
        past_length = _check_layer_cache(args.past_key_value, "past_key_value").self_attention[0].shape[2]
    if args.attention_mask is not None:
        check_mask(args.attention_mask, (batch_size, heads, target_length, past_length + target_length))
    if layer.cross_attention is None:
        if args.encoder_hidden_states is not None:
            raise ValueError("encoder_hidden_states was given, but this layer has no cross-attention sub-layer")
        return
    encoder_hidden_states = check_encoder_hidden_states(
        args.encoder_hidden_states, batch_size, layer.config.hidden_size
    )
    if args.encoder_attention_mask is not None:
        source_length = encoder_hidden_states.shape[1]
        check_mask(
            args.encoder_attention_mask, (batch_size, heads, target_length, source_length), "encoder_attention_mask"
        )


class TransformerDecoderLayer(nn.Module):
    r"""One decoder layer: masked self-attention, encoder-decoder attention, feed-forward.

    .. math::

        x \leftarrow x + \operatorname{SelfAttn}(\operatorname{LN}_1 x),\quad
        x \leftarrow x + \operatorname{CrossAttn}(\operatorname{LN}_2 x, z),\quad
        x \leftarrow x + \operatorname{FFN}(\operatorname{LN}_3 x)

    (pre-LN, ``norm_first=True``); with ``norm_first=False`` each layer norm
    is applied *after* its residual sum instead, as in the 2017 paper and
    :class:`torch.nn.TransformerDecoderLayer` by default.  Without
    ``add_cross_attention`` the middle sub-layer is left out: the layer of a
    decoder-only model.

    The layer does not build masks: it applies the ones it is given.
    :class:`TransformerDecoder` builds the causal mask.

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            ``transformers`` config.
        norm_first: Pre-LN (``True``, the book) or post-LN (``False``).
        add_cross_attention: Give the layer its encoder-decoder attention
            sub-layer (``True``, the default).

    Attributes:
        self_attention: Causal multi-head self-attention over the target.
        cross_attention: Multi-head attention from the target (queries) to
            the encoder's output (keys and values), or ``None``.
        feed_forward: The position-wise feed-forward network.
        layer_norm_1: Layer norm of the self-attention sub-layer.
        layer_norm_2: Layer norm of the cross-attention sub-layer, or ``None``.
        layer_norm_3: Layer norm of the feed-forward sub-layer.
        dropout: Dropout on the attention sub-layers' outputs
            (``config.hidden_dropout_prob``; the feed-forward network has its own).

    >>> import torch
    >>> from literate_transformer import TransformerConfig
    >>> from literate_transformer.core.masks import causal_mask
    >>> config = TransformerConfig(hidden_size=8, num_attention_heads=2, intermediate_size=16)
    >>> layer = TransformerDecoderLayer(config)
    >>> target, source = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    >>> layer(target, source, causal_mask(3)).hidden_states.shape
    torch.Size([2, 3, 8])
    """

    def __init__(
        self, config: TransformerConfig | Any, norm_first: bool = True, add_cross_attention: bool = True
    ) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        self.norm_first = check_norm_first(norm_first)
        self.self_attention = MultiHeadAttention(config)
        self.layer_norm_1 = make_norm(config.hidden_size, config.layer_norm_eps)
        self.cross_attention = MultiHeadAttention(config) if add_cross_attention else None
        self.layer_norm_2 = make_norm(config.hidden_size, config.layer_norm_eps) if add_cross_attention else None
        # The attention sub-layers' output dropout (the feed-forward network drops out its own output).
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.feed_forward = FeedForward(config)
        self.layer_norm_3 = make_norm(config.hidden_size, config.layer_norm_eps)

    @validate_with(_check_layer_inputs)
    def forward(
        self,
        hidden_states: Tensor,
        encoder_hidden_states: Tensor | None = None,
        attention_mask: Tensor | None = None,
        encoder_attention_mask: Tensor | None = None,
        *,
        output_attentions: bool = False,
        past_key_value: LayerCache | None = None,
        use_cache: bool = False,
    ) -> LayerOutput:
        """Run the sub-layers.

        Args:
            hidden_states: Target hidden states ``(B, T, E)`` (with a cache:
                only the new positions, usually ``T = 1``).
            encoder_hidden_states: The encoder's output ``(B, S, E)``
                (required with cross-attention).
            attention_mask: Boolean (``True`` = may attend) or additive
                mask broadcastable to ``(B, H, T, S)`` over the target keys,
                cached ones included; usually causal.  ``None`` lets every
                position see every other (no causality).
            encoder_attention_mask: Mask broadcastable to ``(B, H, T, S)``
                over the source keys, e.g.
                :func:`~literate_transformer.core.masks.padding_mask` of the
                source's ``attention_mask``.
            output_attentions: Also return both attention probability tensors.
            past_key_value: The :class:`~literate_transformer.core.outputs.LayerCache`
                of the previous step.
            use_cache: Return the updated cache.

        Returns:
            A :class:`~literate_transformer.core.outputs.LayerOutput`.

        Raises:
            ValueError: if ``encoder_hidden_states`` is missing (or given to a
                layer without cross-attention), its batch or hidden size
                differs from ``hidden_states``'s, or a mask does not broadcast
                to ``(B, H, T, S)``.
            TypeError: if an input is not a tensor of a suitable dtype.
        """
        past_self, past_cross = past_key_value if past_key_value is not None else (None, None)

        # 1) Masked self-attention: each target position mixes the target
        #    positions up to itself (the mask hides the future); with a cache
        #    the new keys/values are appended after the cached ones.
        self_attention = self.self_attention(
            sublayer_input(hidden_states, self.layer_norm_1, self.norm_first),
            attention_mask=attention_mask,
            output_attentions=output_attentions,
            past_key_value=past_self,
            use_cache=use_cache,
        )
        # Residual connection around the sub-layer: x + Dropout(SelfAttn(.)), then LN_1 in post-LN.
        hidden_states = add_and_norm(
            hidden_states, self_attention.hidden_states, self.layer_norm_1, self.norm_first, self.dropout
        )

        # 2) Encoder-decoder attention: queries from the target, keys and
        #    values from the encoder output z.  They depend on z alone, so a
        #    cache computes them at the first step and reuses them after.
        cross_attention = None
        if self.cross_attention is not None:
            cross_attention = self.cross_attention(
                sublayer_input(hidden_states, self.layer_norm_2, self.norm_first),
                encoder_hidden_states,
                encoder_attention_mask,
                output_attentions=output_attentions,
                past_key_value=past_cross,
                use_cache=use_cache,
            )
            # Residual connection: the source enters the target's stream here.
            hidden_states = add_and_norm(
                hidden_states, cross_attention.hidden_states, self.layer_norm_2, self.norm_first, self.dropout
            )

        # 3) Position-wise feed-forward network, with its residual connection.
        feed_forward_output = self.feed_forward(sublayer_input(hidden_states, self.layer_norm_3, self.norm_first))
        hidden_states = add_and_norm(hidden_states, feed_forward_output, self.layer_norm_3, self.norm_first)

        cross_probs = cross_attention.attention_probs if cross_attention is not None else None
        cache = None
        if use_cache:
            cache = LayerCache(
                self_attention.past_key_value, cross_attention.past_key_value if cross_attention is not None else None
            )
        return LayerOutput(hidden_states, self_attention.attention_probs, cross_probs, cache)


def _check_decoder_inputs(decoder: TransformerDecoder, args: Arguments) -> None:
    config = decoder.config
    batch_size = check_input_ids(args.input_ids, config.vocab_size).shape[0]
    source_length = None
    if decoder.add_cross_attention:
        encoder_hidden_states = check_encoder_hidden_states(args.encoder_hidden_states, batch_size, config.hidden_size)
        source_length = encoder_hidden_states.shape[1]
    elif args.encoder_hidden_states is not None or args.encoder_attention_mask is not None:
        raise ValueError(
            "encoder_hidden_states and encoder_attention_mask must be None: this decoder has no cross-attention "
            "(a decoder-only model reads no encoder; a cache goes in by name, past_key_values=...)"
        )
    past_length = check_past_key_values(
        args.past_key_values,
        num_layers=len(decoder.layers),
        batch_size=batch_size,
        num_heads=config.num_attention_heads,
        head_size=config.head_size,
        source_length=source_length,
    )
    check_token_inputs(args, config, past_length)
    if args.encoder_attention_mask is not None:
        check_attention_mask(args.encoder_attention_mask, batch_size, source_length, name="encoder_attention_mask")


class TransformerDecoder(nn.Module):
    r"""Token embeddings and a stack of :class:`TransformerDecoderLayer`.

    The decoder builds its masks itself, once for all its layers
    (:func:`~literate_transformer.core.masks.build_attention_mask`): the
    causal mask combined with the target's padding for self-attention, the
    source's padding for cross-attention.

    Without cross-attention (``add_cross_attention=False``) it is a
    *decoder-only* model, a language model that reads nothing but its own
    prefix: GPT-2 is this stack, pre-LN, with a final layer norm
    (:mod:`~literate_transformer.models.gpt2`).

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            ``transformers`` config.
        norm_first: Pre-LN (``True``) or post-LN (``False``) layers.
        add_cross_attention: Give every layer its encoder-decoder attention
            (``True``, the default) or not (a decoder-only model).
        final_layer_norm: Normalise the last layer's output once more (the
            ``norm`` of :class:`torch.nn.TransformerDecoder`, GPT-2's ``ln_f``).

    Attributes:
        embeddings: Token + learned position embeddings of the target
            (:class:`~literate_transformer.book.embeddings.Embeddings`).
        layers: ``config.num_hidden_layers`` decoder layers.
        final_layer_norm: The layer norm after the last layer, or ``None``.

    >>> import torch
    >>> from literate_transformer import TransformerConfig
    >>> config = TransformerConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1,
    ...                            num_attention_heads=2, intermediate_size=16)
    >>> decoder = TransformerDecoder(config)
    >>> decoder(torch.tensor([[1, 2, 3]]), torch.randn(1, 4, 8)).last_hidden_state.shape
    torch.Size([1, 3, 8])
    >>> language_model = TransformerDecoder(config, add_cross_attention=False, final_layer_norm=True)
    >>> language_model(torch.tensor([[1, 2, 3]])).last_hidden_state.shape
    torch.Size([1, 3, 8])
    """

    def __init__(
        self,
        config: TransformerConfig | Any,
        norm_first: bool = True,
        add_cross_attention: bool = True,
        final_layer_norm: bool = False,
    ) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        self.norm_first = check_norm_first(norm_first)
        if not isinstance(add_cross_attention, bool):
            raise TypeError(f"add_cross_attention must be a bool, got {add_cross_attention!r}")
        self.add_cross_attention = add_cross_attention
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(
            [
                TransformerDecoderLayer(config, norm_first=norm_first, add_cross_attention=add_cross_attention)
                for _ in range(config.num_hidden_layers)
            ]
        )
        self.final_layer_norm = final_norm(config, final_layer_norm)

    @validate_with(_check_decoder_inputs)
    def forward(
        self,
        input_ids: Tensor,
        encoder_hidden_states: Tensor | None = None,
        attention_mask: Tensor | None = None,
        encoder_attention_mask: Tensor | None = None,
        *,
        position_ids: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        past_key_values: tuple[LayerCache, ...] | None = None,
        use_cache: bool = False,
    ) -> ModelOutput:
        """Decode: target tokens in, contextual target vectors out.

        Args:
            input_ids: Target token ids ``(B, T)`` (with a cache: only the new
                tokens).
            encoder_hidden_states: The encoder's output ``(B, S, E)``;
                required with cross-attention, ``None`` without.
            attention_mask: The target's ``(B, past + T)`` padding mask (1 =
                real token), covering cached positions too; ``None`` = no padding.
            encoder_attention_mask: The source's ``(B, S)`` padding mask.
            position_ids: The tokens' positions ``(B, T)`` or ``(1, T)``; by
                default each real token's position counts the real tokens
                before it, cached ones included
                (:func:`~literate_transformer.parts.positions.position_ids`).
            output_attentions: Also return every layer's attention probabilities.
            output_hidden_states: Also return the embeddings and every layer's output.
            past_key_values: The cache returned by the previous step.
            use_cache: Return the updated cache.

        Returns:
            A :class:`~literate_transformer.core.outputs.ModelOutput`:
            ``last_hidden_state`` ``(B, T, E)``, and with the flags
            ``attentions``, ``cross_attentions`` (``None`` without
            cross-attention), ``hidden_states`` and ``past_key_values``.

        Raises:
            ValueError: for token ids out of range, more positions than
                ``max_position_embeddings``, masks of the wrong shape, or
                encoder states that are missing (or given to a decoder-only
                stack) or do not match.
            TypeError: for inputs of the wrong type or dtype.
        """
        past_length = 0 if past_key_values is None else past_key_values[0].self_attention[0].shape[2]
        target_length = input_ids.shape[1]
        if position_ids is None:
            # A token's position counts the real tokens before it (one rule, parts.positions.position_ids).
            position_ids = positions_of(attention_mask, target_length, past_length, device=input_ids.device)
        # Token + position embeddings.
        embedding_output = self.embeddings(input_ids, past_length=past_length, position_ids=position_ids)  # (B, T, E)
        hidden_states = embedding_output
        # The masks, built once, in the additive form every layer adds to its scores (see core.masks).
        masks = dict(device=input_ids.device, dtype=embedding_output.dtype)
        # Query i sits at position past + i and sees keys 0 .. past + i, never a padded one: (B, 1, T, S).
        self_attention_mask = build_attention_mask(
            attention_mask, query_length=target_length, causal=True, past_length=past_length, **masks
        )
        # Cross-attention sees every real source token: (B, 1, 1, S), no causality.
        source_mask = build_attention_mask(encoder_attention_mask, query_length=target_length, **masks)

        layer_outputs = []
        for index, layer in enumerate(self.layers):
            # One layer: masked self-attention, cross-attention, feed-forward (and its cache).
            layer_output = layer(
                hidden_states,
                encoder_hidden_states,
                self_attention_mask,
                source_mask,
                output_attentions=output_attentions,
                past_key_value=None if past_key_values is None else past_key_values[index],
                use_cache=use_cache,
            )
            layer_outputs.append(layer_output)
            hidden_states = layer_output.hidden_states
        if self.final_layer_norm is not None:
            # One more layer norm over the stack's output.
            hidden_states = self.final_layer_norm(hidden_states)
        # Per-layer tuples of what the layers returned; the last hidden state reported is the normalised one.
        return ModelOutput.from_layers(embedding_output, layer_outputs, hidden_states, output_hidden_states)


def check_family_decoder_inputs(
    args: Arguments,
    config: Any,
    num_layers: int,
    num_heads: int,
    head_size: int,
    max_positions: int | None,
    is_decoder: bool = True,
) -> None:
    """The inputs of a family's stack (BART's decoder, T5's encoder or decoder), checked before it runs.

    Under HuggingFace's names for a decoder (``decoder_input_ids``,
    ``decoder_attention_mask``): integer ids ``(B, T)``; in a decoder, the
    encoder's output ``(B, S, E)`` (``E`` the config's ``d_model``) and its
    ``(B, S)`` mask; a cache of one entry per layer; ids of the vocabulary
    that fit ``max_positions`` after the cached ones (``None``: no position
    table, no limit); a padding mask over the cached and the new positions.

    Args:
        args: The stack's ``forward`` arguments.
        config: The family's config (``vocab_size``, ``d_model``).
        num_layers: The stack's layers, one cache entry each.
        num_heads: Each layer's self-attention heads, ``H``.
        head_size: ``D``.
        max_positions: The positions the stack can number, or ``None``.
        is_decoder: A decoder, which reads the encoder's output (``False``: T5's encoder).
    """
    name, mask_name = ("decoder_input_ids", "decoder_attention_mask") if is_decoder else ("input_ids", "attention_mask")
    batch_size = check_tensor(args.input_ids, name, ndim=2, dtypes=("int",)).shape[0]
    source_length = None
    if is_decoder:
        source_length = check_encoder_hidden_states(args.encoder_hidden_states, batch_size, config.d_model).shape[1]
        if args.encoder_attention_mask is not None:
            check_attention_mask(args.encoder_attention_mask, batch_size, source_length, "encoder_attention_mask")
    past_length = check_past_key_values(
        args.past_key_values,
        num_layers=num_layers,
        batch_size=batch_size,
        num_heads=num_heads,
        head_size=head_size,
        source_length=source_length,
    )
    length = check_input_ids(args.input_ids, config.vocab_size, max_positions, name, past_length).shape[1]
    if args.attention_mask is not None:
        check_attention_mask(args.attention_mask, batch_size, past_length + length, mask_name)


def _check_seq2seq_inputs(model: EncoderDecoderModel, args: Arguments) -> None:
    """Source and target of one batch: as many targets as sources, masks shaped like their ids."""
    check_source_and_target(args, model.config)


class EncoderDecoderModel(nn.Module):
    """What every encoder-decoder model does with its encoder, decoder and head: encode once, decode step by step.

    Generation (:mod:`~literate_transformer.book.generation`) asks a model
    that writes whether it reads a source (``is_encoder_decoder``); one that
    does is encoded once, and decoded a step at a time with a cache.  The
    book's :class:`EncoderDecoderTransformer` and every family of the
    encoder-decoder branch (BART, T5, ...) are such models: each has an
    ``encoder`` and a ``decoder`` that check their inputs, and a ``head``
    that scores the next token (``None`` without one).
    """

    #: ``True``, a model that reads a source and writes a new sequence (what generation asks a model).
    is_encoder_decoder = True

    def encode(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, *, output_attentions: bool = False
    ) -> ModelOutput:
        """Run the encoder once: its :class:`~literate_transformer.core.outputs.ModelOutput` (it checks the inputs)."""
        return self.encoder(input_ids, attention_mask, output_attentions=output_attentions)

    def head(self, hidden_states: Tensor) -> Tensor | None:
        """Next-token scores for the decoder's states; a model without a language-model head has none."""
        return None

    def decode(
        self,
        decoder_input_ids: Tensor,
        encoder_hidden_states: Tensor,
        encoder_attention_mask: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
        *,
        output_attentions: bool = False,
        past_key_values: tuple[LayerCache, ...] | None = None,
        use_cache: bool = False,
    ) -> Seq2SeqOutput:
        """Run the decoder (it checks the inputs) and the head on already-encoded source states.

        Args:
            decoder_input_ids: Target ids ``(B, T)`` (with a cache, only the new ones).
            encoder_hidden_states: The encoder's output ``(B, S, E)``.
            encoder_attention_mask: The source's ``(B, S)`` padding mask.
            decoder_attention_mask: The target's ``(B, past + T)`` padding mask.
            output_attentions: Return the decoder's self- and cross-attention probabilities.
            past_key_values: The cache returned by the previous step.
            use_cache: Return the updated cache.

        Returns:
            A :class:`~literate_transformer.core.outputs.Seq2SeqOutput`
            (without encoder attentions).
        """
        # By name: a family's decoder may order its arguments as HuggingFace's does (T5's stack: the mask second).
        decoded = self.decoder(
            decoder_input_ids,
            encoder_hidden_states=encoder_hidden_states,
            attention_mask=decoder_attention_mask,
            encoder_attention_mask=encoder_attention_mask,
            output_attentions=output_attentions,
            past_key_values=past_key_values,
            use_cache=use_cache,
        )
        return Seq2SeqOutput(
            logits=self.head(decoded.last_hidden_state),
            last_hidden_state=decoded.last_hidden_state,
            past_key_values=decoded.past_key_values,
            decoder_attentions=decoded.attentions,
            cross_attentions=decoded.cross_attentions,
            encoder_last_hidden_state=encoder_hidden_states,
        )

    @validate_with(_check_seq2seq_inputs)
    def forward(
        self,
        input_ids: Tensor,
        decoder_input_ids: Tensor,
        attention_mask: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
        output_attentions: bool = False,
    ) -> Seq2SeqOutput:
        """Encode the source, decode the (teacher-forced) target, score the next tokens.

        Args:
            input_ids: Source token ids ``(B, S)``.
            decoder_input_ids: Target token ids ``(B, T)``, starting with the
                start token (the labels shifted right by one).
            attention_mask: The source's ``(B, S)`` padding mask.
            decoder_attention_mask: The target's ``(B, T)`` padding mask.
            output_attentions: Also return ``encoder_attentions``,
                ``decoder_attentions`` and ``cross_attentions``, tuples of
                ``(B, H, T, S)`` tensors, one per layer (the input of bertviz's
                encoder-decoder ``head_view``).

        Returns:
            A :class:`~literate_transformer.core.outputs.Seq2SeqOutput` with ``logits`` ``(B, T, V)``.

        Raises:
            ValueError: for ids out of range or too long, masks shaped unlike
                their ids, or source and target batches of different sizes.
            TypeError: for inputs of the wrong type or dtype.
        """
        # 1) The encoder reads the whole source, in both directions.
        encoded = self.encode(input_ids, attention_mask, output_attentions=output_attentions)
        # 2) The decoder reads the target (causally) and the source (cross-attention).
        decoded = self.decode(
            decoder_input_ids,
            encoded.last_hidden_state,
            attention_mask,
            decoder_attention_mask,
            output_attentions=output_attentions,
        )
        decoded.encoder_attentions = encoded.attentions
        return decoded


def _check_family_inputs(model: PreTrainedEncoderDecoderModel, args: Arguments) -> None:
    """The family's own check of ``forward``'s arguments (its class's :meth:`~PreTrainedEncoderDecoderModel.check_inputs`)."""
    model.check_inputs(args)


class PreTrainedEncoderDecoderModel(EncoderDecoderModel):
    r"""An encoder-decoder family under HuggingFace's names: ``forward`` in HuggingFace's order, its ``labels=``
    loss, and ``generate``.

    The families of the encoder-decoder branch (BART, T5, and BART's
    descendants) build their ``encoder``, ``decoder`` and ``head`` and
    inherit the rest from here; each writes only where it differs: which
    token a target starts with (:attr:`decoder_start_token_id`), the target
    ``forward`` decodes when given none (:meth:`default_decoder_input_ids`),
    and what its ``forward`` refuses (:meth:`check_inputs`).

    Trained, the model reads the target it must write, shifted one place to
    the right behind the start token (*teacher forcing*,
    :meth:`shift_labels_right`), so that the scores at position :math:`t`
    predict label :math:`t` from the labels before it; the loss is their mean
    cross-entropy over the labels that are not ``-100``,

    .. math::

        \mathcal{L} = -\frac{1}{N} \sum_{b,\,t} \log \operatorname{softmax}(\text{logits}_{b,t})[y_{b,t}],

    nothing shifted in the loss itself (the decoder's input is shifted already), as ``transformers``'
    ``BartForConditionalGeneration(labels=...)`` and ``T5ForConditionalGeneration(labels=...)`` compute it.
    """

    #: The config (a ``transformers`` config, checked once by the family).
    config: Any

    @property
    def decoder_start_token_id(self) -> int | None:
        """The token every target starts with, ``config.decoder_start_token_id`` (a family may fall back on another)."""
        return getattr(self.config, "decoder_start_token_id", None)

    def check_inputs(self, args: Arguments) -> None:
        """What ``forward`` refuses: source and target of one batch, as the book's model checks them, and labels
        that do not fit the target (or a model without a head to score them)."""
        _check_seq2seq_inputs(self, args)
        if args.labels is None:
            return
        if type(self).head is EncoderDecoderModel.head:
            raise ValueError(f"labels need a language-model head to score them: {type(self).__name__} has none")
        target = args.decoder_input_ids
        shape = (args.input_ids.shape[0], None if target is None else target.shape[1])
        labels = check_labels(args.labels, shape, self.config.vocab_size)
        positions = getattr(self.config, "max_position_embeddings", None)
        if target is None and positions is not None and labels.shape[1] > positions:
            raise ValueError(
                f"labels has {labels.shape[1]} tokens, more than max_position_embeddings={positions}: "
                "the decoder reads them shifted right, one position each"
            )

    def default_decoder_input_ids(self, input_ids: Tensor) -> Tensor:
        """The target ``forward`` decodes when given none; a family without a rule for it has none.

        Raises:
            ValueError: always, here (BART's rule shifts the source right).
        """
        raise ValueError(f"decoder_input_ids is required: {type(self).__name__} makes no target of its own")

    def shift_labels_right(self, labels: Tensor) -> Tensor:
        """The decoder's input that teacher-forces ``labels``: the start token, then every label but the last.

        A ``-100`` (a label the loss ignores, no token) becomes the padding token: ``transformers``'
        ``shift_tokens_right`` in BART, ``_shift_right`` in T5.

        Args:
            labels: ``(B, T)`` target ids, ``-100`` where the loss ignores them.

        Returns:
            ``(B, T)`` decoder input ids.

        Raises:
            ValueError: when there is no start token (:attr:`decoder_start_token_id`).
        """
        start = self.decoder_start_token_id
        if start is None:
            raise ValueError("labels need config.decoder_start_token_id to start the decoder's input, which is not set")
        shifted = labels.new_zeros(labels.shape)  # (B, T)
        shifted[:, 0] = start
        shifted[:, 1:] = labels[:, :-1]
        return shifted.masked_fill(shifted == IGNORE_INDEX, self.config.pad_token_id)

    @validate_with(_check_family_inputs)
    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        decoder_input_ids: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
        output_attentions: bool = False,
        labels: Tensor | None = None,
    ) -> Seq2SeqOutput:
        """The book's :meth:`EncoderDecoderModel.forward` (``logits`` is ``None`` in a model without a head), the
        arguments in the order of HuggingFace's (:meth:`transformers.BartModel.forward`,
        :meth:`transformers.T5Model.forward`), and with ``labels`` the loss.

        Args:
            decoder_input_ids: Target ids ``(B, T)``, starting with :attr:`decoder_start_token_id`; ``None``: the
                labels shifted right (:meth:`shift_labels_right`) when there are labels, else the family's
                :meth:`default_decoder_input_ids` (BART: ``input_ids`` shifted one place right; T5 requires
                them, and a ValueError says so).
            labels: ``(B, T)`` the target's ids, ``-100`` where the loss ignores them: ``loss`` is their mean
                cross-entropy (a model with a language-model head only).
        """
        if decoder_input_ids is None and labels is not None:
            # Teacher forcing: the decoder reads the labels shifted right, behind the start token.
            decoder_input_ids = self.shift_labels_right(labels)
        elif decoder_input_ids is None:
            decoder_input_ids = self.default_decoder_input_ids(input_ids)
        # The book's forward, the arguments in its order: encode the source, decode the target.
        output = super().forward(
            input_ids, decoder_input_ids, attention_mask, decoder_attention_mask, output_attentions
        )
        if labels is not None:
            # Each target position's scores against its own label (the decoder's input is the shifted copy).
            output.loss = F.cross_entropy(
                output.logits.float().flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX
            )
        return output

    def generate(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        max_new_tokens: int | None = None,
        use_cache: bool = True,
        forced_bos_token_id: int | None = None,
        *,
        max_length: int | None = None,
    ) -> Tensor:
        """Greedy decoding, as ``generate(do_sample=False, num_beams=1)``: the ids of
        :func:`~literate_transformer.book.generation.greedy_generate`, whose arguments these are.

        A target stops at ``config.eos_token_id`` (and is padded after it); ``forced_bos_token_id`` is a
        multilingual model's target language, as ``generate(forced_bos_token_id=...)``.  ``max_length`` counts
        the start token and the new tokens, as in ``transformers``
        (:func:`~literate_transformer.book.generation.new_tokens_for`); ``max_new_tokens`` wins when both are
        given, and with neither 20 tokens are written.

        Returns:
            ``(B, 1 + N)``: the start token (:attr:`decoder_start_token_id`), then the new token ids.
        """
        return greedy_generate(
            self,
            input_ids,
            new_tokens_for(self, input_ids, max_new_tokens, max_length),
            bos_token_id=self.decoder_start_token_id,
            eos_token_id=self.config.eos_token_id,
            attention_mask=attention_mask,
            use_cache=use_cache,
            forced_bos_token_id=forced_bos_token_id,
        ).sequences


class EncoderDecoderTransformer(EncoderDecoderModel):
    r"""The full transformer of the 2017 paper: encoder, decoder and a language-model head.

    .. math::

        z = \operatorname{Encoder}(x),\qquad
        p(y_{t+1} \mid y_{\le t}, x) = \operatorname{softmax}\bigl(
        \operatorname{Decoder}(y_{\le t}, z)_t\, W_\text{lm}^\top + b_\text{lm}\bigr)

    Encoder and decoder share one config (hidden size, heads, layers) but no
    weights; the ``lm_head`` turns each decoder vector into scores over the
    vocabulary.  :func:`~literate_transformer.book.generation.greedy_generate`
    writes a target with it; :mod:`~literate_transformer.book.training`
    trains one from scratch.  With ``final_layer_norm=True`` it is
    :class:`torch.nn.Transformer`, whose stacks end with a layer norm each
    (the 2017 paper's post-LN model has none).  The families of the
    encoder-decoder branch (BART, T5, ...) are built from the same parts in
    :mod:`literate_transformer.models`, under their own names.

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            ``transformers`` config (with BERT's field names).
        norm_first: Pre-LN (``True``) or post-LN (``False``) layers in both stacks.
        final_layer_norm: A layer norm after the last layer of each stack
            (:class:`torch.nn.Transformer` has them).

    Attributes:
        encoder: The book's :class:`~literate_transformer.book.encoder.TransformerEncoder`.
        decoder: A :class:`TransformerDecoder`.
        lm_head: Linear map ``E -> V`` from decoder vectors to next-token scores.
    """

    def __init__(self, config: TransformerConfig | Any, norm_first: bool = True, *, final_layer_norm: bool = False):
        super().__init__()
        config = as_config(config)
        self.config = config
        self.norm_first = check_norm_first(norm_first)
        self.encoder = TransformerEncoder(config, norm_first=norm_first, final_layer_norm=final_layer_norm)
        self.decoder = TransformerDecoder(config, norm_first=norm_first, final_layer_norm=final_layer_norm)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size)

    def head(self, hidden_states: Tensor) -> Tensor:
        """Scores over the vocabulary for the token after each target position, ``(B, T, V)``."""
        return self.lm_head(hidden_states)
