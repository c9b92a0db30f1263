r"""Decoding over a static cache: the same tokens as the eager loop, with the work of a step done once.

A decoder writes one token per step, and at batch 1 a step is little
arithmetic over a lot of memory: every weight of the model is read once to
multiply one vector.  SmolLM2-135M keeps 538 MB of float32 weights; at the
20-odd GB/s that two cores stream from memory, reading them takes about
22 ms, which caps the model near 45 tokens a second however the step is
written.  The eager step of the package (and of ``transformers``) takes
about 36 ms on that machine: a third of it is not reading weights.  A
profile of one step (``torch.profiler``, chapter 16) says where it goes:

* **Python and small operations, a few microseconds each, by the
  thousand.**  Thirty layers each call a dozen modules, split and merge
  heads, turn queries and keys, build the outputs a layer returns, check
  their inputs, and repeat the key/value heads for their groups of query
  heads.
* **The cache growing by concatenation.**  Each layer's keys and values are
  copied into a new tensor one position longer at every step
  (:func:`~literate_transformer.parts.heads.extend_cache`): a copy of the
  whole cache per step, which at batch 8 and 384 positions is 140 MB.
* **Seven matrix multiplies per layer** where four read the same inputs:
  ``q_proj``, ``k_proj`` and ``v_proj`` read one vector, ``gate_proj`` and
  ``up_proj`` another.
* **Work done again every step that could be done once**: the causal mask
  built anew, the rotary angles computed anew.

This module changes those four things, and nothing about the arithmetic of
the family's layers:

1. **A static cache** (:class:`StaticCache`): every layer's keys and values
   for every position the call can reach (the prompt and the new tokens),
   allocated once, ``(B, K, S, D)`` per layer; a step writes its one
   position in place and attends over the positions written so far, a view.
2. **Fused projections** (:class:`FusedLayer`): ``[W^Q; W^K; W^V]`` stacked
   into one ``(H D + 2 K D) x E`` matrix, ``[W_gate; W_up]`` into one
   ``2F x E``, each concatenated once, when the path is first built, and
   rebuilt only if a weight changes.  Two multiplies fewer per layer.
3. **Grouped-query attention without repeating the keys.**  The ``H``
   query heads of a step are laid out as ``K`` groups of ``H / K`` rows,
   one group per key/value head, and each key/value head is read once by
   its whole group (``(B, H, T, D) -> (B, K, H T / K, D)``): the same
   scores as :func:`~literate_transformer.parts.heads.repeat_kv`'s copies,
   with no copy.
4. **Everything a step reads that does not depend on the step, made once
   per call**: the family's masks for every position the cache holds (its
   own :meth:`~literate_transformer.parts.stack.DecoderStack.attention_masks`,
   causal, padded, banded), the positions, the rotary angles; a step takes
   its row of each.  The inputs are checked once, where ``generate()`` is
   called, and the steps run under :func:`torch.inference_mode`.

What stays the family's own: the embeddings, every norm, the turning of
queries and keys (:meth:`~literate_transformer.parts.attention.Attention.position`:
Llama's rotations, Qwen3's norms of each head), the output projection, the
feed-forward network (called as it is where it is not a gated one:
Mixtral's experts), the residual sums, the head and its scores.  A
family's model mixes in :class:`StaticCacheGeneration`, and its
``generate()`` then runs the package's loops (greedy, sampled, beam
search: :mod:`~literate_transformer.book.decoding`) over a
:class:`StaticCacheDecoder` instead of over the model itself; the family's
tests prove the ids equal to ``transformers``' on that path, and tests here
prove them equal to the eager loop's.

Other weights, the same step
----------------------------
The step's four multiplies are methods of :class:`FusedLayer`
(:meth:`~FusedLayer.project_query_key_value`, :meth:`~FusedLayer.project_output`,
:meth:`~FusedLayer.project_gate_up`, :meth:`~FusedLayer.project_down`), and a
model may hold :class:`StepWeights` (``model.step_weights``): layers of a
variant that multiply by other weights, and a head of their own.  Its steps
then read those instead of :func:`fused_layers`, everything else unchanged:
:mod:`~literate_transformer.parts.int4` makes them from a GGUF file's 4-bit
blocks, so that the same loops decode in 4 bits.

One step compiled
-----------------
What remains of a step's overhead is the operations between the matrix
multiplies, each a pass over a small tensor and a call through PyTorch's
dispatcher.  :meth:`StaticCacheGeneration.compile` hands the step with one
new token to :func:`torch.compile`, which fuses them into a few generated
loops around the multiplies.  A compiled step needs fixed shapes: it
attends over the whole cache, the not-yet-written positions hidden by the
causal mask, and it finds its position in a tensor, so that one
compilation serves every step of every call of the same batch size and
capacity (the capacity is rounded up, to :data:`CAPACITY_STEP` positions,
so that calls of similar lengths share it).  Compiling takes tens of
seconds; it is opt-in.

>>> import torch
>>> from transformers import LlamaConfig
>>> from literate_transformer.models.llama import LlamaForCausalLM
>>> config = LlamaConfig(vocab_size=40, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
...                      num_attention_heads=4, num_key_value_heads=2)
>>> _ = torch.manual_seed(0)
>>> model = LlamaForCausalLM(config).eval()
>>> prompt = torch.tensor([[5, 6, 7]])
>>> fast = model.generate(prompt, max_new_tokens=5)                                  # the static cache
>>> eager = model.generate(prompt, max_new_tokens=5, cache_implementation="dynamic")   # the growing one
>>> torch.equal(fast, eager)
True
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils._pytree import tree_map

from ..core.kernels import fused_attention, scaled_dot_product_attention
from ..core.outputs import ModelOutput
from ..core.validation import (
    Arguments,
    check_attention_mask,
    check_fits_in_memory,
    check_input_ids,
    check_positive_int,
    validate_with,
)
from .attention import Attention
from .feed_forward import GatedFeedForward
from .heads import LanguageModelHead, merge_heads, split_heads
from .stack import DecoderLayer, DecoderStack, Sublayer

__all__ = [
    "CAPACITY_STEP",
    "COMPILE_MODES",
    "StaticCache",
    "FusedLayer",
    "StepWeights",
    "fused_layers",
    "static_cache_applies",
    "StaticCacheDecoder",
    "StaticCacheGeneration",
    "CallTables",
]

#: The multiple a compiled step's capacity is rounded up to, so that calls of similar lengths share one compilation.
CAPACITY_STEP = 128


class StaticCache:
    """Every layer's keys and values for every position a call can reach, allocated once and written in place.

    Args:
        num_layers: ``L``.
        batch_size: ``B`` (the rows of a batch, or of every beam of it).
        num_key_value_heads: ``K``.
        capacity: ``S``, the positions it holds: the prompt's and the new tokens'.
        head_size: ``D``.
        dtype: The model's.
        device: The model's.

    Raises:
        ValueError: for a cache that would take more memory than the device has, saying how much.

    Attributes:
        keys: One ``(B, K, S, D)`` tensor per layer: separate tensors, so that a compiled step writes each in
            place (a write into a view of one large tensor would be copied back whole).
        values: One ``(B, K, S, D)`` tensor per layer.
        length: How many positions are written (the next step writes position ``length``).
    """

    def __init__(
        self,
        num_layers: int,
        batch_size: int,
        num_key_value_heads: int,
        capacity: int,
        head_size: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        # Zeros until written (a position not yet written is never attended to).
        shape = (batch_size, num_key_value_heads, capacity, head_size)
        nbytes = 2 * num_layers * math.prod(shape) * dtype.itemsize
        check_fits_in_memory(nbytes, f"a static cache of {num_layers} layers' keys and values (each {shape})", device)
        with torch.inference_mode():
            self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
            self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.length = 0

    @property
    def capacity(self) -> int:
        """``S``, the positions it can hold."""
        return self.keys[0].shape[2]

    def reorder(self, beam_index: Tensor) -> None:
        """Each row takes over the keys and values of row ``beam_index[row]`` (beam search's new beams), in place.

        Only the positions written so far are copied.
        """
        with torch.inference_mode():
            for cache in (*self.keys, *self.values):
                written = cache[:, :, : self.length]
                written.copy_(written.index_select(0, beam_index))


@dataclass
class FusedLayer:
    """One decoder layer as the static-cache step reads it: its sub-layers, and its projections fused."""

    #: The attention sub-layer (the attention, its norm, and what acts on its output before the sum).
    attention: Sublayer
    #: The feed-forward sub-layer.
    feed_forward: Sublayer
    #: The layer's ``norm_first``.
    norm_first: bool
    #: Which of the stack's masks the layer reads (its ``attention_type``).
    attention_type: str
    #: ``[W^Q; W^K; W^V]``, ``(H D + 2 K D, E)``: queries, keys and values in one multiply.
    query_key_value: Tensor
    #: Their biases side by side, or ``None``.
    query_key_value_bias: Tensor | None
    #: ``[W_gate; W_up]``, ``(2 F, E)``, where the network is a gated one (:class:`~literate_transformer.parts.feed_forward.GatedFeedForward`); else ``None``.
    gate_up: Tensor | None
    #: Their biases side by side, or ``None``.
    gate_up_bias: Tensor | None

    # The step's four multiplies, each a method, so that a variant of the layer multiplies by other weights
    # (:class:`~literate_transformer.parts.int4.Int4Layer`: the GGUF file's 4-bit blocks) in the same step.
    def project_query_key_value(self, normed: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, H D + 2 K D)``: queries, keys and values side by side."""
        return F.linear(normed, self.query_key_value, self.query_key_value_bias)

    def project_output(self, context: Tensor) -> Tensor:
        """``(B, T, H D) -> (B, T, E)``: :math:`W^O`, the attention's own output layer."""
        return self.attention.layer.output(context)

    def project_gate_up(self, normed: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, 2 F)``: the gate's and the up projection's outputs side by side."""
        return F.linear(normed, self.gate_up, self.gate_up_bias)

    def project_down(self, hidden: Tensor) -> Tensor:
        """``(B, T, F) -> (B, T, E)``: the gated network's ``down_proj``."""
        return self.feed_forward.layer.down_proj(hidden)


@dataclass
class StepWeights:
    """Weights a model's steps multiply by in place of its own float ones: its layers, and the head's multiply.

    A model mixing in :class:`StaticCacheGeneration` holds one as ``step_weights`` (``None``: its own weights,
    fused by :func:`fused_layers`); :mod:`~literate_transformer.parts.int4` makes the GGUF file's 4-bit ones.
    """

    #: One :class:`FusedLayer` (or a variant) per layer of the model.
    layers: list[FusedLayer]
    #: The last hidden state ``(B, 1, E)`` to the next token's scores ``(B, 1, V)``, or ``None`` for the model's head.
    head: Callable[[Tensor], Tensor] | None


def _stacked(layers: Sequence[nn.Linear]) -> tuple[Tensor, Tensor | None]:
    """The weights of linear layers that read the same input, one above the other, and their biases (zeros where one
    has none)."""
    weight = torch.cat([layer.weight for layer in layers])
    if all(layer.bias is None for layer in layers):
        return weight, None
    biases = [layer.weight.new_zeros(layer.out_features) if layer.bias is None else layer.bias for layer in layers]
    return weight, torch.cat(biases)


def _fuse(layer: DecoderLayer) -> FusedLayer:
    """A layer's :class:`FusedLayer`: its weights concatenated (a copy, made once)."""
    attention, feed_forward = layer.sublayers()
    query, key, value, _ = attention.layer.projections
    with torch.no_grad():
        qkv, qkv_bias = _stacked([getattr(attention.layer, name) for name in (query, key, value)])
        gate_up = gate_up_bias = None
        if _is_plain_gated(feed_forward.layer):
            gate_up, gate_up_bias = _stacked([feed_forward.layer.gate_proj, feed_forward.layer.up_proj])
    return FusedLayer(
        attention, feed_forward, layer.norm_first, layer.attention_type, qkv, qkv_bias, gate_up, gate_up_bias
    )


def _is_plain_gated(module: nn.Module) -> bool:
    """A gated feed-forward network that runs :class:`GatedFeedForward`'s forward (its two widenings can be fused)."""
    return isinstance(module, GatedFeedForward) and type(module).forward is GatedFeedForward.forward


def _source_tensors(layers: Sequence[DecoderLayer]) -> Iterator[Tensor]:
    """The weights the fused ones are copied from, in a fixed order."""
    for layer in layers:
        attention, feed_forward = layer.sublayers()
        for name in attention.layer.projections[:3]:
            yield from getattr(attention.layer, name).parameters()
        if _is_plain_gated(feed_forward.layer):
            yield from feed_forward.layer.gate_proj.parameters()
            yield from feed_forward.layer.up_proj.parameters()


def _fingerprint(layers: Sequence[DecoderLayer]) -> tuple:
    """What changes when a source weight does: where its memory is, its version (bumped by every in-place write,
    an optimizer's step or ``load_state_dict``'s copy), its dtype and shape."""
    return tuple(
        (tensor.data_ptr(), tensor._version, tensor.dtype, tuple(tensor.shape)) for tensor in _source_tensors(layers)
    )


# The fused layers of each model, kept beside it (not in it: they are no parameters, and no state_dict holds them).
_FUSED: weakref.WeakKeyDictionary[nn.Module, tuple[tuple, list[FusedLayer]]] = weakref.WeakKeyDictionary()


def fused_layers(model: nn.Module) -> list[FusedLayer]:
    """The model's layers with their projections fused: built on the first call, rebuilt when a weight has changed.

    The fused weights are copies (:math:`(H D + 2 K D + 2 F) E` numbers per
    layer: two thirds of a Llama layer's weights once more); they are kept as
    long as the model is, outside its parameters.
    """
    layers = _layers(model)
    fingerprint = _fingerprint(layers)
    kept = _FUSED.get(model)
    if kept is None or kept[0] != fingerprint:
        kept = (fingerprint, [_fuse(layer) for layer in layers])
        _FUSED[model] = kept
    return kept[1]


def _stack(model: nn.Module) -> DecoderStack:
    return getattr(model, model.stack_name)


def _layers(model: nn.Module) -> Sequence[DecoderLayer]:
    return _stack(model).layers


def static_cache_applies(model: object) -> str | None:
    """Why the static-cache step cannot run ``model`` exactly as its eager forward does, or ``None`` if it can.

    It runs a decoder-only language model (:class:`~literate_transformer.parts.heads.LanguageModelHead`)
    whose stack is a :class:`~literate_transformer.parts.stack.DecoderStack` with ``layers``, each a
    :class:`~literate_transformer.parts.stack.DecoderLayer` running that class's forward without
    cross-attention, whose attention is an :class:`~literate_transformer.parts.attention.Attention` running
    that class's forward, with four named projections.
    """
    if not (isinstance(model, LanguageModelHead) and isinstance(model, nn.Module)):
        return f"{type(model).__name__} is not a decoder-only language model of the package"
    stack = getattr(model, model.stack_name, None)
    if not isinstance(stack, DecoderStack) or not isinstance(getattr(stack, "layers", None), nn.ModuleList):
        return f"{type(model).__name__}'s stack is not a DecoderStack with layers"
    for index, layer in enumerate(stack.layers):
        if not isinstance(layer, DecoderLayer) or type(layer).forward is not DecoderLayer.forward:
            return f"layer {index} ({type(layer).__name__}) does not run DecoderLayer's forward"
        if layer.cross_attention_sublayer() is not None:
            return f"layer {index} reads an encoder (cross-attention)"
        attention = layer.sublayers()[0].layer
        if not isinstance(attention, Attention) or type(attention).forward is not Attention.forward:
            return f"layer {index}'s attention ({type(attention).__name__}) does not run Attention's forward"
        if attention.projections is None or any(
            getattr(type(attention), method) is not getattr(Attention, method)
            for method in ("project", "project_query", "project_key_value")
        ):
            return f"layer {index}'s attention ({type(attention).__name__}) projects its own way"
    return None


# ---------------------------------------------------------------------------
# One step: the new tokens through every layer, over the static cache
# ---------------------------------------------------------------------------
def _grouped_mask(mask: Tensor, groups: int) -> Tensor:
    """The ``(B, 1, T, S)`` mask for the ``(B, K, H T / K, S)`` scores of grouped queries: row ``g T + t`` is row ``t``."""
    if mask.shape[2] == 1 or groups == 1:
        return mask  # one query per head: its row broadcasts over the group
    size, _, length, keys = mask.shape
    return mask[:, :, None].expand(size, 1, groups, length, keys).reshape(size, 1, groups * length, keys)


def attend_over_cache(attention: Attention, query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
    """The attention of ``H`` query heads over ``K`` cached key/value heads, each read once by its group.

    Query head ``h`` reads key/value head ``h // (H / K)`` (HuggingFace's
    order), so the ``H / K`` heads of a group are neighbours: viewed as
    ``(B, K, H T / K, D)``, the queries of a group are rows of one head, and
    one attention call over ``(B, K, S, D)`` keys gives every head's scores.

    Args:
        attention: The layer's attention (its ``scale`` and ``softcap``).
        query: ``(B, H, T, D)``, turned.
        keys: ``(B, K, S, D)``: the cache, up to the positions the queries may see.
        values: ``(B, K, S, D)``.
        mask: The family's additive mask ``(B, 1, T, S)``.

    Returns:
        The context ``(B, H, T, D)``.
    """
    size, heads, length, head_size = query.shape
    kv_heads = keys.shape[1]
    groups = heads // kv_heads
    grouped = query.reshape(size, kv_heads, groups * length, head_size)
    mask = None if mask is None else _grouped_mask(mask, groups)
    if attention.softcap is None:
        context = fused_attention(grouped, keys, values, mask, 0.0, attention.scale)
    else:
        # A bound on the scores (Gemma 2's) has no fused kernel: the eager one.
        context, _ = scaled_dot_product_attention(grouped, keys, values, mask, None, attention.scale, attention.softcap)
    return context.reshape(size, heads, length, head_size)


def layer_step(
    fused: FusedLayer,
    hidden_states: Tensor,
    keys: Tensor,
    values: Tensor,
    write: slice | Tensor,
    read: int | None,
    mask: Tensor | None,
    layer_inputs: dict[str, Any],
) -> Tensor:
    """One layer on the new tokens: its keys and values written into the cache, the layer's output returned.

    Args:
        fused: The layer.
        hidden_states: The new tokens' residual stream, ``(B, T, E)``.
        keys: The layer's cached keys ``(B, K, S, D)`` (written in place).
        values: Its cached values ``(B, K, S, D)``.
        write: Where the new positions go: a slice (eager), or their indices ``(T,)`` (a compiled step).
        read: How many positions to attend over (a view of the first ``read``); ``None``: all of them.
        mask: The family's mask for these queries, ``(B, 1, T, S)`` over the keys read.
        layer_inputs: What every layer reads besides (the rotary angles of these positions).

    Returns:
        ``(B, T, E)``.
    """
    attention_sublayer, attention = fused.attention, fused.attention.layer
    heads, kv_heads = attention.num_heads, attention.num_key_value_heads
    inner, kv_inner = heads * attention.head_size, kv_heads * attention.head_size
    # 1) Q, K and V in one multiply, from the sub-layer's input (Norm_1(x), pre-norm).
    normed = attention_sublayer.input(hidden_states, fused.norm_first)
    mixed = fused.project_query_key_value(normed)  # (B, T, H D + 2 K D)
    query, key, value = mixed.split([inner, kv_inner, kv_inner], dim=-1)
    query = split_heads(query, heads)  # (B, H, T, D)
    key = split_heads(key, kv_heads)  # (B, K, T, D)
    value = split_heads(value, kv_heads)  # (B, K, T, D)
    # 2) The family's own turn of the queries and keys (rotations; Qwen3's norms first).
    query, key = attention.position(query, key, **layer_inputs)
    # 3) The new keys and values written in place; attention over the cache so far.
    if isinstance(write, slice):
        keys[:, :, write] = key
        values[:, :, write] = value
    else:
        keys.index_copy_(2, write, key)
        values.index_copy_(2, write, value)
    if read is not None:
        keys, values = keys[:, :, :read], values[:, :, :read]
    context = attend_over_cache(attention, query, keys, values, mask)  # (B, H, T, D)
    # 4) W^O, and the residual sum (the family's: a post-norm of the output first, in Gemma 2).
    attended = fused.project_output(merge_heads(context))  # (B, T, E)
    hidden_states = attention_sublayer.join(hidden_states, attended, fused.norm_first)
    # 5) The feed-forward network: act(x W_gate) * x W_up in one multiply where it is gated, then W_down.
    feed_forward = fused.feed_forward
    normed = feed_forward.input(hidden_states, fused.norm_first)
    if fused.gate_up is None:
        output = feed_forward.layer(normed)
    else:
        network = feed_forward.layer
        gate, up = fused.project_gate_up(normed).chunk(2, dim=-1)
        output = fused.project_down(network.act_fn(gate) * up)  # (B, T, E)
    return feed_forward.join(hidden_states, output, fused.norm_first)


@dataclass
class CallTables:
    """What every step of one call reads and no step changes, made once: the family's masks, positions and layer
    inputs for every position the cache holds."""

    #: The family's masks by kind, each ``(B, 1, S, S)``: row ``t`` is what the query at position ``t`` sees.
    masks: dict[str, Tensor]
    #: ``(B, S)``: each position's number, counted over the real tokens.
    position_ids: Tensor
    #: What every layer reads besides, for every position (the rotary angles, ``(B, S, R)`` each).
    layer_inputs: dict[str, Any]


def _rows(tables: CallTables, rows: slice | Tensor) -> tuple[dict[str, Tensor], Tensor, dict[str, Any]]:
    """The masks' rows, the positions and the layer inputs of the positions ``rows``."""
    if isinstance(rows, slice):
        masks = {kind: mask[:, :, rows] for kind, mask in tables.masks.items()}
        return masks, tables.position_ids[:, rows], tree_map(lambda tensor: tensor[:, rows], tables.layer_inputs)
    masks = {kind: mask.index_select(2, rows) for kind, mask in tables.masks.items()}
    position_ids = tables.position_ids.index_select(1, rows)
    return masks, position_ids, tree_map(lambda tensor: tensor.index_select(1, rows), tables.layer_inputs)


def decode_step(
    model: nn.Module,
    layers: Sequence[FusedLayer],
    input_ids: Tensor,
    cache: tuple[Tensor, Tensor],
    tables: CallTables,
    rows: slice | Tensor,
    read: int | None,
    head: Callable[[Tensor], Tensor] | None = None,
) -> Tensor:
    """The new tokens through the whole model: the next token's scores, the cache written.

    Args:
        model: The language model (its stack's embeddings and final norm, its head).
        layers: Its :func:`fused_layers`.
        input_ids: ``(B, T)``, the tokens at the positions ``rows``.
        cache: The :class:`StaticCache`'s ``(keys, values)``, each a ``(B, K, S, D)`` tensor per layer.
        tables: The call's :class:`CallTables`.
        rows: The new tokens' positions: a slice (eager) or their indices ``(T,)`` (a compiled step).
        read: How many cached positions the new tokens attend over (eager); ``None``: all (a compiled step).
        head: The multiply of the last hidden state into scores (:attr:`StepWeights.head`); ``None``: the model's.

    Returns:
        The scores of the token after the last position, ``(B, 1, V)``.
    """
    stack = _stack(model)
    masks, position_ids, layer_inputs = _rows(tables, rows)
    keys, values = cache
    hidden_states = stack.embed(input_ids, position_ids)  # (B, T, E)
    for index, fused in enumerate(layers):
        mask = masks[fused.attention_type]
        mask = mask if read is None else mask[..., :read]
        hidden_states = layer_step(
            fused, hidden_states, keys[index], values[index], rows, read, mask, layer_inputs
        )  # (B, T, E)
    # Only the last position's scores are wanted: the final norm and the head on it alone.
    last = stack.final_norm(hidden_states[:, -1:])  # (B, 1, E)
    if head is not None:
        return head(last)
    return model.score_next_tokens(ModelOutput(last_hidden_state=last), None).logits


# ---------------------------------------------------------------------------
# The decoder the generation loops run
# ---------------------------------------------------------------------------
def _check_decoder_inputs(decoder: StaticCacheDecoder, args: Arguments) -> None:
    input_ids = check_input_ids(args.input_ids, decoder.config.vocab_size)
    cache = args.past_key_values
    if cache is None:
        if args.attention_mask is not None:
            check_attention_mask(args.attention_mask, *input_ids.shape)
        return
    if not isinstance(cache, StaticCache) or decoder.tables is None:
        raise TypeError(
            "past_key_values must be None at the first call, then the StaticCache this decoder returned, got "
            f"{type(cache).__name__}" + ("" if decoder.tables is not None else " before a first call")
        )
    rows = cache.keys[0].shape[0]
    if input_ids.shape[0] != rows:
        raise ValueError(f"input_ids must have {rows} rows, the cache's, got {input_ids.shape[0]}")
    if cache.length + input_ids.shape[1] > cache.capacity:
        raise ValueError(
            f"the cache holds {cache.capacity} positions and {cache.length} are written: no room for "
            f"{input_ids.shape[1]} more"
        )


class StaticCacheDecoder(nn.Module):
    """A model's steps over a :class:`StaticCache`, called as the generation loops call a decoder-only model.

    ``decoder(new_ids, attention_mask=..., past_key_values=cache)`` returns
    the scores of the next token and the cache, as the model's own forward
    does; the first call (no cache yet) reads the prompt, allocates the cache
    and makes the call's tables, and each later call reads the new tokens.
    The loops append a real position to the mask at every step, which is
    what the tables already hold: the later calls do not read the mask.

    Args:
        model: A model :func:`static_cache_applies` to.
        capacity: The positions the cache holds: the prompt's and the new tokens'.
        compiled_step: The compiled one-token step (:meth:`StaticCacheGeneration.compile`), or ``None``.
    """

    #: A decoder-only model, as the loops ask.
    is_encoder_decoder = False

    def __init__(self, model: nn.Module, capacity: int, compiled_step: Callable[..., Tensor] | None = None) -> None:
        super().__init__()
        self.model = model
        self.config = model.config
        self.capacity = check_positive_int(capacity, "capacity")
        self.compiled_step = compiled_step
        #: The call's tables and fused layers (and head, if not the model's), made by :meth:`start` at the first call.
        self.tables: CallTables | None = None
        self.layers: list[FusedLayer] = []
        self.head: Callable[[Tensor], Tensor] | None = None
        # In the model's mode: the loops switch the decoder to evaluation and back, and the model with it.
        self.train(model.training)

    @property
    def position_limit(self) -> int | None:
        """The model's (:func:`~literate_transformer.book.generation.position_limit`)."""
        return getattr(self.model, "position_limit", getattr(self.config, "max_position_embeddings", None))

    def start(self, input_ids: Tensor, attention_mask: Tensor | None) -> StaticCache:
        """Allocate the cache and make the call's tables for prompts ``(B, P)`` and their mask."""
        stack = _stack(self.model)
        size, length = input_ids.shape
        table = stack.get_input_embeddings().weight
        attention = stack.layers[0].sublayers()[0].layer
        cache = StaticCache(
            len(stack.layers),
            size,
            attention.num_key_value_heads,
            self.capacity,
            attention.head_size,
            table.dtype,
            table.device,
        )
        # The mask of every position the cache holds: the prompt's, then real tokens (what the loops append).
        prompt_mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask.long()
        full_mask = torch.cat([prompt_mask, prompt_mask.new_ones(size, self.capacity - length)], dim=1)  # (B, S)
        # The family's own rules, for all positions at once (position_ids reads only the shape of its first argument).
        position_ids = stack.position_ids(full_mask, full_mask, 0)  # (B, S)
        masks = stack.attention_masks(full_mask, self.capacity, 0, table.dtype, input_ids.device)
        self.tables = CallTables(masks, position_ids, dict(stack.layer_inputs(position_ids)))
        # The fused layers, rebuilt first if a weight has changed since the last call; or the model's step weights.
        weights = getattr(self.model, "step_weights", None)
        self.layers = fused_layers(self.model) if weights is None else weights.layers
        self.head = None if weights is None else weights.head
        return cache

    @torch.inference_mode()
    @validate_with(_check_decoder_inputs)
    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        past_key_values: StaticCache | None = None,
        use_cache: bool = True,
    ) -> ModelOutput:
        """The next token's scores after ``input_ids``, and the cache holding their keys and values.

        Args:
            input_ids: The prompts ``(B, P)`` at the first call, then the new tokens ``(B, T)``.
            attention_mask: The prompts' mask at the first call (later ones are not read).
            past_key_values: ``None`` at the first call, then the :class:`StaticCache` it returned.
            use_cache: Accepted as the loops pass it (the cache is always kept).

        Returns:
            A :class:`~literate_transformer.core.outputs.ModelOutput` with ``logits`` ``(B, 1, V)`` and the cache as
            ``past_key_values``.
        """
        cache = self.start(input_ids, attention_mask) if past_key_values is None else past_key_values
        start, length = cache.length, input_ids.shape[1]
        layers = self.layers
        if self.compiled_step is not None and length == 1:
            # The compiled step: its position as a tensor, attention over the whole cache (fixed shapes; the ids
            # copied out of the loop's sequences, whose strides grow every step).
            position = torch.full((1,), start, dtype=torch.long, device=input_ids.device)
            input_ids = input_ids.clone(memory_format=torch.contiguous_format)
            logits = self.compiled_step(input_ids, layers, (cache.keys, cache.values), self.tables, position, self.head)
        else:
            rows = slice(start, start + length)
            logits = decode_step(
                self.model, layers, input_ids, (cache.keys, cache.values), self.tables, rows, rows.stop, self.head
            )
        cache.length = start + length
        return ModelOutput(last_hidden_state=None, logits=logits, past_key_values=cache)


#: :func:`torch.compile`'s modes (``None``: its default).
COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _tensors(value: Any) -> Iterator[Tensor]:
    """Every tensor in ``value``: a tensor, or the fields of a dataclass, a dict's values, a list's items, nested."""
    if isinstance(value, Tensor):
        yield value
    elif is_dataclass(value):
        for field in fields(value):
            yield from _tensors(getattr(value, field.name))
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)


def _check_compile_options(model: StaticCacheGeneration, args: Arguments) -> None:
    if not isinstance(args.backend, str):
        raise TypeError(f"backend must be a string such as 'inductor', got {type(args.backend).__name__}")
    known = torch.compiler.list_backends(exclude_tags=())
    if args.backend not in known:
        raise ValueError(f"backend must be one of {known}, got {args.backend!r}")
    if args.dynamic not in (True, False, None):
        raise TypeError(f"dynamic must be True, False or None, got {args.dynamic!r}")
    if args.mode not in COMPILE_MODES:
        raise ValueError(f"mode must be one of {COMPILE_MODES}, got {args.mode!r}")
    if args.mode is not None and args.backend != "inductor":
        raise ValueError(f"mode applies to the 'inductor' backend only, got backend={args.backend!r}")
    reason = static_cache_applies(model)
    if reason is not None:
        raise ValueError(f"{type(model).__name__} cannot decode over a static cache: {reason}")


class StaticCacheGeneration:
    """What a language model mixes in to generate over a static cache: ``generate()`` then runs its steps there.

    Llama's language model mixes it in (and with it Qwen3's, Mistral's,
    Mixtral's and Gemma 2's).  The loops of
    :mod:`~literate_transformer.book.decoding` run over
    :meth:`static_cache_decoder` wherever :func:`static_cache_applies`, unless
    ``generate()`` is told ``cache_implementation="dynamic"``.
    """

    #: The compiled one-token step, once :meth:`compile` was called.
    _compiled_step: Callable[..., Tensor] | None = None
    #: What the steps multiply by in place of the model's own weights (:class:`StepWeights`), or ``None``.
    step_weights: StepWeights | None = None

    def static_cache_decoder(self, capacity: int) -> StaticCacheDecoder:
        """The decoder the loops run, its cache holding ``capacity`` positions (rounded up when compiled)."""
        if self._compiled_step is not None:
            capacity = -(-capacity // CAPACITY_STEP) * CAPACITY_STEP
        return StaticCacheDecoder(self, capacity, self._compiled_step)

    @validate_with(_check_compile_options)
    def compile(
        self, backend: str = "inductor", dynamic: bool | None = False, mode: str | None = None
    ) -> StaticCacheGeneration:
        """Compile the one-token step with :func:`torch.compile`: ``generate()`` runs it from then on (opt-in).

        The first step of each batch size and capacity compiles (tens of
        seconds with Inductor); the prompt's step stays eager.  The compiled
        step reads the fused weights of :func:`fused_layers` as they are when
        it compiles: it recompiles if they are rebuilt.

        Args:
            backend: :func:`torch.compile`'s backend (``"inductor"``: generated kernels; ``"eager"`` or
                ``"aot_eager"``: the tracing alone).
            dynamic: :func:`torch.compile`'s ``dynamic``: ``False`` compiles each batch size and capacity anew,
                the best code a fixed shape can get.
            mode: :func:`torch.compile`'s ``mode`` (Inductor's).  On a GPU ``"reduce-overhead"`` records the
                step as a CUDA graph and replays it, one launch in place of hundreds; the fused weights, the cache
                and the call's tables are then marked as staying where they are, so that a replay reads them in
                place instead of copying them into the graph's own memory first.

        Returns:
            The model itself.

        Raises:
            TypeError: if ``backend`` is not a string or ``dynamic`` not a bool or ``None``.
            ValueError: for a backend :func:`torch.compiler.list_backends` does not know, a ``mode`` not in
                :data:`COMPILE_MODES` (or one with another backend), or a model the static cache does not apply to.
        """
        model = self

        def step(
            input_ids: Tensor,
            layers: Sequence[FusedLayer],
            cache: tuple[Tensor, Tensor],
            tables: CallTables,
            position: Tensor,
            head: Callable[[Tensor], Tensor] | None,
        ) -> Tensor:
            return decode_step(model, layers, input_ids, cache, tables, position, None, head)

        compiled = torch.compile(step, backend=backend, dynamic=dynamic, mode=mode)
        if mode != "reduce-overhead":
            self._compiled_step = compiled
            return self

        def replayed_step(input_ids: Tensor, layers: Sequence[FusedLayer], *others: Any) -> Tensor:
            # Without a guard: another call's cache, at other addresses, records the graph again, not the code.
            for tensor in _tensors((layers, *others)):
                torch._dynamo.mark_static_address(tensor, guard=False)
            return compiled(input_ids, layers, *others).clone()  # the next replay overwrites its output

        self._compiled_step = replayed_step
        return self
