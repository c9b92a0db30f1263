"""Outputs: what each module returns, with HuggingFace's field names.

Every module of this package returns the same type whatever its flags: a
flag such as ``output_attentions`` fills a field that is otherwise ``None``,
it never changes what comes back.  The field names are those a reader meets
in :mod:`transformers` (``last_hidden_state``, ``attentions``,
``cross_attentions``, ``past_key_values``, ``logits``, ...), and per-layer
results are tuples, one entry per layer.

================================  =============================================================
type                              returned by
================================  =============================================================
:class:`AttentionOutput`          an attention module (one layer's attention)
:class:`LayerOutput`              a layer (encoder, decoder, BERT)
:class:`ModelOutput`              a stack of layers or a whole model (encoder, decoder, BERT, GPT-2)
:class:`Seq2SeqOutput`            an encoder-decoder model (the 2017 transformer, BART)
:class:`LayerCache`               one decoder layer's key/value cache (inside ``past_key_values``)
:class:`Cache`                    a key/value cache every layer writes into in place (a static one)
================================  =============================================================

The singular ``attention_probs`` is one layer's ``(B, H, T, S)`` tensor
(HuggingFace's name inside ``BertSelfAttention``); the plural ``attentions``
is the tuple of them over the layers (HuggingFace's name in model outputs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from torch import Tensor

__all__ = ["AttentionOutput", "LayerCache", "Cache", "LayerOutput", "ModelOutput", "Seq2SeqOutput"]


class AttentionOutput(NamedTuple):
    """What an attention module returns."""

    #: The attention output ``(B, T, E)``.
    hidden_states: Tensor
    #: The attention probabilities ``(B, H, T, S)`` (before dropout), with ``output_attentions=True``; else ``None``.
    attention_probs: Tensor | None = None
    #: With ``use_cache=True``: the ``(keys, values)`` attended to, each ``(B, H, S, D)`` and including the past
    #: ones, to pass back on the next call; else ``None``.
    past_key_value: tuple[Tensor, Tensor] | None = None


class LayerCache(NamedTuple):
    """What one decoder layer keeps between generation steps."""

    #: ``(keys, values)`` of the positions seen so far, each ``(B, H, S, D)``; each step appends one position.
    self_attention: tuple[Tensor, Tensor]
    #: ``(keys, values)`` projected from the encoder's output, each ``(B, H, S, D)`` with ``S`` the source length:
    #: computed at the first step and reused unchanged; ``None`` in a decoder without cross-attention.
    cross_attention: tuple[Tensor, Tensor] | None = None


class Cache:
    """A key/value cache that every layer of a stack writes into in place: what a static cache is to the forward.

    The growing cache is data: each layer returns its keys and values one
    position longer (a :class:`LayerCache`), and the caller hands them back.
    A cache *object* is passed, the same one, to every layer instead, as
    ``transformers``' ``Cache`` and gpt-fast's ``KVCache`` are: each layer's
    attention writes its new keys and values into it and reads back every
    position written so far (``key, value = cache.update(self.layer_idx,
    key, value)``), and the stack reads the call's positions, masks and what its layers read
    besides from it (:meth:`step`), made once for every position the cache
    holds.  :class:`~literate_transformer.parts.static_cache.StaticCache` is
    the package's.
    """

    #: How many positions hold keys and values (the next call writes the positions after them).
    length: int

    def update(self, layer_idx: int, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Write layer ``layer_idx``'s new keys and values ``(B, K, T, D)``; return every position written so far."""
        raise NotImplementedError

    def step(self) -> tuple[dict[str, Tensor], Tensor, dict[str, Any]]:
        """What the call's new positions read: the masks by kind (their rows, over the positions read), the
        positions ``(B, T)``, and what every layer reads besides (the rotary angles of those positions)."""
        raise NotImplementedError


class LayerOutput(NamedTuple):
    """What a transformer layer returns."""

    #: The layer's output ``(B, T, E)``.
    hidden_states: Tensor
    #: Self-attention probabilities ``(B, H, T, S)`` with ``output_attentions=True``; else ``None``.
    attention_probs: Tensor | None = None
    #: Cross-attention probabilities ``(B, H, T, S)`` of a layer that reads an encoder, with
    #: ``output_attentions=True``; else ``None``.
    cross_attention_probs: Tensor | None = None
    #: The layer's :class:`LayerCache` with ``use_cache=True``; else ``None``.
    past_key_value: LayerCache | None = None


@dataclass
class ModelOutput:
    """What a stack of layers, or a model built on one, returns.

    Attributes:
        last_hidden_state: The last layer's output, ``(B, T, E)``.
        logits: A language model's next-token scores ``(B, T, V)``; ``None``
            for a model without a language-model head.
        loss: The training loss, a scalar, when the call was given
            ``labels``; else ``None``.
        pooler_output: BERT's pooled ``[CLS]`` vector, ``(B, E)``; ``None``
            elsewhere.
        hidden_states: With ``output_hidden_states=True``: the embeddings'
            output and every layer's output, ``num_hidden_layers + 1``
            tensors of shape ``(B, T, E)``.
        attentions: With ``output_attentions=True``: every layer's
            self-attention probabilities, ``(B, H, T, S)`` each.
        cross_attentions: With ``output_attentions=True`` in a model whose
            layers read an encoder: every layer's cross-attention
            probabilities, ``(B, H, T, S)`` each.
        past_key_values: With ``use_cache=True``: one :class:`LayerCache`
            per layer, to pass back with the next tokens; or the
            :class:`Cache` the call was given, written in place.
        router_logits: With ``output_router_logits=True`` in a mixture of
            experts: every layer's router scores, ``(B T, n)`` each (a row
            per token, a score per expert).
        aux_loss: The load-balancing loss of a mixture of experts' routers,
            with ``output_router_logits=True``; else ``None``.
    """

    last_hidden_state: Tensor
    logits: Tensor | None = None
    loss: Tensor | None = None
    pooler_output: Tensor | None = None
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor, ...] | None = None
    cross_attentions: tuple[Tensor, ...] | None = None
    past_key_values: tuple[LayerCache, ...] | Cache | None = None
    router_logits: tuple[Tensor, ...] | None = None
    aux_loss: Tensor | None = None

    @classmethod
    def from_layers(
        cls,
        embedding_output: Tensor,
        layer_outputs: Sequence[LayerOutput],
        last_hidden_state: Tensor,
        output_hidden_states: bool,
    ) -> ModelOutput:
        """A stack's output from its first layer's input and what each layer returned.

        One rule for every stack in the package: per-layer tensors are
        tuples, one entry per layer.  ``hidden_states`` (with
        ``output_hidden_states``) starts with the embeddings' output and
        ends with ``last_hidden_state``, which in a stack with a final layer
        norm is that norm's output (HuggingFace reports it so).  The
        attentions, cross-attentions and caches are what the layers
        returned, and ``None`` where they returned none (a
        :class:`LayerOutput` holds them only when they were asked for, and
        cross-attention only in a layer that reads an encoder).

        >>> import torch
        >>> x = torch.zeros(1, 2, 4)
        >>> layers = [LayerOutput(x + 1, attention_probs=torch.ones(1, 1, 2, 2))] * 2
        >>> output = ModelOutput.from_layers(x, layers, x + 3, output_hidden_states=True)
        >>> [int(h[0, 0, 0]) for h in output.hidden_states], len(output.attentions), output.cross_attentions
        ([0, 1, 3], 2, None)
        """

        def per_layer(name: str) -> tuple | None:
            values = tuple(getattr(layer, name) for layer in layer_outputs)
            return values if values and values[0] is not None else None

        # The embeddings and every layer's output, the last one replaced by the stack's output.
        hidden_states = [embedding_output, *(layer.hidden_states for layer in layer_outputs)]
        hidden_states[-1] = last_hidden_state
        return cls(
            last_hidden_state=last_hidden_state,
            hidden_states=tuple(hidden_states) if output_hidden_states else None,
            attentions=per_layer("attention_probs"),
            cross_attentions=per_layer("cross_attention_probs"),
            past_key_values=per_layer("past_key_value"),
        )


@dataclass
class Seq2SeqOutput:
    """What an encoder-decoder model returns.

    Attributes:
        logits: Next-token scores ``(B, T, V)`` for every target position;
            ``None`` for a model without a language-model head.
        last_hidden_state: The decoder's last layer, ``(B, T, E)``.
        past_key_values: The decoder's cache (one :class:`LayerCache` per
            layer) with ``use_cache=True``; else ``None``.
        decoder_attentions: One ``(B, H, T, S)`` causal self-attention tensor
            per decoder layer, with ``output_attentions=True``.
        cross_attentions: One ``(B, H, T, S)`` tensor per decoder layer
            (target rows, source columns), with ``output_attentions=True``.
        encoder_last_hidden_state: The encoder's output ``(B, S, E)``.
        encoder_attentions: One ``(B, H, S, S)`` tensor per encoder layer,
            with ``output_attentions=True``.
        loss: The training loss, a scalar, when the call was given
            ``labels``; else ``None``.
    """

    logits: Tensor | None
    last_hidden_state: Tensor
    past_key_values: tuple[LayerCache, ...] | None = None
    decoder_attentions: tuple[Tensor, ...] | None = None
    cross_attentions: tuple[Tensor, ...] | None = None
    encoder_last_hidden_state: Tensor | None = None
    encoder_attentions: tuple[Tensor, ...] | None = None
    loss: Tensor | None = None
