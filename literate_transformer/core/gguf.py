r"""A GGUF file, read: llama.cpp's one-file checkpoint, its metadata, and its blocks of 4- and 8-bit weights.

A HuggingFace checkpoint is a folder: ``config.json``, the tokenizer's
files, and ``model.safetensors`` with one float per weight.  llama.cpp keeps
everything in one file, *GGUF* (its ``docs/gguf.md`` and ``gguf-py`` define
it), and keeps most weights *quantized*: a row is cut into blocks of 32
consecutive weights, and each block is stored as 32 small integers and the
one or two numbers that turn them back into weights.  This module reads such
a file with the standard library into PyTorch tensors; nothing of llama.cpp
runs.

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

:func:`read_gguf` reads parts 1 to 3 and returns a :class:`GGUFFile`; its
:meth:`~GGUFFile.tensor` reads one tensor's bytes and turns them into
float32 weights.

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
from its least weight to its greatest, rather than a range symmetric about 0.

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

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "GGML_TYPES",
    "BLOCK_SIZE",
    "BlockFormat",
    "FORMATS",
    "bits_per_weight",
    "dequantize",
    "quantize",
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
    26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4",
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
        # Q4_0, w = d (q - 8): levels symmetric about zero, no minimum.
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


class _Cursor:
    """Reads the header's values one after another, from a bytes-like buffer."""

    def __init__(self, buffer: bytes, path: Path) -> None:
        self.buffer, self.path, self.position = buffer, path, 0

    def take(self, code: str) -> Any:
        """One little-endian value of ``struct`` format ``code``."""
        return self.take_many(code, 1)[0]

    def take_many(self, code: str, count: int) -> list[Any]:
        """``count`` little-endian values of ``struct`` format ``code``, at once."""
        layout = f"<{count}{code}"
        try:
            values = struct.unpack_from(layout, self.buffer, self.position)
        except struct.error:
            raise ValueError(f"{self.path} ends in the middle of its header: the file is truncated") from None
        self.position += struct.calcsize(layout)
        return list(values)

    def string(self) -> str:
        """A length (8 bytes), then that many bytes of UTF-8."""
        length = self.take("Q")
        text = bytes(self.buffer[self.position : self.position + length])
        if len(text) != length:
            raise ValueError(f"{self.path} ends in the middle of its header: the file is truncated")
        self.position += length
        return text.decode("utf-8", errors="replace")

    def value(self, kind: int) -> Any:
        """One metadata value of type ``kind``: a scalar, a string, or an array of either."""
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item_kind, count = self.take("I"), self.take("Q")
            if item_kind in _SCALARS:
                return self.take_many(_SCALARS[item_kind], count)
            return [self.value(item_kind) for _ in range(count)]
        if kind not in _SCALARS:
            raise ValueError(f"{self.path} holds a metadata value of unknown type {kind}: not a GGUF file this reads")
        return self.take(_SCALARS[kind])


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
        metadata: Every metadata entry, key to value (arrays as lists).
        tensors: Every tensor's :class:`TensorInfo`, by name, in the file's order.
    """

    path: Path
    version: int
    metadata: dict[str, Any] = field(repr=False)
    tensors: dict[str, TensorInfo] = field(repr=False)

    @property
    def architecture(self) -> str:
        """``general.architecture``: the model the tensors are for (``"llama"``)."""
        return self.metadata.get("general.architecture", "")

    def check_readable(self) -> None:
        """Check, before reading any weight, that every tensor is of a format this module reads and inside the file.

        Raises:
            ValueError: naming the first tensor of another type (and its type), or the first the file ends inside.
        """
        size = self.path.stat().st_size
        for info in self.tensors.values():
            if info.offset + info.nbytes > size:
                raise ValueError(f"{self.path} ends inside tensor {info.name!r}: the file is truncated")

    def raw(self, name: str) -> Tensor:
        """Tensor ``name``'s bytes, as stored, read from the file (a 1-d ``torch.uint8`` tensor).

        Raises:
            KeyError: for a name the file does not have.
            ValueError: for a tensor of a format this module does not read, or one the file is too short for.
        """
        info = self.tensors[name]
        raw = torch.empty(info.nbytes, dtype=torch.uint8)
        with open(self.path, "rb") as handle:
            handle.seek(info.offset)
            read = handle.readinto(raw.numpy())
        if read != info.nbytes:
            raise ValueError(f"{self.path} ends inside tensor {name!r}: the file is truncated")
        return raw

    def tensor(self, name: str) -> Tensor:
        """Tensor ``name``'s weights in float32, of its shape (:func:`dequantize` of :meth:`raw`)."""
        info = self.tensors[name]
        return dequantize(self.raw(name), info.kind, info.shape)


def read_gguf(path: str | os.PathLike[str]) -> GGUFFile:
    """Read a GGUF file's header: its metadata and its tensors' places, not their data.

    Raises:
        FileNotFoundError: naming a file that does not exist.
        ValueError: for a file that is not GGUF (version 2 or 3), or ends inside its header.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"GGUF file {path} does not exist")
    with open(path, "rb") as handle:
        buffer = handle.read()
    if buffer[:4] != MAGIC:
        raise ValueError(f"{path} is not a GGUF file: it starts with {buffer[:4]!r}, not {MAGIC!r}")
    cursor = _Cursor(buffer, path)
    cursor.position = len(MAGIC)
    version = cursor.take("I")
    if version not in (2, 3):
        raise ValueError(f"{path} is GGUF version {version}; this reader reads versions 2 and 3")
    tensor_count, entry_count = cursor.take("Q"), cursor.take("Q")
    # The metadata: key, type, value, one entry after another.
    metadata = {}
    for _ in range(entry_count):
        key = cursor.string()
        metadata[key] = cursor.value(cursor.take("I"))
    # Each tensor's name, dimensions (innermost first), type and offset in the data.
    entries = []
    for _ in range(tensor_count):
        name = cursor.string()
        dimensions = cursor.take_many("Q", cursor.take("I"))
        kind, offset = cursor.take("I"), cursor.take("Q")
        entries.append((name, tuple(reversed(dimensions)), GGML_TYPES.get(kind, f"type {kind}"), offset))
    # The data starts at the next multiple of the alignment.
    alignment = metadata.get("general.alignment", 32)
    start = -(-cursor.position // alignment) * alignment
    tensors = {name: TensorInfo(name, shape, kind, start + offset) for name, shape, kind, offset in entries}
    return GGUFFile(path, version, metadata, tensors)


# ---------------------------------------------------------------------------
# The tokenizer in the metadata
# ---------------------------------------------------------------------------
#: llama.cpp's token types (``llama_token_type``): the control tokens are the special ones.
CONTROL, USER_DEFINED = 3, 4


def gguf_tokenizer(gguf: GGUFFile, padding_side: str = "left") -> Any:
    """The byte-level BPE tokenizer the file's metadata describes, built as ``transformers`` builds it.

    The vocabulary and the merges are the metadata's ``tokenizer.ggml.tokens``
    and ``tokenizer.ggml.merges``; the text is cut into words by GPT-2's
    byte-level pre-tokenizer; the control tokens (``<|im_start|>``, ...) are
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
        ValueError: for a tokenizer other than byte-level BPE (``tokenizer.ggml.model`` not ``"gpt2"``).
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    metadata = gguf.metadata
    model = metadata.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise ValueError(
            f"{gguf.path}: tokenizer.ggml.model is {model!r}; this package builds byte-level BPE ('gpt2') only"
        )
    tokens = metadata["tokenizer.ggml.tokens"]
    kinds = metadata.get("tokenizer.ggml.token_type", [1] * len(tokens))
    if len(kinds) != len(tokens):
        raise ValueError(f"{gguf.path}: {len(tokens)} tokens but {len(kinds)} token types in the metadata")
    # A merge is two tokens separated by a space: "Ġ t" merges "Ġ" and "t" into "Ġt".
    merges = [tuple(merge.split(" ")) for merge in metadata.get("tokenizer.ggml.merges", [])]
    tokenizer = Tokenizer(models.BPE(vocab={token: index for index, token in enumerate(tokens)}, merges=merges))
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
        return tokens[index] if index is not None and 0 <= index < len(tokens) else None

    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=special("bos_token_id"),
        eos_token=special("eos_token_id"),
        unk_token=special("unknown_token_id"),
        pad_token=special("padding_token_id"),
        chat_template=metadata.get("tokenizer.chat_template"),
        padding_side=padding_side,
        clean_up_tokenization_spaces=False,
        # What a decoder's forward takes (transformers 4.x would add token_type_ids, which no decoder reads).
        model_input_names=["input_ids", "attention_mask"],
    )
