r"""Multi-head attention: many heads side by side, each its own notion of "match".

Scaled dot-product attention (:func:`~literate_transformer.core.kernels.scaled_dot_product_attention`)
turns queries, keys and values into a weighted average of the values.  This
module builds the layer around it, the way the book builds it: the
projections that make the queries, keys and values, one head at a time.

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
  ``past_key_value``, ``use_cache``), which the decoder builds on.  Its
  arguments and outputs have HuggingFace's names (``hidden_states``,
  ``attention_mask``, ``output_attentions``, ``attention_probs``).
* ``config.attn_implementation = "sdpa"`` runs the fused kernel instead of
  the commented steps whenever the probabilities are not asked for; the
  decision and the kernel's masking are shared by every model of the package
  (:func:`~literate_transformer.core.kernels.attend`).

What the source notebooks got wrong
-----------------------------------
One notebook builds a single ``AttentionHead(embed_dim, num_heads)``, that
is one head whose *size* is the number of heads (12).  Multi-head attention
needs ``num_heads`` heads of size ``hidden_size // num_heads`` each.
:class:`AttentionHead` refuses a head size that does not fit, and
:class:`MultiHeadAttention` builds ``config.num_attention_heads`` heads of
``config.head_size``.

>>> import torch
>>> from literate_transformer import TransformerConfig
>>> _ = torch.manual_seed(0)
>>> config = TransformerConfig(hidden_size=24, num_attention_heads=4, attention_probs_dropout_prob=0.0)
>>> attention = MultiHeadAttention(config)
>>> hidden_states = torch.randn(2, 3, 24)                   # (B, T, E)
>>> output = attention(hidden_states, output_attentions=True)
>>> output.hidden_states.shape                              # (B, T, E)
torch.Size([2, 3, 24])
>>> output.attention_probs.shape                            # (B, H, T, S)
torch.Size([2, 4, 3, 3])
>>> torch.allclose(output.attention_probs.sum(dim=-1), torch.ones(2, 4, 3))
True

BERT-base's numbers (the defaults of :class:`~literate_transformer.core.config.TransformerConfig`):

>>> bert_base = TransformerConfig()
>>> bert_base.hidden_size, bert_base.num_attention_heads, bert_base.head_size
(768, 12, 64)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ..core.config import as_config
from ..core.kernels import attend, scaled_dot_product_attention
from ..core.outputs import AttentionOutput
from ..core.validation import (
    Arguments,
    check_hidden_states,
    check_key_value_pair,
    check_mask,
    check_positive_int,
    validate_with,
)

__all__ = ["AttentionHead", "MultiHeadAttention"]


def _check_head_inputs(head: AttentionHead, args: Arguments) -> None:
    hidden_states = check_hidden_states(args.hidden_states, head.embed_dim)
    key_length = hidden_states.shape[1]
    if args.key_value_states is not None:
        key_length = check_hidden_states(args.key_value_states, head.embed_dim, "key_value_states").shape[1]
    if args.attention_mask is not None:
        check_mask(args.attention_mask, (hidden_states.shape[0], hidden_states.shape[1], key_length))


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
        check_positive_int(embed_dim, "embed_dim")
        check_positive_int(head_dim, "head_dim")
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

    @validate_with(_check_head_inputs)
    def forward(
        self, hidden_states: Tensor, key_value_states: Tensor | None = None, attention_mask: Tensor | None = None
    ) -> Tensor:
        """Attend from ``hidden_states`` to itself (or to ``key_value_states``).

        Args:
            hidden_states: The token vectors that ask, ``(B, T, E)``.
            key_value_states: The token vectors that answer, ``(B, S, E)``;
                ``None`` means ``hidden_states`` (self-attention).
            attention_mask: Boolean (``True`` = may attend) or additive mask
                broadcastable to ``(B, T, S)``.

        Returns:
            The head's output ``(B, T, D)``.
        """
        if key_value_states is None:
            key_value_states = hidden_states
        # What each position looks for, X W^Q.
        query = self.q(hidden_states)  # (B, T, D)
        # What each position offers to be matched on, Y W^K.
        key = self.k(key_value_states)  # (B, S, D)
        # What each position hands over when matched, Y W^V.
        value = self.v(key_value_states)
        context, _ = scaled_dot_product_attention(query, key, value, attention_mask)
        return context


def _check_multi_head_inputs(attention: MultiHeadAttention, args: Arguments) -> None:
    hidden_states = check_hidden_states(args.hidden_states, attention.hidden_size)
    batch_size, query_length, _ = hidden_states.shape
    heads, head_size = attention.num_heads, attention.head_size
    past_key_value, key_value_states = args.past_key_value, args.key_value_states
    past_length = 0
    if past_key_value is not None:
        past_length = check_key_value_pair(past_key_value, "past_key_value", batch_size, heads, head_size)
    if key_value_states is not None:
        key_value_states = check_hidden_states(key_value_states, attention.hidden_size, "key_value_states")
        if key_value_states.shape[0] != batch_size:
            raise ValueError(
                f"key_value_states must have batch size {batch_size} like hidden_states, "
                f"got shape {tuple(key_value_states.shape)}"
            )
        # Cross-attention: a cache holds the encoder's keys and values, which replace the projections.
        key_length = past_length if past_key_value is not None else key_value_states.shape[1]
    else:
        key_length = past_length + query_length
    if args.attention_mask is not None:
        check_mask(args.attention_mask, (batch_size, heads, query_length, key_length))


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
            ``(keys, values)``, each ``(B, H, S, D)``; a decoder caches them
            (the encoder's keys and values are the same for every decoding
            step).
        """
        # Every head's keys Y W^K_h, stacked along a new head dimension.
        keys = torch.stack([head.k(states) for head in self.heads], dim=1)  # (B, H, S, D)
        # Every head's values Y W^V_h, likewise.
        values = torch.stack([head.v(states) for head in self.heads], dim=1)
        return keys, values

    @validate_with(_check_multi_head_inputs)
    def forward(
        self,
        hidden_states: Tensor,
        key_value_states: Tensor | None = None,
        attention_mask: Tensor | None = None,
        *,
        output_attentions: bool = False,
        past_key_value: tuple[Tensor, Tensor] | None = None,
        use_cache: bool = False,
    ) -> AttentionOutput:
        """Self-attention, cross-attention, or one step of cached decoding.

        Args:
            hidden_states: The queries' token vectors ``(B, T, E)``.
            key_value_states: For cross-attention, the encoder's output
                ``(B, S, E)``; ``None`` for self-attention.
            attention_mask: Boolean (``True`` = may attend) or additive mask,
                broadcastable to ``(B, H, T, S)`` where ``S`` counts the past
                keys too.  A 2-D mask is read as ``(T, S)`` (e.g.
                :func:`~literate_transformer.core.masks.causal_mask`); make a
                tokenizer's ``(B, S)`` mask a ``(B, 1, 1, S)`` one with
                :func:`~literate_transformer.core.masks.padding_mask`.
            output_attentions: Return the attention probabilities ``(B, H, T, S)``.
            past_key_value: Cached ``(keys, values)``, each ``(B, H, S_past, D)``.
                Self-attention appends the new positions' keys and values
                after them; cross-attention (with ``key_value_states``) uses
                them as they are, instead of projecting the encoder's output
                again.
            use_cache: Return the ``(keys, values)`` used, to pass back on the
                next call.

        Returns:
            An :class:`~literate_transformer.core.outputs.AttentionOutput`.

        Raises:
            TypeError: for a non-tensor or wrongly typed input.
            ValueError: for inputs whose sizes disagree with the config or
                each other, naming the argument.
        """
        batch_size, query_length, _ = hidden_states.shape
        # The keys and values: the encoder's (cross-attention, cached after the first step) ...
        if key_value_states is not None:
            key, value = past_key_value if past_key_value is not None else self.project_key_value(key_value_states)
        # ... or the input's own, appended after the cached ones of earlier positions: S = S_past + T.
        else:
            key, value = self.project_key_value(hidden_states)
            if past_key_value is not None:
                key = torch.cat([past_key_value[0], key], dim=2)  # (B, H, S, D)
                value = torch.cat([past_key_value[1], value], dim=2)
        # Every head's queries X W^Q_h, stacked along a new head dimension.
        query = torch.stack([head.q(hidden_states) for head in self.heads], dim=1)  # (B, H, T, D)
        # softmax(Q K^T / sqrt(D) + M) V for all heads at once (in PyTorch's fused kernel with "sdpa").
        context, attention_probs = attend(
            query, key, value, attention_mask, self.config, self.dropout, output_attentions
        )
        # Concat(head_1, ..., head_H): heads back next to each other.
        context = context.transpose(1, 2).reshape(batch_size, query_length, self.hidden_size)  # (B, T, E)
        # Mix the heads, Concat(...) W^O + b^O.
        output = self.output_linear(context)
        return AttentionOutput(output, attention_probs, (key, value) if use_cache else None)
