"""The pretrained checkpoint: our BertModel equals transformers.BertModel, and the key map fails loudly.

Tolerance: fp32, absolute 1e-5 on real (non-padding) tokens.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from literate_transformer import TransformerConfig, load_hf_model
from literate_transformer.book.attention import MultiHeadAttention
from literate_transformer.core.masks import padding_mask, to_additive
from literate_transformer.interop import bert_attention_to_book
from literate_transformer.models.bert import BertModel

ATOL = 1e-5


@pytest.fixture(scope="module")
def ours_eager():
    return BertModel.from_pretrained()


@pytest.fixture(scope="module")
def ours_sdpa():
    return BertModel.from_pretrained(attn_implementation="sdpa")


@pytest.fixture(scope="module")
def hf_sdpa():
    return load_hf_model(attn_implementation="sdpa")


# One sentence; two sentences of different lengths (padding); a sentence pair (token types).
INPUTS = {
    "single": dict(text=["time flies like an arrow"]),
    "padded_batch": dict(text=["time flies like an arrow", "fruit flies like a banana, said the linguist"]),
    "sentence_pair": dict(text=["time flies like an arrow"], text_pair=["fruit flies like a banana"]),
}


@pytest.fixture(params=sorted(INPUTS))
def encoded(request, tokenizer):
    encoding = tokenizer(**INPUTS[request.param], padding=True, return_tensors="pt")
    if request.param == "padded_batch":
        assert not encoding["attention_mask"].bool().all()
    if request.param == "sentence_pair":
        assert encoding["token_type_ids"].any()
    return encoding


def test_from_pretrained_is_the_checkpoint_in_eval_mode(ours_eager, hf_model):
    assert not ours_eager.training
    assert ours_eager.config.num_hidden_layers == hf_model.config.num_hidden_layers
    hf_state = hf_model.state_dict()
    assert sorted(ours_eager.state_dict()) == sorted(hf_state)
    for key, value in ours_eager.state_dict().items():
        assert torch.equal(value, hf_state[key]), key


@torch.no_grad()
def test_eager_matches_hf_eager_on_the_checkpoint(ours_eager, hf_model, encoded):
    real = encoded["attention_mask"].bool()
    expected = hf_model(**encoded, output_attentions=True)
    actual = ours_eager(
        encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"], output_attentions=True
    )
    torch.testing.assert_close(actual.last_hidden_state[real], expected.last_hidden_state[real], atol=ATOL, rtol=0)
    torch.testing.assert_close(actual.pooler_output, expected.pooler_output, atol=ATOL, rtol=0)
    assert len(actual.attentions) == hf_model.config.num_hidden_layers
    for ours_probs, hf_probs in zip(actual.attentions, expected.attentions, strict=True):
        torch.testing.assert_close(ours_probs, hf_probs, atol=ATOL, rtol=0)


@torch.no_grad()
def test_sdpa_matches_hf_sdpa_on_the_checkpoint(ours_sdpa, hf_sdpa, encoded):
    real = encoded["attention_mask"].bool()
    expected = hf_sdpa(**encoded)
    actual = ours_sdpa(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    torch.testing.assert_close(actual.last_hidden_state[real], expected.last_hidden_state[real], atol=ATOL, rtol=0)
    torch.testing.assert_close(actual.pooler_output, expected.pooler_output, atol=ATOL, rtol=0)


@torch.no_grad()
def test_sdpa_output_attentions_match_hf_eager_on_the_checkpoint(ours_sdpa, hf_model, encoded):
    expected = hf_model(**encoded, output_attentions=True).attentions
    actual = ours_sdpa(
        encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"], output_attentions=True
    ).attentions
    for ours_probs, hf_probs in zip(actual, expected, strict=True):
        torch.testing.assert_close(ours_probs, hf_probs, atol=ATOL, rtol=0)


@torch.no_grad()
def test_book_multi_head_attention_equals_bert_attention_on_layer_0(ours_eager, tokenizer):
    encoded = tokenizer(INPUTS["padded_batch"]["text"], padding=True, return_tensors="pt")
    real = encoded["attention_mask"].bool()
    hidden_states = ours_eager.embeddings(encoded["input_ids"])
    bert_attention = ours_eager.encoder.layer[0].attention
    book = bert_attention_to_book(bert_attention)
    assert isinstance(book, MultiHeadAttention)
    assert len(book.heads) == ours_eager.config.num_attention_heads
    # BERT: fused self-attention, then the output projection W^O (no residual, no LayerNorm).
    context, bert_probs = bert_attention.self(
        hidden_states, to_additive(padding_mask(encoded["attention_mask"])), output_attentions=True
    )
    expected = bert_attention.output.dense(context)
    # The book: one AttentionHead per head, concatenated, then output_linear.
    actual, book_probs, _ = book(
        hidden_states, attention_mask=padding_mask(encoded["attention_mask"]), output_attentions=True
    )
    torch.testing.assert_close(actual[real], expected[real], atol=ATOL, rtol=0)
    torch.testing.assert_close(book_probs, bert_probs, atol=ATOL, rtol=0)


# ---------------------------------------------------------------------------
# The key map, on tiny checkpoints written to a temporary folder
# ---------------------------------------------------------------------------
TINY = TransformerConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16)


@pytest.fixture
def tiny_model():
    model = BertModel(TINY).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter))
    return model


def write_checkpoint(folder, state_dict, model_type="bert", weights="model.safetensors"):
    folder.mkdir(exist_ok=True)
    config = TINY.to_hf().to_dict()
    config["model_type"] = model_type
    (folder / "config.json").write_text(json.dumps(config))
    state_dict = {key: value.contiguous() for key, value in state_dict.items()}
    if weights == "model.safetensors":
        save_file(state_dict, str(folder / weights))
    else:
        torch.save(state_dict, folder / weights)
    return folder


def assert_same_weights(loaded, model):
    assert sorted(loaded.state_dict()) == sorted(model.state_dict())
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key


@pytest.mark.parametrize("weights", ["model.safetensors", "pytorch_model.bin"])
def test_checkpoint_with_bert_prefix_heads_and_buffers_loads(tmp_path, tiny_model, weights):
    state = {"bert." + key: value for key, value in tiny_model.state_dict().items()}
    state["cls.predictions.bias"] = torch.zeros(TINY.vocab_size)
    state["cls.seq_relationship.weight"] = torch.zeros(2, TINY.hidden_size)
    state["bert.embeddings.position_ids"] = torch.arange(TINY.max_position_embeddings)[None]
    folder = write_checkpoint(tmp_path / "ckpt", state, weights=weights)
    loaded = BertModel.from_pretrained(folder)
    assert not loaded.training
    assert_same_weights(loaded, tiny_model)


def test_legacy_gamma_beta_are_renamed(tmp_path, tiny_model):
    state = {}
    for key, value in tiny_model.state_dict().items():
        key = key.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        state[key] = value
    assert any(key.endswith("gamma") for key in state)
    loaded = BertModel.from_pretrained(write_checkpoint(tmp_path / "ckpt", state))
    assert_same_weights(loaded, tiny_model)


def test_missing_tensor_is_named(tmp_path, tiny_model):
    state = dict(tiny_model.state_dict())
    del state["encoder.layer.0.attention.self.key.bias"]
    with pytest.raises(ValueError, match=r"missing tensors: encoder\.layer\.0\.attention\.self\.key\.bias"):
        BertModel.from_pretrained(write_checkpoint(tmp_path / "ckpt", state))


def test_unexpected_tensor_is_named(tmp_path, tiny_model):
    state = dict(tiny_model.state_dict())
    state["encoder.layer.0.adapter.weight"] = torch.zeros(2, 2)
    with pytest.raises(ValueError, match=r"unexpected tensors: encoder\.layer\.0\.adapter\.weight"):
        BertModel.from_pretrained(write_checkpoint(tmp_path / "ckpt", state))


def test_misshaped_tensor_is_named(tmp_path, tiny_model):
    state = dict(tiny_model.state_dict())
    state["pooler.dense.weight"] = torch.zeros(8, 4)
    with pytest.raises(
        ValueError, match=r"mis-shaped tensors: pooler\.dense\.weight: checkpoint \(8, 4\), model \(8, 8\)"
    ):
        BertModel.from_pretrained(write_checkpoint(tmp_path / "ckpt", state))


def test_non_bert_checkpoint_is_refused(tmp_path, tiny_model):
    folder = write_checkpoint(tmp_path / "ckpt", dict(tiny_model.state_dict()), model_type="gpt2")
    with pytest.raises(ValueError, match=r"'gpt2'.*'bert'"):
        BertModel.from_pretrained(folder)


def test_from_hf_refuses_a_non_bert_model():
    with pytest.raises(ValueError, match="hf_model"):
        BertModel.from_hf(torch.nn.Linear(2, 2))


def test_map_lists_every_problem_at_once(tiny_model):
    state = dict(tiny_model.state_dict())
    del state["pooler.dense.bias"]
    state["extra"] = torch.zeros(1)
    state["embeddings.word_embeddings.weight"] = torch.zeros(3, 8)
    with pytest.raises(ValueError) as error:
        BertModel.map_hf_state_dict(state, tiny_model.state_dict())
    message = str(error.value)
    assert "missing tensors: pooler.dense.bias" in message
    assert "unexpected tensors: extra" in message
    assert "mis-shaped tensors: embeddings.word_embeddings.weight" in message
