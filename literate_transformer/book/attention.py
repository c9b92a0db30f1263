r"""Attention: every token looks at every other token and takes what it needs.

Self-attention replaces each token vector by a weighted average of the
vectors of all tokens in the sequence, with weights that depend on how well
the tokens "match".  It is the one operation in a transformer that mixes
information *between* positions; everything else (the feed-forward layer,
layer norm) acts on each position separately.

Scaled dot-product attention
----------------------------
Each token vector is projected three times, into a **query** (what am I
looking for?), a **key** (what do I contain?) and a **value** (what do I
hand over if chosen?).  With the queries of :math:`T` positions stacked into
:math:`Q \in \mathbb{R}^{T \times D}` and the keys and values of :math:`S`
positions into :math:`K \in \mathbb{R}^{S \times D}` and
:math:`V \in \mathbb{R}^{S \times D_v}`,

.. math::

    \operatorname{Attention}(Q, K, V) =
    \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{D}} + M\right) V .

:math:`Q K^\top` holds one similarity score per (query, key) pair; dividing by
:math:`\sqrt{D}` keeps the scores' variance near 1 whatever the head size, so
the softmax does not saturate; :math:`M` is the mask (0 where a query may
look, a very negative number where it may not, see
:mod:`~literate_transformer.core.masks`); the softmax turns each row of scores
into weights that sum to 1; and multiplying by :math:`V` averages the values
with those weights.  :func:`scaled_dot_product_attention` is this equation,
one line per term, and a test shows it equals PyTorch's fused
:func:`torch.nn.functional.scaled_dot_product_attention`.

Many heads
----------
One set of weights can only express one notion of "match".  Multi-head
attention runs :math:`H` heads side by side, each with its own small
projections of size :math:`D = E / H`, concatenates their outputs back to
width :math:`E` and mixes them with one more linear layer:

.. math::

    \operatorname{MultiHead}(X) = \operatorname{Concat}(\mathrm{head}_1, \dots,
    \mathrm{head}_H)\, W^O, \qquad
    \mathrm{head}_h = \operatorname{Attention}(X W^Q_h, X W^K_h, X W^V_h).

Because each head has size :math:`E/H`, the :math:`H` heads together cost
about as much as a single head of size :math:`E`.  For BERT-base, :math:`E =
768` is split into 12 heads of 64 features.

How this maps to the book and to HuggingFace
--------------------------------------------
* Chapter 3 of *Natural Language Processing with Transformers* builds
  ``scaled_dot_product_attention``, an ``AttentionHead`` with three
  ``nn.Linear`` layers ``q``, ``k``, ``v``, and a ``MultiHeadAttention`` that
  keeps one ``AttentionHead`` per head in ``heads`` and concatenates their
  outputs before ``output_linear``.  :class:`AttentionHead` and
  :class:`MultiHeadAttention` keep those names, so the book's code and this
  page read side by side.
* HuggingFace's ``BertSelfAttention`` computes the same thing with *fused*
  projections: one ``query`` layer of shape :math:`E \to E` holds the query
  weights of all heads stacked (head :math:`h` owns rows :math:`hD` to
  :math:`(h+1)D - 1`), and ``transpose_for_scores`` reshapes its output from
  ``(B, T, E)`` to ``(B, H, T, D)``.  Stacking our per-head ``q`` weights
  gives exactly that matrix; ``BertSelfOutput.dense`` is our
  ``output_linear``.  HuggingFace's ``attention_scores`` are our ``scores``,
  its ``attention_probs`` our ``weights``, its ``context_layer`` our
  ``context``.
* :class:`torch.nn.MultiheadAttention` fuses further still: its
  ``in_proj_weight`` is the query, key and value matrices stacked on top of
  each other.  The tests load our weights into it and get the same output,
  the comparison one of the source notebooks left as "TBD".
* The same module also does **cross-attention** (queries from the decoder,
  keys and values from the encoder: ``key_value_states``) and **incremental
  decoding** (keys and values of earlier positions kept in a cache:
  ``past_key_value``, ``use_cache``), which the decoder builds on.

What the source notebooks got wrong
-----------------------------------
* One notebook builds a single ``AttentionHead(embed_dim, num_heads)``, that
  is one head whose *size* is the number of heads (12).  Multi-head attention
  needs ``num_heads`` heads of size ``hidden_size // num_heads`` each.
  :class:`AttentionHead` refuses a head size that does not fit, and
  :class:`MultiHeadAttention` builds ``config.num_attention_heads`` heads of
  ``config.head_size``.
* The masked attention filled forbidden scores with ``-inf``.  A row whose
  keys are *all* masked (a padding query, or an example that is all padding)
  becomes :math:`0/0 =` NaN after the softmax, and NaN spreads everywhere.
  Here masking goes through :func:`~literate_transformer.core.masks.masked_fill_scores`,
  which uses the most negative *finite* number of the dtype: such a row gets
  uniform weights and no NaN appears, in fp32, fp16 and bf16.

>>> import torch
>>> from literate_transformer import TransformerConfig
>>> _ = torch.manual_seed(0)
>>> config = TransformerConfig(hidden_size=24, num_attention_heads=4, attention_probs_dropout_prob=0.0)
>>> attention = MultiHeadAttention(config)
>>> hidden_state = torch.randn(2, 3, 24)                    # (B, T, E)
>>> attention(hidden_state).shape
torch.Size([2, 3, 24])
>>> output, weights, _ = attention(hidden_state, return_weights=True)
>>> weights.shape                                           # (B, H, T, S)
torch.Size([2, 4, 3, 3])
>>> torch.allclose(weights.sum(dim=-1), torch.ones(2, 4, 3))
True

BERT-base's numbers (the defaults of :class:`~literate_transformer.core.config.TransformerConfig`):

>>> bert_base = TransformerConfig()
>>> bert_base.hidden_size, bert_base.num_attention_heads, bert_base.head_size
(768, 12, 64)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.config import as_config
from ..core.masks import masked_fill_scores, to_additive
from ..core.validation import check_hidden_states, check_tensor

__all__ = ["scaled_dot_product_attention", "AttentionHead", "MultiHeadAttention", "AttentionOutput"]


class AttentionOutput(NamedTuple):
    """What :meth:`MultiHeadAttention.forward` returns when asked for more than the output."""

    #: The attention output ``(B, T, E)``.
    output: Tensor
    #: The attention weights ``(B, H, T, S)`` (before dropout), or ``None``
    #: unless ``return_weights=True``.
    weights: Tensor | None
    #: The ``(keys, values)`` this call attended to, each ``(B, H, S, D)``
    #: and including the past ones, or ``None`` unless ``use_cache=True``.
    #: Pass it back as ``past_key_value`` (self-attention) or ``key_value``
    #: (cross-attention) on the next call.
    key_value: tuple[Tensor, Tensor] | None


def _check_mask(mask: object, scores_shape: torch.Size, name: str = "mask") -> Tensor:
    """A boolean or additive mask that broadcasts to the scores' shape ``(..., T, S)``."""
    mask = check_tensor(mask, name, dtypes=("bool", "float"))
    try:
        broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        broadcast = None
    if broadcast != scores_shape:
        raise ValueError(
            f"{name} must broadcast to the attention scores' shape {tuple(scores_shape)} (..., T, S), "
            f"got shape {tuple(mask.shape)}; turn a tokenizer's (B, S) attention_mask into a (B, 1, 1, S) "
            "mask with literate_transformer.core.masks.padding_mask"
        )
    return mask


def _check_query_key_value(query: object, key: object, value: object) -> tuple[Tensor, Tensor, Tensor]:
    """query (..., T, D), key (..., S, D) and value (..., S, Dv) whose sizes agree."""
    query = check_tensor(query, "query", dtypes=("float",))
    key = check_tensor(key, "key", dtypes=("float",))
    value = check_tensor(value, "value", dtypes=("float",))
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if tensor.dim() < 2:
            raise ValueError(
                f"{name} must have at least 2 dimensions (..., length, features), got shape {tuple(tensor.shape)}"
            )
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must have the same head size D (last dimension): "
            f"query has shape {tuple(query.shape)}, key has shape {tuple(key.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same length S (second-to-last dimension): "
            f"key has shape {tuple(key.shape)}, value has shape {tuple(value.shape)}"
        )
    try:
        torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except RuntimeError:
        raise ValueError(
            "query, key and value must have matching (broadcastable) leading dimensions: got shapes "
            f"{tuple(query.shape)}, {tuple(key.shape)} and {tuple(value.shape)}"
        ) from None
    if not query.dtype == key.dtype == value.dtype:
        raise TypeError(f"query, key and value must share a dtype, got {query.dtype}, {key.dtype} and {value.dtype}")
    return query, key, value


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    dropout: Callable[[Tensor], Tensor] | float | None = None,
    return_weights: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    r"""Scaled dot-product attention, :math:`\operatorname{softmax}(QK^\top/\sqrt{D} + M)\,V`.

    Works on any number of leading (batch, head) dimensions: a single head
    passes ``(B, T, D)`` tensors, :class:`MultiHeadAttention` passes all
    heads at once as ``(B, H, T, D)``.

    Args:
        query: Queries ``(..., T, D)``.
        key: Keys ``(..., S, D)``.
        value: Values ``(..., S, Dv)``.
        mask: ``None``, a boolean mask (``True`` = may attend) or an additive
            float mask (0 = may attend, very negative = may not),
            broadcastable to ``(..., T, S)``.
        dropout: Dropout applied to the attention weights before they
            average the values: a module such as :class:`torch.nn.Dropout`
            (which is active only in training mode), a probability (applied
            always, like the ``dropout_p`` of
            :func:`torch.nn.functional.scaled_dot_product_attention`), or
            ``None``.
        return_weights: Also return the attention weights (before dropout).

    Returns:
        The attended values ``(..., T, Dv)``, and the weights ``(..., T, S)``
        when ``return_weights`` is true.

    Raises:
        TypeError: if an input is not a floating-point tensor, or the mask
            is neither boolean nor floating point.
        ValueError: if the sizes of ``query``, ``key`` and ``value`` disagree
            or ``mask`` does not broadcast to ``(..., T, S)``.

    >>> q = k = v = torch.eye(2)[None]  # two orthogonal tokens; the first may not see the second
    >>> scaled_dot_product_attention(q, k, v, mask=torch.tensor([[True, False], [True, True]]))
    tensor([[[1.0000, 0.0000],
             [0.3302, 0.6698]]])
    """
    query, key, value = _check_query_key_value(query, key, value)
    scores_shape = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2]) + (query.shape[-2], key.shape[-2])
    if mask is not None:
        mask = _check_mask(mask, scores_shape)
    if dropout is not None and not callable(dropout) and not isinstance(dropout, float):
        raise TypeError(
            f"dropout must be a module (e.g. torch.nn.Dropout), a float probability or None, got {dropout!r}"
        )
    head_size = query.shape[-1]
    # One similarity score per (query, key) pair, Q K^T / sqrt(D): shape (..., T, S).
    scores = query @ key.transpose(-2, -1) / math.sqrt(head_size)
    # Forbidden pairs get the most negative finite score (not -inf: no NaN).
    scores = masked_fill_scores(scores, mask)
    # Each query's scores become weights over the keys that sum to 1: (..., T, S).
    weights = torch.softmax(scores, dim=-1)
    # Dropout on the weights (HuggingFace's BERT does it too), training only.
    dropped = (
        weights
        if dropout is None
        else (F.dropout(weights, dropout) if isinstance(dropout, float) else dropout(weights))
    )
    # Each query's output is the weighted average of the values: (..., T, Dv).
    context = dropped @ value
    return (context, weights) if return_weights else context


class AttentionHead(nn.Module):
    r"""One attention head: its own query, key and value projections.

    .. math::

        \mathrm{head}(X, Y) = \operatorname{Attention}(X W^Q, Y W^K, Y W^V),

    with :math:`Y = X` for self-attention and :math:`Y` the encoder's states
    for cross-attention.

    Args:
        embed_dim: Width ``E`` of the token vectors it reads.
        head_dim: Width ``D`` of its queries, keys and values; in a
            multi-head layer ``embed_dim // num_heads``, never the number of
            heads.

    Raises:
        ValueError: if ``head_dim`` is not between 1 and ``embed_dim``.

    >>> head = AttentionHead(embed_dim=24, head_dim=6)
    >>> head(torch.randn(2, 3, 24)).shape                     # (B, T, D)
    torch.Size([2, 3, 6])
    """

    def __init__(self, embed_dim: int, head_dim: int) -> None:
        super().__init__()
        for name, value in (("embed_dim", embed_dim), ("head_dim", head_dim)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if head_dim > embed_dim:
            raise ValueError(
                f"head_dim ({head_dim}) must not exceed embed_dim ({embed_dim}): a head of a multi-head layer "
                "has embed_dim // num_heads features"
            )
        self.embed_dim = embed_dim
        self.head_dim = head_dim
        #: The query projection :math:`W^Q` (E -> D).
        self.q = nn.Linear(embed_dim, head_dim)
        #: The key projection :math:`W^K` (E -> D).
        self.k = nn.Linear(embed_dim, head_dim)
        #: The value projection :math:`W^V` (E -> D).
        self.v = nn.Linear(embed_dim, head_dim)

    def forward(
        self,
        hidden_state: Tensor,
        key_value_states: Tensor | None = None,
        mask: Tensor | None = None,
        return_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend from ``hidden_state`` to itself (or to ``key_value_states``).

        Args:
            hidden_state: The token vectors that ask, ``(B, T, E)``.
            key_value_states: The token vectors that answer, ``(B, S, E)``;
                ``None`` means ``hidden_state`` (self-attention).
            mask: Boolean (``True`` = may attend) or additive mask
                broadcastable to ``(B, T, S)``.
            return_weights: Also return the weights ``(B, T, S)``.

        Returns:
            The head's output ``(B, T, D)`` (and the weights).
        """
        check_hidden_states(hidden_state, self.embed_dim, "hidden_state")
        if key_value_states is None:
            key_value_states = hidden_state
        else:
            check_hidden_states(key_value_states, self.embed_dim, "key_value_states")
        # What each position looks for, X W^Q.
        query = self.q(hidden_state)  # (B, T, D)
        # What each position offers to be matched on, Y W^K.
        key = self.k(key_value_states)  # (B, S, D)
        # What each position hands over when matched, Y W^V.
        value = self.v(key_value_states)  # (B, S, D)
        return scaled_dot_product_attention(query, key, value, mask=mask, return_weights=return_weights)


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention: :math:`H` heads side by side, then one linear layer.

    .. math::

        \operatorname{MultiHead}(X, Y) = \operatorname{Concat}(\mathrm{head}_1,
        \dots, \mathrm{head}_H)\, W^O + b^O .

    The heads are kept as the book keeps them, one :class:`AttentionHead` per
    head in :attr:`heads`; :meth:`forward` stacks their projections into
    ``(B, H, ., D)`` tensors and attends with all heads at once, which is
    the same as calling each head and concatenating (a test checks it) and
    is what HuggingFace's ``transpose_for_scores`` sets up.

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            ``transformers`` config; uses ``hidden_size``,
            ``num_attention_heads``, ``attention_probs_dropout_prob`` and
            ``attn_implementation`` (``"sdpa"`` runs PyTorch's fused kernel
            when no weights are requested).
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        self.hidden_size = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_size = config.head_size
        #: One :class:`AttentionHead` of size ``hidden_size // num_attention_heads`` per head.
        self.heads = nn.ModuleList(AttentionHead(self.hidden_size, self.head_size) for _ in range(self.num_heads))
        #: :math:`W^O`, mixing the concatenated heads (E -> E).
        self.output_linear = nn.Linear(self.hidden_size, self.hidden_size)
        #: Dropout on the attention weights (``attention_probs_dropout_prob``).
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def project_key_value(self, states: Tensor) -> tuple[Tensor, Tensor]:
        """The keys and values of every head for ``states``.

        Args:
            states: Token vectors ``(B, S, E)`` (the layer's own input, or the
                encoder's output for cross-attention).

        Returns:
            ``(keys, values)``, each ``(B, H, S, D)``; pass them as
            ``key_value`` to reuse them (the encoder's keys and values are the
            same for every decoding step).
        """
        check_hidden_states(states, self.hidden_size, "states")
        # Every head's keys Y W^K_h, stacked along a new head dimension.
        keys = torch.stack([head.k(states) for head in self.heads], dim=1)  # (B, H, S, D)
        # Every head's values Y W^V_h, likewise.
        values = torch.stack([head.v(states) for head in self.heads], dim=1)  # (B, H, S, D)
        return keys, values

    def _check_key_value(self, pair: object, name: str, batch_size: int) -> tuple[Tensor, Tensor]:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"{name} must be a (keys, values) pair of tensors, got {type(pair).__name__}")
        shape = (batch_size, self.num_heads, None, self.head_size)
        keys = check_tensor(pair[0], f"{name}[0] (keys)", dtypes=("float",), shape=shape)
        values = check_tensor(pair[1], f"{name}[1] (values)", dtypes=("float",), shape=shape)
        if keys.shape != values.shape:
            raise ValueError(
                f"{name}: keys and values must have the same shape, got {tuple(keys.shape)} and {tuple(values.shape)}"
            )
        return keys, values

    def forward(
        self,
        hidden_state: Tensor,
        key_value_states: Tensor | None = None,
        mask: Tensor | None = None,
        *,
        return_weights: bool = False,
        past_key_value: tuple[Tensor, Tensor] | None = None,
        key_value: tuple[Tensor, Tensor] | None = None,
        use_cache: bool = False,
    ) -> Tensor | AttentionOutput:
        """Self-attention, cross-attention, or one step of cached decoding.

        Args:
            hidden_state: The queries' token vectors ``(B, T, E)``.
            key_value_states: For cross-attention, the encoder's output
                ``(B, S, E)``; ``None`` for self-attention.
            mask: Boolean (``True`` = may attend) or additive mask,
                broadcastable to ``(B, H, T, S)`` where ``S`` counts the past
                keys too.  A 2-D mask is read as ``(T, S)`` (e.g.
                :func:`~literate_transformer.core.masks.causal_mask`); make a
                tokenizer's ``(B, S)`` mask a ``(B, 1, 1, S)`` one with
                :func:`~literate_transformer.core.masks.padding_mask`.
            return_weights: Return the attention weights ``(B, H, T, S)``.
            past_key_value: Cached ``(keys, values)`` of earlier positions,
                each ``(B, H, S_past, D)``; the new ones are appended after
                them (incremental self-attention).
            key_value: Precomputed ``(keys, values)``, each ``(B, H, S, D)``
                (from :meth:`project_key_value` or an earlier call's cache);
                nothing is projected.
            use_cache: Return the ``(keys, values)`` used, to pass back on the
                next call.

        Returns:
            The output ``(B, T, E)``, or an :class:`AttentionOutput` when
            ``return_weights`` or ``use_cache`` is set.

        Raises:
            TypeError: for a non-tensor or wrongly typed input.
            ValueError: for inputs whose sizes disagree with the config or
                each other, naming the argument.
        """
        check_hidden_states(hidden_state, self.hidden_size, "hidden_state")
        batch_size, query_length, _ = hidden_state.shape
        # The keys/values: given, projected from the encoder, or from the input itself.
        if key_value is not None:
            key, value = self._check_key_value(key_value, "key_value", batch_size)
        elif key_value_states is not None:
            check_hidden_states(key_value_states, self.hidden_size, "key_value_states")
            if key_value_states.shape[0] != batch_size:
                raise ValueError(
                    f"key_value_states must have batch size {batch_size} like hidden_state, "
                    f"got shape {tuple(key_value_states.shape)}"
                )
            key, value = self.project_key_value(key_value_states)
        else:
            key, value = self.project_key_value(hidden_state)
        if past_key_value is not None:
            past_key, past_value = self._check_key_value(past_key_value, "past_key_value", batch_size)
            # Earlier positions' keys first, then the new ones: S = S_past + T.
            key = torch.cat([past_key, key], dim=2)  # (B, H, S, D)
            value = torch.cat([past_value, value], dim=2)  # (B, H, S, D)
        # Every head's queries X W^Q_h, stacked along a new head dimension.
        query = torch.stack([head.q(hidden_state) for head in self.heads], dim=1)  # (B, H, T, D)
        if self.config.attn_implementation == "sdpa" and not return_weights:
            context = self._fused_attention(query, key, value, mask)  # (B, H, T, D)
            weights = None
        else:
            # softmax(Q K^T / sqrt(D) + M) V for all heads at once.
            context, weights = scaled_dot_product_attention(
                query, key, value, mask=mask, dropout=self.dropout, return_weights=True
            )
        # Concat(head_1, ..., head_H): heads back next to each other.
        context = context.transpose(1, 2).reshape(batch_size, query_length, self.hidden_size)  # (B, T, E)
        # Mix the heads, Concat(...) W^O + b^O.
        output = self.output_linear(context)  # (B, T, E)
        if not return_weights and not use_cache:
            return output
        return AttentionOutput(output, weights if return_weights else None, (key, value) if use_cache else None)

    def _fused_attention(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        """The same attention through :func:`torch.nn.functional.scaled_dot_product_attention`."""
        scores_shape = query.shape[:-1] + (key.shape[-2],)
        if mask is not None:
            mask = _check_mask(mask, scores_shape)
            # A finite additive mask (never -inf) keeps fully masked rows NaN-free here too.
            mask = to_additive(mask, query.dtype) if mask.dtype == torch.bool else mask.to(query.dtype)
            mask = mask.clamp(min=torch.finfo(query.dtype).min / 2)
        dropout_p = self.dropout.p if self.training else 0.0
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout_p)
