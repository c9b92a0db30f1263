"""ALBERT, factorised embeddings and layers shared across the depth, equals transformers.AlbertModel.

Random models of unusual shapes (one group of one layer called 3 times; 2
groups of 2 layers over a depth of 5, so that the groups are called unevenly),
every parameter randomised.  Tolerance: fp32, absolute 1e-5 on the last
hidden state at real positions, the pooler and every attention probability.
"""

from __future__ import annotations

import pytest
import torch
import transformers
from families import assert_encoder_equals_hf, assert_refuses_bad_input
from shapes import padded_batch

from literate_transformer import from_hf
from literate_transformer.models.albert import AlbertModel

ATOL = 1e-5

SHAPES = {
    "one_group_3_layers": dict(vocab_size=47, embedding_size=10, hidden_size=15, num_hidden_layers=3,
                               num_hidden_groups=1, inner_group_num=1, num_attention_heads=5, intermediate_size=23,
                               max_position_embeddings=12, layer_norm_eps=1e-5),
    "two_groups_of_2_over_5": dict(vocab_size=53, embedding_size=9, hidden_size=14, num_hidden_layers=5,
                                   num_hidden_groups=2, inner_group_num=2, num_attention_heads=7, intermediate_size=30,
                                   max_position_embeddings=10, hidden_act="relu", type_vocab_size=3),
}  # fmt: skip


@pytest.fixture(params=sorted(SHAPES), scope="module")
def models(request, randomize):
    torch.manual_seed(0)
    config = transformers.AlbertConfig(**SHAPES[request.param], attn_implementation="eager")
    hf = randomize(transformers.AlbertModel(config))
    return hf, from_hf(hf)


def test_from_hf_builds_albert_under_hfs_names_with_shared_layers(models):
    hf, ours = models
    assert type(ours) is AlbertModel and not ours.training
    assert sorted(ours.state_dict()) == sorted(hf.state_dict())
    config = hf.config
    layers = ours.encoder.layers()
    # The depth calls num_hidden_layers * inner_group_num layers, but only groups * inner_group_num modules exist.
    assert len(layers) == config.num_hidden_layers * config.inner_group_num
    assert len({id(layer) for layer in layers}) == config.num_hidden_groups * config.inner_group_num


def test_last_hidden_state_pooler_and_attentions_equal_hf_on_a_padded_batch(models):
    hf, ours = models
    input_ids, attention_mask = padded_batch(hf.config.vocab_size, 8, (0, 2, 5))
    # Per-layer hidden states are compared where both releases list them alike (one inner layer per group).
    hidden_states = hf.config.inner_group_num == 1
    actual, expected = assert_encoder_equals_hf(hf, ours, input_ids, attention_mask, ATOL, hidden_states)
    torch.testing.assert_close(actual.pooler_output, expected.pooler_output, atol=ATOL, rtol=0)


def test_bad_input_and_unsupported_configs_are_refused_by_name(models):
    hf, ours = models
    input_ids, _ = padded_batch(hf.config.vocab_size, 4, (0, 1))
    assert_refuses_bad_input(ours, input_ids, "max_position_embeddings", hf.config.vocab_size,
                             hf.config.max_position_embeddings)  # fmt: skip
    with pytest.raises(ValueError, match="num_hidden_groups must be in"):
        AlbertModel(transformers.AlbertConfig(num_hidden_layers=2, num_hidden_groups=3))
