"""Absurd settings and hostile folders: each refused by name, in a moment, never a hang or a giant allocation.

Three doors: a checkpoint folder and its ``config.json`` (BERT's
:func:`~literate_transformer.core.checkpoints.resolve_checkpoint`, a
decoder's folder for :func:`~literate_transformer.trained.load_decoder`),
the SHA-256 check, and ``generate``.  The calls whose settings would cost
gigabytes, or run until memory runs out, run under :func:`limits.at_most`:
an attempt to allocate them, or to run on, fails the test, not the machine.
"""

from __future__ import annotations

import json
import math
import os

import pytest
import torch
import transformers
from limits import at_most

from literate_transformer.core import checkpoints
from literate_transformer.core.checkpoints import (
    CheckpointIntegrityError,
    CheckpointNotFoundError,
    resolve_checkpoint,
    sha256_of,
    verify_sha256,
)
from literate_transformer.core.config import TransformerConfig
from literate_transformer.core.validation import memory_of
from literate_transformer.models.bert import BertModel
from literate_transformer.models.llama import LlamaForCausalLM
from literate_transformer.parts.static_cache import StaticCache
from literate_transformer.trained import load_decoder

#: A tiny Llama: 2 layers of 2 key/value heads of 6 features, a vocabulary of 40.
TINY = dict(
    vocab_size=40, hidden_size=24, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=32,
)  # fmt: skip


# ---------------------------------------------------------------------------
# A BERT checkpoint folder whose config.json says what its weights do not
# ---------------------------------------------------------------------------
@pytest.fixture
def bert_folder(tmp_path):
    """``bert_folder(changes)``: a folder of the default checkpoint's weights (linked) and its config, changed."""
    source = resolve_checkpoint()

    def make(changes=None, config=None):
        folder = tmp_path / "bert"
        folder.mkdir()
        (folder / "model.safetensors").symlink_to(source.weights_file)
        text = json.dumps({**source.config, **(changes or {})} if config is None else config)
        (folder / "config.json").write_text(text)
        return folder

    return make


def test_a_config_that_is_a_list_is_refused_naming_the_file(bert_folder):
    folder = bert_folder(config=[{"model_type": "bert"}])
    with pytest.raises(ValueError, match=f"{folder / 'config.json'} must hold a JSON object .* got an array"):
        resolve_checkpoint(folder)


def test_a_hidden_size_of_a_billion_is_refused_before_the_model_is_built(bert_folder):
    folder = bert_folder({"hidden_size": 10**9, "num_attention_heads": 10})
    message = r"vocab_size \(30,522\) rows of hidden_size \(1,000,000,000\) .* but model.safetensors holds 22,"
    with at_most(seconds=5), pytest.raises(ValueError, match=message):
        BertModel.from_pretrained(folder)


def test_a_million_layers_are_refused_naming_the_six_the_weights_hold(bert_folder):
    folder = bert_folder({"num_hidden_layers": 10**6})
    message = "num_hidden_layers is 1,000,000, but model.safetensors holds the tensors of 6 layers"
    with at_most(seconds=5), pytest.raises(ValueError, match=message):
        BertModel.from_pretrained(folder)


def test_a_file_given_as_a_checkpoint_folder_is_refused_for_what_it_is(bert_folder):
    weights = bert_folder() / "model.safetensors"
    with pytest.raises(ValueError, match="is a file, not a checkpoint folder"):
        resolve_checkpoint(weights)


def test_an_empty_path_is_not_the_current_folder():
    with pytest.raises(ValueError, match="path_or_name is '': name a checkpoint"):
        resolve_checkpoint("")


# ---------------------------------------------------------------------------
# A decoder: a file or a folder, each for what it is
# ---------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _no_decoder_override(monkeypatch):
    monkeypatch.delenv(checkpoints.DECODER_ENV, raising=False)
    monkeypatch.delenv(checkpoints.DECODER_SHA256_ENV, raising=False)


def test_an_empty_folder_is_refused_as_an_empty_folder(tmp_path):
    with pytest.raises(CheckpointNotFoundError, match=f"decoder folder {tmp_path} is empty"):
        load_decoder(tmp_path)


def test_an_empty_path_is_refused_not_read_as_the_current_folder():
    with pytest.raises(ValueError, match="path is '': name a checkpoint, or pass None for the default"):
        load_decoder("")


def test_a_device_is_refused_for_what_it_is():
    with pytest.raises(
        ValueError, match="decoder '/dev/zero' is a character device, not a GGUF file or a checkpoint folder"
    ):
        load_decoder("/dev/zero")


def test_a_fifo_is_refused_for_what_it_is_without_waiting_for_a_writer(tmp_path):
    pipe = tmp_path / "model.gguf"
    os.mkfifo(pipe)
    with at_most(seconds=5), pytest.raises(ValueError, match=r"is a FIFO \(a named pipe\), not a GGUF file"):
        load_decoder(pipe)


@pytest.fixture
def llama_folder(tmp_path):
    """A tiny transformers Llama saved as a checkpoint folder, whose config.json a test may change."""
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**TINY))
    folder = tmp_path / "llama"
    model.save_pretrained(folder)
    return folder


def _set_config(folder, config):
    (folder / "config.json").write_text(json.dumps(config))


def test_a_decoders_config_that_is_a_list_is_refused_naming_the_file(llama_folder):
    _set_config(llama_folder, [1, 2])
    with pytest.raises(ValueError, match="config.json must hold a JSON object .* got an array"):
        load_decoder(llama_folder)


def test_a_decoders_width_no_weight_backs_is_refused_before_transformers_reads_it(llama_folder):
    config = json.loads((llama_folder / "config.json").read_text())
    _set_config(llama_folder, {**config, "hidden_size": 10**9})
    with at_most(seconds=5), pytest.raises(ValueError, match=r"vocab_size \(40\) rows of hidden_size \(1,000,000,000"):
        load_decoder(llama_folder)


# ---------------------------------------------------------------------------
# The SHA-256 check remembers a digest only while the file cannot have changed
# ---------------------------------------------------------------------------
def test_a_same_size_file_swapped_with_its_time_restored_is_hashed_again(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"a" * 4096)
    expected, times = sha256_of(path), os.stat(path)
    verify_sha256(path, expected)
    # Another file of the same size, written in place, its modification time set back.
    path.write_bytes(b"b" * 4096)
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
    with pytest.raises(CheckpointIntegrityError, match=f"expected {expected}"):
        verify_sha256(path, expected)


def test_a_file_swapped_by_renaming_is_hashed_again_even_when_its_digest_is_remembered(tmp_path, monkeypatch):
    # Remember every digest, however recent the file (as for a file that has not changed for long).
    monkeypatch.setattr(checkpoints, "_RECENT_NS", -(2**62))
    path, other = tmp_path / "weights.bin", tmp_path / "other.bin"
    path.write_bytes(b"a" * 4096)
    other.write_bytes(b"b" * 4096)
    expected, times = sha256_of(path), os.stat(path)
    verify_sha256(path, expected)
    os.utime(other, ns=(times.st_atime_ns, times.st_mtime_ns))
    os.replace(other, path)
    with pytest.raises(CheckpointIntegrityError, match=f"expected {expected}"):
        verify_sha256(path, expected)


def test_an_unchanged_file_is_hashed_once(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "_RECENT_NS", -(2**62))
    path = tmp_path / "weights.bin"
    path.write_bytes(b"c" * 4096)
    expected, hashed = sha256_of(path), []
    monkeypatch.setattr(checkpoints, "sha256_of", lambda file: hashed.append(file) or expected)
    verify_sha256(path, expected)
    verify_sha256(path, expected)
    assert len(hashed) == 1


# ---------------------------------------------------------------------------
# generate
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def llama():
    torch.manual_seed(0)
    return LlamaForCausalLM(transformers.LlamaConfig(**TINY)).eval()


PROMPT = torch.tensor([[5, 6, 7, 8]])


def test_an_empty_batch_is_refused_naming_input_ids(llama):
    with pytest.raises(
        ValueError, match=r"input_ids must hold at least one sequence, got an empty batch of shape \(0, 4"
    ):
        llama.generate(PROMPT[:0], max_new_tokens=2)


@pytest.mark.parametrize("cache_implementation", ["static", "dynamic"])
def test_a_right_padded_batch_is_refused_saying_to_pad_on_the_left(llama, cache_implementation):
    input_ids = torch.tensor([[5, 6, 7, 8], [5, 6, 0, 0]])
    attention_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    with pytest.raises(
        ValueError, match="row 1 of the prompts ends in padding after its tokens; .* padded on the left"
    ):
        llama.generate(input_ids, attention_mask, 2, cache_implementation=cache_implementation)
    # Padded on the left, the same prompts are accepted.
    llama.generate(input_ids.roll(2, 1), attention_mask.roll(2, 1), 2, cache_implementation=cache_implementation)


def test_max_new_tokens_beyond_any_sequence_is_refused(llama):
    with pytest.raises(ValueError, match=r"max_new_tokens=9223372036854775808 is beyond any sequence: .* 2\*\*63 - 1"):
        llama.generate(PROMPT, max_new_tokens=2**63)


@pytest.mark.parametrize(
    "options",
    [{"cache_implementation": "static"}, {"cache_implementation": "dynamic"}, {"use_cache": False}, {"num_beams": 2}],
    ids=["static", "dynamic", "no-cache", "beams"],
)
def test_a_billion_new_tokens_are_refused_naming_the_bytes_they_would_take(llama, options):
    # 2 layers x 2 key/value heads x 6 features x 4 bytes, keys and values: 192 bytes a position, and the scores.
    assert memory_of("cpu") < 192 * 10**9, "this machine could hold the cache: the test would not test"
    with at_most(seconds=10), pytest.raises(ValueError, match=r"max_new_tokens=1000000000 .* would take [\d,.]+ GiB"):
        llama.generate(PROMPT, max_new_tokens=10**9, **options)


def test_a_static_cache_larger_than_memory_is_refused_before_it_is_allocated():
    with (
        at_most(seconds=5),
        pytest.raises(
            ValueError, match=r"a static cache of 2 layers' .* would take 2,980.2 GiB .* of memory the cpu has"
        ),
    ):
        StaticCache(2, 1, 2, 10**11, 1)


# ---------------------------------------------------------------------------
# Floats of a config
# ---------------------------------------------------------------------------
def test_a_nan_in_a_family_config_is_refused_naming_the_field():
    config = transformers.LlamaConfig(**TINY, rms_norm_eps=math.nan)
    with pytest.raises(ValueError, match="LlamaConfig.rms_norm_eps is nan: every number of a config must be finite"):
        LlamaForCausalLM(config)


def test_an_infinite_layer_norm_epsilon_is_refused_naming_it():
    with pytest.raises(ValueError, match="layer_norm_eps must be a positive, finite float, got inf"):
        TransformerConfig(layer_norm_eps=math.inf)
