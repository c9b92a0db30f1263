r"""Decoding in 4 bits: the GGUF file's own Q4_1 blocks, multiplied as they are stored.

The trained decoder's file keeps its weights in blocks of 32, five bits a
weight (:mod:`~literate_transformer.core.gguf`), and the package reads them
into float32: 538 MB for SmolLM2-135M.  At batch 1 that is what a step
costs.  Each new token multiplies one vector by every weight matrix once, two
floating-point operations for every four bytes read, so the step waits on
memory, not arithmetic: at the 24 to 27 GB/s that two CPU cores stream
(measured by the generation benchmark), reading 538 MB allows at most 45 to
50 tokens a second, however the step is written
(:mod:`~literate_transformer.parts.static_cache`).  The file itself holds the
same weights in 98 MB, less than a fifth of the bytes.  This module
multiplies by those bytes: the blocks as they are stored, packed for
PyTorch's 4-bit CPU kernel, never re-quantized.

From a Q4_1 block to PyTorch's 4-bit layout
-------------------------------------------
PyTorch's CPU build has a weight-only 4-bit multiply (the one ``torchao``'s
int4 weight-only layout calls): ``torch.ops.aten._convert_weight_to_int4pack_for_cpu``
packs an ``(N, K)`` matrix of integers :math:`q \in 0..15` into ``(N, K/2)``
bytes, and ``torch.ops.aten._weight_int4pack_mm_for_cpu(x, packed, 32, scales_and_zeros)``
multiplies ``x`` by the weights

.. math::

    w = (q - 8)\,s + z \qquad \text{per group of 32 along a row,}

with a scale :math:`s` and a zero :math:`z` per group, in ``scales_and_zeros``
``(K/32, N, 2)``.  A GGUF block is such a group, and each of its formats maps
onto it with no rounding of the levels (:func:`levels_of`):

=========================  ===================  ==========================  =========================
format                     the block's weights  :math:`s`                   :math:`z`
=========================  ===================  ==========================  =========================
Q4_1                       :math:`d\,q + m`     :math:`d`                   :math:`m + 8 d`
Q4_0                       :math:`d\,(q - 8)`   :math:`d`                   :math:`0`
Q8_0, as two 4-bit halves  :math:`d\,q`         :math:`16 d` and :math:`d`  :math:`0` and :math:`8 d`
=========================  ===================  ==========================  =========================

The levels are the block's own 4-bit integers, unpacked from its bytes
(byte :math:`j` holds weights :math:`j` and :math:`j + 16`) and packed again
in PyTorch's order.  Q8_0 has 8-bit levels: :math:`q + 128 = 16 h + l` with
:math:`h, l` in 0..15, so a Q8_0 matrix is two 4-bit matrices side by side,
the high halves and the low ones, and the input is read twice
(``[x, x]`` against ``[W_h, W_l]``).  PyTorch's packing wants the rows in
multiples of 16 (:data:`ROW_MULTIPLE`); a matrix with other rows is padded
with zero weights and its output cut back.

The one rounding the mapping adds is in ``scales_and_zeros``, which are
bfloat16: 8 significant bits where the file's float16 :math:`d` and
:math:`m` have 11, a relative error of at most :math:`2^{-9}` on each.  On
SmolLM2's file it moves the weights by 0.17% of their size on average (the
sum of the changes over the sum of the weights, every matrix), 0.02 at most.
:meth:`Levels.weights` gives the weights the kernel multiplies by.

Swapped in place, as gpt-fast swaps them
----------------------------------------
A 4-bit matrix is a module of the model's tree, as gpt-fast's
``WeightOnlyInt4Linear`` is: :func:`swap_to_int4` replaces every linear
layer of the model's layers (``q_proj``, ``k_proj``, ``v_proj``,
``o_proj``, ``gate_proj``, ``up_proj``, ``down_proj``) by a
:class:`PackedLinear` of the same name holding that matrix's blocks, and
the head by a :class:`RescoredHead`, where they were: the model's own
forward then multiplies by them, on every path (the static cache's steps,
compiled or not, the growing cache, a plain call).  The query and key rows
that llama.cpp's converter interleaved are put back by the same
:func:`~literate_transformer.trained.halves_from_pairs`, applied to the rows
of blocks (:func:`~literate_transformer.trained.blocks_from_gguf`).  The
norms, the rotations, the attention over the cache and the residual sums
are the model's own, in float32, and the loops (greedy, sampled, beam
search: :mod:`~literate_transformer.book.decoding`) run over it unchanged.
Matrices that read the same input may also be stacked into one multiply
(:func:`stack_levels`: a row of blocks is a row of weights), as a family
whose projections are fused (Phi-3's ``qkv_proj``) would need.

What bfloat16 activations cost
------------------------------
The kernel is fast only for bfloat16 inputs: on 2 CPU cores, at
``576 -> 1536`` (one ``up_proj`` of SmolLM2) and batch 1 it takes 29 µs with
bfloat16 activations and 700 µs with float32 ones.  So each multiply rounds
its input to bfloat16 and widens its output back (:class:`PackedLinear`):
two roundings, each a relative error of at most :math:`2^{-9}` per number,
at every multiply of every layer.  The 4-bit path therefore computes other
numbers than the float32 path on the *same* weights.  The generation
benchmark feeds both the float32 path's ids and records, at every step, how
far the next token's scores differ, and how many greedy ids the two write
before they part (on the Benchmarks page).  In its run on 2 CPU cores the
largest difference of a step's scores was 0.46 to 1.13 and the mean 0.06 to
0.07, for scores that spread over tens; 15 of its 18 prompts (of 32 and 256
tokens) got the float32 path's 128 greedy tokens, and the other three parted
at a near-tie, after 17, 0 and 7 tokens.

The token table and the head
----------------------------
SmolLM2 ties its head to the token table, which the file keeps in Q8_0
(49152 rows of 576); llama.cpp multiplies by it in that format.  Here it is
packed as two 4-bit halves, the file's own numbers: at batch 1 it takes
1.5 ms on 2 CPU cores, where the float32 table takes 2.6 ms.  But a 4-bit
multiply writes bfloat16 scores, and a score of 10 in bfloat16 is a
multiple of 1/16: close candidates become ties.  On four random prompts of
32 tokens, greedy decoding with those scores kept the float32 path's first
25, 0, 1 and 8 ids.  So the head rescores (:class:`RescoredHead`): the
16 best tokens of the 4-bit scores are scored again against the model's
own float32 table (the Q8_0 blocks, dequantized), from the float32 hidden
state.  The best token of the float32 scores was never further than fifth
in the 4-bit ones, over 1024 steps measured; with the rescoring the same
four prompts kept 128, 128, 1 and 128 ids (the third parts at a near-tie in
the layers, which a float32 head on the 4-bit layers parts at too), for
0.25 ms more a step.  The token table itself stays float32, for the
embeddings: a step reads one row of it.

Bound by bytes, then by unpacking
---------------------------------
Packed, with their bfloat16 scales and zeros and the head as two halves,
SmolLM2's weights are 102 MB: read at 25 GB/s, a step's bytes would allow
about 250 tokens a second.  The kernel does not read that fast.  On 2 CPU
cores, at batch 1, it gets through the packed bytes of SmolLM2's matrices at
13 to 20 GB/s, not at the memory's rate: unpacking levels, widening them
and scaling them is arithmetic, and with one row of input there is little
of it to share.  So a 4-bit step is bound by its multiplies, and then by the
rest of the step (the attention over the cache, the norms, the rotations and
Python around them, which compiling shrinks).  In the generation
benchmark's run on 2 CPU cores, at batch 1 and a prompt of 32 tokens, one
4-bit step took 15 ms where the float32 static step took 34 ms, and
``generate()`` wrote 49 tokens a second in 4 bits, 74 compiled, against 25
and 32 for the float32 static cache and compiled step; compiling helps the
4-bit step more because its multiplies take less of it.  The kernel's time
grows with the rows of input, though: the prompt's step, 256 tokens at
once, took 450 ms in 4 bits and 270 ms in float32.

Using it
--------
``tokenizer, model = load_decoder(weights="int4")``
(:func:`~literate_transformer.trained.load_decoder`) reads the file once
and swaps the model's linear layers for its 4-bit blocks
(:func:`swap_to_int4`): ``model.generate(...)`` then decodes over the
static cache in 4 bits, and ``model.compile()`` compiles that step
(Inductor calls the same kernel); its forward, the growing cache and the
lens multiply by the same blocks.  :func:`packed_bytes` counts the bytes
they hold.  The kernels are PyTorch's CPU ones: the 4-bit path runs on the
CPU.

>>> from literate_transformer.core.gguf import dequantize, quantize
>>> _ = torch.manual_seed(0)
>>> weights = torch.randn(48, 64)
>>> blocks = quantize(weights, "Q4_1")                         # the file's format: 20 bytes a block of 32
>>> packed = PackedLinear.from_levels(levels_of(BlockRows("w", "Q4_1", blocks.view(48, -1), 64)))   # a module
>>> x = torch.randn(3, 64)
>>> exact = x.to(torch.bfloat16).float() @ dequantize(blocks, "Q4_1", (48, 64)).T
>>> bool(((packed(x) - exact).abs() <= 2**-7 * exact.abs().max()).all())
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from ..core.gguf import BLOCK_SIZE, FORMATS, GGUFFile
from ..core.validation import check_positive_int
from .static_cache import static_cache_applies

__all__ = [
    "PACKABLE",
    "ROW_MULTIPLE",
    "BlockRows",
    "Levels",
    "levels_of",
    "stack_levels",
    "PackedLinear",
    "RescoredHead",
    "swap_to_int4",
    "packed_bytes",
]

#: The block formats this path packs as they are (two of 4-bit levels, and Q8_0 as two 4-bit halves).
PACKABLE = ("Q4_0", "Q4_1", "Q8_0")
#: PyTorch's CPU packing wants the output rows in multiples of this (a matrix is padded with zero rows).
ROW_MULTIPLE = 16


@dataclass(frozen=True)
class BlockRows:
    """A matrix as its file stores it: each row's blocks, not dequantized.

    Attributes:
        name: The tensor's name in the file (for messages).
        kind: Its format (``"Q4_1"``).
        rows: ``(N, K / 32 * block bytes)`` ``torch.uint8``: row ``n``'s blocks, one after another.
        columns: ``K``, its weights per row.
    """

    name: str
    kind: str
    rows: Tensor
    columns: int

    @classmethod
    def read(cls, gguf: GGUFFile, name: str) -> BlockRows:
        """Tensor ``name`` of the file (a matrix), its bytes as they are stored."""
        info = gguf.tensors[name]
        if len(info.shape) != 2:
            raise ValueError(f"tensor {name!r} has shape {info.shape}: not a matrix")
        return cls(name, info.kind, gguf.raw(name).view(info.shape[0], -1), info.shape[1])

    def reordered(self, rows: Tensor) -> BlockRows:
        """The same matrix with its rows reordered (``rows``: this one's, in another order)."""
        return replace(self, rows=rows)


@dataclass(frozen=True)
class Levels:
    r"""A matrix as PyTorch's 4-bit multiply reads it: :math:`w = (q - 8)\,s + z` per group of 32 along a row.

    Attributes:
        levels: ``(N, C)`` ``torch.int32``, each in 0..15.
        scales: ``(N, C / 32)`` float32, :math:`s` of each group.
        zeros: ``(N, C / 32)`` float32, :math:`z` of each group.
        copies: How many copies of the input, side by side, the ``C`` columns read (1; 2 for Q8_0's halves).
    """

    levels: Tensor
    scales: Tensor
    zeros: Tensor
    copies: int

    def weights(self) -> Tensor:
        """The float32 ``(N, C / copies)`` weights the levels stand for, scales and zeros rounded to bfloat16 as the
        multiply reads them (the copies' columns summed)."""
        scales = self.scales.to(torch.bfloat16).float().repeat_interleave(BLOCK_SIZE, dim=1)
        zeros = self.zeros.to(torch.bfloat16).float().repeat_interleave(BLOCK_SIZE, dim=1)
        weights = (self.levels.float() - 8) * scales + zeros
        return weights.reshape(weights.shape[0], self.copies, -1).sum(dim=1)


def _halves(blocks: Tensor, start: int) -> Tensor:
    """The float16 number at bytes ``start, start + 1`` of every block, as float32 ``(blocks, 1)``."""
    return blocks[:, start : start + 2].contiguous().view(torch.float16).float()


def levels_of(matrix: BlockRows) -> Levels:
    r"""A matrix's blocks as :class:`Levels`, each block's numbers mapped, none re-quantized.

    * Q4_1, :math:`w = d\,q + m`: :math:`s = d`, :math:`z = m + 8 d`.
    * Q4_0, :math:`w = d\,(q - 8)`: :math:`s = d`, :math:`z = 0`.
    * Q8_0, :math:`w = d\,q` with :math:`q \in [-127, 127]`: :math:`q + 128 = 16\,h + l` with :math:`h, l` in
      0..15, so :math:`w = 16 d\,(h - 8) + (d\,(l - 8) + 8 d)`: two 4-bit matrices side by side, the high
      halves (:math:`s = 16 d`, :math:`z = 0`) and the low ones (:math:`s = d`, :math:`z = 8 d`), reading two
      copies of the input.

    Raises:
        ValueError: for another format, naming the tensor.
    """
    if matrix.kind not in PACKABLE:
        raise ValueError(
            f"tensor {matrix.name!r} is {matrix.kind}: the 4-bit path packs the file's {', '.join(PACKABLE)} blocks "
            "as they are, and re-quantizes nothing"
        )
    block = FORMATS[matrix.kind]
    count, groups = matrix.rows.shape[0], matrix.columns // BLOCK_SIZE
    blocks = matrix.rows.reshape(count * groups, block.block_bytes)
    scale = _halves(blocks, 0)
    if matrix.kind == "Q8_0":
        shifted = blocks[:, 2:].contiguous().view(torch.int8).int() + 128
        levels = torch.cat([(shifted >> 4).reshape(count, -1), (shifted & 15).reshape(count, -1)], dim=1)
        scales = torch.cat([16 * scale, scale], dim=1)
        zeros = torch.cat([torch.zeros_like(scale), 8 * scale], dim=1)
        return Levels(levels, _groups(scales, count, groups), _groups(zeros, count, groups), 2)
    start = 4 if matrix.kind == "Q4_1" else 2
    packed = blocks[:, start:]
    # Byte j holds weight j in its low four bits and weight j + 16 in its high four.
    levels = torch.cat([packed & 0x0F, packed >> 4], dim=1).int().reshape(count, -1)
    zeros = _halves(blocks, 2) + 8 * scale if matrix.kind == "Q4_1" else torch.zeros_like(scale)
    return Levels(levels, scale.reshape(count, groups), zeros.reshape(count, groups), 1)


def _groups(pairs: Tensor, count: int, groups: int) -> Tensor:
    """``(count * groups, 2)`` numbers, a high and a low half's per block, as ``(count, 2 * groups)``: every high
    half's group first, then every low half's, as the levels are laid out."""
    return pairs.reshape(count, groups, 2).transpose(1, 2).reshape(count, 2 * groups)


def stack_levels(parts: Sequence[Levels]) -> Levels:
    """Matrices that read the same input, one above the other (``[W^Q; W^K; W^V]``): their rows stacked.

    Raises:
        ValueError: if they read different numbers of input copies (a Q8_0 matrix beside a 4-bit one).
    """
    copies = {part.copies for part in parts}
    if len(copies) != 1:
        raise ValueError("matrices stacked into one multiply must all be 4-bit or all Q8_0, got a mix")
    return Levels(
        torch.cat([part.levels for part in parts]),
        torch.cat([part.scales for part in parts]),
        torch.cat([part.zeros for part in parts]),
        copies.pop(),
    )


class PackedLinear(nn.Module):
    """A linear layer over packed 4-bit levels: bfloat16 in, PyTorch's CPU 4-bit multiply, the input's dtype out.

    A module, so that it takes a linear layer's place in the model's tree (:func:`swap_to_int4`); its numbers are
    buffers (nothing to train).

    Args:
        weight: ``(N', C / 2)`` ``torch.uint8``, as ``torch.ops.aten._convert_weight_to_int4pack_for_cpu`` packs
            the levels (``N'``: ``N`` rounded up to :data:`ROW_MULTIPLE`).
        scales_and_zeros: ``(C / 32, N', 2)`` bfloat16: each group's :math:`s` and :math:`z`.
        out_features: ``N``.
        copies: The input's copies the columns read.
        bias: ``(N,)`` float32, added after the multiply, or ``None``.
    """

    def __init__(
        self, weight: Tensor, scales_and_zeros: Tensor, out_features: int, copies: int, bias: Tensor | None = None
    ) -> None:
        super().__init__()
        self.register_buffer("weight", weight)
        self.register_buffer("scales_and_zeros", scales_and_zeros)
        self.register_buffer("bias", bias)
        self.out_features = out_features
        self.copies = copies

    @classmethod
    def from_levels(cls, levels: Levels, bias: Tensor | None = None) -> PackedLinear:
        """Pack ``levels`` (rows padded with zero weights up to a multiple of :data:`ROW_MULTIPLE`)."""
        count = levels.levels.shape[0]
        padding = -count % ROW_MULTIPLE
        codes, scales, zeros = levels.levels, levels.scales, levels.zeros
        if padding:
            # Level 8 at scale 0 and zero 0: weights of 0.
            codes = torch.cat([codes, codes.new_full((padding, codes.shape[1]), 8)])
            scales = torch.cat([scales, scales.new_zeros(padding, scales.shape[1])])
            zeros = torch.cat([zeros, zeros.new_zeros(padding, zeros.shape[1])])
        with torch.no_grad():
            weight = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes.contiguous(), 1)
            scales_and_zeros = torch.stack([scales.t(), zeros.t()], dim=-1).to(torch.bfloat16).contiguous()
        return cls(weight, scales_and_zeros, count, levels.copies, None if bias is None else bias.detach().float())

    def forward(self, inputs: Tensor) -> Tensor:
        """``(..., K) -> (..., N)``: the inputs rounded to bfloat16, multiplied, returned in their own dtype."""
        leading = inputs.shape[:-1]
        flat = inputs.reshape(-1, inputs.shape[-1]).to(torch.bfloat16)
        if self.copies > 1:
            flat = flat.repeat(1, self.copies)
        output = torch.ops.aten._weight_int4pack_mm_for_cpu(flat, self.weight, BLOCK_SIZE, self.scales_and_zeros)
        if output.shape[1] != self.out_features:
            output = output[:, : self.out_features]
        output = output.to(inputs.dtype).reshape(*leading, self.out_features)
        return output if self.bias is None else output + self.bias

    def extra_repr(self) -> str:
        return f"out_features={self.out_features}, copies={self.copies}, bias={self.bias is not None}"


class RescoredHead(nn.Module):
    """The head: every token scored by the 4-bit multiply, the ``candidates`` best of them scored again in float32.

    Args:
        packed: The head's blocks, packed.
        weight: ``(V, E)`` float32: the model's own head (the table, dequantized), whose rows rescore; kept as the
            parameter it is, so that a head tied to the token table stays tied.
        candidates: How many of the best tokens are rescored.
    """

    def __init__(self, packed: PackedLinear, weight: Tensor, candidates: int) -> None:
        super().__init__()
        self.packed = packed
        self.weight = weight
        self.candidates = candidates

    def forward(self, last: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, V)``: the scores of the next token."""
        scores = self.packed(last)
        best = scores.topk(self.candidates, dim=-1).indices  # shape (B, T, candidates)
        # The candidates' rows of the float32 head, against the float32 hidden state.
        exact = torch.einsum("btce,bte->btc", self.weight[best], last)
        if self.packed.bias is not None:
            exact = exact + self.packed.bias[best]
        return scores.scatter(-1, best, exact)


def _packed(blocks: Mapping[str, BlockRows], name: str, module: nn.Linear) -> PackedLinear:
    """The linear layer ``name``'s matrix, from the file's blocks, packed with its bias."""
    key = f"{name}.weight"
    if key not in blocks:
        raise ValueError(f"no blocks for {key}: the 4-bit path needs every matrix of the layers from the file")
    matrix = blocks[key]
    if matrix.rows.shape[0] != module.out_features or matrix.columns != module.in_features:
        raise ValueError(
            f"the blocks of {key} are a ({matrix.rows.shape[0]}, {matrix.columns}) matrix; the model's is "
            f"({module.out_features}, {module.in_features})"
        )
    return PackedLinear.from_levels(levels_of(matrix), module.bias)


def swap_to_int4(model: nn.Module, blocks: Mapping[str, BlockRows], candidates: int = 16) -> nn.Module:
    """Swap the model's linear layers for the file's 4-bit blocks, in place: every one of its layers, and the head.

    Each :class:`torch.nn.Linear` inside the stack's layers becomes a :class:`PackedLinear` of the same name, and
    ``lm_head`` a :class:`RescoredHead` (where the head's blocks are of a :data:`PACKABLE` format; else the
    model's own float32 head is kept).  The token table, the norms and the rotary frequencies stay float32.

    Args:
        model: A decoder-only language model a static cache serves (Llama's and its descendants').
        blocks: The file's matrices by the model's parameter names (``"model.layers.0.self_attn.q_proj.weight"``,
            ``"lm_head.weight"``), rows in the model's order
            (:func:`~literate_transformer.trained.blocks_from_gguf`).
        candidates: How many of the head's best tokens are rescored in float32 (:class:`RescoredHead`).

    Returns:
        ``model``, its linear layers 4-bit.

    Raises:
        TypeError: for ``blocks`` that is not a mapping.
        ValueError: for ``candidates`` below 1, a model the static cache does not serve, a matrix missing from
            ``blocks`` or of another shape, or one of a format not in :data:`PACKABLE` (naming the tensor); the
            model is left as it was.
    """
    if not isinstance(blocks, Mapping):
        raise TypeError(f"blocks must be a mapping of parameter names to BlockRows, got {type(blocks).__name__}")
    check_positive_int(candidates, "candidates")
    reason = static_cache_applies(model)
    if reason is not None:
        raise ValueError(f"{type(model).__name__} cannot decode over a static cache: {reason}")
    stack_name = model.stack_name
    linears = [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and name.startswith(f"{stack_name}.layers.")
    ]
    # Every matrix packed first, so that a refused one leaves the model as it was.
    swaps = {name: _packed(blocks, name, module) for name, module in linears}
    head = blocks.get("lm_head.weight")
    if head is not None and head.kind in PACKABLE:
        packed = _packed(blocks, "lm_head", model.lm_head)
        swaps["lm_head"] = RescoredHead(packed, model.lm_head.weight, min(candidates, packed.out_features))
    for name, module in swaps.items():
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, child, module)
    return model


def packed_bytes(model: nn.Module) -> int:
    """The bytes a 4-bit model's packed weights hold: every :class:`PackedLinear`'s levels, scales and zeros.

    The norms and the float32 rows the head rescores, some tens of thousands of numbers, are left out.

    Raises:
        ValueError: for a model without 4-bit layers (:func:`swap_to_int4`).
    """
    packed = [module for module in model.modules() if isinstance(module, PackedLinear)]
    if not packed:
        raise ValueError(
            f"model must decode over 4-bit weights (load_decoder(weights='int4')), got {type(model).__name__}"
        )
    return sum(
        tensor.numel() * tensor.element_size()
        for linear in packed
        for tensor in (linear.weight, linear.scales_and_zeros)
    )
