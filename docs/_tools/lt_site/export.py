r"""Export: the literate BERT as one ONNX graph that a web browser can run.

The site's *Try your own sentence* page runs this package's own
``literate_transformer.BertModel`` (not HuggingFace's) inside the
reader's browser, with `onnxruntime-web <https://onnxruntime.ai>`_.  This
module writes what that page downloads: an ONNX graph of the model and a small
JSON file with the vocabulary, the tokenizer's settings, the model's config
and what the export measured.

What is exported
----------------
:class:`BrowserBert` is ``literate_transformer.BertModel`` minus two
things a browser does not need: the pooler (the ``[CLS]`` sentence vector),
and the argument checks at the top of ``BertModel.forward``.  Those checks
read the *values* of the token ids (``int(input_ids.max())``), and
``torch.export.export``, which traces the model into a graph, cannot turn
a decision on a value into a graph: the page's tokenizer only produces valid
ids, so the graph trusts its caller.  What remains is the two calls that do
the work, ``embeddings`` then ``encoder``, with ``output_attentions=True``.
The graph has

* two inputs, ``input_ids`` and ``token_type_ids``, ``int64`` of shape
  ``(1, T)``, where ``T`` may be anything from 2 (``[CLS] [SEP]``) to
  ``max_position_embeddings``: one sentence (or pair) at a time, so no
  padding and no attention mask;
* two outputs, ``last_hidden_state`` ``(1, T, E)`` and ``attentions``
  ``(1, L, H, T, T)``: every layer's attention probabilities stacked in one
  tensor, layer by head by query by key.

A test runs the graph in ``onnxruntime`` and compares it with
``BertModel.forward`` itself (pooler and checks included): the graph is the
model.

How it is exported
------------------
:func:`export_onnx` calls ``torch.onnx.export`` with ``dynamo=True``:
``torch.export.export`` records the ``forward`` as a graph of ATen
operations for a symbolic length ``T``, and the exporter translates each
operation to ONNX operators (opset 21).  The graph's tensors keep the
module's parameter names (``bert.embeddings.word_embeddings.weight``); the
exporter folds the transposes of the ``nn.Linear`` weights into new constants
(``val_13``...), which is why :func:`shrink_weights` finds the weights by size
and type, not by name.  The exporter also records, for each node, the Python
stack that made it; those notes hold this machine's paths, so they are
removed, and two exports of the same code write the same bytes.

Shrinking the weights
---------------------
In ``float32`` the MiniLM checkpoint's 22.7 million parameters are 91 MB, too
much to download for a page.  The obvious halving, ``float16``, still leaves
45 MB; plain ``int8`` storage (a quarter) moves the attention probabilities by
up to about ``3e-2``, far more than the page's promise of ``5e-3``.
:func:`shrink_weights` stores each large weight matrix in 13 bits per number
instead, as an ``int8`` code plus an ``int4`` correction.  For every block of
``BLOCK_SIZE`` (16) consecutive numbers :math:`w` of a row,

.. math::

    s = \frac{\max |w|}{127}, \qquad
    q = \operatorname{round}\Big(\frac{w}{s}\Big) \in [-127, 127], \qquad
    r = \operatorname{round}\Big(\frac{w - s\,q}{s / 14}\Big) \in [-7, 7],

    \hat w = s\,q + \frac{s}{14}\,r, \qquad |w - \hat w| \le \frac{s}{28}.

The remainder :math:`w - s q` lies within :math:`\pm s/2`, so 15 steps of
:math:`s/14` cover it and :math:`r` needs no scale of its own: one ``float16``
:math:`s` per block, 16 ``int8`` codes and 16 ``int4`` corrections.  In the
graph each matrix becomes two ``DequantizeLinear`` nodes (ONNX's own operator
for "codes times a per-block scale", opset 21) and an ``Add`` whose output
has the matrix's old name, so nothing else in the graph changes.  The
runtime can fold those nodes back into ``float32`` matrices once, when it
loads the graph.

Why blocks of 16 and not 32 (measured when this was written, on the 268
texts of the tokenizer's test corpus): with 32 the largest error was
``5.3e-3``, on two 512-token texts that repeat one phrase (their attention
spreads over hundreds of near-identical keys, where small changes of the
scores move many probabilities); blocks of 16 bring that to about ``4e-3``
for 1.4 MB more (blocks of 8: ``2.8e-3`` for another 2.8 MB).  Ordinary
sentences stay near ``2e-3`` either way.

What that costs is measured, not assumed: :func:`export_for_browser` runs the
shrunk graph and ``BertModel.forward`` on :data:`DEFAULT_CHECK_TEXTS`, one of
them 512 repetitive tokens long, and writes the largest differences of the
attention probabilities and of the last hidden state into the JSON file (the
page prints them).

The cache
---------
Exporting takes tens of seconds, so :func:`export_for_browser` first computes
a digest of everything the files depend on: the package's source, the
checkpoint's SHA-256, the tokenizer, the export settings and the versions of
``torch``, ``onnx``, ``onnxscript`` and ``onnxruntime``.  When the folder
already holds an export with that digest, nothing is done.

>>> import numpy as np
>>> weight = np.random.default_rng(0).normal(0.0, 0.05, size=(4, 64)).astype(np.float32)
>>> codes, corrections, scales = quantize_int8_int4(weight, block_size=16)
>>> codes.dtype, codes.shape, corrections.shape, scales.dtype, scales.shape
(dtype('int8'), (4, 64), (4, 64), dtype('float16'), (4, 4))
>>> error = np.abs(dequantize_int8_int4(codes, corrections, scales) - weight)
>>> bool((error <= np.repeat(scales.astype(np.float32), 16, axis=1) / 28 + 1e-9).all())
True
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib.metadata
import io
import json
import logging
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

import literate_transformer
from literate_transformer.core.checkpoints import load_tokenizer, resolve_checkpoint
from literate_transformer.models.bert import BertModel

from .deps import Reached, Record, installed_imports, paused

#: The package's source folder.
PACKAGE_SOURCE = Path(literate_transformer.__file__).resolve().parent
#: What an export's record of its run counts: the package's files and the site's tooling's (this exporter's).
RECORDED = (PACKAGE_SOURCE, Path(__file__).resolve().parent)
#: The checkout, which the record's paths are relative to.
CHECKOUT = PACKAGE_SOURCE.parent

__all__ = [
    "BrowserBert",
    "ExportCheck",
    "BrowserExport",
    "DEFAULT_CHECK_TEXTS",
    "export_onnx",
    "quantize_int8_int4",
    "dequantize_int8_int4",
    "shrink_weights",
    "tokenizer_spec",
    "compare_with_pytorch",
    "export_digest",
    "export_for_browser",
    "load_browser_export",
]

#: The ONNX operator set of the graph: 21 is the first with ``int4`` tensors
#: and block-wise ``DequantizeLinear``.
OPSET = 21
#: Names of the files :func:`export_for_browser` writes.
ONNX_FILE = "model.onnx"
FP32_ONNX_FILE = "model.fp32.onnx"
METADATA_FILE = "model.json"
#: Written into the JSON file, so a reader of the file (the page) can refuse one it does not understand.
FORMAT = "literate-transformer-browser-export/1"
#: How many consecutive numbers of a row share one scale (see "Why blocks of 16" above).
BLOCK_SIZE = 16
#: How many steps of ``s / 14`` the int4 correction has on each side of zero.
_CORRECTION_STEPS = 7
#: The packages whose versions can change the exported bytes.
_VERSIONED = ("torch", "onnx", "onnxscript", "onnxruntime", "transformers", "numpy")

#: Texts on which :func:`export_for_browser` measures the shrunk graph against
#: ``BertModel.forward``: plain, accented, numeric, CJK and emoji text, pairs,
#: and long inputs, one of them the full 512 tokens.  (The tests use other texts.)
DEFAULT_CHECK_TEXTS: tuple[str | tuple[str, str], ...] = (
    "time flies like an arrow",
    ("time flies like an arrow", "fruit flies like a banana"),
    "The quick brown fox jumps over the lazy dog.",
    "Zürich's café served crème brûlée at 3:45 pm for €12.50!",
    "東京は日本の首都です。",
    "Let's celebrate 🎉 and launch 🚀 the rocket.",
    "Antidisestablishmentarianism is a supercalifragilistic word.",
    ("Where is the station?", "It is two blocks north, next to the bank."),
    "Attention lets every token look at every other token and decide how much each one matters. " * 4,
    # The hard case: 512 tokens of one repeated phrase (the tokenizer truncates it).
    "The attention of every token in this very long text is computed against all the others. " * 40,
)


# ---------------------------------------------------------------------------
# The module that is exported
# ---------------------------------------------------------------------------
class BrowserBert(torch.nn.Module):
    """A ``literate_transformer.BertModel`` with the outputs the page draws.

    Args:
        bert: The model to export (its ``embeddings`` and ``encoder`` are used
            as they are; its pooler is not).

    Raises:
        TypeError: if ``bert`` is not a ``literate_transformer.BertModel``.
    """

    def __init__(self, bert: torch.nn.Module) -> None:
        super().__init__()
        if not isinstance(bert, BertModel):
            raise TypeError(f"bert must be a literate_transformer.BertModel, got {type(bert).__name__}")
        self.bert = bert

    def forward(self, input_ids: Tensor, token_type_ids: Tensor) -> tuple[Tensor, Tensor]:
        """``(1, T)`` ids and segments to ``last_hidden_state`` ``(1, T, E)`` and ``attentions`` ``(1, L, H, T, T)``."""
        # BertModel.forward's steps 1 and 3, without its value checks and with no padding mask.
        embedding_output = self.bert.embeddings(input_ids, token_type_ids)  # (B, T, E)
        encoder_outputs = self.bert.encoder(embedding_output, output_attentions=True)
        # One tensor for all layers: the page indexes it [layer][head][query][key].
        attentions = torch.stack(encoder_outputs.attentions, dim=1)  # (B, L, H, T, T)
        return encoder_outputs.last_hidden_state, attentions


#: The exporter's example input (``[CLS] hello world [SEP]``): ids and segments.
EXAMPLE = (torch.tensor([[101, 7592, 2088, 102]]), torch.zeros(1, 4, dtype=torch.long))


def _exporter_modules() -> tuple[Any, ...]:
    """The libraries ``torch.onnx.export(..., dynamo=True)`` runs besides PyTorch: onnxscript and onnx_ir."""
    import onnx_ir
    import onnxscript

    return onnxscript, onnx_ir


def _onnx() -> Any:
    """Import :mod:`onnx`, or say what to install."""
    try:
        import onnx
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "exporting needs onnx, onnxscript and onnxruntime: pip install -c constraints.txt onnx onnxscript onnxruntime"
        ) from error
    return onnx


def _check_path(value: object, name: str) -> Path:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike), got {type(value).__name__}")
    return Path(value)


def export_onnx(model: torch.nn.Module, path: str | os.PathLike[str], *, opset_version: int = OPSET) -> Path:
    """Export ``model`` (a ``literate_transformer.BertModel``) to an ONNX file, weights in float32.

    Args:
        model: The model, in evaluation mode.
        path: Where to write the ``.onnx`` file (its folder must exist).
        opset_version: The ONNX operator set, at least 21.

    Returns:
        ``path``.

    Raises:
        TypeError: if ``model`` is not a ``literate_transformer.BertModel`` or ``path`` not a path.
        ValueError: if ``model`` is in training mode (dropout would be exported) or ``opset_version < 21``.
        FileNotFoundError: if the folder of ``path`` does not exist.
    """
    browser_model = BrowserBert(model)
    path = _check_path(path, "path")
    if model.training:
        raise ValueError("model must be in evaluation mode (call model.eval()): dropout would be part of the graph")
    if not isinstance(opset_version, int) or opset_version < OPSET:
        raise ValueError(f"opset_version must be an int >= {OPSET} (int4 weights need it), got {opset_version!r}")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot write {path}: the folder {path.parent} does not exist")
    onnx = _onnx()
    config = model.config
    # T may be anything from [CLS] [SEP] to the longest sequence the position table covers.
    length = torch.export.Dim("T", min=2, max=config.max_position_embeddings)
    with _quiet_exporter():
        program = torch.onnx.export(
            browser_model,
            EXAMPLE,  # its length is marked dynamic below: any T in range works
            dynamo=True,
            opset_version=opset_version,
            input_names=["input_ids", "token_type_ids"],
            output_names=["last_hidden_state", "attentions"],
            dynamic_shapes={"input_ids": {1: length}, "token_type_ids": {1: length}},
        )
    proto = _strip_provenance(program.model_proto)
    # One file, no external-data side files: the page downloads one thing.
    onnx.save_model(proto, path)
    return path


@contextlib.contextmanager
def _quiet_exporter() -> Iterable[None]:
    """Keep the exporter's progress lines and advisory warnings out of build logs and pages."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _strip_provenance(proto: Any) -> Any:
    """Remove the exporter's per-node notes (Python stacks with local paths): same code, same bytes."""
    for node in proto.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    del proto.graph.metadata_props[:]
    del proto.metadata_props[:]
    proto.graph.doc_string = ""
    proto.doc_string = ""
    return proto


# ---------------------------------------------------------------------------
# Shrinking the weights: int8 codes plus int4 corrections
# ---------------------------------------------------------------------------
def _check_block_size(block_size: object) -> int:
    if isinstance(block_size, bool) or not isinstance(block_size, int):
        raise TypeError(f"block_size must be an int, got {type(block_size).__name__}")
    if block_size < 2 or block_size % 2:
        raise ValueError(f"block_size must be an even number >= 2, got {block_size}")
    return block_size


def quantize_int8_int4(weight: np.ndarray, block_size: int = BLOCK_SIZE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split a float matrix into int8 codes, int4 corrections and one float16 scale per block.

    Args:
        weight: A 2-D float array whose number of columns is a multiple of ``block_size``.
        block_size: How many consecutive numbers of a row share one scale.

    Returns:
        ``(codes, corrections, scales)``: int8 ``(R, C)``, int8 ``(R, C)``
        holding values in ``[-7, 7]``, and float16 ``(R, C // block_size)``.

    Raises:
        TypeError: if ``weight`` is not a floating-point numpy array.
        ValueError: if ``weight`` is not 2-D or its columns do not split into blocks.
    """
    block_size = _check_block_size(block_size)
    if not isinstance(weight, np.ndarray) or not np.issubdtype(weight.dtype, np.floating):
        raise TypeError(f"weight must be a floating-point numpy array, got {type(weight).__name__}")
    if weight.ndim != 2 or weight.shape[1] % block_size:
        raise ValueError(f"weight must be 2-D with a multiple of block_size={block_size} columns, got {weight.shape}")
    rows, columns = weight.shape
    # rows x blocks x block_size: one scale will serve each block of block_size numbers.
    blocks = weight.astype(np.float32).reshape(rows, columns // block_size, block_size)
    # One scale per block, stored (and therefore used) in float16, rounded up where float16
    # rounded it down, so that |w / s| <= 127 and no code is clipped; an all-zero block gets scale 1.
    exact = np.abs(blocks).max(axis=-1) / 127
    scales = exact.astype(np.float16)
    rounded_down = scales.astype(np.float32) < exact
    scales[rounded_down] = np.nextafter(scales[rounded_down], np.float16(np.inf))
    scales[scales == 0] = 1
    scale = scales.astype(np.float32)[..., None]
    # The int8 code: the nearest multiple of s.
    codes = np.clip(np.rint(blocks / scale), -127, 127)
    # The correction: the remainder (within +-s/2) in steps of s/14, computed as the graph will.
    step = scale / np.float32(2 * _CORRECTION_STEPS)
    corrections = np.clip(np.rint((blocks - codes * scale) / step), -_CORRECTION_STEPS, _CORRECTION_STEPS)
    return (
        codes.reshape(rows, columns).astype(np.int8),
        corrections.reshape(rows, columns).astype(np.int8),
        scales,
    )


def dequantize_int8_int4(codes: np.ndarray, corrections: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """What the graph computes from :func:`quantize_int8_int4`'s output: ``s q + (s / 14) r``, in float32."""
    block_size = codes.shape[1] // scales.shape[1]
    # Every number's scale: each block's, repeated over its block_size columns.
    scale = np.repeat(scales.astype(np.float32), block_size, axis=1)
    step = scale / np.float32(2 * _CORRECTION_STEPS)
    return codes.astype(np.float32) * scale + corrections.astype(np.float32) * step


def _blockwise(name: str, values: str, scale: str, output: str, block_size: int) -> Any:
    """The ONNX node ``{name}.{output} = {name}.{values} * {name}.{scale}``, a scale per block along each row."""
    onnx = _onnx()
    return onnx.helper.make_node(
        "DequantizeLinear",
        [f"{name}.{values}", f"{name}.{scale}"],
        [f"{name}.{output}"],
        axis=1,
        block_size=block_size,
    )


def shrink_weights(model_proto: Any, *, block_size: int = BLOCK_SIZE, min_elements: int = 65536) -> Any:
    """Store the large float32 matrices of an ONNX graph as int8 codes plus int4 corrections.

    Every 2-D float32 initializer with at least ``min_elements`` numbers (and
    columns that split into blocks) is replaced by its codes, corrections and
    scales, and by nodes that rebuild it under its old name::

        scale  = Cast(scale_fp16, to=float)
        step   = Div(scale, 14)
        weight = Add(DequantizeLinear(codes, scale, axis=1, block_size),
                     DequantizeLinear(corrections, step, axis=1, block_size))

    Biases, layer norms and small tables stay float32.

    Args:
        model_proto: An ``onnx.ModelProto`` (not changed; a shrunk copy is returned).
        block_size: Numbers per scale.
        min_elements: Smallest matrix that is shrunk.

    Returns:
        The shrunk ``onnx.ModelProto``, at opset 21 or later.

    Raises:
        TypeError: if ``model_proto`` is not an ``onnx.ModelProto``.
        ValueError: for a bad ``block_size`` or ``min_elements``.
    """
    onnx = _onnx()
    import ml_dtypes  # installed with onnx
    from onnx import TensorProto, helper, numpy_helper

    if not isinstance(model_proto, onnx.ModelProto):
        raise TypeError(f"model_proto must be an onnx.ModelProto, got {type(model_proto).__name__}")
    block_size = _check_block_size(block_size)
    if isinstance(min_elements, bool) or not isinstance(min_elements, int) or min_elements < 1:
        raise ValueError(f"min_elements must be a positive int, got {min_elements!r}")
    shrunk = onnx.ModelProto()
    shrunk.CopyFrom(model_proto)
    graph = shrunk.graph
    initializers, dequantize_nodes = [], []
    for initializer in graph.initializer:
        array = numpy_helper.to_array(initializer)
        eligible = (
            initializer.data_type == TensorProto.FLOAT
            and array.ndim == 2
            and array.size >= min_elements
            and array.shape[1] % block_size == 0
        )
        if not eligible:
            initializers.append(initializer)
            continue
        name = initializer.name

        codes, corrections, scales = quantize_int8_int4(array, block_size)
        initializers += [
            numpy_helper.from_array(codes, f"{name}.codes"),
            # int4 (ml_dtypes' numpy type, which onnx packs two numbers to a byte in the file).
            numpy_helper.from_array(corrections.astype(ml_dtypes.int4), f"{name}.corrections"),
            numpy_helper.from_array(scales, f"{name}.scales"),
            numpy_helper.from_array(np.array(2 * _CORRECTION_STEPS, dtype=np.float32), f"{name}.steps"),
        ]
        dequantize_nodes += [
            # s, in float32 so that the rebuilt matrix is float32.
            helper.make_node("Cast", [f"{name}.scales"], [f"{name}.scale"], to=TensorProto.FLOAT),
            # s / 14, the correction's step.
            helper.make_node("Div", [f"{name}.scale", f"{name}.steps"], [f"{name}.step"]),
            # s q and (s / 14) r, block by block along each row.
            _blockwise(name, "codes", "scale", "coarse", block_size),
            _blockwise(name, "corrections", "step", "fine", block_size),
            # Their sum, under the matrix's old name: the rest of the graph is unchanged.
            helper.make_node("Add", [f"{name}.coarse", f"{name}.fine"], [name]),
        ]
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    # The new nodes read only constants, so they can go first (ONNX wants nodes in topological order).
    nodes = dequantize_nodes + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    for opset in shrunk.opset_import:
        if opset.domain in ("", "ai.onnx"):
            opset.version = max(opset.version, OPSET)
    onnx.checker.check_model(shrunk)
    return shrunk


# ---------------------------------------------------------------------------
# The tokenizer, as data for the page's own WordPiece tokenizer
# ---------------------------------------------------------------------------
def tokenizer_spec(tokenizer: Any) -> dict[str, Any]:
    """What a WordPiece tokenizer written in another language needs to give the same ids.

    Args:
        tokenizer: A fast BERT tokenizer (``load_tokenizer()``): a
            ``BertNormalizer``, a ``BertPreTokenizer`` and a ``WordPiece`` model.

    Returns:
        A JSON-ready dict: the normaliser's switches, the WordPiece settings,
        the special tokens (matched in the raw text, as HuggingFace does), the
        vocabulary as a list indexed by id, and ``model_max_length``.

    Raises:
        TypeError: if ``tokenizer`` is not a fast tokenizer.
        ValueError: if it is not a BERT WordPiece tokenizer.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not hasattr(backend, "to_str"):
        raise TypeError(f"tokenizer must be a fast (tokenizers-backed) tokenizer, got {type(tokenizer).__name__}")
    spec = json.loads(backend.to_str())
    normalizer, pre_tokenizer, wordpiece = spec.get("normalizer") or {}, spec.get("pre_tokenizer") or {}, spec["model"]
    if (
        normalizer.get("type") != "BertNormalizer"
        or pre_tokenizer.get("type") != "BertPreTokenizer"
        or wordpiece.get("type") != "WordPiece"
    ):
        raise ValueError(
            "tokenizer must be a BERT WordPiece tokenizer (BertNormalizer, BertPreTokenizer, WordPiece); got "
            f"{normalizer.get('type')}, {pre_tokenizer.get('type')}, {wordpiece.get('type')}"
        )
    vocab = wordpiece["vocab"]
    by_id = [""] * len(vocab)
    for token, index in vocab.items():
        by_id[index] = token
    # HuggingFace's rule: strip accents unless told otherwise exactly when lowercasing.
    strip_accents = normalizer["strip_accents"]
    return {
        "lowercase": bool(normalizer["lowercase"]),
        "strip_accents": bool(normalizer["lowercase"] if strip_accents is None else strip_accents),
        "clean_text": bool(normalizer["clean_text"]),
        "handle_chinese_chars": bool(normalizer["handle_chinese_chars"]),
        "unk_token": wordpiece["unk_token"],
        "continuing_subword_prefix": wordpiece["continuing_subword_prefix"],
        "max_input_chars_per_word": int(wordpiece["max_input_chars_per_word"]),
        "cls_token": tokenizer.cls_token,
        "sep_token": tokenizer.sep_token,
        "pad_token": tokenizer.pad_token,
        "special_tokens": sorted(
            (token["content"] for token in spec.get("added_tokens", []) if not token.get("normalized", True)),
            key=lambda text: (-len(text), text),
        ),
        "model_max_length": int(tokenizer.model_max_length),
        "vocab": by_id,
    }


# ---------------------------------------------------------------------------
# Checking the graph against the PyTorch model
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ExportCheck:
    """The largest differences between an ONNX graph and ``BertModel.forward`` on some texts.

    Attributes:
        texts: How many texts (or pairs) were run.
        max_abs_attention: Largest absolute difference of any attention probability.
        max_abs_last_hidden_state: Largest absolute difference of any number of the last hidden state.
    """

    texts: int
    max_abs_attention: float
    max_abs_last_hidden_state: float


def _session(onnx_model: str | os.PathLike[str] | bytes) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    # Rebuild the shrunk matrices once at load time instead of at every run (same numbers, faster).
    options.add_session_config_entry("session.disable_quant_qdq", "1")
    options.log_severity_level = 3
    source = onnx_model if isinstance(onnx_model, bytes) else os.fspath(onnx_model)
    return onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def compare_with_pytorch(
    onnx_model: str | os.PathLike[str] | bytes,
    model: torch.nn.Module,
    tokenizer: Any,
    texts: Sequence[str | tuple[str, str]],
) -> ExportCheck:
    """Run an exported graph (in ``onnxruntime``) and ``model.forward`` on the same texts and compare.

    Args:
        onnx_model: The ``.onnx`` file, or its bytes.
        model: The ``literate_transformer.BertModel`` the graph was exported from.
        tokenizer: Its tokenizer.
        texts: Sentences, or ``(sentence_a, sentence_b)`` pairs.

    Returns:
        The :class:`ExportCheck`.

    Raises:
        ValueError: if ``texts`` is empty.
    """
    if isinstance(texts, str) or not len(texts):
        raise ValueError("texts must be a non-empty sequence of sentences or (sentence, sentence) pairs")
    session = _session(onnx_model)
    worst_attention = worst_hidden = 0.0
    for text in texts:
        pair = (text,) if isinstance(text, str) else tuple(text)
        encoded = tokenizer(*pair, truncation=True, return_tensors="pt")
        with torch.no_grad():
            expected = model(encoded["input_ids"], token_type_ids=encoded["token_type_ids"], output_attentions=True)
        hidden, attentions = session.run(
            ["last_hidden_state", "attentions"],
            {"input_ids": encoded["input_ids"].numpy(), "token_type_ids": encoded["token_type_ids"].numpy()},
        )
        # All layers in one array, as the graph returns them: [layer][head][query][key] after the batch.
        expected_attentions = torch.stack(expected.attentions, dim=1).numpy()
        worst_attention = max(worst_attention, float(np.abs(attentions - expected_attentions).max()))
        worst_hidden = max(worst_hidden, float(np.abs(hidden - expected.last_hidden_state.numpy()).max()))
    return ExportCheck(len(texts), worst_attention, worst_hidden)


# ---------------------------------------------------------------------------
# The cached export for the site
# ---------------------------------------------------------------------------
def _versions(names: Sequence[str] = _VERSIONED) -> dict[str, str]:
    """The installed version of each package of ``names`` (``"absent"`` for one not installed)."""
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def export_digest(checkpoint_id: str, tokenizer_json: str, settings: dict[str, Any]) -> str:
    """The hex SHA-256 of what an export is made from, besides the code its run reaches.

    Args:
        checkpoint_id: The checkpoint's weights SHA-256 (or its name, when it has no local file).
        tokenizer_json: The tokenizer's :func:`tokenizer_spec`, as JSON.
        settings: The export settings (block size, opset, check texts...).

    Returns:
        64 hex digits; the same inputs always give the same digest.
    """
    digest = hashlib.sha256()
    # The code is not in it: an export also keeps the record of the files its run reached (see _cached_metadata).
    for part in (checkpoint_id, tokenizer_json, json.dumps(settings, sort_keys=True), json.dumps(_versions())):
        digest.update(b"\0")
        digest.update(part.encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class BrowserExport:
    """What :func:`export_for_browser` wrote.

    Attributes:
        folder: The output folder.
        onnx_path: The shrunk graph.
        metadata_path: The JSON file (vocabulary, tokenizer settings, config, measurements).
        digest: The digest of everything the files depend on.
        cached: ``True`` when the files were already there and nothing was done.
        metadata: The JSON file's content.
    """

    folder: Path
    onnx_path: Path
    metadata_path: Path
    digest: str
    cached: bool
    metadata: dict[str, Any]


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _write_atomically(path: Path, data: bytes) -> None:
    # A half-written file must never look like a finished export.
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def _output_folder(value: object) -> Path:
    """``value`` as an export's output folder: a path, to a folder or to nothing yet."""
    folder = _check_path(value, "folder")
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"folder must be a directory, but {folder} is a file")
    return folder


def _cached_metadata(
    onnx_path: Path, metadata_path: Path, digest: str, load: Callable[[Path], dict[str, Any]]
) -> dict[str, Any] | None:
    """The JSON file of a finished export made with ``digest``, or ``None`` when the export must be made.

    The cache: an export with this digest whose graph is the size it recorded, and none of whose recorded files
    (the package's and the site's tooling's that its run reached, :mod:`lt_site.deps`) changed since.

    Args:
        onnx_path: The export's graph.
        metadata_path: Its JSON file, in the same folder.
        digest: The digest of everything the export depends on now.
        load: Reads the folder's JSON file, raising ``ValueError`` when it is not of the export's format.
    """
    if not (metadata_path.is_file() and onnx_path.is_file()):
        return None
    try:
        metadata = load(metadata_path.parent)
    except (ValueError, json.JSONDecodeError):
        return None
    if metadata.get("digest") != digest or metadata.get("model", {}).get("bytes") != onnx_path.stat().st_size:
        return None
    if "reached" not in metadata or not Record.from_dict(metadata["reached"]).is_current(CHECKOUT):
        return None
    return metadata


def record_of(reached: Reached) -> dict[str, Any]:
    """An export's record of what its run reached, as its JSON file keeps it, with every installed distribution
    its process imported (some of them before the run began: a library whose Python code the run never called,
    a tokenizer in Rust say, still keys the export)."""
    return Record.of(reached.paths | installed_imports(), CHECKOUT, RECORDED).as_dict()


def _write_metadata(path: Path, metadata: dict[str, Any]) -> None:
    # Written last: its presence (with this digest) is what marks the export finished.
    _write_atomically(path, json.dumps(metadata, ensure_ascii=False, sort_keys=True).encode("utf-8"))


def load_browser_export(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """Read the JSON file of an export.

    Raises:
        TypeError: if ``folder`` is not a path.
        FileNotFoundError: if the folder holds no export (naming the function that makes one).
        ValueError: if the file is not an export of this format.
    """
    return _read_export(folder, METADATA_FILE, FORMAT, "browser export", "lt_site.export.export_for_browser")


def _read_export(folder: object, metadata_file: str, format: str, what: str, maker: str) -> dict[str, Any]:
    """The JSON file ``metadata_file`` of an export in ``folder``, checked to be of ``format`` (a ``what``
    that ``maker(folder)`` makes)."""
    folder = _check_path(folder, "folder")
    path = folder / metadata_file
    if not path.is_file():
        raise FileNotFoundError(f"{folder} holds no {what} ({metadata_file} is missing): make one with {maker}(folder)")
    metadata = json.loads(path.read_text(encoding="utf-8"))
    if metadata.get("format") != format:
        raise ValueError(f"{path} is not a {format} file (format {metadata.get('format')!r})")
    return metadata


def export_for_browser(
    folder: str | os.PathLike[str],
    *,
    checkpoint: str | os.PathLike[str] | None = None,
    block_size: int = BLOCK_SIZE,
    check_texts: Sequence[str | tuple[str, str]] = DEFAULT_CHECK_TEXTS,
    keep_fp32: bool = False,
    force: bool = False,
) -> BrowserExport:
    """Export the checkpoint's BertModel for the page, unless ``folder`` already holds this export.

    Writes ``model.onnx`` (weights shrunk by :func:`shrink_weights`) and
    ``model.json`` (format, digest, config, tokenizer spec with vocabulary,
    file sizes and the measured differences from ``BertModel.forward``).

    Args:
        folder: The output folder (created if missing).
        checkpoint: A checkpoint folder or hub name; by default the offline,
            SHA-256-verified one (see ``literate_transformer.core.checkpoints.resolve_checkpoint``).
        block_size: Numbers per scale in the shrunk matrices.
        check_texts: Texts on which the shrunk graph is measured against the model.
        keep_fp32: Also keep the float32 graph as ``model.fp32.onnx`` (and measure it).
        force: Export even when the digest matches.

    Returns:
        A :class:`BrowserExport`; ``cached`` says whether the work was skipped.

    Raises:
        TypeError: if ``folder`` is not a path or ``block_size`` not an int.
        ValueError: if ``folder`` is a file, ``block_size`` is bad or ``check_texts`` is empty.
    """
    folder = _output_folder(folder)
    block_size = _check_block_size(block_size)
    if isinstance(check_texts, str) or not len(check_texts):
        raise ValueError("check_texts must be a non-empty sequence of sentences or (sentence, sentence) pairs")
    check_texts = [text if isinstance(text, str) else list(text) for text in check_texts]

    # Everything from here on is recorded: the export is made again when a file its run reached changes.
    with Reached(RECORDED) as reached:
        # The checkpoint's identity is its weights' SHA-256 (verified for the default checkpoint).
        resolved = resolve_checkpoint(checkpoint)
        weights_file = getattr(resolved, "weights_file", None)
        checkpoint_id = resolved.sha256 or (_file_sha256(Path(weights_file)) if weights_file else os.fspath(checkpoint))
        tokenizer = load_tokenizer(checkpoint)
        # What the page's tokenizer is built from (not the backend's whole state, which
        # also records the truncation of its last call).
        spec = tokenizer_spec(tokenizer)
        tokenizer_json = json.dumps(spec, sort_keys=True)
        settings = {
            "block_size": block_size,
            "opset": OPSET,
            "check_texts": check_texts,
            "keep_fp32": bool(keep_fp32),
        }
        digest = export_digest(checkpoint_id, tokenizer_json, settings)
        onnx_path, metadata_path = folder / ONNX_FILE, folder / METADATA_FILE
        cached = None if force else _cached_metadata(onnx_path, metadata_path, digest, load_browser_export)
        if cached is not None:
            return BrowserExport(folder, onnx_path, metadata_path, digest, True, cached)

        onnx = _onnx()
        folder.mkdir(parents=True, exist_ok=True)
        model = BertModel.from_pretrained(checkpoint)
        fp32_path = folder / FP32_ONNX_FILE
        # The exporter traces the forward through PyTorch's and onnxscript's own Python: millions of calls,
        # each of which the call hook would see (the whole export took 23.0 s of CPU that way, 11.4 s with the
        # trace paused).  So the forward runs once under the hook, on the exporter's example (its value checks
        # too, which the trace skips: it reaches at least what the trace reaches), and the export runs with the
        # hook paused, PyTorch and the exporter's libraries counting by their versions.
        with torch.no_grad():
            BrowserBert(model)(*EXAMPLE)
        with paused(torch, onnx, *_exporter_modules()):
            export_onnx(model, fp32_path)
        fp32_proto = onnx.load_model(fp32_path)
        shrunk = shrink_weights(fp32_proto, block_size=block_size)
        shrunk_bytes = shrunk.SerializeToString()
        _write_atomically(onnx_path, shrunk_bytes)
        check = compare_with_pytorch(shrunk_bytes, model, tokenizer, check_texts)
        fp32_check = compare_with_pytorch(fp32_path, model, tokenizer, check_texts) if keep_fp32 else None
        fp32_bytes = fp32_path.stat().st_size
        if not keep_fp32:
            fp32_path.unlink()

        config = model.config
        metadata = {
            "format": FORMAT,
            "digest": digest,
            "checkpoint": {"argument": None if checkpoint is None else os.fspath(checkpoint), "sha256": checkpoint_id},
            "config": config.sizes(),
            "model": {
                "file": ONNX_FILE,
                "bytes": len(shrunk_bytes),
                "sha256": hashlib.sha256(shrunk_bytes).hexdigest(),
                # What gzip -9 makes of it (the page downloads it compressed).
                "gzip_bytes": len(gzip.compress(shrunk_bytes, compresslevel=9, mtime=0)),
                "opset": OPSET,
                "inputs": {"input_ids": ["1", "T"], "token_type_ids": ["1", "T"]},
                "outputs": {"last_hidden_state": ["1", "T", "E"], "attentions": ["1", "L", "H", "T", "T"]},
            },
            "weights": {
                "scheme": "int8 codes + int4 corrections, one float16 scale per block",
                "block_size": block_size,
                "bits_per_weight": 8 + 4 + 16 / block_size,
                "float32_bytes": fp32_bytes,
                "shrunk_tensors": sum(1 for node in shrunk.graph.node if node.op_type == "DequantizeLinear") // 2,
            },
            "check": {
                "texts": check.texts,
                "max_abs_attention": check.max_abs_attention,
                "max_abs_last_hidden_state": check.max_abs_last_hidden_state,
                "float32_max_abs_attention": fp32_check.max_abs_attention if fp32_check else None,
                "float32_max_abs_last_hidden_state": fp32_check.max_abs_last_hidden_state if fp32_check else None,
            },
            "tokenizer": spec,
            "versions": _versions(),
        }
    metadata["reached"] = record_of(reached)
    _write_metadata(metadata_path, metadata)
    return BrowserExport(folder, onnx_path, metadata_path, digest, False, metadata)
