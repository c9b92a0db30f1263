"""DistilBERT, built from the package's parts under HuggingFace's names, equals transformers.DistilBertModel.

Random models of unusual shapes (odd head counts, head sizes that are not
powers of two, learned and sinusoidal positions), every parameter randomised
(layer norms included), converted with ``from_hf``.  Tolerance: fp32,
absolute 1e-5 on the hidden states at real positions and on every attention
probability, on a right-padded batch.
"""

from __future__ import annotations

import pytest
import torch
import transformers
from families import assert_encoder_equals_hf, assert_refuses_bad_input
from shapes import padded_batch

from literate_transformer import from_hf
from literate_transformer.models.distilbert import DistilBertModel

ATOL = 1e-5

SHAPES = {
    # V, E (dim), L, H, F (hidden_dim), positions, activation, sinusoidal
    "5_heads_of_3_learned": dict(vocab_size=47, dim=15, n_layers=2, n_heads=5, hidden_dim=23,
                                 max_position_embeddings=12, activation="gelu", sinusoidal_pos_embds=False),
    "7_heads_of_2_sinusoidal_relu": dict(vocab_size=53, dim=14, n_layers=1, n_heads=7, hidden_dim=30,
                                         max_position_embeddings=10, activation="relu", sinusoidal_pos_embds=True),
}  # fmt: skip


@pytest.fixture(params=sorted(SHAPES), scope="module")
def models(request, randomize):
    torch.manual_seed(0)
    config = transformers.DistilBertConfig(**SHAPES[request.param], attn_implementation="eager")
    hf = randomize(transformers.DistilBertModel(config))
    return hf, from_hf(hf)


def test_from_hf_builds_distilbert_under_hfs_names(models):
    hf, ours = models
    assert type(ours) is DistilBertModel and not ours.training
    assert sorted(ours.state_dict()) == sorted(hf.state_dict())
    # No segment table and no pooler: DistilBERT removed both.
    assert not any("token_type" in key or "pooler" in key for key in ours.state_dict())


def test_hidden_states_and_attentions_equal_hf_on_a_padded_batch(models):
    hf, ours = models
    input_ids, attention_mask = padded_batch(hf.config.vocab_size, 8, (0, 3, 5))
    assert_encoder_equals_hf(hf, ours, input_ids, attention_mask, ATOL)


def test_a_fresh_sinusoidal_model_starts_from_hfs_sinusoids():
    config = transformers.DistilBertConfig(**SHAPES["7_heads_of_2_sinusoidal_relu"])
    ours, hf = DistilBertModel(config), transformers.DistilBertModel(config)
    table = ours.embeddings.position_embeddings.weight
    torch.testing.assert_close(table, hf.embeddings.position_embeddings.weight, atol=1e-6, rtol=0)
    assert not table.requires_grad


def test_bad_input_and_unsupported_configs_are_refused_by_name(models):
    hf, ours = models
    input_ids, _ = padded_batch(hf.config.vocab_size, 4, (0, 1))
    config = hf.config
    assert_refuses_bad_input(ours, input_ids, "max_position_embeddings", config.vocab_size,
                             config.max_position_embeddings)  # fmt: skip
    with pytest.raises(ValueError, match="sinusoidal_pos_embds needs an even dim"):
        DistilBertModel(transformers.DistilBertConfig(dim=15, n_heads=5, sinusoidal_pos_embds=True))
    with pytest.raises(TypeError, match="DistilBertConfig"):
        DistilBertModel(transformers.BertConfig())
