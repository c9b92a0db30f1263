"""DeBERTa v2/v3, disentangled attention, equals transformers.DebertaV2Model.

Random models of unusual shapes, one per combination of the options the
released checkpoints use: transformers' default (no relative attention: an
absolute-position BERT without segments); v3's (both position terms,
log-bucketed distances, shared position keys, a layer norm on the position
table, no absolute positions); content-to-position only with its own
projection and plain clamped distances, a narrower embedding and segments;
position-to-content only with buckets.  The sequences are longer than half
the buckets, so the log-bucketed distances are exercised.  Every parameter
randomised.  Tolerance: fp32, absolute 1e-5 on the hidden states at real
positions and every attention probability, the padded queries' rows
included (DeBERTa masks them whole).
"""

from __future__ import annotations

import inspect

import pytest
import torch
import transformers
from families import assert_encoder_equals_hf, assert_refuses_bad_input
from shapes import padded_batch

from literate_transformer import from_hf
from literate_transformer.models.deberta_v2 import (
    DebertaV2Model,
    build_relative_position,
    make_log_bucket_position,
)

ATOL = 1e-5

BASE = dict(vocab_size=47, hidden_size=15, num_hidden_layers=2, num_attention_heads=5, intermediate_size=23,
            max_position_embeddings=14, layer_norm_eps=1e-6)  # fmt: skip
SHAPES = {
    "default_absolute_only": dict(BASE),
    "v3_both_terms_buckets_shared_keys": dict(BASE, relative_attention=True, pos_att_type=["p2c", "c2p"],
                                              position_buckets=6, norm_rel_ebd="layer_norm", share_att_key=True,
                                              position_biased_input=False),
    "c2p_own_projection_clamped": dict(BASE, num_attention_heads=3, relative_attention=True, pos_att_type=["c2p"],
                                       max_relative_positions=5, type_vocab_size=2, embedding_size=10),
    "p2c_buckets": dict(BASE, hidden_size=14, num_attention_heads=7, relative_attention=True, pos_att_type=["p2c"],
                        position_buckets=8, max_relative_positions=12, hidden_act="gelu_new"),
}  # fmt: skip


@pytest.fixture(params=sorted(SHAPES), scope="module")
def models(request, randomize):
    torch.manual_seed(0)
    config = transformers.DebertaV2Config(**SHAPES[request.param], attn_implementation="eager")
    hf = randomize(transformers.DebertaV2Model(config))
    return hf, from_hf(hf)


def test_from_hf_builds_deberta_under_hfs_names(models):
    hf, ours = models
    assert type(ours) is DebertaV2Model and not ours.training
    assert sorted(ours.state_dict()) == sorted(hf.state_dict())


def test_hidden_states_and_attentions_equal_hf_on_a_padded_batch(models):
    hf, ours = models
    input_ids, attention_mask = padded_batch(hf.config.vocab_size, 11, (0, 3, 5))
    actual, expected = assert_encoder_equals_hf(hf, ours, input_ids, attention_mask, ATOL, padded_rows=False)
    # A padded query's row is masked whole: here its softmax gives uniform weights, as transformers 5 does;
    # transformers 4 (XSoftmax) zeroed the row after the softmax instead.
    row, hf_row = actual.attentions[0][2, :, -1], expected.attentions[0][2, :, -1]
    torch.testing.assert_close(row, torch.full_like(row, 1 / row.shape[-1]))
    assert torch.allclose(hf_row, row, atol=ATOL) or float(hf_row.abs().max()) == 0.0


def test_each_layer_module_takes_hfs_arguments_in_hfs_order(models):
    # Called positionally as transformers calls them, separate query states included (the enhanced mask
    # decoder's input): the layer, its attention and the disentangled self-attention.
    hf, ours = models
    hidden_states, query_states = torch.randn(2, 2, 6, hf.config.hidden_size).unbind(0)
    mask = torch.ones(2, 1, 6, 6, dtype=torch.bool)
    mask[1, ..., 4:] = False
    relative_pos, rel_embeddings = ours.layer_inputs(6, hidden_states.device)[1:]
    theirs_layer, ours_layer = hf.encoder.layer[1], ours.encoder.layer[1]
    pairs = [
        (theirs_layer, ours_layer, (hidden_states, mask, query_states, relative_pos, rel_embeddings, True)),
        (theirs_layer.attention, ours_layer.attention, (hidden_states, mask, True, query_states, relative_pos, rel_embeddings)),
        (theirs_layer.attention.self, ours_layer.attention.self, (hidden_states, mask, True, query_states, relative_pos, rel_embeddings)),
    ]  # fmt: skip
    with torch.no_grad():
        for theirs_module, ours_module, arguments in pairs:
            expected, actual = theirs_module(*arguments), ours_module(*arguments)
            torch.testing.assert_close(actual[0], expected[0], atol=ATOL, rtol=0)
            torch.testing.assert_close(actual[1], expected[1], atol=ATOL, rtol=0)


def test_log_buckets_and_relative_positions_equal_hfs():
    from transformers.models.deberta_v2 import modeling_deberta_v2 as hf_deberta

    distances = torch.arange(-70, 71)
    expected = hf_deberta.make_log_bucket_position(distances, 16, 64)
    assert torch.equal(make_log_bucket_position(distances, 16, 64), expected)
    # Near distances keep their own row; far ones share rows, each wider than the last.
    assert expected[70 - 8 : 70 + 9].tolist() == list(range(-8, 9))
    assert len(set(expected.tolist())) < len(distances)
    # transformers 5 takes the query and key tensors, transformers 4 their lengths.
    if "query_layer" in inspect.signature(hf_deberta.build_relative_position).parameters:
        sizes = (torch.zeros(1, 9, 4), torch.zeros(1, 9, 4))
    else:
        sizes = (9, 9)
    hf_positions = hf_deberta.build_relative_position(*sizes, bucket_size=6, max_position=20)
    assert torch.equal(build_relative_position(9, 9, 6, 20), hf_positions[0])


def test_the_key_map_drops_an_unused_position_table_and_names_a_missing_tensor(models):
    hf, ours = models
    state = dict(hf.state_dict())
    if not hf.config.position_biased_input:
        state["embeddings.position_embeddings.weight"] = torch.zeros(14, 15)
        assert sorted(DebertaV2Model.map_hf_state_dict(state, ours.state_dict())) == sorted(ours.state_dict())
    del state["encoder.layer.0.attention.self.query_proj.weight"]
    with pytest.raises(ValueError, match="missing tensors: encoder.layer.0.attention.self.query_proj.weight"):
        DebertaV2Model.map_hf_state_dict(state, ours.state_dict())


def test_bad_input_and_unsupported_configs_are_refused_by_name(models):
    hf, ours = models
    input_ids, _ = padded_batch(hf.config.vocab_size, 4, (0, 1))
    assert_refuses_bad_input(ours, input_ids, "max_position_embeddings", hf.config.vocab_size,
                             hf.config.max_position_embeddings)  # fmt: skip
    with pytest.raises(ValueError, match="conv_kernel_size=3 is not supported"):
        DebertaV2Model(transformers.DebertaV2Config(**BASE, conv_kernel_size=3))
    with pytest.raises(ValueError, match="pos_att_type may hold"):
        DebertaV2Model(transformers.DebertaV2Config(**BASE, pos_att_type=["p2p"]))
