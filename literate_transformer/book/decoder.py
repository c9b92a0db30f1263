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
arrangements the rest of this package uses.  Writing :math:`x` for the target
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

>>> from literate_transformer import TransformerConfig
>>> config = TransformerConfig(vocab_size=20, hidden_size=16, num_hidden_layers=2,
...                            num_attention_heads=2, intermediate_size=32)
>>> _ = torch.manual_seed(0)
>>> model = EncoderDecoderTransformer(config).eval()
>>> source = torch.tensor([[5, 6, 7, 8]])
>>> target = torch.tensor([[1, 9, 10]])
>>> output = model(source, target, return_weights=True)
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

from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from ..core.config import TransformerConfig, as_config
from ..core.masks import causal_mask, combine_masks, padding_mask
from ..core.validation import check_attention_mask, check_hidden_states, check_input_ids, check_tensor
from .attention import MultiHeadAttention
from .embeddings import Embeddings
from .encoder import TransformerEncoder
from .feed_forward import FeedForward

__all__ = [
    "LayerCache",
    "DecoderLayerOutput",
    "DecoderOutput",
    "Seq2SeqOutput",
    "TransformerDecoderLayer",
    "TransformerDecoder",
    "EncoderDecoderTransformer",
]


class LayerCache(NamedTuple):
    """What one decoder layer keeps between generation steps."""

    #: ``(keys, values)`` of the target positions seen so far, each ``(B, H, S, D)`` with ``S`` the number of
    #: those positions; each step appends one position.
    self_attention: tuple[Tensor, Tensor]
    #: ``(keys, values)`` projected from the encoder's output, each ``(B, H, S, D)`` with ``S`` the source
    #: length; computed at the first step and reused unchanged.
    cross_attention: tuple[Tensor, Tensor]


class DecoderLayerOutput(NamedTuple):
    """What :meth:`TransformerDecoderLayer.forward` returns when asked for weights or a cache."""

    #: The layer's output ``(B, T, E)``.
    hidden_state: Tensor
    #: ``(B, H, T, S)`` causal self-attention weights, or ``None``.
    self_attention_weights: Tensor | None
    #: ``(B, H, T, S)`` encoder-decoder weights, or ``None``.
    cross_attention_weights: Tensor | None
    #: The :class:`LayerCache` to pass to the next step, or ``None``.
    cache: LayerCache | None


class DecoderOutput(NamedTuple):
    """What :meth:`TransformerDecoder.forward` returns when asked for weights or a cache."""

    #: The last layer's output ``(B, T, E)``.
    last_hidden_state: Tensor
    #: One ``(B, H, T, S)`` tensor of causal self-attention weights per layer, or ``None``.
    self_attentions: list[Tensor] | None
    #: One ``(B, H, T, S)`` tensor of encoder-decoder weights per layer, or ``None``.
    cross_attentions: list[Tensor] | None
    #: One :class:`LayerCache` per layer, or ``None``.
    past_key_values: list[LayerCache] | None


class Seq2SeqOutput(NamedTuple):
    """What :class:`EncoderDecoderTransformer` returns."""

    #: Next-token scores ``(B, T, V)`` for every target position.
    logits: Tensor
    #: The encoder's output ``(B, S, E)``.
    encoder_last_hidden_state: Tensor
    #: One ``(B, H, S, S)`` tensor per encoder layer, or ``None``.
    encoder_attentions: list[Tensor] | None
    #: One ``(B, H, T, T)`` causal self-attention tensor per decoder layer (``(B, H, T, S)`` with a cache), or
    #: ``None``.
    decoder_attentions: list[Tensor] | None
    #: One ``(B, H, T, S)`` tensor per decoder layer, or ``None``.
    cross_attentions: list[Tensor] | None
    #: The decoder's cache (one :class:`LayerCache` per layer) when ``use_cache`` was set, else ``None``.
    past_key_values: list[LayerCache] | None


def _check_mask(mask: object, name: str, target_shape: tuple[int, ...]) -> Tensor:
    """A ready-made attention mask must broadcast to ``(B, H, T, S)``."""
    mask = check_tensor(mask, name, dtypes=("bool", "float"))
    try:
        broadcast = torch.broadcast_shapes(mask.shape, target_shape)
    except RuntimeError:
        broadcast = None
    if broadcast != torch.Size(target_shape):
        raise ValueError(
            f"{name} must broadcast to (B, H, T, S) = {tuple(target_shape)}, got shape {tuple(mask.shape)}"
        )
    return mask


def _check_encoder_states(encoder_hidden_states: object, batch_size: int, hidden_size: int) -> Tensor:
    """The encoder's output must exist and match the decoder's batch and hidden size."""
    if encoder_hidden_states is None:
        raise ValueError(
            "encoder_hidden_states is required: the decoder's cross-attention takes its keys and values "
            "from the encoder's output, a (B, S, E) tensor"
        )
    states = check_tensor(encoder_hidden_states, "encoder_hidden_states", ndim=3, dtypes=("float",))
    if states.shape[-1] != hidden_size:
        raise ValueError(
            f"encoder_hidden_states has hidden size {states.shape[-1]}, but the decoder's hidden_size is "
            f"{hidden_size}: encoder and decoder must share E"
        )
    if states.shape[0] != batch_size:
        raise ValueError(
            f"encoder_hidden_states has batch size {states.shape[0]}, but the decoder input has batch size "
            f"{batch_size}: each target needs its own source"
        )
    return states


class TransformerDecoderLayer(nn.Module):
    r"""One decoder layer: masked self-attention, encoder-decoder attention, feed-forward.

    .. math::

        x \leftarrow x + \operatorname{SelfAttn}(\operatorname{LN}_1 x),\quad
        x \leftarrow x + \operatorname{CrossAttn}(\operatorname{LN}_2 x, z),\quad
        x \leftarrow x + \operatorname{FFN}(\operatorname{LN}_3 x)

    (pre-LN, ``norm_first=True``); with ``norm_first=False`` each layer norm
    is applied *after* its residual sum instead, as in the 2017 paper and
    :class:`torch.nn.TransformerDecoderLayer` by default.

    The layer does not build masks: it applies the ones it is given.
    :class:`TransformerDecoder` builds the causal mask.

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            ``transformers`` config.
        norm_first: Pre-LN (``True``, the book) or post-LN (``False``).

    Attributes:
        self_attention: Causal multi-head self-attention over the target.
        cross_attention: Multi-head attention from the target (queries) to
            the encoder's output (keys and values).
        feed_forward: The position-wise feed-forward network.
        layer_norm_1: Layer norm of the self-attention sub-layer.
        layer_norm_2: Layer norm of the cross-attention sub-layer.
        layer_norm_3: Layer norm of the feed-forward sub-layer.
        dropout: Dropout on the attention sub-layers' outputs
            (``config.hidden_dropout_prob``; the feed-forward network has its own).

    >>> from literate_transformer import TransformerConfig
    >>> config = TransformerConfig(hidden_size=8, num_attention_heads=2, intermediate_size=16)
    >>> layer = TransformerDecoderLayer(config)
    >>> target, source = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    >>> layer(target, source, causal_mask(3)).shape
    torch.Size([2, 3, 8])
    """

    def __init__(self, config: TransformerConfig | Any, norm_first: bool = True) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        self.norm_first = bool(norm_first)
        self.self_attention = MultiHeadAttention(config)
        self.cross_attention = MultiHeadAttention(config)
        self.feed_forward = FeedForward(config)
        self.layer_norm_1 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.layer_norm_2 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.layer_norm_3 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self,
        hidden_state: Tensor,
        encoder_hidden_states: Tensor,
        self_attention_mask: Tensor | None = None,
        encoder_attention_mask: Tensor | None = None,
        *,
        return_weights: bool = False,
        past_key_value: LayerCache | None = None,
        use_cache: bool = False,
    ) -> Tensor | DecoderLayerOutput:
        """Run the three sub-layers.

        Args:
            hidden_state: Target hidden states ``(B, T, E)`` (with a cache:
                only the new positions, usually ``T = 1``).
            encoder_hidden_states: The encoder's output ``(B, S, E)``.
            self_attention_mask: Boolean (``True`` = may attend) or additive
                mask broadcastable to ``(B, H, T, S)`` over the target keys,
                cached ones included; usually causal.  ``None`` lets every
                position see every other (no causality).
            encoder_attention_mask: Mask broadcastable to ``(B, H, T, S)``
                over the source keys, e.g.
                :func:`~literate_transformer.core.masks.padding_mask` of the
                source's ``attention_mask``.
            return_weights: Also return both attention weight tensors.
            past_key_value: The :class:`LayerCache` of the previous step.
            use_cache: Return the updated :class:`LayerCache`.

        Returns:
            The new hidden states ``(B, T, E)``; a :class:`DecoderLayerOutput`
            when ``return_weights`` or ``use_cache`` is set.

        Raises:
            ValueError: if ``encoder_hidden_states`` is missing or its batch or
                hidden size differs from ``hidden_state``'s, or a mask does not
                broadcast to ``(B, H, T, S)``.
            TypeError: if an input is not a tensor of a suitable dtype.
        """
        config = self.config
        hidden_state = check_hidden_states(hidden_state, config.hidden_size, "hidden_state")
        batch_size, target_length, _ = hidden_state.shape
        encoder_hidden_states = _check_encoder_states(encoder_hidden_states, batch_size, config.hidden_size)
        past_self = past_cross = None
        if past_key_value is not None:
            if not isinstance(past_key_value, LayerCache):
                raise TypeError(f"past_key_value must be a LayerCache, got {type(past_key_value).__name__}")
            past_self, past_cross = past_key_value
        past_length = 0 if past_self is None else past_self[0].shape[2]
        heads = config.num_attention_heads
        if self_attention_mask is not None:
            _check_mask(
                self_attention_mask,
                "self_attention_mask",
                (batch_size, heads, target_length, past_length + target_length),
            )
        if encoder_attention_mask is not None:
            source_length = encoder_hidden_states.shape[1]
            _check_mask(
                encoder_attention_mask, "encoder_attention_mask", (batch_size, heads, target_length, source_length)
            )

        # 1) Masked self-attention: each target position mixes the target
        #    positions up to itself (the mask hides the future); with a cache
        #    the new keys/values are appended after the cached ones.
        residual = hidden_state  # (B, T, E)
        if self.norm_first:
            hidden_state = self.layer_norm_1(hidden_state)  # (B, T, E)
        self_attention = self.self_attention(
            hidden_state,
            mask=self_attention_mask,
            return_weights=return_weights,
            past_key_value=past_self,
            use_cache=True,
        )
        # Residual connection around the sub-layer: x + Dropout(SelfAttn(.)).
        hidden_state = residual + self.dropout(self_attention.output)  # (B, T, E)
        if not self.norm_first:
            hidden_state = self.layer_norm_1(hidden_state)  # (B, T, E)

        # 2) Encoder-decoder attention: queries from the target, keys and
        #    values from the encoder output z.  They depend on z alone, so a
        #    cache computes them at the first step and reuses them after.
        residual = hidden_state  # (B, T, E)
        if self.norm_first:
            hidden_state = self.layer_norm_2(hidden_state)  # (B, T, E)
        if past_cross is None:
            # K = z W^K and V = z W^V, per head.
            past_cross = self.cross_attention.project_key_value(encoder_hidden_states)
        cross_attention = self.cross_attention(
            hidden_state,
            mask=encoder_attention_mask,
            return_weights=return_weights,
            key_value=past_cross,
            use_cache=True,
        )
        # Residual connection: the source enters the target's stream here.
        hidden_state = residual + self.dropout(cross_attention.output)  # (B, T, E)
        if not self.norm_first:
            hidden_state = self.layer_norm_2(hidden_state)  # (B, T, E)

        # 3) Position-wise feed-forward network, with its residual connection.
        residual = hidden_state  # (B, T, E)
        if self.norm_first:
            hidden_state = self.layer_norm_3(hidden_state)  # (B, T, E)
        hidden_state = residual + self.feed_forward(hidden_state)  # (B, T, E)
        if not self.norm_first:
            hidden_state = self.layer_norm_3(hidden_state)  # (B, T, E)

        if not (return_weights or use_cache):
            return hidden_state
        cache = LayerCache(self_attention.key_value, cross_attention.key_value) if use_cache else None
        return DecoderLayerOutput(hidden_state, self_attention.weights, cross_attention.weights, cache)


class TransformerDecoder(nn.Module):
    r"""Token embeddings and a stack of :class:`TransformerDecoderLayer`.

    The decoder builds its masks itself: the causal mask
    (:func:`~literate_transformer.core.masks.causal_mask`), combined with the
    target's padding mask when ``attention_mask`` is given, for
    self-attention; the source's padding mask for cross-attention.

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            ``transformers`` config.
        norm_first: Pre-LN (``True``) or post-LN (``False``) layers.

    Attributes:
        embeddings: Token + learned position embeddings of the target
            (:class:`~literate_transformer.book.embeddings.Embeddings`).
        layers: ``config.num_hidden_layers`` decoder layers.

    >>> from literate_transformer import TransformerConfig
    >>> config = TransformerConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1,
    ...                            num_attention_heads=2, intermediate_size=16)
    >>> decoder = TransformerDecoder(config)
    >>> decoder(torch.tensor([[1, 2, 3]]), torch.randn(1, 4, 8)).shape
    torch.Size([1, 3, 8])
    """

    def __init__(self, config: TransformerConfig | Any, norm_first: bool = True) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        self.norm_first = bool(norm_first)
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(
            [TransformerDecoderLayer(config, norm_first=norm_first) for _ in range(config.num_hidden_layers)]
        )

    def _past_length(self, past_key_values: object) -> int:
        """Number of target positions held in a cache (0 without one)."""
        if past_key_values is None:
            return 0
        if not isinstance(past_key_values, (list, tuple)) or len(past_key_values) != len(self.layers):
            raise ValueError(
                f"past_key_values must hold one LayerCache per decoder layer ({len(self.layers)}), "
                f"got {type(past_key_values).__name__}"
                + (f" of length {len(past_key_values)}" if isinstance(past_key_values, (list, tuple)) else "")
            )
        first = past_key_values[0]
        if not isinstance(first, LayerCache):
            raise TypeError(f"past_key_values must hold LayerCache entries, got {type(first).__name__}")
        return first.self_attention[0].shape[2]

    def forward(
        self,
        input_ids: Tensor,
        encoder_hidden_states: Tensor,
        attention_mask: Tensor | None = None,
        encoder_attention_mask: Tensor | None = None,
        *,
        return_weights: bool = False,
        past_key_values: list[LayerCache] | None = None,
        use_cache: bool = False,
    ) -> Tensor | DecoderOutput:
        """Decode: target tokens in, contextual target vectors out.

        Args:
            input_ids: Target token ids ``(B, T)`` (with a cache: only the new
                tokens).
            encoder_hidden_states: The encoder's output ``(B, S, E)``.
            attention_mask: The target's ``(B, past + T)`` padding mask (1 =
                real token), covering cached positions too; ``None`` = no padding.
            encoder_attention_mask: The source's ``(B, S)`` padding mask.
            return_weights: Also return every layer's attention weights.
            past_key_values: The cache returned by the previous step.
            use_cache: Return the updated cache.

        Returns:
            The last layer's hidden states ``(B, T, E)``; a
            :class:`DecoderOutput` when ``return_weights`` or ``use_cache``.

        Raises:
            ValueError: for token ids out of range, more positions than
                ``max_position_embeddings``, masks of the wrong shape, or
                encoder states that are missing or do not match.
            TypeError: for inputs of the wrong type or dtype.
        """
        config = self.config
        past_length = self._past_length(past_key_values)
        input_ids = check_input_ids(
            input_ids, config.vocab_size, config.max_position_embeddings, name="input_ids", past_length=past_length
        )
        batch_size, target_length = input_ids.shape
        key_length = past_length + target_length
        encoder_hidden_states = _check_encoder_states(encoder_hidden_states, batch_size, config.hidden_size)
        source_length = encoder_hidden_states.shape[1]
        if attention_mask is not None:
            attention_mask = check_attention_mask(attention_mask, batch_size, key_length, name="attention_mask")
        if encoder_attention_mask is not None:
            encoder_attention_mask = check_attention_mask(
                encoder_attention_mask, batch_size, source_length, name="encoder_attention_mask"
            )

        # Token + position embeddings; positions continue after the cached ones.
        hidden_state = self.embeddings(input_ids, past_length=past_length)  # (B, T, E)
        # Look-ahead mask: query i sits at position past + i and sees keys 0 .. past + i.
        look_ahead = causal_mask(target_length, key_length, device=input_ids.device)  # (T, S)
        # ... and never a padded target key: (T, S) & (B, 1, 1, S) -> (B, 1, T, S).
        target_padding = None if attention_mask is None else padding_mask(attention_mask)
        self_attention_mask = combine_masks(look_ahead, target_padding)
        # Cross-attention sees every real source token: (B, 1, 1, S), no causality.
        source_padding = None if encoder_attention_mask is None else padding_mask(encoder_attention_mask)

        self_attentions: list[Tensor] = []
        cross_attentions: list[Tensor] = []
        caches: list[LayerCache] = []
        for index, layer in enumerate(self.layers):
            # One layer: masked self-attention, cross-attention, feed-forward (and its cache).
            output = layer(
                hidden_state,
                encoder_hidden_states,
                self_attention_mask,
                source_padding,
                return_weights=return_weights,
                past_key_value=None if past_key_values is None else past_key_values[index],
                use_cache=True,
            )
            hidden_state = output.hidden_state  # (B, T, E)
            self_attentions.append(output.self_attention_weights)
            cross_attentions.append(output.cross_attention_weights)
            caches.append(output.cache)

        if not (return_weights or use_cache):
            return hidden_state
        return DecoderOutput(
            hidden_state,
            self_attentions if return_weights else None,
            cross_attentions if return_weights else None,
            caches if use_cache else None,
        )


class EncoderDecoderTransformer(nn.Module):
    r"""The full transformer of the 2017 paper: encoder, decoder and a language-model head.

    .. math::

        z = \operatorname{Encoder}(x),\qquad
        p(y_{t+1} \mid y_{\le t}, x) = \operatorname{softmax}\bigl(
        \operatorname{Decoder}(y_{\le t}, z)_t\, W_\text{lm}^\top + b_\text{lm}\bigr)

    Encoder and decoder share one config (hidden size, heads, layers) but no
    weights; the ``lm_head`` turns each decoder vector into scores over the
    vocabulary.  :func:`~literate_transformer.book.generation.greedy_generate`
    writes a target with it; :mod:`~literate_transformer.book.training` trains one
    from scratch.

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            ``transformers`` config.
        norm_first: Pre-LN (``True``) or post-LN (``False``) layers in both stacks.

    Attributes:
        encoder: The book's :class:`~literate_transformer.book.encoder.TransformerEncoder`.
        decoder: A :class:`TransformerDecoder`.
        lm_head: Linear map ``E -> V`` from decoder vectors to next-token scores.
    """

    def __init__(self, config: TransformerConfig | Any, norm_first: bool = True) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        self.norm_first = bool(norm_first)
        self.encoder = TransformerEncoder(config, norm_first=norm_first)
        self.decoder = TransformerDecoder(config, norm_first=norm_first)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size)

    def encode(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, *, return_weights: bool = False
    ) -> tuple[Tensor, list[Tensor] | None]:
        """Run the encoder once.

        Returns:
            ``(encoder_hidden_states, encoder_attentions)``: ``(B, S, E)`` and
            one ``(B, H, S, S)`` tensor per layer (``None`` unless
            ``return_weights``).
        """
        output = self.encoder(input_ids, attention_mask=attention_mask, return_weights=return_weights)
        if not return_weights:
            return output, None
        return output[0], list(output[1])

    def decode(
        self,
        decoder_input_ids: Tensor,
        encoder_hidden_states: Tensor,
        encoder_attention_mask: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
        *,
        return_weights: bool = False,
        past_key_values: list[LayerCache] | None = None,
        use_cache: bool = False,
    ) -> Seq2SeqOutput:
        """Run the decoder and the LM head on already-encoded source states.

        Arguments as in :meth:`TransformerDecoder.forward`.

        Returns:
            A :class:`Seq2SeqOutput` (without encoder attentions).
        """
        output = self.decoder(
            decoder_input_ids,
            encoder_hidden_states,
            decoder_attention_mask,
            encoder_attention_mask,
            return_weights=return_weights,
            past_key_values=past_key_values,
            use_cache=True,
        )
        # Scores over the vocabulary for the token after each target position.
        logits = self.lm_head(output.last_hidden_state)  # (B, T, V)
        return Seq2SeqOutput(
            logits,
            encoder_hidden_states,
            None,
            output.self_attentions,
            output.cross_attentions,
            output.past_key_values if use_cache else None,
        )

    def forward(
        self,
        input_ids: Tensor,
        decoder_input_ids: Tensor,
        attention_mask: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
        return_weights: bool = False,
    ) -> Seq2SeqOutput:
        """Encode the source, decode the (teacher-forced) target, score the next tokens.

        Args:
            input_ids: Source token ids ``(B, S)``.
            decoder_input_ids: Target token ids ``(B, T)``, starting with the
                start token (the labels shifted right by one).
            attention_mask: The source's ``(B, S)`` padding mask.
            decoder_attention_mask: The target's ``(B, T)`` padding mask.
            return_weights: Also return ``encoder_attentions``,
                ``decoder_attentions`` and ``cross_attentions``, lists of
                ``(B, H, T, S)`` tensors, one per layer (the input of bertviz's
                encoder-decoder ``head_view``).

        Returns:
            A :class:`Seq2SeqOutput` with ``logits`` ``(B, T, V)``.
        """
        # 1) The encoder reads the whole source, in both directions.
        encoder_hidden_states, encoder_attentions = self.encode(
            input_ids, attention_mask, return_weights=return_weights
        )
        # 2) The decoder reads the target (causally) and the source (cross-attention).
        decoded = self.decode(
            decoder_input_ids,
            encoder_hidden_states,
            attention_mask,
            decoder_attention_mask,
            return_weights=return_weights,
        )
        return decoded._replace(encoder_attentions=encoder_attentions)
