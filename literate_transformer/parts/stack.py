"""A stack: layers run one after another, each reading its own cache, and what the stack reports.

Every model runs its layers the same way: the first layer reads the
embeddings, each layer's output is the next one's input, and with a
key/value cache each layer reads its own entry of ``past_key_values``.
:func:`run_layers` is that loop, written once for every family; the book's
encoder and decoder write it out, where the chapters read it.  What the
stack then reports (every layer's output, attentions and cache, as
per-layer tuples) is :meth:`~literate_transformer.core.outputs.ModelOutput.from_layers`.

A decoder stack adds a cache and a causal mask around that loop, and its
forward is the same in every family: :class:`DecoderStack` writes it once
(:meth:`DecoderStack.run_stack`); GPT's stack, Llama's and BART's decoder,
which are not each other's parents, all call it, and each writes only the
decisions it changes: how positions are counted, what the first layer
reads, what every layer reads besides, and what follows the last layer.
The same forward decodes over a static cache
(:mod:`~literate_transformer.parts.static_cache`): given a cache object
(:class:`~literate_transformer.core.outputs.Cache`) in place of the
per-layer caches, the stack hands that one object to every layer, whose
attention writes into it, and reads the call's positions, masks and
rotary angles from it, made once for every position the cache holds.
The decoder of an encoder-decoder model is the same stack with one more
input, the encoder's output, which every layer's cross-attention reads.

The layers of a decoder stack run one forward too: causal
self-attention, then a feed-forward network, each a residual sub-layer
(:mod:`~literate_transformer.core.residual`), pre-norm or post-norm, and in
the decoder of an encoder-decoder model a cross-attention sub-layer between
the two.  :class:`DecoderLayer` writes it once; GPT's block, CTRL's and
Llama's layer, BART's decoder layer and T5's block each name their
sub-layers (:meth:`DecoderLayer.sublayers`, and
:meth:`DecoderLayer.cross_attention_sublayer` where they have one) under
HuggingFace's names, and say where the norms sit (``norm_first``).

An encoder that reads token ids and nothing else runs four steps, the same
in every family: embed, build the mask once, run the layers, pool.
:class:`EncoderModel` writes them once, beside :class:`DecoderStack`;
ALBERT's model and DeBERTa's each write only the steps they change.

>>> import torch
>>> from torch import nn
>>> from literate_transformer.core.outputs import LayerOutput
>>> class Double(nn.Module):
...     def forward(self, hidden_states):
...         return LayerOutput(2 * hidden_states)
>>> hidden_states, outputs = run_layers([Double(), Double(), Double()], torch.ones(1))
>>> hidden_states, len(outputs)
(tensor([8.]), 3)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..core.masks import MaskHook, build_attention_mask
from ..core.outputs import Cache, LayerCache, LayerOutput, ModelOutput
from ..core.residual import add_and_norm, sublayer_input
from ..core.validation import Arguments, check_token_inputs, validate_with
from .positions import position_ids as positions_of

__all__ = ["DecoderStack", "DecoderLayer", "Sublayer", "run_layers", "EncoderModel"]


def run_layers(
    layers: Sequence[nn.Module],
    hidden_states: Tensor,
    *args: Any,
    past_key_values: Sequence[LayerCache] | None = None,
    attention_masks: Sequence[Tensor | None] | None = None,
    **kwargs: Any,
) -> tuple[Tensor, list[LayerOutput]]:
    """Run ``layers`` in order: each reads the previous one's output, its own mask and its own cache entry.

    Args:
        layers: The stack's layers, each returning a :class:`~literate_transformer.core.outputs.LayerOutput`.
        hidden_states: The first layer's input, ``(B, T, E)``.
        *args: What every layer reads besides (a mask, the encoder's output), the same for all.
        past_key_values: One cache entry per layer, handed to each as ``past_key_value``; or ``None``.
        attention_masks: One mask per layer (a decoder stack's, each of its layer's kind), handed to each before
            ``args``; or ``None``.
        **kwargs: Keyword arguments of every layer (``use_cache``, ``output_attentions``, ...).

    Returns:
        ``(the last layer's output, what every layer returned)``.
    """
    outputs = []
    for index, layer in enumerate(layers):
        # With a cache, each layer reads its own entry (a stack without one, an encoder's, passes none).
        cache = {} if past_key_values is None else {"past_key_value": past_key_values[index]}
        mask = () if attention_masks is None else (attention_masks[index],)
        outputs.append(layer(hidden_states, *mask, *args, **cache, **kwargs))
        # Each layer's output is the next one's input.
        hidden_states = outputs[-1].hidden_states
    return hidden_states, outputs


class DecoderStack(MaskHook):
    """A decoder stack over a cache: the forward every decoder stack shares, and the decisions a family changes.

    A stack mixes this class in and writes :meth:`embed` and :meth:`final_norm`
    (and :meth:`position_ids`, the mask hook
    :meth:`~literate_transformer.core.masks.MaskHook.attention_masks` and
    :meth:`layer_inputs`, where it changes them); its ``forward`` keeps
    HuggingFace's signature and hands its arguments, with its layers, to
    :meth:`run_stack`.
    """

    #: A decoder stack's self-attention hides the future (the mask hook's causal mask).
    causal = True

    def position_ids(self, input_ids: Tensor, attention_mask: Tensor | None, past_length: int = 0) -> Tensor:
        """The positions of ``input_ids``, ``(B, T)``: the package's one rule
        (:func:`~literate_transformer.parts.positions.position_ids`): a real token's counts the real tokens before it,
        cached ones included."""
        return positions_of(attention_mask, input_ids.shape[1], past_length, device=input_ids.device)

    def embed(self, input_ids: Tensor, position_ids: Tensor) -> Tensor:
        """The first layer's input, ``(B, T, E)``: each family says how tokens and positions enter."""
        raise NotImplementedError

    def layer_inputs(self, position_ids: Tensor) -> dict[str, Any]:
        """What every layer reads besides its input and mask, by name: nothing, unless a family says (rotary angles)."""
        return {}

    def final_norm(self, hidden_states: Tensor) -> Tensor:
        """What follows the last layer (a pre-norm stack's final norm)."""
        raise NotImplementedError

    def run_stack(
        self,
        layers: Sequence[nn.Module],
        input_ids: Tensor,
        attention_mask: Tensor | None,
        position_ids: Tensor | None,
        past_key_values: Sequence[LayerCache] | None,
        *,
        use_cache: bool,
        output_attentions: bool,
        output_hidden_states: bool,
        encoder_hidden_states: Tensor | None = None,
        encoder_attention_mask: Tensor | None = None,
    ) -> ModelOutput:
        """The stack's forward: embeddings, the masks once, the layers over the cache, the final norm.

        Args:
            layers: The stack's layers (GPT's ``h``, Llama's ``layers``).
            input_ids: ``(B, T)`` token ids (with a cache, only the new ones); the other arguments as the
                stack's ``forward`` received them (``position_ids=None``: :meth:`position_ids`);
                ``past_key_values`` may be a cache object (:class:`~literate_transformer.core.outputs.Cache`), whose
                positions, masks and layer inputs the call reads (its ``attention_mask`` and ``position_ids`` are
                then not read).
            encoder_hidden_states: The encoder's output ``(B, S, E)``, which every layer's cross-attention
                reads (the decoder of an encoder-decoder model); ``None`` in a decoder-only stack.
            encoder_attention_mask: The source's ``(B, S)`` padding mask.

        Returns:
            A :class:`~literate_transformer.core.outputs.ModelOutput`.
        """
        length = input_ids.shape[1]
        in_place = isinstance(past_key_values, Cache)
        if in_place:
            # A cache written in place: this call's positions, masks and layer inputs were made once, for every
            # position the cache holds (with the family's own hooks, below); the call reads their rows.
            masks, position_ids, inputs = past_key_values.step()
        else:
            past_length = 0 if past_key_values is None else past_key_values[0].self_attention[0].shape[2]
            if position_ids is None:
                position_ids = self.position_ids(input_ids, attention_mask, past_length)
        # 1) What the first layer reads (the family's embed: positions added to it, or none).
        embedding_output = self.embed(input_ids, position_ids)  # (B, T, E)
        if not in_place:
            # 2) Which keys each query may see, built once for every kind of layer; each layer reads its kind's.
            dtype, device = embedding_output.dtype, input_ids.device
            masks = self.attention_masks(attention_mask, length, past_length, dtype, device)
            inputs = dict(self.layer_inputs(position_ids))
        layer_masks = [masks[getattr(layer, "attention_type", "full")] for layer in layers]
        # 3) What every layer reads besides: the family's inputs (rotary angles, computed once for all the
        #    layers), and in the decoder of an encoder-decoder model the source, whose real tokens every target
        #    position may see (no causality: (B, 1, 1, S)).
        if encoder_hidden_states is not None:
            inputs["encoder_hidden_states"] = encoder_hidden_states
            inputs["encoder_attention_mask"] = build_attention_mask(
                encoder_attention_mask, query_length=length, device=input_ids.device, dtype=embedding_output.dtype
            )
        # 4) The layers, each reading the previous one's output and its own cache entry (or the one cache object).
        hidden_states, layer_outputs = run_layers(
            layers,
            embedding_output,
            attention_masks=layer_masks,
            past_key_values=[past_key_values] * len(layers) if in_place else past_key_values,
            use_cache=use_cache,
            output_attentions=output_attentions,
            **inputs,
        )
        # 5) After the last layer.
        hidden_states = self.final_norm(hidden_states)
        output = ModelOutput.from_layers(embedding_output, layer_outputs, hidden_states, output_hidden_states)
        if in_place:
            # The cache object itself, written in place, is what the next call reads.
            output.past_key_values = past_key_values if use_cache else None
        return output


@dataclass(frozen=True)
class Sublayer:
    """One residual sub-layer of a layer, under the family's names: what it computes, its norm, the dropout on its output."""

    #: The attention or the feed-forward network (a module, or a method of the layer that runs one).
    layer: nn.Module | Callable[..., Any]
    #: Its norm (read first in a pre-norm layer, applied to the sum in a post-norm one).
    norm: nn.Module
    #: Dropout on its output before the residual sum, where the family keeps it outside the sub-layer (CTRL's).
    dropout: nn.Module | None = None

    def input(self, hidden_states: Tensor, norm_first: bool) -> Tensor:
        """What the sub-layer reads: ``Norm(x)`` in pre-norm, ``x`` in post-norm."""
        return sublayer_input(hidden_states, self.norm, norm_first)

    def join(self, hidden_states: Tensor, output: Tensor, norm_first: bool) -> Tensor:
        """The residual stream after the sub-layer: ``x + Dropout(output)``, normalised after the sum in post-norm."""
        return add_and_norm(hidden_states, output, self.norm, norm_first, self.dropout)


class DecoderLayer(nn.Module):
    """A decoder layer: causal self-attention, cross-attention where it has one, then a feed-forward network.

    Each sub-layer joins the residual stream.  Its forward is the same in
    every family whose sub-layers run one after the other (GPT's block,
    post-norm; GPT-2's, CTRL's and Llama's, pre-norm; the decoder layers of
    BART and T5, which read an encoder's output in between): a family's
    layer builds its modules under HuggingFace's names, says which is which
    in :meth:`sublayers` (and :meth:`cross_attention_sublayer`), and sets
    ``norm_first``.
    """

    #: The arrangement of its residual sub-layers (:mod:`~literate_transformer.core.residual`): pre-norm.
    norm_first = True
    #: Which of its stack's masks (:meth:`~literate_transformer.core.masks.MaskHook.attention_masks`) the layer reads: ``"full"``, the causal one,
    #: unless a family's layers come in kinds (GPT-3's local and global ones).
    attention_type = "full"
    # What a family's layer builds, each a class a descendant may swap for its own (GPT-2 both of GPT's, GPT-Neo
    # both again, Qwen3 Llama's attention, Mixtral its feed-forward network, Gemma 2 both and its norms).
    #: The attention, built from ``(config, layer_idx)``.
    attention_class: type[nn.Module]
    #: The feed-forward network, built from what the family's constructor gives it (GPT's ``(F, config)``,
    #: Llama's ``(config)``).
    mlp_class: type[nn.Module]

    def sublayers(self) -> tuple[Sublayer, Sublayer]:
        """The self-attention sub-layer and the feed-forward one, under the family's names."""
        raise NotImplementedError

    def cross_attention_sublayer(self) -> Sublayer | None:
        """The cross-attention sub-layer of an encoder-decoder model's decoder; ``None`` (decoder-only) by default."""
        return None

    def forward(
        self,
        hidden_states: Tensor,
        attention_mask: Tensor | None = None,
        encoder_hidden_states: Tensor | None = None,
        encoder_attention_mask: Tensor | None = None,
        *,
        position_embeddings: tuple[Tensor, Tensor] | None = None,
        past_key_value: LayerCache | None = None,
        use_cache: bool = False,
        output_attentions: bool = False,
    ) -> LayerOutput:
        """Run the layer.

        Args:
            hidden_states: The residual stream, ``(B, T, E)``.
            attention_mask: The stack's additive mask, built once for every layer.
            encoder_hidden_states: The encoder's output ``(B, S, E)``, which the cross-attention reads.
            encoder_attention_mask: The source's additive mask, ``(B, 1, 1, S)``.
            position_embeddings: The tokens' rotary angles ``(cos, sin)``, for a family whose attention turns
                queries and keys (Llama's); ``None`` where positions were added to the embeddings.
            past_key_value: The layer's :class:`~literate_transformer.core.outputs.LayerCache`, the stack's cache
                object (:class:`~literate_transformer.core.outputs.Cache`), or ``None``.
            use_cache: Return the keys and values attended to.
            output_attentions: Return the attention probabilities.

        Returns:
            A :class:`~literate_transformer.core.outputs.LayerOutput`.
        """
        attention, feed_forward = self.sublayers()
        cross_attention = self.cross_attention_sublayer()
        if isinstance(past_key_value, Cache):
            # A cache object: the self-attention writes into it in place (a decoder-only stack has no cross-attention).
            past_self, past_cross = past_key_value, None
        else:
            past_self, past_cross = (None, None) if past_key_value is None else past_key_value
        # 1) Causal self-attention reads x (post-norm) or Norm_1(x) (pre-norm); its output joins the residual
        #    stream, normalised after the sum in post-norm.
        attended = attention.layer(
            attention.input(hidden_states, self.norm_first),
            attention_mask=attention_mask,
            past_key_value=past_self,
            use_cache=use_cache,
            output_attentions=output_attentions,
            position_embeddings=position_embeddings,
        )
        hidden_states = attention.join(hidden_states, attended.hidden_states, self.norm_first)
        # 2) In an encoder-decoder model's decoder, cross-attention the same way: queries from the target, keys
        #    and values from the encoder's output (projected at the first step, cached after).
        crossed = None
        if cross_attention is not None:
            crossed = cross_attention.layer(
                cross_attention.input(hidden_states, self.norm_first),
                encoder_hidden_states,
                encoder_attention_mask,
                past_key_value=past_cross,
                use_cache=use_cache,
                output_attentions=output_attentions,
            )
            hidden_states = cross_attention.join(hidden_states, crossed.hidden_states, self.norm_first)
        # 3) The feed-forward network, the same way, with the last norm.
        feed_forward_output = feed_forward.layer(feed_forward.input(hidden_states, self.norm_first))
        hidden_states = feed_forward.join(hidden_states, feed_forward_output, self.norm_first)
        if crossed is None:
            cache = LayerCache(attended.past_key_value) if use_cache else None
            return LayerOutput(hidden_states, attended.attention_probs, None, cache)
        cache = LayerCache(attended.past_key_value, crossed.past_key_value) if use_cache else None
        return LayerOutput(hidden_states, attended.attention_probs, crossed.attention_probs, cache)


def _check_encoder_model_inputs(model: EncoderModel, args: Arguments) -> None:
    check_token_inputs(args, model.config)


class EncoderModel(MaskHook, nn.Module):
    """The forward of an encoder that reads token ids and nothing else: BERT's steps without BERT's extras.

    :meth:`~literate_transformer.models.bert.BertModel.forward` also takes a ``head_mask`` and, in a decoder,
    an encoder's output to attend to.  HuggingFace's ALBERT and DeBERTa take
    neither, and their models run the rest of BERT's steps, written once in
    :meth:`forward`: embed the tokens, build the mask once, run the layers,
    pool.  A subclass (:class:`~literate_transformer.models.albert.AlbertModel`,
    :class:`~literate_transformer.models.deberta_v2.DebertaV2Model`) builds its
    modules under HuggingFace's names and writes the steps it changes:
    :meth:`embed` and :meth:`layers` always, the mask hook
    (:meth:`~literate_transformer.core.masks.MaskHook.attention_masks`),
    :meth:`layer_inputs` and :meth:`pool` where BERT's do not fit it.
    """

    def embed(
        self, input_ids: Tensor, token_type_ids: Tensor | None, position_ids: Tensor | None, mask: Tensor | None
    ) -> Tensor:
        """Step 1: token ids to the vectors the first layer reads, ``(B, T, E)``.

        ``mask`` is the call's ``attention_mask``, ``(B, T)``, for embeddings that read it (DeBERTa's
        zero the padding's vectors); the other arguments as :meth:`forward` received them.
        """
        raise NotImplementedError

    def layers(self) -> Sequence[nn.Module]:
        """Step 3: the layers, in the order they run."""
        raise NotImplementedError

    def layer_inputs(self, length: int, device: torch.device) -> tuple[Tensor | None, ...]:
        """What every layer reads after its input and mask, computed once for all of them: nothing, as in BERT."""
        return ()

    def pool(self, last_hidden_state: Tensor) -> Tensor | None:
        """Step 4: the sentence vector ``(B, E)`` from the last hidden state; ``None`` for a model without pooler."""
        return None

    @validate_with(_check_encoder_model_inputs)
    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        *,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """Encode a batch; the arguments as in :meth:`~literate_transformer.models.bert.BertModel.forward`, less
        ``head_mask`` and cross-attention.

        Returns:
            A :class:`~literate_transformer.core.outputs.ModelOutput`, with ``pooler_output`` where
            :meth:`pool` gives one; ``attentions`` and ``hidden_states`` hold one entry per layer call.

        Raises:
            TypeError: for inputs of the wrong type or dtype.
            ValueError: for ids outside the vocabulary, sequences longer than
                ``max_position_embeddings``, masks of the wrong shape, or segments without a segment table.
        """
        # 1) Token ids -> vectors of the layers' width.
        embedding_output = self.embed(input_ids, token_type_ids, position_ids, attention_mask)  # (B, T, E)
        # 2) The mask, and what else every layer reads, computed once.
        length, dtype = input_ids.shape[1], embedding_output.dtype
        mask = self.attention_masks(attention_mask, length, 0, dtype, input_ids.device)["full"]
        inputs = self.layer_inputs(input_ids.shape[1], input_ids.device)
        # 3) The layers, each reading the previous one's output.
        hidden_states, layer_outputs = run_layers(
            self.layers(), embedding_output, mask, *inputs, output_attentions=output_attentions
        )
        output = ModelOutput.from_layers(embedding_output, layer_outputs, hidden_states, output_hidden_states)
        # 4) The sentence vector, where the model has a pooler.
        output.pooler_output = self.pool(hidden_states)
        return output
