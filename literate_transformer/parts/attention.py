r"""Attention between projections: what every family's attention does once its queries, keys and values are made.

Every model family projects the queries, keys and values of all its heads
with fused layers, under its own names (``query``/``key``/``value`` in
BERT, one ``c_attn`` in GPT-2, ``q_proj``/``k_proj``/``v_proj`` in BART and
Llama, ``q``/``k``/``v`` in T5), and mixes the heads' outputs with one more
layer (``output.dense``, ``c_proj``, ``out_proj``, ``o_proj``, ``o``).
Everything between is the same in all of them:

1. split each projection into heads, ``(B, T, H D) -> (B, H, T, D)``
   (:func:`~literate_transformer.parts.heads.split_heads`);
2. with a cache, append the new keys and values to the cached ones
   (self-attention), or reuse the encoder's, projected once (cross-attention);
   with a cache *object* (:class:`~literate_transformer.core.outputs.Cache`:
   the static one of :mod:`~literate_transformer.parts.static_cache`), write
   them into it in place, ``key, value = cache.update(layer_idx, key, value)``;
3. with grouped-query attention, repeat each key/value head for its group of
   query heads (:func:`~literate_transformer.parts.heads.repeat_kv`), or, over
   a cache object, read each once for its whole group
   (:func:`~literate_transformer.core.kernels.grouped_attention`);
4. attend, by the eager code or the fused kernel
   (:func:`~literate_transformer.core.kernels.attend`);
5. put the heads side by side again
   (:func:`~literate_transformer.parts.heads.merge_heads`).

:class:`Attention` is those steps.  A family's attention module subclasses
it and writes only what it changes: the names of its four projections
(:attr:`~Attention.projections`, which :meth:`~Attention.add_projections`
builds and the default :meth:`~Attention.project_query`,
:meth:`~Attention.project_key_value` and :meth:`~Attention.output` apply),
or its own projection where it is fused (:meth:`~Attention.project`), and,
where it has one, what it does to the queries and keys before they meet
(:meth:`~Attention.position`: rotary embeddings, a norm per head).  This is
HuggingFace's "modular transformers" without the generated code: the
family's file holds the difference, the part holds the rest.

>>> import torch
>>> class Plain(Attention):                        # projections under BART's names
...     projections = ("q_proj", "k_proj", "v_proj", "out_proj")
...     def __init__(self):
...         super().__init__(config=None, num_heads=2, head_size=3)
...         self.add_projections(6)
>>> Plain()(torch.randn(1, 4, 6), output_attentions=True).attention_probs.shape   # (B, H, T, S)
torch.Size([1, 2, 4, 4])
"""

from __future__ import annotations

from typing import Any, ClassVar

from torch import Tensor, nn

from ..core.kernels import attend, grouped_attention
from ..core.outputs import AttentionOutput, Cache
from .heads import extend_cache, merge_heads, repeat_kv, split_heads

__all__ = ["Attention"]


class Attention(nn.Module):
    """Multi-head attention between a family's projections: split, cache, group, attend, merge.

    Args:
        config: The model's config (its attention implementation, eager or fused).
        num_heads: ``H``, the query heads.
        head_size: ``D``.
        num_key_value_heads: ``K``, the key/value heads (``H`` by default; fewer with grouped-query attention,
            one with multi-query attention).
        dropout: Dropout on the probabilities.
        scale: The factor on the scores (``None`` for :math:`1/\\sqrt{D}`; T5 and GPT-Neo use 1).
        layer_idx: The layer's index in its stack: the entry of a cache object it writes (``None`` in a family that
            keeps no cache object).
    """

    def __init__(
        self,
        config: Any,
        num_heads: int,
        head_size: int,
        num_key_value_heads: int | None = None,
        dropout: float = 0.0,
        scale: float | None = None,
        layer_idx: int | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.num_heads = num_heads
        self.head_size = head_size
        self.num_key_value_heads = num_key_value_heads or num_heads
        self.scale = scale
        #: The bound on the scores, :math:`c \tanh(s / c)` (:func:`~literate_transformer.core.kernels.attend`);
        #: ``None`` (no bound) but where a family sets it (Gemma 2's ``attn_logit_softcapping``).
        self.softcap: float | None = None
        self.attention_dropout = nn.Dropout(dropout)

    # -- what a family writes ------------------------------------------------------------------------------
    #: The names of the query, key, value and output projections, each a linear layer, under the family's
    #: HuggingFace names (Llama's ``("q_proj", "k_proj", "v_proj", "o_proj")``); ``None`` for a family that
    #: projects its own way (GPT's one fused ``c_attn``, in
    #: :meth:`~literate_transformer.parts.attention.Attention.project`).
    projections: ClassVar[tuple[str, str, str, str] | None] = None

    def add_projections(self, width: int, bias: bool = True, output_bias: bool | None = None) -> None:
        """Build the four layers named by :attr:`projections`: ``E -> H D`` for the queries, ``E -> K D`` for the
        keys and the values, ``H D -> E`` for the output.

        Args:
            width: ``E``, the width of the states the queries, keys and values are made from.
            bias: Whether the layers add a bias.
            output_bias: Whether the output layer does, where it differs from the others (GPT-Neo's).
        """
        query, key, value, output = self.projections
        inner, key_value = self.num_heads * self.head_size, self.num_key_value_heads * self.head_size
        setattr(self, query, nn.Linear(width, inner, bias=bias))
        setattr(self, key, nn.Linear(width, key_value, bias=bias))
        setattr(self, value, nn.Linear(width, key_value, bias=bias))
        setattr(self, output, nn.Linear(inner, width, bias=bias if output_bias is None else output_bias))

    def project_query(self, hidden_states: Tensor) -> Tensor:
        """Every head's queries, ``(B, T, H D)``: the family's query projection."""
        if self.projections is None:
            raise NotImplementedError(f"{type(self).__name__} projects its queries in project() only")
        return getattr(self, self.projections[0])(hidden_states)

    def project_key_value(self, states: Tensor) -> tuple[Tensor, Tensor]:
        """Every key/value head's keys and values, ``(B, S, K D)`` each: the family's key and value projections."""
        if self.projections is None:
            raise NotImplementedError(f"{type(self).__name__} projects its keys and values in project() only")
        return getattr(self, self.projections[1])(states), getattr(self, self.projections[2])(states)

    def project(self, hidden_states: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention's queries, keys and values from the same states (one fused layer may do all three)."""
        return (self.project_query(hidden_states), *self.project_key_value(hidden_states))

    def position(self, query: Tensor, key: Tensor, **kwargs: Any) -> tuple[Tensor, Tensor]:
        """What the family does to the split queries and keys before they meet (nothing, by default)."""
        return query, key

    def output(self, context: Tensor) -> Tensor:
        """:math:`W^O`: the heads' concatenated outputs mixed back to the model's width, the family's output layer."""
        if self.projections is None:
            raise NotImplementedError(f"{type(self).__name__} writes its own output()")
        return getattr(self, self.projections[3])(context)

    # -- what every family shares ----------------------------------------------------------------------------
    def forward(
        self,
        hidden_states: Tensor,
        key_value_states: Tensor | None = None,
        attention_mask: Tensor | None = None,
        *,
        past_key_value: tuple[Tensor, Tensor] | None = None,
        use_cache: bool = False,
        output_attentions: bool = False,
        **position: Any,
    ) -> AttentionOutput:
        """Self-attention, or cross-attention to ``key_value_states``, with or without a cache.

        Args:
            hidden_states: The queries' input, ``(B, T, E)``.
            key_value_states: The encoder's output ``(B, S, E)`` for cross-attention; ``None`` for self-attention.
            attention_mask: A ready mask (boolean or additive) broadcastable to ``(B, H, T, S)``.
            past_key_value: Cached ``(keys, values)``, each ``(B, K, S_past, D)``: the earlier positions'
                (self-attention, appended to) or the encoder's (cross-attention, used as they are); or a
                :class:`~literate_transformer.core.outputs.Cache` (self-attention), written in place.
            use_cache: Return the keys and values attended to, to pass back on the next call.
            output_attentions: Return the probabilities.
            **position: What :meth:`position` reads (a family's rotary angles).

        Returns:
            An :class:`~literate_transformer.core.outputs.AttentionOutput`.
        """
        cross_cached = key_value_states is not None and past_key_value is not None
        if key_value_states is None:
            query, key, value = self.project(hidden_states)
        else:
            query = self.project_query(hidden_states)
            # Cross-attention after the first step: the encoder's keys and values were projected once, at step 1.
            key, value = past_key_value if cross_cached else self.project_key_value(key_value_states)
        # Each projection into heads: queries (B, H, T, D), keys and values (B, K, S, D).
        query = split_heads(query, self.num_heads)  # (B, H, T, D)
        if not cross_cached:
            key = split_heads(key, self.num_key_value_heads)  # (B, K, S, D)
            value = split_heads(value, self.num_key_value_heads)
        query, key = self.position(query, key, **position)
        cached_in_place = isinstance(past_key_value, Cache)
        if cached_in_place:
            # A cache written in place (the static one): the new keys and values go into it, and every position
            # written so far comes back (a view, no copy).
            key, value = past_key_value.update(self.layer_idx, key, value)
        elif key_value_states is None:
            # Self-attention with a cache: the earlier positions' keys and values, then the new ones.
            key, value = extend_cache(key, value, past_key_value)
        cache = (past_key_value if cached_in_place else (key, value)) if use_cache else None
        if cached_in_place and not output_attentions:
            # Grouped-query attention over the cache: each key/value head read once by its group of H / K query
            # heads, without repeating it.
            context = grouped_attention(query, key, value, attention_mask, self.scale, self.softcap)
            attention_probs = None
        else:
            # Grouped-query attention: each key/value head serves H / K query heads.
            groups = self.num_heads // self.num_key_value_heads
            context, attention_probs = attend(
                query,
                repeat_kv(key, groups),
                repeat_kv(value, groups),
                attention_mask,
                self.config,
                self.attention_dropout,
                output_attentions,
                self.scale,
                self.softcap,
            )
        # The heads side by side again, then W^O.
        output = self.output(merge_heads(context))  # (B, T, E)
        return AttentionOutput(output, attention_probs, cache)
