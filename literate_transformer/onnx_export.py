r"""The trained decoder in onnxruntime: one step of generation as one graph, multiplying the file's own blocks.

The PyTorch 4-bit path (:mod:`~literate_transformer.parts.int4`) reads the
GGUF file's blocks as they are stored, and still turns every weight back
into a number before it multiplies: PyTorch's CPU kernel unpacks each level,
scales it and multiplies it by a bfloat16 activation.  llama.cpp, reading
the same file, does not.  It rounds the *activations* to 8-bit integers too,
a scale for each block of 32, and multiplies integers by integers.  This
module exports the decoder to an ONNX graph that
`onnxruntime <https://onnxruntime.ai>`_ runs the same way, and runs it.

Why integer dot products win
----------------------------
At batch 1 every weight is used once per token, so a step costs what the
processor does per weight.  A float path unpacks a level :math:`q`, turns it
into a float, subtracts its zero and multiplies by the scale before it can
multiply by :math:`x_j`: several instructions per weight.  An integer path
multiplies the 4-bit :math:`q_j` by an 8-bit :math:`\hat x_j` and adds
the products of a block in 32-bit integers, many lanes per instruction
(``vpmaddubsw`` / ``vpdpbusd`` on x86), and touches floats once per block:

.. math::

    \sum_{j \in \text{block}} w_j x_j \;\approx\; d\, s_x \sum_j (q_j - 8)\, \hat x_j,
    \qquad x_j \approx s_x \hat x_j .

``onnxruntime``'s ``MatMulNBits`` (a ``com.microsoft`` operator: weights of
2 to 8 bits in blocks along the input dimension, a float scale per block, an
optional zero point) does this when it is told ``accuracy_level=4``: the
activations are rounded to int8 per block, the products summed in integers.
The price is that rounding, which the float32 path does not make (below).

Q4_1, mapped exactly
--------------------
``MatMulNBits`` computes :math:`w = d\,(q - z)` with an integer zero point
:math:`z` (8 when none is given).  A Q4_1 block stores :math:`w = d\,q + m`
(:mod:`~literate_transformer.core.gguf`) with a float minimum :math:`m`.
One line of algebra splits it:

.. math::

    d\,q + m = d\,(q - 8) + (m + 8d)
    \quad\Longrightarrow\quad
    \sum_j w_j x_j = \underbrace{\sum_j d\,(q_j - 8)\,x_j}_{\texttt{MatMulNBits}, \text{ no zero point}}
    + \underbrace{(m + 8d) \sum_j x_j}_{\text{the block's offset times its sum of } x} .

So each Q4_1 matrix is two products: ``MatMulNBits`` over the file's own
levels and scales (:func:`nbits_of` only repacks the nibbles into the
operator's order), and a small float product, the sums of :math:`x` over
each block of 32 (``(T, K/32)``) times the offsets :math:`c = m + 8d`
(``(K/32, N)``), a ``Gemm`` that adds it to the first.  Nothing is
re-quantized: :math:`d` and :math:`m` are float16 numbers, widened to
float32 exactly; :math:`c` is rounded once, to float32 (a relative
:math:`2^{-24}`, the rounding :func:`~literate_transformer.core.gguf.dequantize`
itself makes of :math:`d\,q + m`).  The tests prove the mapping equal to the
dequantized weights.  The two obvious mappings are worse: a *float* zero
point :math:`-m/d` makes ``onnxruntime`` dequantize the whole matrix at
every call, and a uint4 zero point rounds :math:`-m/d` to an integer, moving
every weight by up to half a step.

Q4_0 (:math:`w = d\,(q - 8)`) is ``MatMulNBits`` as it is, no offset; Q8_0
(:math:`w = d\,q`, :math:`q \in [-127, 127]`) is 8-bit ``MatMulNBits`` with
the levels stored as :math:`q + 128` and the default zero point, 128.

The token table and the head
----------------------------
SmolLM2 ties its head to its token table, which the file keeps in Q8_0.
The same bytes serve both: ``GatherBlockQuantized`` looks up the new
tokens' rows (dequantized as they are gathered), and the head is an 8-bit
``MatMulNBits`` over the whole table.  An 8-bit head on 8-bit activations
moves close scores, so the head *rescores*, as the 4-bit PyTorch path does:
the :data:`RESCORED` best tokens of the 8-bit scores are scored again,
their rows gathered from the same blocks and multiplied in float32 by the
float32 hidden state.

One step, fused
---------------
One call of the graph is one step, for one sequence: its new tokens
``input_ids`` ``(1, T)`` (the prompt, then one token a step) and, per layer
``i``, a static cache ``past_key.i`` / ``past_value.i`` ``(1, K, S, D)``
that the step writes in place (bound as ``present_key.i`` /
``present_value.i`` to the same memory).  Per layer:

1. the norm (``SimplifiedLayerNormalization``; from the second sub-layer on,
   ``SkipSimplifiedLayerNormalization``, which adds the residual and
   normalizes in one operator and hands the sum on);
2. :math:`[W^Q; W^K; W^V]` in one ``MatMulNBits`` (their rows stacked);
3. ``GroupQueryAttention``: the rotary positions on the queries and keys
   (``do_rotary``, from cosine and sine tables of every position), the new
   keys and values written into the cache, and attention over the written
   positions only (``seqlens_k``: the positions written so far, minus one),
   each of the ``K`` key/value heads serving ``H / K`` query heads;
4. :math:`W^O`, the skip-norm, :math:`[W_\text{gate}; W_\text{up}]` in one
   ``MatMulNBits``, SiLU and the product, ``down_proj``, the skip-norm.

The head reads the last position only.  The session binds its inputs and
outputs once (``IOBinding``): the new token, the two counters and the
logits are NumPy arrays the graph reads and writes in place, so a step of
:meth:`OnnxDecoder.generate` is one call of the graph and a choice of the
next token, and nothing else runs in Python.

What 8-bit activations cost
---------------------------
Rounding :math:`x` to 8 bits per block is an error of up to
:math:`s_x / 2` per number, at every multiply of every layer; the float32
path does not make it, so the engine writes other scores than the
package's float32 model on the *same* weights.  :meth:`OnnxDecoder.forced_logits`
feeds the engine the float32 model's own tokens (teacher forcing) and
returns its scores at every step, so that the two are compared step by step
rather than after they have parted; the generation benchmark prints that
comparison and the first step at which greedy ids part.

In the browser
--------------
The site's prompt page runs the trained decoder in ``onnxruntime-web``,
whose WebAssembly build registers these operators too, ``MatMulNBits``
among them, but without the packed kernels of the CPU build: timed in
Node.js on one thread (``benchmarks/bench_wasm_nbits.py``, which writes
``docs/benchmarks/wasm-nbits.md``), a ``576 -> 1536`` multiply from 4-bit
blocks took about twenty times as long as the same multiply from float32
weights, and so did the head from 8-bit blocks.  So the page keeps its own
export (the site's ``lt_site.export_decoder``): the same file's blocks,
downloaded as they are and turned into float32 weights once, in a worker;
this graph is what runs in Python.

Running it
----------
``tokenizer, model = load_decoder(engine="onnxruntime")``
(:func:`~literate_transformer.trained.load_decoder`) builds the graph from
the file and opens an :class:`OnnxDecoder`, whose
:meth:`~OnnxDecoder.generate` takes what the package's
:func:`~literate_transformer.book.decoding.generate` takes for greedy
decoding and sampling (the same draws, from the same generator, under
``torch.manual_seed``) and refuses what it does not do, by name: beam
search, a cache other than the static one, prompts padded on the right.  A
batch runs as rows in lockstep, each with its own cache and without its
padding.  The graph itself is :func:`export_decoder`'s ``onnx.ModelProto``
(:meth:`OnnxDecoder.save` writes it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from .book.decoding import sample_next_token
from .book.generation import check_eos_token_id, check_generate_inputs, new_tokens_for
from .core.gguf import BLOCK_SIZE
from .core.validation import Arguments, check_input_ids, check_positive_int
from .models.llama import head_dim_of, key_value_heads_of, rotary_inverse_frequencies
from .parts.int4 import BlockRows

__all__ = [
    "OPSET",
    "CONTRIB",
    "ACCURACY_LEVELS",
    "RESCORED",
    "NBits",
    "nbits_of",
    "stack_nbits",
    "export_decoder",
    "OnnxDecoder",
]

#: The ONNX opset of the graph's standard operators, 21, the first with block-wise quantization types.
OPSET = 21
#: The domain of ``onnxruntime``'s own operators (``MatMulNBits``, ``GroupQueryAttention``, ...).
CONTRIB = "com.microsoft"
#: ``MatMulNBits``'s ``accuracy_level``: 4 rounds the activations to int8 (integer dot products), 1 keeps float32.
ACCURACY_LEVELS = (1, 4)
#: How many of the 8-bit head's best tokens are scored again in float32.
RESCORED = 16
#: The block formats this export multiplies as they are stored, and the bits of their levels.
_BITS = {"Q4_0": 4, "Q4_1": 4, "Q8_0": 8}
#: Each layer's matrices, by HuggingFace's names: stacked into one multiply where they read the same input.
_FUSED = (
    ("query_key_value", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
    ("output", ("self_attn.o_proj",)),
    ("gate_up", ("mlp.gate_proj", "mlp.up_proj")),
    ("down", ("mlp.down_proj",)),
)


# ---------------------------------------------------------------------------
# A matrix's blocks, as MatMulNBits reads them
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class NBits:
    r"""A matrix as ``MatMulNBits`` reads it: :math:`w = d\,(q - z) + c` per block of 32 along a row.

    Attributes:
        name: The matrix (for messages).
        bits: 4 or 8.
        blobs: ``(N, K/32, 32 * bits / 8)`` ``uint8``: each block's levels :math:`q`, two to a byte for 4 bits
            (element :math:`2i` in the low four bits, :math:`2i + 1` in the high four), one for 8.
        scales: ``(N, K/32)`` float32: :math:`d`.
        offsets: ``(N, K/32)`` float32: :math:`c = m + 8d` (Q4_1), or ``None`` where every :math:`c` is 0.
    """

    name: str
    bits: int
    blobs: np.ndarray
    scales: np.ndarray
    offsets: np.ndarray | None

    @property
    def shape(self) -> tuple[int, int]:
        """``(N, K)``: the matrix's rows and columns."""
        return self.blobs.shape[0], self.blobs.shape[1] * BLOCK_SIZE

    @property
    def zero(self) -> int:
        r"""The zero point ``MatMulNBits`` takes when none is given, :math:`2^{\text{bits} - 1}`."""
        return 2 ** (self.bits - 1)

    def levels(self) -> np.ndarray:
        """``(N, K)`` ``uint8``: every level :math:`q`, unpacked."""
        if self.bits == 8:
            return self.blobs.reshape(self.blobs.shape[0], -1)
        pairs = np.stack([self.blobs & 0x0F, self.blobs >> 4], axis=-1)
        return pairs.reshape(self.blobs.shape[0], -1)

    def weights(self, dtype: Any = np.float32) -> np.ndarray:
        """``(N, K)``: the weights the two products multiply by, :math:`d\\,(q - z) + c`, computed in ``dtype``."""
        per_weight = lambda values: np.repeat(values.astype(dtype), BLOCK_SIZE, axis=1)  # noqa: E731
        weights = per_weight(self.scales) * (self.levels().astype(dtype) - self.zero)
        return weights if self.offsets is None else weights + per_weight(self.offsets)


def _float16(blocks: np.ndarray, start: int) -> np.ndarray:
    """The float16 number at bytes ``start, start + 1`` of every block, as float32: ``(N, K/32)``."""
    return blocks[..., start : start + 2].copy().view(np.float16)[..., 0].astype(np.float32)


def nbits_of(matrix: BlockRows) -> NBits:
    r"""A matrix's blocks as :class:`NBits`: the levels repacked, the numbers widened, none re-quantized.

    * Q4_1, :math:`w = d\,q + m`: 4 bits, scale :math:`d`, offset :math:`c = m + 8d`.
    * Q4_0, :math:`w = d\,(q - 8)`: 4 bits, scale :math:`d`, no offset.
    * Q8_0, :math:`w = d\,q`, :math:`q \in [-127, 127]`: 8 bits, levels :math:`q + 128`, scale :math:`d`.

    A GGUF 4-bit block keeps weight :math:`j` in the low four bits of byte :math:`j` and weight :math:`j + 16`
    in its high four; ``MatMulNBits`` keeps neighbours together (weights :math:`2i` and :math:`2i + 1` in
    byte :math:`i`): the nibbles are unpacked and packed again in that order.

    Raises:
        ValueError: for a format other than Q4_0, Q4_1 and Q8_0, naming the tensor.
    """
    if matrix.kind not in _BITS:
        raise ValueError(
            f"tensor {matrix.name!r} is {matrix.kind}: the onnxruntime engine multiplies the file's "
            f"{', '.join(_BITS)} blocks as they are, and re-quantizes nothing"
        )
    rows, groups = matrix.rows.shape[0], matrix.columns // BLOCK_SIZE
    blocks = matrix.rows.numpy().reshape(rows, groups, -1)
    scales = _float16(blocks, 0)
    if matrix.kind == "Q8_0":
        # q + 128 in 0..255: the default zero point of 8 bits, 128, takes it back to q.
        levels = (blocks[..., 2:].copy().view(np.int8).astype(np.int16) + 128).astype(np.uint8)
        return NBits(matrix.name, 8, levels, scales, None)
    start = 4 if matrix.kind == "Q4_1" else 2
    packed = blocks[..., start:]
    # GGUF's order (weights j and j + 16 in byte j), unpacked to 32 levels, then packed as neighbours.
    levels = np.concatenate([packed & 0x0F, packed >> 4], axis=-1)
    blobs = levels[..., 0::2] | (levels[..., 1::2] << 4)
    offsets = _float16(blocks, 2) + 8 * scales if matrix.kind == "Q4_1" else None
    return NBits(matrix.name, 4, blobs, scales, offsets)


def stack_nbits(parts: Sequence[NBits], name: str) -> NBits:
    """Matrices that read the same input, one above the other (``[W^Q; W^K; W^V]``): their rows stacked.

    Raises:
        ValueError: if they have different bits or columns (a Q8_0 matrix beside a 4-bit one).
    """
    if len({(part.bits, part.shape[1]) for part in parts}) != 1:
        found = ", ".join(f"{part.name} ({part.bits} bits, {part.shape[1]} columns)" for part in parts)
        raise ValueError(f"matrices stacked into one multiply must have the same bits and columns, got {found}")
    offsets = None
    if any(part.offsets is not None for part in parts):
        offsets = np.concatenate(
            [part.offsets if part.offsets is not None else np.zeros_like(part.scales) for part in parts]
        )
    return NBits(
        name,
        parts[0].bits,
        np.concatenate([part.blobs for part in parts]),
        np.concatenate([part.scales for part in parts]),
        offsets,
    )


# ---------------------------------------------------------------------------
# The graph
# ---------------------------------------------------------------------------
def _onnx() -> Any:
    try:
        import onnx
    except ImportError as error:  # pragma: no cover - the package's extra installs it
        raise ImportError("the onnxruntime engine needs onnx and onnxruntime: pip install onnx onnxruntime") from error
    return onnx


class _Graph:
    """Nodes and initializers with fresh names: ``graph.op("MatMul", a, b)`` returns its output's name."""

    def __init__(self, accuracy_level: int) -> None:
        self.onnx = _onnx()
        self.accuracy_level = accuracy_level
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.count = 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def op(self, op_type: str, *inputs: str, outputs: Sequence[str] | None = None, **attributes: Any) -> Any:
        """One node; its outputs' names (one name for one output).  ``domain=CONTRIB`` for onnxruntime's own."""
        names = list(outputs) if outputs is not None else [self.name(op_type.lower())]
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), names, **attributes))
        return names[0] if len(names) == 1 else names

    def constant(self, array: np.ndarray, name: str | None = None) -> str:
        name = name or self.name("constant")
        self.initializers.append(self.onnx.numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def ints(self, *values: int) -> str:
        return self.constant(np.array(values, dtype=np.int64))

    def nbits(self, x: str, matrix: NBits, blobs: str | None = None, scales: str | None = None) -> str:
        """``x @ W^T`` for ``x`` ``(T, K)``: ``MatMulNBits``, plus each block's sum of ``x`` times its offset."""
        rows, columns = matrix.shape
        blobs = blobs or self.constant(matrix.blobs, f"{matrix.name}.blobs")
        scales = scales or self.constant(matrix.scales, f"{matrix.name}.scales")
        # sum_j d (q_j - z) x_j: the levels as stored, the default zero point.
        product = self.op(
            "MatMulNBits", x, blobs, scales, domain=CONTRIB, K=columns, N=rows, bits=matrix.bits,
            block_size=BLOCK_SIZE, accuracy_level=self.accuracy_level,
        )  # fmt: skip
        if matrix.offsets is None:
            return product
        # + c sum_j x_j per block: x's sums over each block of 32, (T, K/32), times the offsets (K/32, N).
        sums = self.op("ReduceSum", self.op("Reshape", x, self.ints(-1, columns // BLOCK_SIZE, BLOCK_SIZE)),
                       self.ints(-1), keepdims=0)  # fmt: skip
        return self.op("Gemm", sums, self.constant(matrix.offsets.T, f"{matrix.name}.offsets"), product)


def _rotary_tables(config: Any) -> tuple[np.ndarray, np.ndarray]:
    """The cosines and sines of every position's angles ``(max_position_embeddings, D/2)``, as the model computes
    them: the position times each pair's frequency, in float32."""
    inv_freq = rotary_inverse_frequencies(config).float()
    positions = torch.arange(config.max_position_embeddings, dtype=torch.float32)
    angles = positions[:, None] * inv_freq[None, :]
    return angles.cos().numpy(), angles.sin().numpy()


def _check_export(config: Any, blocks: Mapping[str, BlockRows], vectors: Mapping[str, Tensor]) -> None:
    if getattr(config, "model_type", None) != "llama":
        raise ValueError(f"config must be a Llama's (model_type 'llama'), got {getattr(config, 'model_type', None)!r}")
    needed = ["model.embed_tokens.weight"] + [
        f"model.layers.{i}.{module}.weight"
        for i in range(config.num_hidden_layers)
        for _, modules in _FUSED
        for module in modules
    ]
    missing = [name for name in needed if name not in blocks]
    if missing:
        raise ValueError(f"blocks has no {missing[0]!r} ({len(missing)} matrices missing): the graph needs them all")
    norms = ["model.norm.weight"] + [
        f"model.layers.{i}.{norm}.weight"
        for i in range(config.num_hidden_layers)
        for norm in ("input_layernorm", "post_attention_layernorm")
    ]
    missing = [name for name in norms if name not in vectors]
    if missing:
        raise ValueError(f"vectors has no {missing[0]!r}: the graph needs every norm's weight")
    extra = sorted(set(vectors) - set(norms))
    if extra:
        raise ValueError(f"vectors holds {extra[0]!r}, which a Llama's graph has no place for (a bias?)")
    if "lm_head.weight" in blocks and blocks["lm_head.weight"] is not blocks["model.embed_tokens.weight"]:
        raise ValueError("the head must be tied to the token table (config.tie_word_embeddings): SmolLM2's is")


def export_decoder(
    config: Any,
    blocks: Mapping[str, BlockRows],
    vectors: Mapping[str, Tensor],
    accuracy_level: int = 4,
    rescored: int = RESCORED,
) -> Any:
    """The ONNX graph of one generation step of a Llama whose matrices are a GGUF file's blocks.

    Args:
        config: The Llama's config (:func:`~literate_transformer.trained.llama_config_from_gguf`).
        blocks: Its matrices as the file stores them, under HuggingFace's names, the query and key rows in
            HuggingFace's order (:func:`~literate_transformer.trained.blocks_from_gguf`); the head tied to the
            token table.
        vectors: Its norms' weights, float32, under HuggingFace's names.
        accuracy_level: ``MatMulNBits``'s: 4 rounds the activations to int8 per block (integer dot products),
            1 multiplies float32 activations.
        rescored: How many of the head's best tokens are scored again in float32 (0: none).

    Returns:
        The ``onnx.ModelProto``: inputs ``input_ids`` ``(1, T)`` int64, ``seqlens_k`` ``(1,)`` int32 (the
        positions written after the step, minus one), ``total_sequence_length`` (a scalar int32, those
        positions) and ``past_key.i`` / ``past_value.i`` ``(1, K, S, D)``; outputs ``logits`` ``(1, V)``, the
        next token's scores, and ``present_key.i`` / ``present_value.i``, the same cache written (bind them to
        the same memory as the inputs).

    Raises:
        ValueError: for a config other than a plain Llama's, a missing matrix or norm, a matrix of a format
            other than Q4_0, Q4_1 and Q8_0, or an ``accuracy_level`` other than :data:`ACCURACY_LEVELS`.
    """
    if accuracy_level not in ACCURACY_LEVELS:
        raise ValueError(f"accuracy_level must be one of {ACCURACY_LEVELS}, got {accuracy_level!r}")
    check_positive_int(rescored, "rescored", minimum=0)
    _check_export(config, blocks, vectors)
    graph = _Graph(accuracy_level)
    onnx = graph.onnx
    helper, FLOAT, INT64, INT32 = onnx.helper, onnx.TensorProto.FLOAT, onnx.TensorProto.INT64, onnx.TensorProto.INT32
    heads, kv_heads, head_dim = config.num_attention_heads, key_value_heads_of(config), head_dim_of(config)
    vocab, eps = config.vocab_size, float(config.rms_norm_eps)
    layers = config.num_hidden_layers

    inputs = [
        helper.make_tensor_value_info("input_ids", INT64, [1, "T"]),
        helper.make_tensor_value_info("seqlens_k", INT32, [1]),
        helper.make_tensor_value_info("total_sequence_length", INT32, []),
    ]
    outputs = [helper.make_tensor_value_info("logits", FLOAT, [1, vocab])]
    for i in range(layers):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_{kind}.{i}", FLOAT, [1, kv_heads, "S", head_dim]))
            outputs.append(helper.make_tensor_value_info(f"present_{kind}.{i}", FLOAT, [1, kv_heads, "S", head_dim]))

    def norm_weight(name: str) -> str:
        return graph.constant(vectors[name].detach().float().numpy(), name)

    def skip_norm(update: str, residual: str, weight: str) -> tuple[str, str]:
        # The residual sum x + update, and its norm, in one operator: (normed, sum).
        normed, total = graph.name("normed"), graph.name("residual")
        graph.op("SkipSimplifiedLayerNormalization", update, residual, norm_weight(weight),
                 outputs=[normed, "", "", total], domain=CONTRIB, epsilon=eps)  # fmt: skip
        return normed, total

    # The token table: its blocks gathered for the new tokens (dequantized as they are read), the head's weight.
    table = nbits_of(blocks["model.embed_tokens.weight"])
    if table.bits != 8:
        raise ValueError(
            f"the token table must be Q8_0 (an 8-bit head), got {blocks['model.embed_tokens.weight'].kind}"
        )
    table_levels = graph.constant(table.levels(), "model.embed_tokens.levels")  # (V, E) uint8
    table_scales = graph.constant(table.scales, "model.embed_tokens.scales")  # (V, E/32)
    ids = graph.op("Reshape", "input_ids", graph.ints(-1))  # the T ids, one row
    x = graph.op("GatherBlockQuantized", table_levels, ids, table_scales, domain=CONTRIB, bits=8,
                 block_size=BLOCK_SIZE, quantize_axis=1, gather_axis=0)  # fmt: skip
    cos, sin = _rotary_tables(config)
    cos, sin = graph.constant(cos, "rotary.cos"), graph.constant(sin, "rotary.sin")
    h = graph.op("SimplifiedLayerNormalization", x, norm_weight("model.layers.0.input_layernorm.weight"),
                 axis=-1, epsilon=eps)  # fmt: skip

    for i in range(layers):
        prefix = f"model.layers.{i}."
        fused = {
            name: stack_nbits([nbits_of(blocks[f"{prefix}{module}.weight"]) for module in modules], prefix + name)
            for name, modules in _FUSED
        }
        # 1) [W^Q; W^K; W^V] h: (T, (H + 2K) D), as GroupQueryAttention takes them packed, (1, T, ...).
        packed = graph.op(
            "Reshape", graph.nbits(h, fused["query_key_value"]), graph.ints(1, -1, (heads + 2 * kv_heads) * head_dim)
        )
        # 2) Rotary positions, the cache written at the new positions, attention over the written ones.
        context = graph.op(
            "GroupQueryAttention", packed, "", "", f"past_key.{i}", f"past_value.{i}", "seqlens_k",
            "total_sequence_length", cos, sin,
            outputs=[graph.name("context"), f"present_key.{i}", f"present_value.{i}"], domain=CONTRIB,
            num_heads=heads, kv_num_heads=kv_heads, do_rotary=1, scale=float(head_dim**-0.5),
        )[0]  # fmt: skip
        context = graph.op("Reshape", context, graph.ints(-1, heads * head_dim))  # (T, H D)
        # 3) x + W^O context, and its norm.
        h, x = skip_norm(graph.nbits(context, fused["output"]), x, f"{prefix}post_attention_layernorm.weight")
        # 4) SwiGLU: silu(gate) * up, from one multiply of [W_gate; W_up].
        size = fused["gate_up"].shape[0] // 2
        gate, up = graph.op("Split", graph.nbits(h, fused["gate_up"]), graph.ints(size, size), axis=-1,
                            outputs=[graph.name("gate"), graph.name("up")])  # fmt: skip
        swish = graph.op("Mul", graph.op("Mul", gate, graph.op("Sigmoid", gate)), up)
        # 5) x + down_proj, and the next layer's norm (the final norm after the last layer).
        after = f"model.layers.{i + 1}.input_layernorm.weight" if i + 1 < layers else "model.norm.weight"
        h, x = skip_norm(graph.nbits(swish, fused["down"]), x, after)

    # The head on the last position only: (1, E) -> (1, V), 8-bit activations on the table's blocks.
    last = graph.op("Slice", h, graph.ints(-1), graph.ints(2**62), graph.ints(0))
    head = NBits("model.embed_tokens", 8, table.blobs, table.scales, None)
    blobs = graph.constant(table.blobs, "model.embed_tokens.blobs")
    scores = graph.nbits(last, head, blobs=blobs, scales=table_scales)
    if rescored:
        # The best candidates scored again: their rows gathered from the blocks, times the float32 hidden state.
        _, best = graph.op(
            "TopK", scores, graph.ints(rescored), axis=-1, outputs=[graph.name("top"), graph.name("best")]
        )
        rows = graph.op("GatherBlockQuantized", table_levels, graph.op("Reshape", best, graph.ints(-1)), table_scales,
                        domain=CONTRIB, bits=8, block_size=BLOCK_SIZE, quantize_axis=1, gather_axis=0)  # fmt: skip
        exact = graph.op("Gemm", last, rows, transB=1)  # one row: a score per rescored token
        graph.op("ScatterElements", scores, best, exact, axis=-1, outputs=["logits"])
    else:
        graph.op("Identity", scores, outputs=["logits"])

    proto = helper.make_model(
        helper.make_graph(graph.nodes, "literate_transformer_llama_step", inputs, outputs, graph.initializers),
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(CONTRIB, 1)],
        producer_name="literate_transformer",
    )
    proto.ir_version = 10
    return proto


# ---------------------------------------------------------------------------
# The engine
# ---------------------------------------------------------------------------
class _Row:
    """One sequence's step: the session's binding, its cache, its new token, counters and logits, bound once."""

    def __init__(self, session: Any, config: Any, capacity: int) -> None:
        import onnxruntime

        ortvalue = onnxruntime.OrtValue.ortvalue_from_numpy
        kv_heads, head_dim = key_value_heads_of(config), head_dim_of(config)
        self.binding = session.io_binding()
        # Each layer's keys and values: one buffer, the step's input and its output (written in place).
        self.cache = [
            np.zeros((1, kv_heads, capacity, head_dim), dtype=np.float32) for _ in range(2 * config.num_hidden_layers)
        ]
        for index, buffer in enumerate(self.cache):
            value = ortvalue(buffer)
            kind = ("key", "value")[index % 2]
            self.binding.bind_ortvalue_input(f"past_{kind}.{index // 2}", value)
            self.binding.bind_ortvalue_output(f"present_{kind}.{index // 2}", value)
        self.logits = np.empty((1, config.vocab_size), dtype=np.float32)
        self.binding.bind_ortvalue_output("logits", ortvalue(self.logits))
        self.seqlens_k, self.total = np.zeros(1, dtype=np.int32), np.zeros((), dtype=np.int32)
        self.binding.bind_ortvalue_input("seqlens_k", ortvalue(self.seqlens_k))
        self.binding.bind_ortvalue_input("total_sequence_length", ortvalue(self.total))
        self.token = np.zeros((1, 1), dtype=np.int64)

    def read(self, session: Any, ids: np.ndarray) -> np.ndarray:
        """Feed ``ids`` ``(1, T)`` after what the cache holds (a new binding of the input for them); the logits."""
        import onnxruntime

        self.total += ids.shape[1]
        self.seqlens_k[0] = self.total - 1
        self._prompt = np.ascontiguousarray(ids, dtype=np.int64)
        self.binding.bind_ortvalue_input("input_ids", onnxruntime.OrtValue.ortvalue_from_numpy(self._prompt))
        session.run_with_iobinding(self.binding)
        # From now on one token a step, in a buffer bound once.
        self.binding.bind_ortvalue_input("input_ids", onnxruntime.OrtValue.ortvalue_from_numpy(self.token))
        return self.logits

    def step(self, session: Any, token: int) -> np.ndarray:
        """Feed one token: its id written into the bound buffer, the counters moved on, one call of the graph."""
        self.token[0, 0] = token
        self.total += 1
        self.seqlens_k[0] = self.total - 1
        session.run_with_iobinding(self.binding)
        return self.logits


def _check_generate(decoder: OnnxDecoder, args: Arguments) -> None:
    refused = {
        "num_beams": (args.num_beams, 1, "beam search"),
        "use_cache": (args.use_cache, True, "decoding without a cache"),
    }
    for name, (value, allowed, what) in refused.items():
        if value != allowed or isinstance(value, bool) != isinstance(allowed, bool):
            raise ValueError(
                f"{name}={value!r}: the onnxruntime engine does not do {what}; it decodes greedily or by sampling "
                f"over its static cache ({name}={allowed!r}); load the model with engine='torch' for it"
            )
    if args.cache_implementation not in (None, "static"):
        raise ValueError(
            f"cache_implementation={args.cache_implementation!r}: the onnxruntime engine's cache is static "
            "(None or 'static')"
        )
    if not isinstance(args.do_sample, bool):
        raise TypeError(f"do_sample must be a bool, got {args.do_sample!r}")
    args.max_new_tokens = new_tokens_for(decoder, args.input_ids, args.max_new_tokens, args.max_length)
    args.bos_token_id = None
    check_generate_inputs(args)
    from .book.decoding import _check_sampling_options

    _check_sampling_options(args.temperature, args.top_k, args.top_p)
    if args.attention_mask is not None:
        empty = ~args.attention_mask.bool().any(dim=1)
        if bool(empty.any()):
            raise ValueError(
                f"attention_mask: row {int(empty.nonzero()[0, 0])} holds no real token; the onnxruntime engine "
                "continues a prompt of at least one token"
            )


class OnnxDecoder(nn.Module):
    """The decoder's step graph in an ``onnxruntime`` session, and the loop that generates with it.

    An ``nn.Module`` with no parameters (its weights are in the session), so that the package's checks of
    ``generate()``'s arguments apply to it as to the models.

    Args:
        proto: The graph (:func:`export_decoder`'s ``onnx.ModelProto``, or its bytes).
        config: The Llama's config.
        threads: ``onnxruntime``'s threads for one call (``None``: ``torch.get_num_threads()``, the
            package's setting).
    """

    #: A decoder-only language model, as the package's checks ask.
    is_encoder_decoder = False

    def __init__(self, proto: Any, config: Any, threads: int | None = None) -> None:
        super().__init__()
        import onnxruntime

        self.config = config
        threads = torch.get_num_threads() if threads is None else check_positive_int(threads, "threads")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.proto_bytes = proto if isinstance(proto, bytes) else proto.SerializeToString()
        self.session = onnxruntime.InferenceSession(self.proto_bytes, options, providers=["CPUExecutionProvider"])
        self.threads = threads
        self.eval()

    @classmethod
    def from_blocks(
        cls,
        config: Any,
        blocks: Mapping[str, BlockRows],
        vectors: Mapping[str, Tensor],
        threads: int | None = None,
        accuracy_level: int = 4,
    ) -> OnnxDecoder:
        """Export the graph (:func:`export_decoder`) and open it."""
        return cls(export_decoder(config, blocks, vectors, accuracy_level), config, threads)

    @property
    def position_limit(self) -> int:
        """The positions the rotary tables cover, ``config.max_position_embeddings``."""
        return self.config.max_position_embeddings

    def generation_eos_token_id(self) -> int | list[int] | None:
        """``config.eos_token_id``, as the package's models read it."""
        from .book.decoding import GenerationMixin

        return GenerationMixin.generation_eos_token_id(self)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the graph to ``path`` (an ``.onnx`` file, its weights inside)."""
        with open(path, "wb") as handle:
            handle.write(self.proto_bytes)

    def _rows(self, input_ids: Tensor, attention_mask: Tensor | None) -> list[np.ndarray]:
        """Each row's real tokens, ``(1, P_b)``: a left-padded row without its padding."""
        ids = input_ids.detach().cpu().numpy()
        if attention_mask is None:
            return [row[None, :] for row in ids]
        real = attention_mask.detach().cpu().bool().numpy()
        return [row[keep][None, :] for row, keep in zip(ids, real, strict=True)]

    @torch.no_grad()
    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """The next token's scores after each prompt, ``(B, V)`` (one call of the graph per row)."""
        input_ids = check_input_ids(input_ids, self.config.vocab_size, self.position_limit)
        rows = self._rows(input_ids, attention_mask)
        return torch.from_numpy(
            np.concatenate([_Row(self.session, self.config, row.shape[1]).read(self.session, row) for row in rows])
        )

    @torch.no_grad()
    def forced_logits(self, input_ids: Tensor, prompt_length: int) -> Tensor:
        """Teacher forcing: the scores of every step when the tokens written are ``input_ids[:, prompt_length:]``.

        Args:
            input_ids: ``(1, P + N)``: a prompt of ``prompt_length`` tokens and the tokens to feed after it.
            prompt_length: ``P``.

        Returns:
            ``(N, V)``: step ``t``'s scores, read after the prompt and the first ``t`` forced tokens.
        """
        input_ids = check_input_ids(input_ids, self.config.vocab_size, self.position_limit)
        if input_ids.shape[0] != 1 or not 0 < prompt_length < input_ids.shape[1]:
            raise ValueError(
                f"input_ids must be one row (1, P + N) and prompt_length a P in [1, {input_ids.shape[1] - 1}], got "
                f"{tuple(input_ids.shape)} and {prompt_length!r}"
            )
        ids = input_ids[0].tolist()
        row = _Row(self.session, self.config, len(ids))
        scores = [row.read(self.session, np.array([ids[:prompt_length]])).copy()]
        for token in ids[prompt_length:-1]:
            scores.append(row.step(self.session, token).copy())
        return torch.from_numpy(np.concatenate(scores))

    @torch.no_grad()
    def generate(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        max_new_tokens: int | None = None,
        *,
        max_length: int | None = None,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int = 50,
        top_p: float = 1.0,
        num_beams: int = 1,
        eos_token_id: int | list[int] | None = None,
        use_cache: bool = True,
        cache_implementation: str | None = None,
    ) -> Tensor:
        """Continue the prompts: greedy by default, or sampling, under the package's ``generate()``'s names.

        Args:
            input_ids: The prompts ``(B, P)``, padded on the left (a tokenizer's, or the chat template's, ids).
            attention_mask: ``(B, P)``, 0 on the padding.
            max_new_tokens: How many tokens to write at most (20 when neither this nor ``max_length`` is given).
            max_length: The whole sequence's length, as ``transformers`` counts it.
            do_sample: Draw each token (:func:`~literate_transformer.book.decoding.sample_next_token`, the same
                call on the same generator as the package's sampling).
            temperature: Divide the scores by it before drawing (> 0).
            top_k: Draw among the ``k`` most likely tokens (0: all).
            top_p: Draw among the most likely tokens holding ``p`` of the probability.
            num_beams: 1 only: beam search is refused, by name.
            eos_token_id: Stop a sequence at this token (or any of a list); ``None``: the config's.
            use_cache: ``True`` only (the engine always reads a cache).
            cache_implementation: ``None`` or ``"static"``: the engine's cache is static.

        Returns:
            The prompts followed by the new ids, ``(B, P + N)``; a sequence that finished early is padded with
            ``config.pad_token_id`` (or its end-of-sequence id), as the package pads.

        Raises:
            ValueError: for ``num_beams > 1``, ``use_cache=False``, a ``cache_implementation`` other than
                ``None`` and ``"static"``, prompts padded on the right or a row without a real token, and
                whatever the package's ``generate()`` refuses (ids outside the vocabulary, masks of another
                shape, positions beyond ``max_position_embeddings``, sampling options out of range).
            TypeError: for arguments of the wrong type.
        """
        args = Arguments(
            model=self, input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=max_new_tokens,
            max_length=max_length, do_sample=do_sample, temperature=temperature, top_k=top_k, top_p=top_p,
            num_beams=num_beams, eos_token_id=eos_token_id, use_cache=use_cache,
            cache_implementation=cache_implementation, bos_token_id=None,
        )  # fmt: skip
        if eos_token_id is None:
            args.eos_token_id = self.generation_eos_token_id()
        _check_generate(self, args)
        max_new_tokens = args.max_new_tokens
        eos_token_ids = check_eos_token_id(args.eos_token_id, self.config.vocab_size)
        prompts = self._rows(input_ids, attention_mask)
        rows = [_Row(self.session, self.config, prompt.shape[1] + max_new_tokens) for prompt in prompts]
        stops = set(eos_token_ids or ())
        pad = self.config.pad_token_id if self.config.pad_token_id is not None else (eos_token_ids or [0])[0]
        finished = [False] * len(rows)
        written: list[list[int]] = [[] for _ in rows]
        logits = np.concatenate([row.read(self.session, prompt) for row, prompt in zip(rows, prompts, strict=True)])
        for step in range(max_new_tokens):
            # The choice: each row's most likely token, or a draw from the package's sampler (one row each).
            if do_sample:
                tokens = sample_next_token(torch.from_numpy(logits), temperature, top_k, top_p).tolist()
            else:
                tokens = logits.argmax(axis=-1).tolist()
            for index, token in enumerate(tokens):
                token = pad if finished[index] else token
                written[index].append(token)
                finished[index] = finished[index] or token in stops
            if (stops and all(finished)) or step + 1 == max_new_tokens:
                break
            # Every row reads what it wrote (a finished row, its padding), as the package's loop feeds them.
            if len(rows) == 1:
                logits = rows[0].step(self.session, written[0][-1])
            else:
                logits = np.concatenate([row.step(self.session, written[i][-1]) for i, row in enumerate(rows)])
        new = torch.tensor(written, dtype=torch.long, device=input_ids.device)
        return torch.cat([input_ids, new], dim=1)
