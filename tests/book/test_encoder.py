"""The encoder: pre-LN (the book) and post-LN (BERT) layers equal PyTorch's; the stack; the classifier.

Sizes: B=2, T=5, H=4, D=6, E=24, F=40, two layers.  fp32, max abs difference 1e-5.
"""

from __future__ import annotations

import pytest
import torch
from transformers.models.bert.modeling_bert import BertLayer

from literate_transformer.book.encoder import TransformerEncoder, TransformerEncoderLayer
from literate_transformer.core.masks import padding_mask, to_additive
from literate_transformer.core.outputs import ModelOutput
from literate_transformer.interop import book_encoder_layer_to_torch, book_encoder_to_torch, book_layer_to_bert

ATOL = 1e-5
B, T, H, D, E, F, V, C, L = 2, 5, 4, 6, 24, 40, 50, 3, 2
ATTENTION_MASK = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
REAL = ATTENTION_MASK.bool()


@pytest.fixture
def make_config(tiny_config):
    return lambda **changes: tiny_config(layer_norm_eps=1e-6, **changes)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


NORMS = pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])


@NORMS
def test_encoder_layer_equals_torch_encoder_layer(norm_first, make_config, randomize):
    ours = randomize(TransformerEncoderLayer(make_config(), norm_first=norm_first))
    reference = book_encoder_layer_to_torch(ours)
    hidden = torch.randn(B, T, E)
    assert max_diff(ours(hidden).hidden_states, reference(hidden)) <= ATOL


@NORMS
def test_encoder_layer_equals_torch_encoder_layer_with_padding_mask(norm_first, make_config, randomize):
    ours = randomize(TransformerEncoderLayer(make_config(), norm_first=norm_first))
    reference = book_encoder_layer_to_torch(ours)
    hidden = torch.randn(B, T, E)
    expected = reference(hidden, src_key_padding_mask=~REAL)  # torch: True = ignore
    output = ours(hidden, attention_mask=padding_mask(ATTENTION_MASK)).hidden_states
    assert max_diff(output[REAL], expected[REAL]) <= ATOL


def test_pre_ln_and_post_ln_layers_differ(make_config, randomize):
    pre = randomize(TransformerEncoderLayer(make_config(), norm_first=True))
    post = TransformerEncoderLayer(make_config(), norm_first=False).eval()
    post.load_state_dict(pre.state_dict())
    hidden = torch.randn(B, T, E)
    assert max_diff(pre(hidden).hidden_states, post(hidden).hidden_states) > 1e-2


def test_post_ln_layer_equals_hf_bert_layer(make_config, randomize, hf_api):
    # BERT is post-LN: our layer with norm_first=False computes HuggingFace's BertLayer.
    config = make_config()
    ours = randomize(TransformerEncoderLayer(config, norm_first=False))
    reference = BertLayer(config.to_hf()).eval()
    reference.load_state_dict(book_layer_to_bert(ours).state_dict(), strict=True)
    hidden = torch.randn(B, T, E)
    mask = padding_mask(ATTENTION_MASK)
    expected = hf_api.hidden_states(reference(hidden, attention_mask=to_additive(mask)))
    assert max_diff(ours(hidden, attention_mask=mask).hidden_states[REAL], expected[REAL]) <= ATOL


@NORMS
def test_encoder_stack_equals_torch_transformer_encoder(norm_first, make_config, randomize):
    ours = randomize(TransformerEncoder(make_config(), norm_first=norm_first))
    reference = book_encoder_to_torch(ours)
    input_ids = torch.randint(1, V, (B, T))
    embedded = ours.embeddings(input_ids)
    expected = reference(embedded, src_key_padding_mask=~REAL)
    output = ours(input_ids, ATTENTION_MASK).last_hidden_state
    assert output.shape == (B, T, E)
    assert max_diff(output[REAL], expected[REAL]) <= ATOL


def test_encoder_has_num_hidden_layers_layers(make_config):
    assert len(TransformerEncoder(make_config(num_hidden_layers=3)).layers) == 3


def test_padding_does_not_change_the_real_tokens(make_config, randomize):
    encoder = randomize(TransformerEncoder(make_config()))
    input_ids = torch.randint(1, V, (1, 3))
    alone = encoder(input_ids).last_hidden_state
    padded = torch.cat([input_ids, torch.zeros(1, 2, dtype=torch.long)], dim=1)
    output = encoder(padded, torch.tensor([[1, 1, 1, 0, 0]])).last_hidden_state
    assert max_diff(output[:, :3], alone) <= ATOL


def test_encoder_returns_every_layers_weights_with_padding_masked(make_config, randomize):
    encoder = randomize(TransformerEncoder(make_config()))
    result = encoder(torch.randint(1, V, (B, T)), ATTENTION_MASK, output_attentions=True)
    assert isinstance(result, ModelOutput) and isinstance(result.attentions, tuple)
    assert len(result.attentions) == L
    assert all(weights.shape == (B, H, T, T) for weights in result.attentions)
    assert all(weights[1, :, :, 3:].abs().max().item() == 0.0 for weights in result.attentions)


def test_encoder_returns_the_embeddings_and_every_layers_output(make_config, randomize):
    encoder = randomize(TransformerEncoder(make_config()))
    input_ids = torch.randint(1, V, (B, T))
    result = encoder(input_ids, output_hidden_states=True)
    assert len(result.hidden_states) == L + 1 and result.attentions is None
    assert torch.equal(result.hidden_states[0], encoder.embeddings(input_ids))
    assert torch.equal(result.hidden_states[-1], result.last_hidden_state)


def test_layer_dropout_uses_config_probability(make_config):
    layer = TransformerEncoderLayer(make_config(hidden_dropout_prob=0.25))
    assert layer.dropout.p == 0.25 and layer.feed_forward.dropout.p == 0.25


def test_norm_first_must_be_a_bool(make_config):
    with pytest.raises(TypeError, match=r"norm_first must be a bool"):
        TransformerEncoderLayer(make_config(), norm_first="pre")
    with pytest.raises(TypeError, match=r"norm_first must be a bool"):
        TransformerEncoder(make_config(), norm_first=1)


def test_encoder_layer_refuses_hidden_states_of_wrong_width(make_config):
    with pytest.raises(ValueError, match=r"hidden_states must have shape \(\*, \*, 24\)"):
        TransformerEncoderLayer(make_config())(torch.randn(B, T, D))


def test_encoder_refuses_attention_mask_of_wrong_shape(make_config):
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(2, 5\)"):
        TransformerEncoder(make_config())(torch.randint(1, V, (B, T)), torch.ones(B, T + 1))


def test_encoder_refuses_attention_mask_with_values_other_than_zero_and_one(make_config):
    with pytest.raises(ValueError, match=r"attention_mask must hold only 0 and 1"):
        TransformerEncoder(make_config())(torch.randint(1, V, (B, T)), torch.full((B, T), 2))


def test_encoder_refuses_float_input_ids(make_config):
    with pytest.raises(TypeError, match=r"input_ids must have an int dtype"):
        TransformerEncoder(make_config())(torch.rand(B, T))


def test_encoder_refuses_token_type_ids_out_of_range(make_config):
    with pytest.raises(ValueError, match=r"token_type_ids must be in \[0, type_vocab_size=2\)"):
        TransformerEncoder(make_config())(torch.randint(1, V, (B, T)), token_type_ids=torch.full((B, T), 5))
