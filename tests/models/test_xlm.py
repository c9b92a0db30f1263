"""XLM, language embeddings and padding zeroed after every layer, equals transformers.XLMModel.

Random models of unusual shapes (three languages with learned positions and
GELU; one language with sinusoidal positions and ReLU), every parameter
randomised.  Tolerance: fp32, absolute 1e-5 on the hidden states at real
positions and every attention probability, with and without an
``attention_mask`` (without one, XLM counts the padding ids).
"""

from __future__ import annotations

import pytest
import torch
import transformers
from families import assert_encoder_equals_hf, assert_refuses_bad_input
from shapes import padded_batch

from literate_transformer import from_hf
from literate_transformer.models.xlm import XLMModel

ATOL = 1e-5

SHAPES = {
    "3_languages_7_heads_gelu": dict(vocab_size=47, emb_dim=14, n_layers=2, n_heads=7, n_langs=3,
                                     max_position_embeddings=12, layer_norm_eps=1e-6, gelu_activation=True),
    "1_language_sinusoidal_relu": dict(vocab_size=53, emb_dim=18, n_layers=1, n_heads=3, n_langs=1,
                                       max_position_embeddings=10, sinusoidal_embeddings=True, gelu_activation=False),
}  # fmt: skip


@pytest.fixture(params=sorted(SHAPES), scope="module")
def models(request, randomize):
    torch.manual_seed(0)
    config = transformers.XLMConfig(**SHAPES[request.param], attn_implementation="eager")
    hf = randomize(transformers.XLMModel(config))
    return hf, from_hf(hf)


def batch(config):
    input_ids, attention_mask = padded_batch(config.vocab_size, 8, (0, 2, 5), pad_token_id=config.pad_index)
    langs = torch.randint(0, config.n_langs, input_ids.shape, generator=torch.Generator().manual_seed(2))
    return input_ids, attention_mask, langs


def test_from_hf_builds_xlm_under_hfs_names(models):
    hf, ours = models
    assert type(ours) is XLMModel and not ours.training
    assert sorted(ours.state_dict()) == sorted(hf.state_dict())
    assert ours.uses_langs == (hf.config.n_langs > 1)


def test_hidden_states_and_attentions_equal_hf_with_languages_on_a_padded_batch(models):
    hf, ours = models
    input_ids, attention_mask, langs = batch(hf.config)
    actual, _ = assert_encoder_equals_hf(hf, ours, input_ids, attention_mask, ATOL, langs=langs)
    # XLM zeroes the padded positions after every layer.
    assert actual.last_hidden_state[attention_mask == 0].abs().max().item() == 0.0


@torch.no_grad()
def test_without_a_mask_the_padding_ids_give_the_same_output(models):
    hf, ours = models
    input_ids, _, langs = batch(hf.config)
    expected = hf(input_ids=input_ids, langs=langs).last_hidden_state
    torch.testing.assert_close(ours(input_ids, langs=langs).last_hidden_state, expected, atol=ATOL, rtol=0)


@torch.no_grad()
def test_without_langs_no_language_vector_is_added_as_in_transformers(models):
    hf, ours = models
    input_ids, attention_mask, langs = batch(hf.config)
    actual, _ = assert_encoder_equals_hf(hf, ours, input_ids, attention_mask, ATOL)
    if ours.uses_langs:
        # Not vacuous: with languages the output is another.
        with_langs = ours(input_ids, attention_mask=attention_mask, langs=langs).last_hidden_state
        assert (with_langs - actual.last_hidden_state).abs().max() > 1e-3


def test_bad_input_is_refused_by_name(models):
    hf, ours = models
    input_ids, _, langs = batch(hf.config)
    config = hf.config
    inputs = dict(langs=langs) if ours.uses_langs else {}
    assert_refuses_bad_input(ours, input_ids, "max_position_embeddings", config.vocab_size,
                             config.max_position_embeddings, **inputs)  # fmt: skip
    if ours.uses_langs:
        with pytest.raises(ValueError, match=r"langs must be language ids in \[0, n_langs=3\)"):
            ours(input_ids, langs=langs + 3)
    with pytest.raises(ValueError, match="XLMConfig.causal=True is not supported"):
        XLMModel(transformers.XLMConfig(causal=True))
