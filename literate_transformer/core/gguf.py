r"""A GGUF file, read: llama.cpp's one-file checkpoint, its metadata, and its blocks of 4- and 8-bit weights.

A HuggingFace checkpoint is a folder: ``config.json``, the tokenizer's
files, and ``model.safetensors`` with one float per weight.  llama.cpp keeps
everything in one file, *GGUF* (its ``docs/gguf.md`` and ``gguf-py`` define
it), and keeps most weights *quantized*: a row is cut into blocks of 32
consecutive weights, and each block is stored as 32 small integers and the
one or two numbers that turn them back into weights.  This module reads such
a file with the standard library (and NumPy) into PyTorch tensors; nothing of
llama.cpp runs.

The container
-------------
Little-endian throughout, in four parts:

1. a header: the bytes ``GGUF``, the format's version (3), the number of
   tensors and the number of metadata entries;
2. the metadata, one typed entry after another: a key
   (``llama.block_count``), a type (integers, floats, a bool, a string, or an
   array of one of them) and the value.  The architecture's sizes are here,
   and so is the whole tokenizer: the vocabulary, the merges, the special
   ids and the chat template;
3. one entry per tensor: its name (``blk.0.attn_q.weight``), its dimensions
   *innermost first* (a ``(rows, columns)`` weight is listed
   ``[columns, rows]``), its type, and where its data starts;
4. padding up to ``general.alignment`` bytes (32 by default), then the data.

:func:`read_gguf` reads parts 1 to 3 and returns a :class:`GGUFFile`, whose
:attr:`~GGUFFile.layout` says where each part starts and ends; its
:meth:`~GGUFFile.tensor` reads one tensor's bytes and turns them into
float32 weights.

A GGUF file is input from anywhere, so the reader trusts no number of the
header before checking it: a count or a length against the bytes the file
has left (before anything is allocated), the alignment, each key and tensor
named once, each tensor's dimensions and its place in the data.  It maps the
file (``mmap``) instead of reading it: reading the header costs what the
header holds, and a tensor's bytes are copied out when it is read.

The blocks
----------
Each format stores a block of 32 weights :math:`w_1 \dots w_{32}` as
integers :math:`q_j` and float16 numbers that map them back:

======  ================================================  ==========  ===============
format  one block                                         bytes       bits per weight
======  ================================================  ==========  ===============
F32     (no blocks) one float32 per weight                4 each      32
F16     (no blocks) one float16 per weight                2 each      16
Q8_0    scale :math:`d`, 32 int8 :math:`q_j`              2 + 32      8.5
Q4_1    scale :math:`d`, minimum :math:`m`, 32 × 4 bits   2 + 2 + 16  5
Q4_0    scale :math:`d`, 32 × 4 bits                      2 + 16      4.5
======  ================================================  ==========  ===============

.. math::

    \text{Q8\_0: } w_j = d\,q_j, \quad q_j \in [-127, 127]; \qquad
    \text{Q4\_1: } w_j = d\,q_j + m, \quad q_j \in [0, 15]; \qquad
    \text{Q4\_0: } w_j = d\,(q_j - 8), \quad q_j \in [0, 15].

A 4-bit block packs two weights in a byte, and not neighbours: byte
:math:`j` holds weight :math:`j` in its low four bits and weight
:math:`j + 16` in its high four.  Q4_1 spends 16 more bits a block than
Q4_0 on its minimum, so that its 16 levels span the block's own range,
from its least weight to its greatest.  Q4_0's levels are
:math:`-8d, -7d, \dots, 7d`: ``ggml``'s reference quantizer sets
:math:`d` so that the weight of largest magnitude lands on :math:`-8d`
exactly, and the other side reaches only :math:`7/8` of that magnitude,
whatever the block holds there.

:func:`dequantize` turns a tensor's bytes into float32 weights, computing
each formula in float32 as ``gguf-py`` (and so ``transformers``) does;
:func:`quantize` goes the other way, with ``ggml``'s reference rounding,
which is how a lesson measures what a coarser format costs.

>>> weights = torch.linspace(-1.0, 2.0, 32)
>>> for kind in ("Q8_0", "Q4_1", "Q4_0"):
...     packed = quantize(weights, kind)
...     error = (dequantize(packed, kind, (32,)) - weights).abs().max()
...     print(kind, packed.numel(), "bytes, largest error", round(float(error), 4))
Q8_0 34 bytes, largest error 0.0078
Q4_1 20 bytes, largest error 0.0968
Q4_0 18 bytes, largest error 0.121
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .checkpoints import path_kind

__all__ = [
    "GGML_TYPES",
    "BLOCK_SIZE",
    "BlockFormat",
    "FORMATS",
    "bits_per_weight",
    "dequantize",
    "quantize",
    "GGML_BLOCKS",
    "TensorInfo",
    "GGUFFile",
    "read_gguf",
    "gguf_tokenizer",
]

#: The bytes every GGUF file starts with.
MAGIC = b"GGUF"
#: Weights per block, in every format of this module (``QK8_0``, ``QK4_0`` and ``QK4_1`` in ``ggml``).
BLOCK_SIZE = 32
#: ``ggml``'s type ids of tensors, and their names (``ggml.h``); this module reads those of :data:`FORMATS`.
GGML_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1",
    10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS",
    18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16",
    26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4", 40: "NVFP4",
    41: "Q1_0",
}  # fmt: skip


@dataclass(frozen=True)
class BlockFormat:
    """How a format stores its weights: ``block_bytes`` bytes for every ``block_weights`` of them.

    Attributes:
        name: ``ggml``'s name (``"Q4_1"``).
        block_weights: Weights per block (1 for the unquantized formats).
        block_bytes: Bytes per block.
    """

    name: str
    block_weights: int
    block_bytes: int

    @property
    def bits_per_weight(self) -> float:
        """The bits a weight costs, its share of the block's scale and minimum included."""
        return 8 * self.block_bytes / self.block_weights


#: The formats this module reads, by name.
FORMATS = {
    "F32": BlockFormat("F32", 1, 4),
    "F16": BlockFormat("F16", 1, 2),
    "Q8_0": BlockFormat("Q8_0", BLOCK_SIZE, 2 + BLOCK_SIZE),
    "Q4_1": BlockFormat("Q4_1", BLOCK_SIZE, 2 + 2 + BLOCK_SIZE // 2),
    "Q4_0": BlockFormat("Q4_0", BLOCK_SIZE, 2 + BLOCK_SIZE // 2),
}


def bits_per_weight(kind: str) -> float:
    """The bits a weight costs in format ``kind`` (``"Q4_1"``: 5.0)."""
    return _format(kind).bits_per_weight


def _format(kind: str, tensor: str | None = None) -> BlockFormat:
    if kind not in FORMATS:
        where = f" (tensor {tensor!r})" if tensor else ""
        raise ValueError(f"tensor type {kind!r}{where} is not one this reader decodes: one of {sorted(FORMATS)}")
    return FORMATS[kind]


# ---------------------------------------------------------------------------
# Blocks to weights
# ---------------------------------------------------------------------------
def _halves(blocks: Tensor, start: int) -> Tensor:
    """The float16 number at bytes ``start, start + 1`` of every block, as float32: one per block, as a column."""
    return blocks[:, start : start + 2].contiguous().view(torch.float16).float()


def _nibbles(packed: Tensor) -> Tensor:
    """Sixteen bytes a block to 32 integers in 0..15: the low four bits are weights 0-15, the high four 16-31."""
    return torch.cat([packed & 0x0F, packed >> 4], dim=1).float()


def dequantize(raw: Tensor, kind: str, shape: tuple[int, ...]) -> Tensor:
    """A tensor's bytes, as stored in format ``kind``, turned into float32 weights of ``shape``.

    Args:
        raw: The bytes, a 1-d ``torch.uint8`` tensor.
        kind: ``"F32"``, ``"F16"``, ``"Q8_0"``, ``"Q4_1"`` or ``"Q4_0"``.
        shape: The tensor's shape, outermost first (its last size a multiple of 32 for the block formats).

    Returns:
        The float32 weights, ``shape``.

    Raises:
        ValueError: for a format this module does not read, or bytes that are not ``shape``'s worth.
    """
    block = _format(kind)
    count = 1
    for size in shape:
        count *= size
    if count % block.block_weights or raw.numel() != count // block.block_weights * block.block_bytes:
        raise ValueError(
            f"{raw.numel()} bytes are not a {kind} tensor of shape {tuple(shape)} "
            f"({block.block_bytes} bytes for every {block.block_weights} weights)"
        )
    if kind == "F32":
        return raw.view(torch.float32).reshape(shape)
    if kind == "F16":
        return raw.view(torch.float16).float().reshape(shape)
    # One row per block of 32 weights.
    blocks = raw.view(-1, block.block_bytes)
    scale = _halves(blocks, 0)
    if kind == "Q8_0":
        # w = d q: the 32 bytes after the scale are signed integers.
        weights = scale * blocks[:, 2:].contiguous().view(torch.int8).float()
    elif kind == "Q4_1":
        # w = d q + m: the minimum m after the scale, then the 16 packed bytes.
        weights = scale * _nibbles(blocks[:, 4:]) + _halves(blocks, 2)
    else:
        # Q4_0, w = d (q - 8): levels from -8 d to 7 d, no minimum.
        weights = scale * (_nibbles(blocks[:, 2:]) - 8.0)
    return weights.reshape(shape)


# ---------------------------------------------------------------------------
# Weights to blocks (ggml's reference quantizers)
# ---------------------------------------------------------------------------
def _float16_bytes(values: Tensor) -> Tensor:
    """A column of float32 numbers as float16, each two bytes."""
    return values.to(torch.float16).view(torch.uint8)


def _pack(levels: Tensor) -> Tensor:
    """32 integers in 0..15 a block, two to a byte: weight ``j`` in the low four bits, weight ``j + 16`` in the high."""
    levels = levels.to(torch.uint8)
    return levels[:, : BLOCK_SIZE // 2] | (levels[:, BLOCK_SIZE // 2 :] << 4)


def _inverse(scale: Tensor) -> Tensor:
    """``1 / scale``, and 0 where the scale is 0 (a block of zeros)."""
    return torch.where(scale == 0, torch.zeros_like(scale), 1.0 / scale)


def quantize(weights: Tensor, kind: str) -> Tensor:
    """Float weights stored in format ``kind`` the way ``ggml``'s reference quantizers store them: their bytes.

    * Q8_0: :math:`d = \\max|w| / 127`, :math:`q = \\operatorname{round}(w / d)`.
    * Q4_1: :math:`d = (\\max w - \\min w) / 15`, :math:`m = \\min w`,
      :math:`q = \\lfloor (w - m)/d + 0.5 \\rfloor`.
    * Q4_0: :math:`d = w^\\ast / {-8}` with :math:`w^\\ast` the weight of largest magnitude, sign kept,
      :math:`q = \\min(15, \\lfloor w/d + 8.5 \\rfloor)`.

    Args:
        weights: Any shape whose last size is a multiple of 32 (for F32 and F16, any shape).
        kind: ``"F32"``, ``"F16"``, ``"Q8_0"``, ``"Q4_1"`` or ``"Q4_0"``.

    Returns:
        The bytes, a 1-d ``torch.uint8`` tensor; :func:`dequantize` reads them back.

    Raises:
        ValueError: for another format, or a last size that does not divide into blocks.
    """
    _format(kind)
    weights = weights.detach().float().cpu()
    if kind == "F32":
        return weights.contiguous().view(torch.uint8).flatten()
    if kind == "F16":
        return weights.to(torch.float16).contiguous().view(torch.uint8).flatten()
    if weights.shape[-1] % BLOCK_SIZE:
        raise ValueError(f"weights' last size ({weights.shape[-1]}) must be a multiple of {BLOCK_SIZE} for {kind}")
    # One row per block of 32 weights.
    blocks = weights.reshape(-1, BLOCK_SIZE)
    if kind == "Q8_0":
        scale = blocks.abs().amax(dim=1, keepdim=True) / 127
        scaled = blocks * _inverse(scale)
        # C's roundf (halves away from zero), computed as gguf-py computes it, without adding 0.5 in float32.
        whole = scaled.abs().floor()
        levels = (whole + (2 * (scaled.abs() - whole)).floor()) * scaled.sign()
        parts = [_float16_bytes(scale), levels.to(torch.int8).view(torch.uint8)]
    elif kind == "Q4_1":
        low, high = blocks.amin(dim=1, keepdim=True), blocks.amax(dim=1, keepdim=True)
        scale = (high - low) / 15
        levels = ((blocks - low) * _inverse(scale) + 0.5).trunc().clamp(0, 15)
        parts = [_float16_bytes(scale), _float16_bytes(low), _pack(levels)]
    else:
        # Q4_0: the weight of largest magnitude, with its sign, lands on level 0 (-8 d).
        extreme = blocks.gather(1, blocks.abs().argmax(dim=1, keepdim=True))
        scale = extreme / -8
        levels = (blocks * _inverse(scale) + 8.5).trunc().clamp(0, 15)
        parts = [_float16_bytes(scale), _pack(levels)]
    return torch.cat(parts, dim=1).flatten()


# ---------------------------------------------------------------------------
# The container
# ---------------------------------------------------------------------------
#: The metadata's fixed-size value types (``gguf_type`` in ``gguf.h``): 8 is a string, 9 an array.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
#: A string's length, before its bytes.
_LENGTH = struct.Struct("<Q")
#: ``general.alignment`` when the file does not set it.
DEFAULT_ALIGNMENT = 32
#: The most dimensions a tensor has (``GGML_MAX_DIMS``).
MAX_DIMS = 4
#: How deep arrays of arrays may nest (llama.cpp reads none; deeper ones are refused rather than recursed into).
MAX_NESTING = 8
#: The fewest bytes a metadata entry takes (a key's length, its type, a one-byte value) and a tensor's entry (a
#: name's length, its number of dimensions, its type, its offset): what bounds the counts the header claims.
_SMALLEST_ENTRY, _SMALLEST_TENSOR = 8 + 4 + 1, 8 + 4 + 4 + 8
#: ``ggml``'s count of a tensor's weights is an ``int64_t``.
_MOST_WEIGHTS = 2**63 - 1


class _Cursor:
    """Reads the header's values one after another from the mapped file; every count checked against what is left.

    A count or a length is read before what it counts, and a hostile file can claim any: each is compared with
    the bytes the file has left before anything is allocated or looped over.
    """

    def __init__(self, buffer: Any, path: Path) -> None:
        self.buffer, self.path, self.position, self.size = buffer, path, 0, len(buffer)

    def take(self, code: str, what: str) -> Any:
        """One little-endian value of ``struct`` format ``code``: ``what`` it is, for the message."""
        layout = "<" + code
        size = struct.calcsize(layout)
        if self.position + size > self.size:
            raise ValueError(f"{self.path} ends in the middle of its header (reading {what}): the file is truncated")
        (value,) = struct.unpack_from(layout, self.buffer, self.position)
        self.position += size
        return value

    def count(self, what: str, item_bytes: int) -> int:
        """A count (8 bytes) of items of at least ``item_bytes`` bytes each: no more than the bytes left can hold."""
        count = self.take("Q", what)
        left = self.size - self.position
        if count * item_bytes > left:
            raise ValueError(
                f"{self.path}: {what} is {count:,}, but the {left:,} bytes left in the file hold at most "
                f"{left // item_bytes:,}: the file ends in the middle of its header, or is corrupt"
            )
        return count

    def string(self, what: str) -> str:
        """A length (8 bytes), then that many bytes of UTF-8."""
        length = self.count(f"the length of {what}", 1)
        start = self.position
        self.position += length
        return str(self.buffer[start : self.position], "utf-8", "replace")

    def strings(self, count: int, key: str) -> list[str]:
        """``count`` strings, one after another (a vocabulary's 49,152 tokens): :meth:`string` in one loop."""
        buffer, position, size, length_at = self.buffer, self.position, self.size, _LENGTH.unpack_from
        values = []
        for _ in range(count):
            if position + 8 > size:
                self.position = position
                return values + [self.string(f"metadata key {key!r}")]  # refused, with its message
            (length,) = length_at(buffer, position)
            if length > size - position - 8:
                self.position = position
                return values + [self.string(f"metadata key {key!r}")]
            position += 8 + length
            values.append(str(buffer[position - length : position], "utf-8", "replace"))
        self.position = position
        return values

    def value(self, kind: int, key: str, depth: int = 0) -> Any:
        """One value of metadata key ``key``, of type ``kind``: a scalar, a string, or an array.

        An array of numbers is a :class:`numpy.ndarray` of their type, as compact as in the file; an array of
        strings (or of arrays) a list.
        """
        if kind == _STRING:
            return self.string(f"metadata key {key!r}")
        if kind == _ARRAY:
            item_kind = self.take("I", f"the item type of metadata key {key!r}")
            if item_kind in _SCALARS:
                dtype = np.dtype("<" + _SCALARS[item_kind])
                count = self.count(f"the length of metadata key {key!r}", dtype.itemsize)
                values = np.frombuffer(self.buffer, dtype, count, self.position).copy()
                self.position += count * dtype.itemsize
                return values
            if item_kind == _ARRAY and depth + 1 >= MAX_NESTING:
                raise ValueError(
                    f"{self.path}: metadata key {key!r} nests arrays more than {MAX_NESTING} deep; this reader reads "
                    f"arrays of arrays {MAX_NESTING} deep at most"
                )
            if item_kind not in (_STRING, _ARRAY):
                raise ValueError(
                    f"{self.path}: metadata key {key!r} is an array of unknown type {item_kind}: not a GGUF file "
                    "this reads"
                )
            # Each string takes at least its 8-byte length; each array its type and its length.
            count = self.count(f"the length of metadata key {key!r}", 8 if item_kind == _STRING else 4 + 8)
            if item_kind == _STRING:
                return self.strings(count, key)
            return [self.value(item_kind, key, depth + 1) for _ in range(count)]
        if kind not in _SCALARS:
            raise ValueError(
                f"{self.path}: metadata key {key!r} has a value of unknown type {kind}: not a GGUF file this reads"
            )
        return self.take(_SCALARS[kind], f"metadata key {key!r}")


#: Every ``ggml`` type's block: weights per block, bytes per block (``ggml_type_traits``; gguf-py's
#: ``GGML_QUANT_SIZES``), so that the place of every tensor is checked, even one of a format not decoded here.
GGML_BLOCKS = {
    "F32": (1, 4), "F16": (1, 2), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24),
    "Q8_0": (32, 34), "Q8_1": (32, 40), "Q2_K": (256, 84), "Q3_K": (256, 110), "Q4_K": (256, 144),
    "Q5_K": (256, 176), "Q6_K": (256, 210), "Q8_K": (256, 292), "IQ2_XXS": (256, 66), "IQ2_XS": (256, 74),
    "IQ3_XXS": (256, 98), "IQ1_S": (256, 50), "IQ4_NL": (32, 18), "IQ3_S": (256, 110), "IQ2_S": (256, 82),
    "IQ4_XS": (256, 136), "I8": (1, 1), "I16": (1, 2), "I32": (1, 4), "I64": (1, 8), "F64": (1, 8),
    "IQ1_M": (256, 56), "BF16": (1, 2), "TQ1_0": (256, 54), "TQ2_0": (256, 66), "MXFP4": (32, 17),
    "NVFP4": (64, 36), "Q1_0": (128, 18),
}  # fmt: skip


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of the file: where its bytes are, and what they mean.

    Attributes:
        name: llama.cpp's name (``"blk.0.attn_q.weight"``).
        shape: Its shape, outermost first (PyTorch's order; the file lists the dimensions the other way round).
        kind: Its format's name (``"Q4_1"``), or ``"type <id>"`` for a type ``ggml`` has not named.
        offset: Where its bytes start, from the start of the file.
    """

    name: str
    shape: tuple[int, ...]
    kind: str
    offset: int

    @property
    def numel(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count

    @property
    def nbytes(self) -> int:
        """Its bytes in the file (``ValueError`` for a format this module does not read)."""
        block = _format(self.kind, self.name)
        return self.numel // block.block_weights * block.block_bytes


@dataclass(frozen=True)
class GGUFFile:
    """A GGUF file's header, read: its metadata and where each tensor is.  :meth:`tensor` reads the weights.

    Attributes:
        path: The file.
        version: The format's version.
        metadata: Every metadata entry, key to value: a number, a string, or an array (of numbers, a
            :class:`numpy.ndarray` of their type; of strings, a list).
        tensors: Every tensor's :class:`TensorInfo`, by name, in the file's order.
        data: The file, mapped into memory once (``mmap``): :meth:`raw` copies a tensor's bytes out of it, and
            nothing else of the file is read until then.
        layout: Where each part of the file lies, ``(start, stop)`` in bytes from its start, in the file's order:
            ``"header"``, ``"metadata"``, ``"tensor infos"``, ``"padding"`` (up to ``general.alignment``) and
            ``"tensor data"`` (to the end of the file).
    """

    path: Path
    version: int
    metadata: dict[str, Any] = field(repr=False)
    tensors: dict[str, TensorInfo] = field(repr=False)
    data: Any = field(default=None, repr=False, compare=False)
    layout: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def architecture(self) -> str:
        """``general.architecture``: the model the tensors are for (``"llama"``)."""
        return self.metadata.get("general.architecture", "")

    def _size(self) -> int:
        return len(self.data) if self.data is not None else self.path.stat().st_size

    def check_readable(self) -> None:
        """Check, before reading any weight, that every tensor is of a format this module reads and inside the file.

        Raises:
            ValueError: naming the first tensor of another type (and its type), or the first the file ends inside.
        """
        size = self._size()
        for info in self.tensors.values():
            if info.offset + info.nbytes > size:
                raise ValueError(f"{self.path} ends inside tensor {info.name!r}: the file is truncated")

    def raw(self, name: str) -> Tensor:
        """Tensor ``name``'s bytes, as stored, copied out of the file (a 1-d ``torch.uint8`` tensor).

        Raises:
            KeyError: for a name the file does not have.
            ValueError: for a tensor of a format this module does not read, or one the file is too short for.
        """
        info = self.tensors[name]
        nbytes = info.nbytes
        # Checked before a byte is copied: a tensor that claims more than the file holds allocates nothing.
        if info.offset + nbytes > self._size():
            raise ValueError(f"{self.path} ends inside tensor {name!r}: the file is truncated")
        if self.data is None:
            with open(self.path, "rb") as handle:
                handle.seek(info.offset)
                return torch.frombuffer(bytearray(handle.read(nbytes)), dtype=torch.uint8)
        return torch.from_numpy(np.frombuffer(self.data, np.uint8, nbytes, info.offset).copy())

    def tensor(self, name: str) -> Tensor:
        """Tensor ``name``'s weights in float32, of its shape (:func:`dequantize` of :meth:`raw`).

        Raises:
            ValueError: as :meth:`raw`, or for a tensor that holds NaN or infinite weights (a block's scale or
                minimum NaN or infinite), naming it.
        """
        info = self.tensors[name]
        weights = dequantize(self.raw(name), info.kind, info.shape)
        # A NaN or an infinity anywhere makes the sum NaN or infinite: one cheap pass, and a precise one if so.
        if not bool(torch.isfinite(weights.sum())):
            nan, infinite = int(weights.isnan().sum()), int(weights.isinf().sum())
            if nan or infinite:
                raise ValueError(
                    f"{self.path}: tensor {name!r} holds {nan:,} NaN values and {infinite:,} infinite ones among "
                    f"its {weights.numel():,} weights: a model of finite weights was expected"
                )
        return weights


def _check_path(path: Path) -> None:
    """A regular file: ``FileNotFoundError`` where there is nothing, ``ValueError`` naming what is there instead."""
    kind = path_kind(path)
    if kind is None:
        raise FileNotFoundError(f"GGUF file {path} does not exist")
    if kind != "a file":
        raise ValueError(f"GGUF file {path} is {kind}, not a file")


def _check_tensors(path: Path, entries: list[tuple[str, list[int], str, int]], alignment: int, start: int) -> None:
    """Each tensor's dimensions, and its place: aligned, and inside its own span, overlapping no other."""
    spans = []
    for name, dims, kind, offset in entries:
        if any(size < 1 for size in dims):
            raise ValueError(
                f"{path}: tensor {name!r} has dimensions {dims} (innermost first); each must be at least 1"
            )
        if offset % alignment:
            raise ValueError(
                f"{path}: tensor {name!r} starts at offset {offset:,} of the data, not a multiple of "
                f"general.alignment ({alignment})"
            )
        numel = 1
        for size in dims:
            numel *= size
        if numel > _MOST_WEIGHTS:
            raise ValueError(
                f"{path}: tensor {name!r} has dimensions {dims} (innermost first), {numel:,} weights: more than a "
                "64-bit count holds"
            )
        if kind not in GGML_BLOCKS:
            continue  # its place cannot be known; check_readable refuses it before any weight is read
        block_weights, block_bytes = GGML_BLOCKS[kind]
        if dims[0] % block_weights:
            raise ValueError(
                f"{path}: tensor {name!r} has rows of {dims[0]} weights, not a whole number of {kind} blocks of "
                f"{block_weights}"
            )
        spans.append((start + offset, numel // block_weights * block_bytes, name))
    spans.sort()
    for (first, size, name), (second, _, other) in zip(spans, spans[1:], strict=False):
        if first + size > second:
            raise ValueError(
                f"{path}: tensors {name!r} and {other!r} overlap: {name!r} takes bytes {first:,} to "
                f"{first + size:,}, and {other!r} starts at {second:,}"
            )


def read_gguf(path: str | os.PathLike[str]) -> GGUFFile:
    """Read a GGUF file's header: its metadata and its tensors' places, not their data.

    The file is mapped into memory (``mmap``), not read: the header costs
    what the header holds, whatever the file's size.  Nothing in the header is
    trusted before it is checked: every count and length against the bytes
    the file has left (before anything is allocated), each key and tensor
    name once, the alignment a power of two, each tensor's dimensions
    positive, its offset aligned and its bytes overlapping no other tensor's.
    A file cut short inside its data is read (its header is whole), and
    refused by :meth:`~GGUFFile.check_readable` or :meth:`~GGUFFile.raw`
    before a weight is read.

    Raises:
        FileNotFoundError: naming a file that does not exist.
        ValueError: for a path that is not a file (a folder, a FIFO, a device), a file that is not GGUF
            (version 2 or 3), that ends inside its header, or whose header does not hold together (naming the
            key, the tensor or the count at fault).
    """
    path = Path(path)
    _check_path(path)
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < len(MAGIC):
            raise ValueError(f"{path} is not a GGUF file: it holds {size} bytes")
        buffer = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    if buffer[: len(MAGIC)] != MAGIC:
        raise ValueError(f"{path} is not a GGUF file: it starts with {buffer[:4]!r}, not {MAGIC!r}")
    cursor = _Cursor(buffer, path)
    cursor.position = len(MAGIC)
    version = cursor.take("I", "the version")
    if version not in (2, 3):
        raise ValueError(f"{path} is GGUF version {version}; this reader reads versions 2 and 3")
    tensor_count = cursor.count("the number of tensors", _SMALLEST_TENSOR)
    entry_count = cursor.count("the number of metadata entries", _SMALLEST_ENTRY)
    header_end = cursor.position
    # The metadata: key, type, value, one entry after another; each key once.
    metadata: dict[str, Any] = {}
    for index in range(entry_count):
        key = cursor.string(f"the key of metadata entry {index}")
        if key in metadata:
            raise ValueError(f"{path}: metadata key {key!r} appears twice; a GGUF file sets each key once")
        metadata[key] = cursor.value(cursor.take("I", f"the type of metadata key {key!r}"), key)
    metadata_end = cursor.position
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if type(alignment) is not int or alignment < 1 or alignment & (alignment - 1):
        raise ValueError(
            f"{path}: general.alignment is {alignment!r} ({type(alignment).__name__}); it must be a positive power "
            f"of two ({DEFAULT_ALIGNMENT} when the file does not set it)"
        )
    # Each tensor's name (once), dimensions (innermost first), type and offset in the data.
    entries: list[tuple[str, list[int], str, int]] = []
    names: set[str] = set()
    for index in range(tensor_count):
        name = cursor.string(f"the name of tensor {index}")
        if name in names:
            raise ValueError(f"{path}: tensor {name!r} appears twice; a GGUF file names each tensor once")
        names.add(name)
        n_dims = cursor.take("I", f"the number of dimensions of tensor {name!r}")
        if n_dims > MAX_DIMS:
            raise ValueError(f"{path}: tensor {name!r} has {n_dims:,} dimensions; a GGUF tensor has {MAX_DIMS} at most")
        dims = [cursor.take("Q", f"the dimensions of tensor {name!r}") for _ in range(n_dims)]
        kind = cursor.take("I", f"the type of tensor {name!r}")
        offset = cursor.take("Q", f"the offset of tensor {name!r}")
        entries.append((name, dims, GGML_TYPES.get(kind, f"type {kind}"), offset))
    # The data starts at the next multiple of the alignment.
    start = -(-cursor.position // alignment) * alignment
    _check_tensors(path, entries, alignment, start)
    tensors = {
        name: TensorInfo(name, tuple(reversed(dims)), kind, start + offset) for name, dims, kind, offset in entries
    }
    layout = {
        "header": (0, header_end),
        "metadata": (header_end, metadata_end),
        "tensor infos": (metadata_end, cursor.position),
        "padding": (cursor.position, min(start, size)),
        "tensor data": (min(start, size), size),
    }
    return GGUFFile(path, version, metadata, tensors, buffer, layout)


# ---------------------------------------------------------------------------
# The tokenizer in the metadata
# ---------------------------------------------------------------------------
#: llama.cpp's token types (``llama_token_type``): the control tokens are the special ones.
CONTROL, USER_DEFINED = 3, 4


def _tokenizer_entries(gguf: GGUFFile) -> tuple[list[str], dict[str, int], list[int], list[tuple[str, str]]]:
    """The tokens, the vocabulary (each token's id, by its text), each token's type and the merges, checked:
    strings, a type per token, and each merge two tokens of the vocabulary that merge into a third."""
    metadata, path = gguf.metadata, gguf.path
    tokens = metadata.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not all(isinstance(token, str) for token in tokens):
        raise ValueError(f"{path}: tokenizer.ggml.tokens must be an array of strings (the vocabulary)")
    kinds = metadata.get("tokenizer.ggml.token_type")
    if kinds is None:
        kinds = [1] * len(tokens)
    elif not (isinstance(kinds, np.ndarray) and kinds.dtype.kind in "iu"):
        raise ValueError(f"{path}: tokenizer.ggml.token_type must be an array of integers (a type per token)")
    elif len(kinds) != len(tokens):
        raise ValueError(f"{path}: {len(tokens)} tokens but {len(kinds)} token types in the metadata")
    else:
        kinds = kinds.tolist()
    entries = metadata.get("tokenizer.ggml.merges", [])
    if not isinstance(entries, list) or not all(isinstance(merge, str) for merge in entries):
        raise ValueError(f"{path}: tokenizer.ggml.merges must be an array of strings ('Ġ t': two tokens and a space)")
    vocabulary = {token: index for index, token in enumerate(tokens)}
    # A merge is two tokens separated by a space: "Ġ t" merges "Ġ" and "t" into "Ġt".
    merges = [tuple(merge.split(" ")) for merge in entries]
    for index, merge in enumerate(merges):
        if (
            len(merge) != 2
            or merge[0] not in vocabulary
            or merge[1] not in vocabulary
            or "".join(merge) not in vocabulary
        ):
            raise ValueError(
                f"{path}: tokenizer.ggml.merges[{index}] is {entries[index]!r}: a merge must be two tokens of the "
                "vocabulary, separated by a space, that merge into a third"
            )
    return tokens, vocabulary, kinds, merges


def gguf_tokenizer(gguf: GGUFFile, padding_side: str = "left") -> Any:
    """The byte-level BPE tokenizer the file's metadata describes, built as ``transformers`` builds it.

    The vocabulary and the merges are the metadata's ``tokenizer.ggml.tokens``
    and ``tokenizer.ggml.merges``; the text is cut into words by GPT-2's
    byte-level pre-tokenizer.  The file's ``tokenizer.ggml.pre`` names the
    cut llama.cpp makes instead, a pattern of its own code
    (``src/llama-vocab.cpp``; ``"smollm"``: every digit apart, then GPT-2's
    pattern), which this builder does not read: the two give the same ids for a
    vocabulary in which no token joins a digit to another character, as
    SmolLM2's (each digit is then a token of its own either way), and may differ
    for another.  The control tokens (``<|im_start|>``, ...) are
    special tokens, never cut, and the user-defined ones are added whole; the
    special ids and the chat template come from the metadata too.  Tests prove
    it writes the ids of the tokenizer ``transformers`` builds from the same
    file (``AutoTokenizer.from_pretrained(folder, gguf_file=...)``).

    Args:
        gguf: The file, read.
        padding_side: Where a batch is padded: on the left by default, which is where a decoder's prompts are
            padded for generation (``transformers``' tokenizer pads on the right unless told).

    Returns:
        A :class:`transformers.PreTrainedTokenizerFast`.

    Raises:
        ValueError: for a tokenizer other than byte-level BPE (``tokenizer.ggml.model`` not ``"gpt2"``), or
            entries that do not make one (tokens that are not strings, or of another number than their types,
            merges that are not two known tokens making a third, a chat template that is not text), naming the key.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    metadata = gguf.metadata
    model = metadata.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise ValueError(
            f"{gguf.path}: tokenizer.ggml.model is {model!r}; this package builds byte-level BPE ('gpt2') only"
        )
    tokens, vocabulary, kinds, merges = _tokenizer_entries(gguf)
    tokenizer = Tokenizer(models.BPE(vocab=vocabulary, merges=merges))
    # GPT-2's split into words, each word's bytes spelled as printable characters ("Ġ" is a space).
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(
        [
            AddedToken(token, normalized=False, special=True)
            for token, kind in zip(tokens, kinds, strict=True)
            if kind == CONTROL
        ]
    )
    tokenizer.add_tokens(
        [
            AddedToken(token, normalized=False, special=False)
            for token, kind in zip(tokens, kinds, strict=True)
            if kind == USER_DEFINED
        ]
    )

    def special(key: str) -> str | None:
        index = metadata.get(f"tokenizer.ggml.{key}")
        known = isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(tokens)
        return tokens[index] if known else None

    template = metadata.get("tokenizer.chat_template")
    if template is not None and not isinstance(template, str):
        raise ValueError(f"{gguf.path}: tokenizer.chat_template must be a string (a Jinja template)")

    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=special("bos_token_id"),
        eos_token=special("eos_token_id"),
        unk_token=special("unknown_token_id"),
        pad_token=special("padding_token_id"),
        chat_template=template,
        padding_side=padding_side,
        clean_up_tokenization_spaces=False,
        # What a decoder's forward takes (transformers 4.x would add token_type_ids, which no decoder reads).
        model_input_names=["input_ids", "attention_mask"],
    )
