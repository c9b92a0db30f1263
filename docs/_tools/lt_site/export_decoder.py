r"""Export: the trained decoder as one ONNX graph that a web browser runs, its weights still in the file's blocks.

The site's *Try your own prompt* page runs the package's own
:class:`~literate_transformer.models.llama.LlamaForCausalLM` with the weights
of SmolLM2-135M-Instruct (:func:`literate_transformer.trained.load_decoder`)
inside the reader's browser, with `onnxruntime-web <https://onnxruntime.ai>`_.
This module writes what the page downloads: an ONNX graph of the model, one
step of generation with its cache; the weights in the file's blocks; and a
JSON file with the table of those blocks, the tokenizer's vocabulary and
merges, the chat template's wrapping, the config and what the export
measured.

The graph, written out
----------------------
:func:`export_decoder_graph` writes the graph node by node from the model's modules:
each line of :class:`~literate_transformer.models.llama.LlamaDecoderLayer`'s
forward becomes a few ONNX operators, in the model's order, and each weight
a float32 input the page makes from its blocks (below); the thirty layers
take a couple of seconds, the exact check of every weight included.  One call of the graph
is one step of generation:

* inputs: ``input_ids`` ``(1, T)`` and, per layer ``i``, the cache so far,
  ``past_key.i`` and ``past_value.i``, ``(1, K, P, D)`` (``P = 0`` on the first
  step, the prompt);
* outputs: ``logits`` ``(1, V)``, the scores of the *next* token only (the
  head on one position instead of ``T``); ``present_key.i`` and
  ``present_value.i``, ``(1, K, P + T, D)``, the cache to hand to the next
  step; and ``attention.i`` ``(1, H, T, P + T)``, layer ``i``'s attention
  probabilities, which the page fetches for the prompt only.

The positions are ``P, P + 1, ..., P + T - 1``, computed in the graph from
the cache's length; the causal mask lets position ``P + t`` see keys
``0 .. P + t``.  Grouped-query attention shares each of the ``K`` key and
value heads among ``H / K`` query heads: the graph reshapes the queries into
``(1, K, H / K, T, D)`` groups and lets the matrix product broadcast the keys
over each group, which is what
:func:`~literate_transformer.parts.heads.repeat_kv` does by copying.

The weights, in the file's blocks
---------------------------------
The GGUF file keeps the layers' matrices in Q4_1 blocks (32 four-bit levels
:math:`q`, a float16 scale :math:`d` and minimum :math:`m`:
:math:`w = d\,q + m`) and the token table in Q8_0 blocks (:math:`w = d\,q`,
eight-bit :math:`q`), see :mod:`literate_transformer.core.gguf`.  The page
downloads exactly those numbers, in a file of their own,
:data:`BLOCKS_FILE`: each matrix's levels (four bits, two to a byte, or one
signed byte) with its float16 scales and minimums, laid out in the order of
the float32 numbers they become (a matrix as :math:`W^\top`, inputs first,
the blocks of 32 running down its columns; the token table as it is, the
blocks along its rows), so that the page writes its floats in one pass.
The graph names each matrix as float32 numbers in :data:`WEIGHTS_FILE`, a
file it does not hold (ONNX's *external data*: a name, an offset, a
length); the page makes that file, in a Web Worker beside the page, with
``_static/try/blocks.js``,

.. math::

    w = \operatorname{fl}(d\,q + m)
    \quad (\text{per block of } 32),

:math:`d\,q` and then :math:`+\,m` in float32, as
:func:`~literate_transformer.core.gguf.dequantize` computes them (the
product is exact: an 11-bit scale times a level of at most 8 bits needs 19
of float32's 24 bits; the sum is rounded once): the weights the browser
multiplies by are the package's, bit for bit
(:func:`weights_from_blocks` is the same in NumPy, and the tests compare
the three).  It hands the file to ``onnxruntime`` with the graph, and every
step runs plain float32 matrix products.  The page does it, not
``onnxruntime`` (which could fold ``DequantizeLinear`` nodes into constants
at load): the page can then say how far it is, weight by weight, and the
model starts sooner (on a two-core machine, about 9 s from the click
instead of 16, the download included).  Why not ``MatMulNBits``, ``onnxruntime``'s own operator for
blocks of 4 bits?  Q4_1's minimum is a zero point of :math:`-m/d`, not an
integer, and with a float zero point the operator dequantizes the whole
matrix again at every call (``ComputeBUnpacked`` in ``matmul_nbits.cc``);
its packed kernels exist for x86, ARM and RISC-V processors, none for
WebAssembly, where even integer zero points take that path.  Doing it once
at load costs memory (the float32 weights, about 540 MB) and keeps the
download at the file's size.

The token table is used twice, as the tied head of the model uses it:
``Gather`` looks up the prompt's rows, and the head multiplies by the whole
table.

What is checked
---------------
:func:`export_decoder_graph` refuses blocks that do not dequantize to the
model's own parameters, exactly (``torch.equal``), so the blocks file holds
the model's weights and no others.  :func:`compare_with_pytorch` runs the
graph in ``onnxruntime`` step by step, with its cache, on the float32
numbers :func:`weights_from_blocks` makes of the blocks file, and the
model's own ``generate`` on the same prompts: the greedy ids must be equal,
and the largest difference of the first step's next-token probabilities is
recorded in the JSON file and printed on the page.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from literate_transformer.core.checkpoints import (
    DECODER_ENV,
    DECODER_SHA256,
    _default_decoder_file,
    resolve_decoder,
    sha256_of,
)
from literate_transformer.core.gguf import GGUFFile, dequantize, gguf_tokenizer, read_gguf
from literate_transformer.models.llama import LlamaForCausalLM, head_dim_of, key_value_heads_of
from literate_transformer.trained import halves_from_pairs, hf_name, llama_config_from_gguf, llama_from_gguf

from .deps import Reached
from .export import (
    RECORDED,
    BrowserExport,
    _cached_metadata,
    _check_path,
    _onnx,
    _output_folder,
    _read_export,
    _versions,
    _write_atomically,
    _write_metadata,
    record_of,
)

__all__ = [
    "Blocks",
    "DecoderCheck",
    "DecoderExport",
    "DecoderGraph",
    "DEFAULT_CHECK_PROMPTS",
    "decoder_blocks",
    "export_decoder_graph",
    "weights_from_blocks",
    "tokenizer_spec",
    "chat_wrapping",
    "greedy_in_onnxruntime",
    "compare_with_pytorch",
    "export_digest",
    "export_decoder_for_browser",
    "load_decoder_export",
]

#: Opset 21: the first with ``uint4`` tensors and block-wise ``DequantizeLinear``.
OPSET = 21
#: Names of the files :func:`export_decoder_for_browser` writes.
ONNX_FILE = "decoder.onnx"
BLOCKS_FILE = "decoder.blocks"
METADATA_FILE = "decoder.json"
#: The file of float32 weights the graph names: never written, the page makes it from the blocks.
WEIGHTS_FILE = "decoder.weights"
#: Written into the JSON file, so that the page can refuse a file it does not understand.
FORMAT = "literate-transformer-decoder-export/2"
#: Weights per block in every format of the file (``QK8_0``, ``QK4_1`` in ``ggml``).
BLOCK = 32
#: Each part of the blocks file starts on a multiple of this many bytes (a typed array's view needs it).
BLOCKS_ALIGNMENT = 8
#: The packages whose versions can change the exported bytes or the check.
_VERSIONED = ("torch", "onnx", "onnxruntime", "transformers", "tokenizers", "numpy")
#: The formats a matrix may have, and the token table.
_MATRIX_FORMATS = ("F32", "F16", "Q8_0", "Q4_0", "Q4_1")
_TABLE_FORMATS = ("F32", "F16", "Q8_0")
#: The formats kept as floats (no blocks), and those whose levels are four bits, two to a byte.
_FLOATS = ("F32", "F16")
_UINT4 = ("Q4_0", "Q4_1")

#: Prompts (user messages, wrapped in the chat template) on which the export measures the graph against the model.
DEFAULT_CHECK_PROMPTS: tuple[str, ...] = (
    "What is the capital of France?",
    "Write a haiku about attention.",
)
#: New tokens generated greedily on each check prompt, by the graph and by the model.
CHECK_NEW_TOKENS = 16


# ---------------------------------------------------------------------------
# The blocks of the file, under the model's names
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Blocks:
    """One weight as the file stores it.

    Attributes:
        kind: Its format: ``"Q4_1"``, ``"Q4_0"``, ``"Q8_0"``, ``"F16"`` or ``"F32"``.
        shape: ``(rows, columns)`` (a matrix, ``(out, in)`` as ``nn.Linear`` keeps it) or ``(size,)``.
        raw: Its bytes, ``uint8``, the rows in HuggingFace's order.
    """

    kind: str
    shape: tuple[int, ...]
    raw: np.ndarray

    def dequantized(self) -> Tensor:
        """The float32 weights, as :func:`literate_transformer.core.gguf.dequantize` computes them."""
        return dequantize(torch.from_numpy(self.raw), self.kind, self.shape)


def decoder_blocks(gguf: GGUFFile, config: Any) -> dict[str, Blocks]:
    """Every tensor of the file, as stored, under HuggingFace's names, the query and key rows in its order.

    The rows of ``q_proj`` and ``k_proj`` are put back in HuggingFace's order
    (:func:`~literate_transformer.trained.halves_from_pairs`) by moving whole
    rows of blocks: a block never spans two rows, so no number changes.

    Raises:
        ValueError: naming a tensor whose format this module does not read.
    """
    gguf.check_readable()
    heads = {"attn_q": config.num_attention_heads, "attn_k": config.num_key_value_heads}
    blocks = {}
    for name, info in gguf.tensors.items():
        raw = gguf.raw(name)
        kind = name.split(".")[-2] if name.startswith("blk.") else ""
        if kind in heads and name.endswith(".weight"):
            # One row of bytes per row of the matrix; reorder the rows.
            raw = halves_from_pairs(raw.reshape(info.shape[0], -1), heads[kind]).reshape(-1)
        blocks[hf_name(name)] = Blocks(info.kind, tuple(info.shape), raw.numpy())
    return blocks


def _check_blocks_are_the_models(blocks: Mapping[str, Blocks], model: LlamaForCausalLM) -> None:
    """Every parameter of ``model`` must be its blocks, dequantized, exactly."""
    parameters = dict(model.named_parameters())
    missing = sorted(set(parameters) - set(blocks) - {"lm_head.weight"})
    if missing:
        raise ValueError(f"blocks has no entry for the model's parameters {missing[:5]}")
    for name, parameter in parameters.items():
        if name == "lm_head.weight" and name not in blocks:
            if model.config.tie_word_embeddings:
                continue
            raise ValueError("blocks has no 'lm_head.weight' and the model's head is not tied to its table")
        weights = blocks[name].dequantized()
        if weights.shape != parameter.shape or not torch.equal(weights, parameter.detach()):
            raise ValueError(
                f"blocks[{name!r}] ({blocks[name].kind}, {blocks[name].shape}) does not dequantize to the model's "
                "parameter of that name: the blocks are not this model's"
            )


# ---------------------------------------------------------------------------
# The blocks file and the graph
# ---------------------------------------------------------------------------
def _pack_uint4(levels: np.ndarray) -> bytes:
    """Integers 0..15 packed two to a byte as ONNX packs ``uint4``: element ``2i`` low, ``2i + 1`` high."""
    flat = levels.reshape(-1).astype(np.uint8)
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    return (flat[0::2] | (flat[1::2] << 4)).tobytes()


def _unpack_uint4(packed: np.ndarray, count: int) -> np.ndarray:
    """The inverse of :func:`_pack_uint4`: ``count`` integers 0..15."""
    return np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(-1)[:count]


def _block_parts(blocks: Blocks) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """A matrix's blocks split into levels ``(R, C/32, 32)``, scales ``(R, C/32)`` and minimums (``None`` without)."""
    rows, columns = blocks.shape
    if blocks.kind == "Q8_0":
        data = blocks.raw.reshape(rows, columns // BLOCK, 2 + BLOCK)
        return data[..., 2:].copy().view(np.int8), data[..., :2].copy().view(np.float16)[..., 0], None
    start = 4 if blocks.kind == "Q4_1" else 2
    data = blocks.raw.reshape(rows, columns // BLOCK, start + BLOCK // 2)
    packed = data[..., start:]
    # ggml's order: byte j holds level j (low four bits) and level j + 16 (high four bits).
    levels = np.concatenate([packed & 0x0F, packed >> 4], axis=-1)
    scales = data[..., :2].copy().view(np.float16)[..., 0]
    minimums = data[..., 2:4].copy().view(np.float16)[..., 0] if blocks.kind == "Q4_1" else None
    return levels, scales, minimums


class _BlocksFile:
    """The blocks of every weight the graph names, in one file, and the table that says where each part lies.

    Each weight is written in the order of the float32 array the page makes of it, ``(A, B)`` row by row,
    its blocks of 32 running along ``block_axis``: for a matrix stored as ``W^T`` (``(C, R)``, inputs first,
    for ``MatMul``) down its columns (axis 0, element ``(c, r)`` scaled by scale ``(c // 32, r)``), for the
    token table (``(V, E)``, as ``Gather`` and the tied head read it) along its rows (axis 1, element
    ``(v, e)`` by scale ``(v, e // 32)``).  That way the page writes its floats in order, one pass.
    """

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.table: list[dict[str, Any]] = []
        self.weights_bytes = 0

    def _put(self, data: bytes) -> list[int]:
        """Append ``data``; returns ``[offset, length]``.  Each part starts on 8 bytes, for the page's typed views."""
        padding = -self.size % BLOCKS_ALIGNMENT
        self.parts.append(b"\0" * padding)
        offset = self.size + padding
        self.parts.append(data)
        self.size = offset + len(data)
        return [offset, len(data)]

    def add(self, name: str, kind: str, shape: tuple[int, int], block_axis: int, **parts: np.ndarray) -> list[int]:
        """Record one weight (its parts already in the page's order); returns ``[offset, length]`` of its floats."""
        entry: dict[str, Any] = {"name": name, "kind": kind, "shape": list(shape), "block_axis": block_axis}
        for part, array in parts.items():
            entry[part] = self._put(_pack_uint4(array) if part == "levels" and kind in _UINT4 else array.tobytes())
        floats = [self.weights_bytes, shape[0] * shape[1] * 4]
        entry["weights"] = floats
        self.weights_bytes += floats[1]
        self.table.append(entry)
        return floats

    def bytes(self) -> bytes:
        return b"".join(self.parts)


class _Graph:
    """Nodes and initializers, with fresh names: ``g.op("MatMul", a, b)`` returns the output's name."""

    def __init__(self) -> None:
        self.onnx = _onnx()
        self.FLOAT = self.onnx.TensorProto.FLOAT
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.blocks = _BlocksFile()
        self.count = 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def op(self, op_type: str, *inputs: str, hint: str | None = None, outputs: int = 1, **attributes: Any) -> Any:
        names = [self.name(hint or op_type.lower()) for _ in range(outputs)]
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), names, **attributes))
        return names[0] if outputs == 1 else names

    def output(self, op_type: str, output: str, *inputs: str, **attributes: Any) -> str:
        """A node whose output has a given name (a graph output)."""
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), [output], **attributes))
        return output

    def constant(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(self.onnx.numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def ints(self, *values: int) -> str:
        return self.constant(self.name("ints"), np.array(values, dtype=np.int64))

    def scalar(self, value: float) -> str:
        return self.constant(self.name("scalar"), np.array(value, dtype=np.float32))

    def external(self, name: str, shape: tuple[int, int], floats: list[int]) -> str:
        """A float32 initializer whose numbers are ``floats`` (``[offset, length]``) of the file the page makes."""
        TensorProto = self.onnx.TensorProto
        tensor = TensorProto(name=name, data_type=self.FLOAT, dims=list(shape), data_location=TensorProto.EXTERNAL)
        for key, value in (("location", WEIGHTS_FILE), ("offset", floats[0]), ("length", floats[1])):
            tensor.external_data.add(key=key, value=str(value))
        self.initializers.append(tensor)
        return name

    # -- a weight, as float32 numbers the page makes from its blocks ----------------------------------------------
    def weight_t(self, name: str, blocks: Blocks) -> str:
        """``W^T`` ``(C, R)`` in float32 (for ``MatMul``), from the blocks of ``W`` ``(R, C)``, kept in the blocks file."""
        if blocks.kind not in _MATRIX_FORMATS:
            raise ValueError(f"{name} is stored as {blocks.kind}; the export reads {list(_MATRIX_FORMATS)}")
        rows, columns = blocks.shape
        shape = (columns, rows)
        if blocks.kind in _FLOATS:
            dtype = np.float32 if blocks.kind == "F32" else np.float16
            data = np.frombuffer(blocks.raw.tobytes(), dtype=dtype).reshape(rows, columns).T
            floats = self.blocks.add(name, blocks.kind, shape, 0, data=np.ascontiguousarray(data))
            return self.external(name, shape, floats)
        levels, scales, minimums = _block_parts(blocks)
        # W^T's levels (C, R): level (c, r) is level c % 32 of block c // 32 of row r; scales (C/32, R).
        parts = {"levels": levels.transpose(1, 2, 0).reshape(shape), "scales": np.ascontiguousarray(scales.T)}
        if minimums is not None:
            parts["minimums"] = np.ascontiguousarray(minimums.T)
        return self.external(name, shape, self.blocks.add(name, blocks.kind, shape, 0, **parts))

    def table(self, name: str, blocks: Blocks) -> str:
        """The token table ``(V, E)`` in float32, from its blocks (along its rows), kept in the blocks file."""
        if blocks.kind not in _TABLE_FORMATS:
            raise ValueError(f"the token table is stored as {blocks.kind}; the export reads {list(_TABLE_FORMATS)}")
        shape = blocks.shape
        if blocks.kind in _FLOATS:
            data = np.frombuffer(blocks.raw.tobytes(), dtype=np.float32 if blocks.kind == "F32" else np.float16)
            return self.external(name, shape, self.blocks.add(name, blocks.kind, shape, 1, data=data))
        levels, scales, _ = _block_parts(blocks)
        floats = self.blocks.add(name, blocks.kind, shape, 1, levels=levels.reshape(shape), scales=scales)
        return self.external(name, shape, floats)


def _rms_norm(g: _Graph, x: str, weight: str, eps: float) -> str:
    """``RMSNorm``: ``weight * (x * (1 / sqrt(mean(x^2) + eps)))``, the package's order (its ``rsqrt`` as one over a root)."""
    variance = g.op("ReduceMean", g.op("Mul", x, x), g.ints(-1), keepdims=1)
    inverse = g.op("Reciprocal", g.op("Sqrt", g.op("Add", variance, g.scalar(eps))))
    return g.op("Mul", weight, g.op("Mul", x, inverse))


def _rotate(g: _Graph, x: str, cos: str, sin: str, half: int) -> str:
    """``x * cos + rotate_half(x) * sin``, ``rotate_half(x) = cat(-x2, x1)`` (Llama's pairs: the two halves)."""
    first, second = g.op("Split", x, g.ints(half, half), axis=-1, outputs=2)
    rotated = g.op("Concat", g.op("Neg", second), first, axis=-1)
    return g.op("Add", g.op("Mul", x, cos), g.op("Mul", rotated, sin))


@dataclass(frozen=True)
class DecoderGraph:
    """What :func:`export_decoder_graph` makes.

    Attributes:
        proto: The ``onnx.ModelProto`` (opset 21), its matrices float32 initializers whose numbers are in
            :data:`WEIGHTS_FILE`, a file it does not hold.
        blocks: The blocks file: every matrix's levels, scales and minimums, in the order of its floats.
        table: One entry per weight: ``name``, ``kind`` (``"Q4_1"``, ...), ``shape`` ``[A, B]`` of its float32
            array, ``block_axis`` (0 or 1, along which its blocks of 32 run), ``[offset, length]`` in the blocks
            file of its ``levels``, ``scales`` and ``minimums`` (or of its ``data``, for F32 and F16), and of its
            numbers in the float32 file, ``weights``.
        weights_bytes: The float32 file's size.
    """

    proto: Any
    blocks: bytes
    table: tuple[dict[str, Any], ...]
    weights_bytes: int


def weights_from_blocks(table: Sequence[Mapping[str, Any]], blocks: bytes) -> dict[str, np.ndarray]:
    r"""The float32 weights the page makes from the blocks file, as ``blocks.js`` makes them, by name.

    Each weight is :math:`w = d\,q` (Q8_0), :math:`d\,(q - 8)` (Q4_0) or :math:`d\,q + m` (Q4_1), computed
    in float32 as :func:`~literate_transformer.core.gguf.dequantize` computes it.

    Args:
        table: :attr:`DecoderGraph.table` (the JSON file's ``weights.table``).
        blocks: The blocks file's bytes.

    Raises:
        ValueError: naming an entry whose parts lie outside ``blocks`` or are not its shape's size.
    """
    data = np.frombuffer(blocks, dtype=np.uint8)
    return {entry["name"]: _weight_from_blocks(entry, data) for entry in table}


def _weight_from_blocks(entry: Mapping[str, Any], data: np.ndarray) -> np.ndarray:
    """One entry of the table: its float32 array ``(A, B)``, from the blocks file's bytes ``data``."""
    name, kind, (a, b), axis = entry["name"], entry["kind"], entry["shape"], entry["block_axis"]
    count = a * b

    def part(key: str, dtype: Any, expected: int) -> np.ndarray:
        offset, length = entry[key]
        if offset < 0 or offset + length > data.size or length != expected:
            raise ValueError(f"blocks: {name}'s {key} ({length} bytes at {offset}) is not {expected} bytes inside")
        return data[offset : offset + length].view(dtype)

    def per_weight(key: str) -> np.ndarray:
        # One number per block of 32, repeated over its weights.
        values = part(key, np.float16, count // BLOCK * 2).astype(np.float32)
        blocked = (a // BLOCK, b) if axis == 0 else (a, b // BLOCK)
        return np.repeat(values.reshape(blocked), BLOCK, axis=axis)

    if kind in _FLOATS:
        size, dtype = (4, np.float32) if kind == "F32" else (2, np.float16)
        return part("data", dtype, count * size).astype(np.float32).reshape(a, b)
    if kind in _UINT4:
        levels = _unpack_uint4(part("levels", np.uint8, (count + 1) // 2), count).astype(np.float32)
    else:
        levels = part("levels", np.int8, count).astype(np.float32)
    if kind == "Q4_0":
        # The zero point 8: levels symmetric about zero.
        levels -= 8.0
    # d q (exact in float32), then + m (rounded).
    weights = per_weight("scales") * levels.reshape(a, b)
    return weights + per_weight("minimums") if kind == "Q4_1" else weights


def export_decoder_graph(model: LlamaForCausalLM, blocks: Mapping[str, Blocks]) -> DecoderGraph:
    """The ONNX graph of one step of ``model`` with its cache, and the blocks file it takes its weights from.

    Args:
        model: The package's Llama, in evaluation mode.
        blocks: Its weights as the file stores them (:func:`decoder_blocks`), each dequantizing to the
            model's parameter of that name.

    Returns:
        The graph, the blocks file and its table.

    Raises:
        TypeError: if ``model`` is not a ``literate_transformer`` ``LlamaForCausalLM``.
        ValueError: if ``model`` is training, or the blocks are not the model's weights, or of a format the
            export does not read.
    """
    if not isinstance(model, LlamaForCausalLM):
        raise TypeError(f"model must be a literate_transformer LlamaForCausalLM, got {type(model).__name__}")
    if model.training:
        raise ValueError("model must be in evaluation mode (call model.eval())")
    _check_blocks_are_the_models(blocks, model)
    onnx = _onnx()
    helper, FLOAT, INT64 = onnx.helper, onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    config = model.config
    layers = model.model.layers
    heads, kv_heads, head_dim = config.num_attention_heads, key_value_heads_of(config), head_dim_of(config)
    group, hidden, vocab = heads // kv_heads, config.hidden_size, config.vocab_size
    g = _Graph()

    # -- inputs ------------------------------------------------------------------------------------------------
    inputs = [helper.make_tensor_value_info("input_ids", INT64, [1, "T"])]
    outputs = [helper.make_tensor_value_info("logits", FLOAT, [1, vocab])]
    for i in range(len(layers)):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_{kind}.{i}", FLOAT, [1, kv_heads, "P", head_dim]))
            outputs.append(helper.make_tensor_value_info(f"present_{kind}.{i}", FLOAT, [1, kv_heads, "S", head_dim]))
    outputs += [
        helper.make_tensor_value_info(f"attention.{i}", FLOAT, [1, heads, "T", "S"]) for i in range(len(layers))
    ]

    # -- lengths, positions, the rotations and the causal mask, once for all layers -------------------------------
    length = g.op("Gather", g.op("Shape", "input_ids"), g.ints(1), axis=0)  # [T]
    past = g.op("Gather", g.op("Shape", "past_key.0"), g.ints(2), axis=0)  # [P]
    total = g.op("Add", past, length)  # [S]
    one = g.ints(1)
    positions = g.op("Range", g.op("Squeeze", past), g.op("Squeeze", total), g.op("Squeeze", one))  # shape (T,)
    # angles (T, D/2) = positions x the model's own inverse frequencies; each angle for both features of a pair.
    inv_freq = g.constant("rotary.inv_freq", model.model.rotary_emb.inv_freq.detach().float().numpy()[None, :])
    angles = g.op("Mul", g.op("Unsqueeze", g.op("Cast", positions, to=FLOAT), one), inv_freq)
    angles = g.op("Concat", angles, angles, axis=-1)  # shape (T, D)
    cos, sin = g.op("Cos", angles), g.op("Sin", angles)
    # A query at position P + t sees the keys 0 .. P + t: the others get the lowest float, as transformers' mask.
    keys = g.op("Range", g.op("Squeeze", g.ints(0)), g.op("Squeeze", total), g.op("Squeeze", one))  # shape (S,)
    hidden_after = g.op(
        "Greater", g.op("Unsqueeze", keys, g.ints(0)), g.op("Unsqueeze", positions, one)
    )  # shape (T, S)
    lowest = g.scalar(float(np.finfo(np.float32).min))
    mask = g.op("Where", hidden_after, lowest, g.scalar(0.0))
    attention_shape = g.op("Concat", g.ints(1, heads), length, g.ints(-1), axis=0)  # shape (1, H, T, S)

    # -- the token table: its rows for the prompt's tokens, the whole table for the tied head ---------------------
    table = g.table("model.embed_tokens.weight", blocks["model.embed_tokens.weight"])
    x = g.op("Gather", table, "input_ids", axis=0)  # shape (1, T, E)

    def linear(h: str, name: str) -> str:
        return g.op("MatMul", h, g.weight_t(name, blocks[name]), hint=name.rsplit(".", 2)[-2])

    def norm(h: str, module: Any, name: str) -> str:
        return _rms_norm(g, h, g.constant(name, module.weight.detach().float().numpy()), module.eps)

    def heads_first(h: str, count: int) -> str:  # (1, T, count * D) -> (1, count, T, D)
        return g.op("Transpose", g.op("Reshape", h, g.ints(1, -1, count, head_dim)), perm=[0, 2, 1, 3])

    # -- the layers ----------------------------------------------------------------------------------------------
    for i, layer in enumerate(layers):
        prefix = f"model.layers.{i}."
        h = norm(x, layer.input_layernorm, prefix + "input_layernorm.weight")
        q = heads_first(linear(h, prefix + "self_attn.q_proj.weight"), heads)
        k = heads_first(linear(h, prefix + "self_attn.k_proj.weight"), kv_heads)
        v = heads_first(linear(h, prefix + "self_attn.v_proj.weight"), kv_heads)
        q, k = _rotate(g, q, cos, sin, head_dim // 2), _rotate(g, k, cos, sin, head_dim // 2)
        k = g.output("Concat", f"present_key.{i}", f"past_key.{i}", k, axis=2)  # shape (1, K, S, D)
        v = g.output("Concat", f"present_value.{i}", f"past_value.{i}", v, axis=2)
        # Groups: query heads (1, K, H/K, T, D) against their key/value head (1, K, 1, S, D).
        q = g.op("Reshape", q, g.ints(1, kv_heads, group, -1, head_dim))
        k_t = g.op("Transpose", g.op("Unsqueeze", k, g.ints(2)), perm=[0, 1, 2, 4, 3])  # shape (1, K, 1, D, S)
        scores = g.op("Mul", g.op("MatMul", q, k_t), g.scalar(model.model.layers[i].self_attn.scale or head_dim**-0.5))
        probabilities = g.op("Softmax", g.op("Add", scores, mask), axis=-1)  # (1, K, H/K, T, S)
        g.output("Reshape", f"attention.{i}", probabilities, attention_shape)
        context = g.op("MatMul", probabilities, g.op("Unsqueeze", v, g.ints(2)))  # (1, K, H/K, T, D)
        context = g.op("Reshape", context, g.ints(1, heads, -1, head_dim))  # head k * H/K + j: repeat_kv's order
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), g.ints(1, -1, heads * head_dim))
        x = g.op("Add", x, linear(context, prefix + "self_attn.o_proj.weight"))
        h = norm(x, layer.post_attention_layernorm, prefix + "post_attention_layernorm.weight")
        gate = linear(h, prefix + "mlp.gate_proj.weight")
        swish = g.op("Mul", gate, g.op("Sigmoid", gate))
        x = g.op(
            "Add",
            x,
            linear(g.op("Mul", swish, linear(h, prefix + "mlp.up_proj.weight")), prefix + "mlp.down_proj.weight"),
        )

    # -- the head, on the last position only --------------------------------------------------------------------
    last = g.op("Gather", x, g.op("Sub", length, one), axis=1)  # shape (1, 1, E)
    last = norm(g.op("Reshape", last, g.ints(1, hidden)), model.model.norm, "model.norm.weight")
    if "lm_head.weight" in blocks and not config.tie_word_embeddings:
        g.output("MatMul", "logits", last, g.weight_t("lm_head.weight", blocks["lm_head.weight"]))
    else:
        g.output("Gemm", "logits", last, table, transB=1)

    graph = helper.make_graph(g.nodes, "literate_transformer_llama_step", inputs, outputs, g.initializers)
    proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="literate_transformer"
    )
    proto.ir_version = 10
    return DecoderGraph(proto, g.blocks.bytes(), tuple(g.blocks.table), g.blocks.weights_bytes)


# ---------------------------------------------------------------------------
# The tokenizer and the chat template, for the page's JavaScript
# ---------------------------------------------------------------------------
#: llama.cpp's token types: 3 is a control token (special), 4 a user-defined one (added whole, not special).
_CONTROL, _USER_DEFINED = 3, 4


def tokenizer_spec(gguf: GGUFFile) -> dict[str, Any]:
    """What ``bpe.js`` builds its tokenizer from: the file's own vocabulary, merges and special tokens.

    Returns:
        ``{"model": "byte-level-bpe", "tokens", "merges", "special", "added", "bos_token_id", "eos_token_id",
        "pad_token_id", "unk_token_id"}``: ``tokens[i]`` is token ``i``'s text (bytes spelled as GPT-2's printable
        characters), ``merges`` the merge rules in priority order (``"Ġ t"``), ``special`` the control tokens and
        ``added`` the user-defined ones, both matched whole in the text before anything else.

    Raises:
        ValueError: for a tokenizer other than byte-level BPE (the only one ``bpe.js`` implements).
    """
    metadata = gguf.metadata
    if metadata.get("tokenizer.ggml.model") != "gpt2":
        raise ValueError(
            f"{gguf.path}: tokenizer.ggml.model is {metadata.get('tokenizer.ggml.model')!r}; the page's tokenizer "
            "is byte-level BPE ('gpt2') only"
        )
    tokens = list(metadata["tokenizer.ggml.tokens"])
    kinds = list(metadata.get("tokenizer.ggml.token_type", [1] * len(tokens)))
    return {
        "model": "byte-level-bpe",
        "tokens": tokens,
        "merges": list(metadata.get("tokenizer.ggml.merges", [])),
        "special": [token for token, kind in zip(tokens, kinds, strict=True) if kind == _CONTROL],
        "added": [token for token, kind in zip(tokens, kinds, strict=True) if kind == _USER_DEFINED],
        **{
            f"{key}_token_id": metadata.get(f"tokenizer.ggml.{key}_token_id")
            for key in ("bos", "eos", "padding", "unknown")
        },
    }


#: Stand-ins for a message's text, to find where the chat template puts it.
_PROBES = ("\ue000first probe\ue000", "\ue001a second, other probe\ue001")


def chat_wrapping(tokenizer: Any) -> dict[str, str]:
    """The text the chat template puts before and after one user message, with the assistant's turn opened.

    The page wraps what the reader types as ``before + message + after``: what
    ``tokenizer.apply_chat_template([{"role": "user", "content": message}], add_generation_prompt=True,
    tokenize=False)`` writes (SmolLM2's template adds its default system message first).

    Raises:
        ValueError: if the tokenizer has no chat template, or its template does not copy a message verbatim
            between a fixed beginning and end.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("the tokenizer has no chat template to wrap a message in")
    wrapped = [
        tokenizer.apply_chat_template([{"role": "user", "content": probe}], add_generation_prompt=True, tokenize=False)
        for probe in _PROBES
    ]
    parts = [text.split(probe) for text, probe in zip(wrapped, _PROBES, strict=True)]
    if any(len(part) != 2 for part in parts) or parts[0] != parts[1]:
        raise ValueError("the chat template does not copy a user message verbatim between a fixed beginning and end")
    return {"before": parts[0][0], "after": parts[0][1]}


# ---------------------------------------------------------------------------
# The check: the graph, run step by step in onnxruntime, against the model
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DecoderCheck:
    """What :func:`compare_with_pytorch` measured.

    Attributes:
        prompts: How many prompts were run.
        new_tokens: Greedy tokens generated on each (fewer where the model ended its answer).
        greedy_ids_equal: Whether the graph's greedy ids were the model's on every prompt.
        max_abs_probability: The largest difference of a first-step next-token probability.
        max_abs_logit: The largest difference of a first-step logit.
        max_abs_attention: The largest difference of an attention probability on the prompts.
    """

    prompts: int
    new_tokens: tuple[int, ...]
    greedy_ids_equal: bool
    max_abs_probability: float
    max_abs_logit: float
    max_abs_attention: float


def _session(onnx_model: bytes | str | os.PathLike[str], weights: Mapping[str, np.ndarray]) -> Any:
    """An ``onnxruntime`` session of the graph, handed its matrices' float32 numbers as the page hands them."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    # The graph names its matrices' numbers in a file it does not hold; here they are, by name.
    values = [onnxruntime.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array)) for array in weights.values()]
    options.add_external_initializers(list(weights), values)
    options.log_severity_level = 3
    # One thread, as in the browser (and no threads spinning against a build's other processes).
    options.intra_op_num_threads = 1
    source = onnx_model if isinstance(onnx_model, bytes) else os.fspath(onnx_model)
    session = onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    # onnxruntime reads those arrays in place: they live as long as the session.
    session.lt_weights = values
    return session


def greedy_in_onnxruntime(session: Any, config: Any, input_ids: Sequence[int], max_new_tokens: int, eos: int | None):
    """Greedy decoding with the graph, one step per token with its cache, as the page does.

    Returns:
        ``(new_ids, first_logits, prompt_attentions)``: the generated ids (stopping after ``eos``), the first
        step's logits ``(V,)``, and every layer's attention on the prompt, ``(L, H, T, T)``.
    """
    layers, kv_heads, head_dim = config.num_hidden_layers, key_value_heads_of(config), head_dim_of(config)
    empty = np.zeros((1, kv_heads, 0, head_dim), dtype=np.float32)
    cache = {f"past_{kind}.{i}": empty for i in range(layers) for kind in ("key", "value")}
    names = [output.name for output in session.get_outputs()]
    ids = np.array([list(input_ids)], dtype=np.int64)
    new_ids, first_logits, attentions = [], None, None
    for step in range(max_new_tokens):
        outputs = dict(zip(names, session.run(None, {"input_ids": ids, **cache}), strict=True))
        if step == 0:
            first_logits = outputs["logits"][0]
            attentions = np.stack([outputs[f"attention.{i}"][0] for i in range(layers)])
        cache = {f"past_{kind}.{i}": outputs[f"present_{kind}.{i}"] for i in range(layers) for kind in ("key", "value")}
        token = int(outputs["logits"][0].argmax())
        new_ids.append(token)
        if token == eos:
            break
        ids = np.array([[token]], dtype=np.int64)
    return new_ids, first_logits, attentions


def compare_with_pytorch(
    onnx_model: bytes | str | os.PathLike[str],
    weights: Mapping[str, np.ndarray],
    model: LlamaForCausalLM,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int = CHECK_NEW_TOKENS,
) -> DecoderCheck:
    """Run the graph (in ``onnxruntime``, step by step) and the model (its own ``generate``) on the same prompts.

    Args:
        onnx_model: The graph's file, or its bytes.
        weights: Its matrices' float32 numbers, by name (:func:`weights_from_blocks`).
        model: The package's Llama it was exported from.
        prompts: Token ids of each prompt.
        max_new_tokens: Greedy tokens to generate on each.

    Raises:
        ValueError: if ``prompts`` is empty or holds an empty prompt.
    """
    if not len(prompts) or any(not len(prompt) for prompt in prompts):
        raise ValueError("prompts must be a non-empty sequence of non-empty lists of token ids")
    session = _session(onnx_model, weights)
    was_training = model.training
    try:
        return _compare(session, model.eval(), prompts, max_new_tokens)
    finally:
        # The model is left as it was found, whatever its generate() does to its mode.
        model.train(was_training)


def _compare(session: Any, model: LlamaForCausalLM, prompts: Sequence[Sequence[int]], max_new_tokens: int):
    eos = model.config.eos_token_id
    equal, counts, worst_probability, worst_logit, worst_attention = True, [], 0.0, 0.0, 0.0
    for prompt in prompts:
        new_ids, logits, attentions = greedy_in_onnxruntime(session, model.config, prompt, max_new_tokens, eos)
        ids = torch.tensor([list(prompt)])
        with torch.no_grad():
            output = model(ids, output_attentions=True)
            expected = model.generate(ids, torch.ones_like(ids), max_new_tokens)[0, len(prompt) :].tolist()
        reference = output.logits[0, -1].numpy()
        probabilities = torch.softmax(torch.from_numpy(logits), -1) - torch.softmax(output.logits[0, -1], -1)
        worst_probability = max(worst_probability, float(probabilities.abs().max()))
        worst_logit = max(worst_logit, float(np.abs(logits - reference).max()))
        expected_attentions = torch.stack(output.attentions, dim=1)[0].numpy()
        worst_attention = max(worst_attention, float(np.abs(attentions - expected_attentions).max()))
        equal = equal and new_ids == expected
        counts.append(len(new_ids))
    return DecoderCheck(len(prompts), tuple(counts), equal, worst_probability, worst_logit, worst_attention)


# ---------------------------------------------------------------------------
# The cached export for the site
# ---------------------------------------------------------------------------
def export_digest(file_id: str, settings: Mapping[str, Any]) -> str:
    """The hex SHA-256 of what the export is made from besides the code its run reaches: the file and the settings.

    Args:
        file_id: The GGUF file's SHA-256.
        settings: The export's settings (check prompts, new tokens).
    """
    digest = hashlib.sha256()
    # The code is not in it: the export also keeps the record of the files its run reached (the package's and
    # this exporter's; see lt_site.export._cached_metadata).
    for part in (file_id, json.dumps(settings, sort_keys=True), json.dumps(_versions(_VERSIONED), sort_keys=True)):
        digest.update(b"\0")
        digest.update(part.encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class DecoderExport(BrowserExport):
    """What :func:`export_decoder_for_browser` wrote (or found).

    The fields of :class:`~lt_site.export.BrowserExport`: the output folder, the graph ``decoder.onnx``, the JSON
    file ``decoder.json`` and its content, the digest, and whether the files were already there; and
    ``blocks_path``, the blocks file ``decoder.blocks``.
    """

    blocks_path: Path


def load_decoder_export(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """Read the JSON file of an export.

    Raises:
        TypeError: if ``folder`` is not a path.
        FileNotFoundError: if the folder holds no export (naming the function that makes one).
        ValueError: if the file is not an export of this format.
    """
    maker = "lt_site.export_decoder.export_decoder_for_browser"
    return _read_export(folder, METADATA_FILE, FORMAT, "decoder export", maker)


def _file_sha256(path: Path, default: bool) -> str:
    """The file's SHA-256: the pinned one for the default file (verified before its weights are read), else hashed."""
    return DECODER_SHA256 if default else sha256_of(path)


def export_decoder_for_browser(
    folder: str | os.PathLike[str],
    *,
    gguf: str | os.PathLike[str] | None = None,
    check_prompts: Sequence[str] = DEFAULT_CHECK_PROMPTS,
    check_new_tokens: int = CHECK_NEW_TOKENS,
    force: bool = False,
) -> DecoderExport:
    """Export the trained decoder for the page, unless ``folder`` already holds this export.

    Writes ``decoder.onnx`` and ``decoder.blocks`` (:func:`export_decoder_graph`)
    and ``decoder.json`` (format, digest, config, the blocks file's table,
    tokenizer spec, chat wrapping, sizes, and what :func:`compare_with_pytorch`
    measured on ``check_prompts``, each wrapped in the chat template).

    Args:
        folder: The output folder (created if missing).
        gguf: A GGUF file of a Llama; by default the verified SmolLM2 file
            (:func:`literate_transformer.core.checkpoints.resolve_decoder`).
        check_prompts: User messages on which the graph is measured against the model.
        check_new_tokens: Greedy tokens generated on each.
        force: Export even when the digest matches.

    Raises:
        TypeError: if ``folder`` or ``gguf`` is not a path, or ``check_new_tokens`` not an int.
        ValueError: if ``folder`` is a file, ``check_prompts`` is empty, ``check_new_tokens < 1``, or the graph's
            greedy ids are not the model's.
    """
    folder = _output_folder(folder)
    if gguf is not None:
        _check_path(gguf, "gguf")
    if isinstance(check_prompts, str) or not len(check_prompts) or not all(isinstance(p, str) for p in check_prompts):
        raise ValueError("check_prompts must be a non-empty sequence of strings")
    if isinstance(check_new_tokens, bool) or not isinstance(check_new_tokens, int):
        raise TypeError(f"check_new_tokens must be an int, got {type(check_new_tokens).__name__}")
    if check_new_tokens < 1:
        raise ValueError(f"check_new_tokens must be at least 1, got {check_new_tokens}")

    default = gguf is None and not os.environ.get(DECODER_ENV)
    path = _default_decoder_file() if default else resolve_decoder(gguf)
    if path.is_dir() or path.suffix != ".gguf":
        raise ValueError(f"gguf must be a GGUF file of a Llama, got {path}")
    # Everything from here on is recorded: the export is made again when a file its run reached changes.
    with Reached(RECORDED) as reached:
        file_id = _file_sha256(path, default)
        settings = {
            "check_prompts": list(check_prompts),
            "check_new_tokens": check_new_tokens,
            "opset": OPSET,
            "format": FORMAT,
        }
        digest = export_digest(file_id, settings)
        onnx_path, blocks_path, metadata_path = folder / ONNX_FILE, folder / BLOCKS_FILE, folder / METADATA_FILE
        files = {"folder": folder, "onnx_path": onnx_path, "metadata_path": metadata_path, "blocks_path": blocks_path}
        cached = None if force else _cached_metadata(onnx_path, metadata_path, digest, load_decoder_export)
        if cached is not None and blocks_path.is_file() and blocks_path.stat().st_size == cached["blocks"]["bytes"]:
            return DecoderExport(digest=digest, cached=True, metadata=cached, **files)

        if default:
            # The default file is verified by its SHA-256 before its weights are used.
            resolve_decoder(None)
        folder.mkdir(parents=True, exist_ok=True)
        read = read_gguf(path)
        model = llama_from_gguf(read)
        tokenizer = gguf_tokenizer(read)
        graph = export_decoder_graph(model, decoder_blocks(read, llama_config_from_gguf(read)))
        data = graph.proto.SerializeToString()
        _write_atomically(onnx_path, data)
        _write_atomically(blocks_path, graph.blocks)
        wrapping = chat_wrapping(tokenizer)
        prompts = [tokenizer(wrapping["before"] + prompt + wrapping["after"])["input_ids"] for prompt in check_prompts]
        # The check runs the graph on the numbers made from the blocks file, as the page makes them.
        weights = weights_from_blocks(graph.table, graph.blocks)
        check = compare_with_pytorch(data, weights, model, prompts, check_new_tokens)
        del weights
        if not check.greedy_ids_equal:
            raise ValueError("the exported graph's greedy ids differ from the model's on the check prompts")

        config = model.config
        kinds: dict[str, int] = {}
        for info in read.tensors.values():
            kinds[info.kind] = kinds.get(info.kind, 0) + 1
        metadata = {
            "format": FORMAT,
            "digest": digest,
            "file": {"name": path.name, "sha256": file_id, "bytes": path.stat().st_size, "tensor_formats": kinds},
            "config": {
                "vocab_size": config.vocab_size,
                "hidden_size": config.hidden_size,
                "intermediate_size": config.intermediate_size,
                "num_hidden_layers": config.num_hidden_layers,
                "num_attention_heads": config.num_attention_heads,
                "num_key_value_heads": key_value_heads_of(config),
                "head_dim": head_dim_of(config),
                "max_position_embeddings": config.max_position_embeddings,
                "eos_token_id": config.eos_token_id,
                "parameters": sum(parameter.numel() for parameter in model.parameters()),
            },
            "model": {
                "file": ONNX_FILE,
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "opset": OPSET,
            },
            "blocks": {
                "file": BLOCKS_FILE,
                "bytes": len(graph.blocks),
                "sha256": hashlib.sha256(graph.blocks).hexdigest(),
            },
            "weights": {"file": WEIGHTS_FILE, "bytes": graph.weights_bytes, "table": list(graph.table)},
            "check": {
                "prompts": check.prompts,
                "new_tokens": list(check.new_tokens),
                "greedy_ids_equal": check.greedy_ids_equal,
                "max_abs_probability": check.max_abs_probability,
                "max_abs_logit": check.max_abs_logit,
                "max_abs_attention": check.max_abs_attention,
            },
            "tokenizer": tokenizer_spec(read),
            "chat": wrapping,
            "versions": _versions(_VERSIONED),
        }
    metadata["reached"] = record_of(reached)
    _write_metadata(metadata_path, metadata)
    return DecoderExport(digest=digest, cached=False, metadata=metadata, **files)
