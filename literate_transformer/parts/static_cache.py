r"""Decoding over a static cache: the model's own forward, with the work of a step done once.

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
* **Work done again every step that could be done once**: the causal mask
  built anew, the rotary angles computed anew.

A static cache changes those things, and nothing about the model's own
forward, which it runs as it is, as ``transformers``' ``StaticCache`` and
gpt-fast's ``KVCache`` do:

1. **A cache object** (:class:`StaticCache`): every layer's keys and values
   for every position the call can reach (the prompt and the new tokens),
   allocated once, ``(B, K, S, D)`` per layer.  The stack hands the one
   object to every layer (:meth:`~literate_transformer.parts.stack.DecoderStack.run_stack`),
   and each layer's attention writes its new position in place and reads
   the positions written so far, a view,
   ``key, value = cache.update(layer_idx, key, value)``
   (:meth:`~literate_transformer.parts.attention.Attention.forward`).
2. **Grouped-query attention without repeating the keys.**  Over the cache,
   the ``H`` query heads of a step are laid out as ``K`` groups of
   ``H / K`` rows, one group per key/value head, and each key/value head is
   read once by its whole group
   (:func:`~literate_transformer.core.kernels.grouped_attention`): the same
   scores as :func:`~literate_transformer.parts.heads.repeat_kv`'s copies,
   with no copy.
3. **Everything a step reads that does not depend on the step, made once
   per call, and kept in the cache** (:class:`CallTables`): the family's
   masks for every position the cache holds (its own
   :meth:`~literate_transformer.core.masks.MaskHook.attention_masks`,
   causal, padded, banded), the positions, the rotary angles; a step takes
   its rows of each (:meth:`StaticCache.step`).  The inputs are checked
   once, where ``generate()`` is called, and the steps run under
   :func:`torch.inference_mode`.

Everything else is the family's own forward: the embeddings, every norm,
its projections (fused where the family fuses them, as Phi-3's
``qkv_proj`` and ``gate_up_proj``), the turning of queries and keys
(Llama's rotations, Qwen3's norms of each head), the feed-forward network,
the residual sums, the head and its scores, and a model whose linear
layers were swapped for 4-bit ones (:mod:`~literate_transformer.parts.int4`)
multiplies by those.  A family's model mixes in
:class:`StaticCacheGeneration`, and its ``generate()`` then runs the
package's loops (greedy, sampled, beam search:
:mod:`~literate_transformer.book.decoding`) over a
:class:`StaticCacheDecoder`, which calls the model's forward over the
cache, instead of over the model itself; the family's tests prove the ids
equal to ``transformers``' on that path, and tests here prove them equal
to the eager loop's.  A model the cache cannot serve (a layer that reads an
encoder, an attention that does not write the cache) is told why
(:func:`static_cache_applies`), and ``generate()`` says so before it runs
the growing cache instead.

One step compiled
-----------------
What remains of a step's overhead is the operations between the matrix
multiplies, each a pass over a small tensor and a call through PyTorch's
dispatcher.  :meth:`StaticCacheGeneration.compile` hands the forward with
one new token to :func:`torch.compile`, which fuses them into a few
generated loops around the multiplies.  A compiled step needs fixed shapes:
it attends over the whole cache, the not-yet-written positions hidden by
the causal mask, and it finds its position in a tensor, so that one
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils._pytree import tree_map

from ..core.outputs import Cache, ModelOutput
from ..core.validation import (
    Arguments,
    check_attention_mask,
    check_fits_in_memory,
    check_input_ids,
    check_positive_int,
    validate_with,
)
from .attention import Attention
from .heads import LanguageModelHead
from .stack import DecoderLayer, DecoderStack

__all__ = [
    "CAPACITY_STEP",
    "COMPILE_MODES",
    "CallTables",
    "StaticCache",
    "static_cache_applies",
    "StaticCacheDecoder",
    "StaticCacheGeneration",
]

#: The multiple a compiled step's capacity is rounded up to, so that calls of similar lengths share one compilation.
CAPACITY_STEP = 128


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


class StaticCache(Cache):
    """Every layer's keys and values for every position a call can reach, allocated once and written in place.

    Args:
        num_layers: ``L``.
        batch_size: ``B`` (the rows of a batch, or of every beam of it).
        num_key_value_heads: ``K``.
        capacity: ``S``, the positions it holds: the prompt's and the new tokens'.
        head_size: ``D``.
        dtype: The model's.
        device: The model's.
        tables: The call's :class:`CallTables` (made by :meth:`StaticCacheDecoder.start`).

    Raises:
        ValueError: for a cache that would take more memory than the device has, saying how much.

    Attributes:
        keys: One ``(B, K, S, D)`` tensor per layer: separate tensors, so that a compiled step writes each in
            place (a write into a view of one large tensor would be copied back whole).
        values: One ``(B, K, S, D)`` tensor per layer.
        length: How many positions are written (the next call writes position ``length`` on).
        positions: The positions the forward in progress writes: a slice (an eager call, which reads the
            positions up to its end), or their indices ``(T,)`` (a compiled step, which reads the whole cache, the
            positions not yet written hidden by the masks).
        written: The layers that wrote during the forward in progress, where it is watched (the prompt's);
            ``None`` otherwise.
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
        tables: CallTables | None = None,
    ) -> None:
        # Zeros until written (a position not yet written is never attended to).
        shape = (batch_size, num_key_value_heads, capacity, head_size)
        nbytes = 2 * num_layers * math.prod(shape) * dtype.itemsize
        check_fits_in_memory(nbytes, f"a static cache of {num_layers} layers' keys and values (each {shape})", device)
        with torch.inference_mode():
            self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
            self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.tables = tables
        self.length = 0
        self.positions: slice | Tensor = slice(0, 0)
        self.written: set[int] | None = None

    @property
    def capacity(self) -> int:
        """``S``, the positions it can hold."""
        return self.keys[0].shape[2]

    def update(self, layer_idx: int, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Write layer ``layer_idx``'s new keys and values ``(B, K, T, D)`` at :attr:`positions`; return the keys and
        values the new positions attend over, ``(B, K, S, D)`` each: the positions up to the last one written (an
        eager call), or all of them (a compiled step)."""
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        if self.written is not None:
            self.written.add(layer_idx)
        write = self.positions
        if isinstance(write, slice):
            keys[:, :, write] = key
            values[:, :, write] = value
            return keys[:, :, : write.stop], values[:, :, : write.stop]
        keys.index_copy_(2, write, key)
        values.index_copy_(2, write, value)
        return keys, values

    def step(self) -> tuple[dict[str, Tensor], Tensor, dict[str, Any]]:
        """The rows of :attr:`positions` in the call's tables: the masks (over the keys :meth:`update` returns), the
        positions ``(B, T)`` and the layer inputs of those positions."""
        tables, rows = self.tables, self.positions
        if isinstance(rows, slice):
            masks = {kind: mask[:, :, rows, : rows.stop] for kind, mask in tables.masks.items()}
            return masks, tables.position_ids[:, rows], tree_map(lambda tensor: tensor[:, rows], tables.layer_inputs)
        masks = {kind: mask.index_select(2, rows) for kind, mask in tables.masks.items()}
        position_ids = tables.position_ids.index_select(1, rows)
        return masks, position_ids, tree_map(lambda tensor: tensor.index_select(1, rows), tables.layer_inputs)

    def reorder(self, beam_index: Tensor) -> None:
        """Each row takes over the keys and values of row ``beam_index[row]`` (beam search's new beams), in place.

        Only the positions written so far are copied.
        """
        with torch.inference_mode():
            for cache in (*self.keys, *self.values):
                written = cache[:, :, : self.length]
                written.copy_(written.index_select(0, beam_index))


def _stack(model: nn.Module) -> DecoderStack:
    return getattr(model, model.stack_name)


def static_cache_applies(model: object) -> str | None:
    """Why a static cache cannot serve ``model``, or ``None`` if it can.

    It serves a decoder-only language model of the package
    (:class:`~literate_transformer.parts.heads.LanguageModelHead`) whose stack is a
    :class:`~literate_transformer.parts.stack.DecoderStack` with ``layers``, each a
    :class:`~literate_transformer.parts.stack.DecoderLayer` without cross-attention whose attention is an
    :class:`~literate_transformer.parts.attention.Attention` that knows its layer (``layer_idx``, the cache entry it
    writes).  Whether every attention does write the cache is checked when it runs (:class:`StaticCacheDecoder`).
    """
    if not (isinstance(model, LanguageModelHead) and isinstance(model, nn.Module)):
        return f"{type(model).__name__} is not a decoder-only language model of the package"
    stack = getattr(model, model.stack_name, None)
    if not isinstance(stack, DecoderStack) or not isinstance(getattr(stack, "layers", None), nn.ModuleList):
        return f"{type(model).__name__}'s stack is not a DecoderStack with layers"
    for index, layer in enumerate(stack.layers):
        if not isinstance(layer, DecoderLayer):
            return f"layer {index} ({type(layer).__name__}) is not a DecoderLayer"
        if layer.cross_attention_sublayer() is not None:
            return f"layer {index} reads an encoder (cross-attention)"
        attention = layer.sublayers()[0].layer
        if not isinstance(attention, Attention):
            return f"layer {index}'s attention ({type(attention).__name__}) is not an Attention, which writes the cache"
        if attention.layer_idx != index:
            return f"layer {index}'s attention has layer_idx={attention.layer_idx!r}: the cache entry it writes"
    return None


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
    if not isinstance(cache, StaticCache) or cache.tables is None:
        raise TypeError(
            "past_key_values must be None at the first call, then the StaticCache this decoder returned, got "
            f"{type(cache).__name__}"
        )
    rows = cache.keys[0].shape[0]
    if input_ids.shape[0] != rows:
        raise ValueError(f"input_ids must have {rows} rows, the cache's, got {input_ids.shape[0]}")
    if cache.length + input_ids.shape[1] > cache.capacity:
        raise ValueError(
            f"the cache holds {cache.capacity} positions and {cache.length} are written: no room for "
            f"{input_ids.shape[1]} more"
        )


def _next_token_scores(model: nn.Module, input_ids: Tensor, cache: StaticCache) -> Tensor:
    """The model's own forward over ``cache``: the scores of the token after the last position, ``(B, 1, V)``."""
    return model(input_ids, past_key_values=cache, use_cache=True, logits_to_keep=1).logits


class StaticCacheDecoder(nn.Module):
    """A model's forward over a :class:`StaticCache`, called as the generation loops call a decoder-only model.

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
        # In the model's mode: the loops switch the decoder to evaluation and back, and the model with it.
        self.train(model.training)

    @property
    def position_limit(self) -> int | None:
        """The model's (:func:`~literate_transformer.book.generation.position_limit`)."""
        return getattr(self.model, "position_limit", getattr(self.config, "max_position_embeddings", None))

    def start(self, input_ids: Tensor, attention_mask: Tensor | None) -> StaticCache:
        """Allocate the cache for prompts ``(B, P)`` and their mask, and make the call's tables with the family's own
        hooks (its masks, positions and layer inputs, for every position the cache holds)."""
        stack = _stack(self.model)
        size, length = input_ids.shape
        dtype = stack.get_input_embeddings().weight.dtype
        attention = stack.layers[0].sublayers()[0].layer
        # The mask of every position the cache holds: the prompt's, then real tokens (what the loops append).
        prompt_mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask.long()
        full_mask = torch.cat([prompt_mask, prompt_mask.new_ones(size, self.capacity - length)], dim=1)  # (B, S)
        # The family's own rules, for all positions at once (position_ids reads only the shape of its first argument).
        position_ids = stack.position_ids(full_mask, full_mask, 0)  # (B, S)
        masks = stack.attention_masks(full_mask, self.capacity, 0, dtype, input_ids.device)
        tables = CallTables(masks, position_ids, dict(stack.layer_inputs(position_ids)))
        return StaticCache(
            len(stack.layers),
            size,
            attention.num_key_value_heads,
            self.capacity,
            attention.head_size,
            dtype,
            input_ids.device,
            tables,
        )

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

        Raises:
            RuntimeError: at the first call, naming the layers whose attention did not write the cache (a family
                whose forward does not take a cache object: its keys would be lost, and its tokens wrong).
        """
        first = past_key_values is None
        cache = self.start(input_ids, attention_mask) if first else past_key_values
        start, length = cache.length, input_ids.shape[1]
        if self.compiled_step is not None and length == 1:
            # The compiled step: its position as a tensor, attention over the whole cache (fixed shapes; the ids
            # copied out of the loop's sequences, whose strides grow every step).
            cache.positions = torch.full((1,), start, dtype=torch.long, device=input_ids.device)
            input_ids = input_ids.clone(memory_format=torch.contiguous_format)
            logits = self.compiled_step(input_ids, cache)
        else:
            cache.positions = slice(start, start + length)
            # The first call watches that every layer writes the cache (the later ones run the same code).
            cache.written = set() if first else None
            logits = _next_token_scores(self.model, input_ids, cache)
            if first and cache.written != set(range(len(cache.keys))):
                missing = sorted(set(range(len(cache.keys))) - cache.written)
                raise RuntimeError(
                    f"{type(self.model).__name__}: the attention of layers {missing} did not write the static cache "
                    "(its forward does not take a cache object); decode with cache_implementation='dynamic'"
                )
            cache.written = None
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
    """What a language model mixes in to generate over a static cache: ``generate()`` then runs its forward there.

    Llama's language model mixes it in (and with it Qwen3's, Mistral's,
    Mixtral's, Gemma 2's and Phi-3's).  The loops of
    :mod:`~literate_transformer.book.decoding` run over
    :meth:`static_cache_decoder` wherever :func:`static_cache_applies`, unless
    ``generate()`` is told ``cache_implementation="dynamic"``; where it does
    not apply, ``generate()`` warns, naming why, and runs the growing cache.
    """

    #: The compiled one-token step, once :meth:`compile` was called.
    _compiled_step: Callable[..., Tensor] | None = None

    def static_cache_decoder(self, capacity: int) -> StaticCacheDecoder:
        """The decoder the loops run, its cache holding ``capacity`` positions (rounded up when compiled)."""
        if self._compiled_step is not None:
            capacity = -(-capacity // CAPACITY_STEP) * CAPACITY_STEP
        return StaticCacheDecoder(self, capacity, self._compiled_step)

    @validate_with(_check_compile_options)
    def compile(
        self, backend: str = "inductor", dynamic: bool | None = False, mode: str | None = None
    ) -> StaticCacheGeneration:
        """Compile the one-token step (the model's forward over the cache) with :func:`torch.compile`: ``generate()``
        runs it from then on (opt-in).

        The first step of each batch size and capacity compiles (tens of
        seconds with Inductor); the prompt's step stays eager.

        Args:
            backend: :func:`torch.compile`'s backend (``"inductor"``: generated kernels; ``"eager"`` or
                ``"aot_eager"``: the tracing alone).
            dynamic: :func:`torch.compile`'s ``dynamic``: ``False`` compiles each batch size and capacity anew,
                the best code a fixed shape can get.
            mode: :func:`torch.compile`'s ``mode`` (Inductor's).  On a GPU ``"reduce-overhead"`` records the
                step as a CUDA graph and replays it, one launch in place of hundreds; the cache and the call's
                tables are then marked as staying where they are (the model's parameters are, as parameters), so
                that a replay reads them in place instead of copying them into the graph's own memory first.

        Returns:
            The model itself.

        Raises:
            TypeError: if ``backend`` is not a string or ``dynamic`` not a bool or ``None``.
            ValueError: for a backend :func:`torch.compiler.list_backends` does not know, a ``mode`` not in
                :data:`COMPILE_MODES` (or one with another backend), or a model the static cache does not apply to.
        """
        model = self

        def step(input_ids: Tensor, cache: StaticCache) -> Tensor:
            return _next_token_scores(model, input_ids, cache)

        compiled = torch.compile(step, backend=backend, dynamic=dynamic, mode=mode)
        if mode != "reduce-overhead":
            self._compiled_step = compiled
            return self

        def replayed_step(input_ids: Tensor, cache: StaticCache) -> Tensor:
            # Without a guard: another call's cache, at other addresses, records the graph again, not the code.
            for tensor in _tensors((cache.keys, cache.values, cache.tables)):
                torch._dynamo.mark_static_address(tensor, guard=False)
            return compiled(input_ids, cache).clone()  # the next replay overwrites its output

        self._compiled_step = replayed_step
        return self
