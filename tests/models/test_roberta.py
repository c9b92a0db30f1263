"""RoBERTa and XLM-RoBERTa, BERT's layers with positions counted after the padding, equal transformers'.

Random models of unusual shapes (odd head counts, one or two token types, a
padding id of 1 as in the checkpoints, and another), every parameter
randomised, converted with ``from_hf``.  Tolerance: fp32, absolute 1e-5 on the
hidden states at real positions, the pooler and every attention probability,
on a right-padded batch whose padding holds ``pad_token_id`` (the positions
are computed from the ids).
"""

from __future__ import annotations

import pytest
import torch
import transformers
from families import assert_encoder_equals_hf, assert_refuses_bad_input
from shapes import padded_batch

from literate_transformer import from_hf
from literate_transformer.models.roberta import RobertaModel, create_position_ids_from_input_ids
from literate_transformer.models.xlm_roberta import XLMRobertaModel

ATOL = 1e-5

SHAPES = {
    "roberta_5_heads_pad_1": ("RobertaConfig", "RobertaModel", dict(
        vocab_size=47, hidden_size=15, num_hidden_layers=2, num_attention_heads=5, intermediate_size=23,
        max_position_embeddings=14, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1)),
    "xlm_roberta_3_heads_pad_4": ("XLMRobertaConfig", "XLMRobertaModel", dict(
        vocab_size=61, hidden_size=18, num_hidden_layers=1, num_attention_heads=3, intermediate_size=20,
        max_position_embeddings=16, type_vocab_size=2, layer_norm_eps=1e-7, pad_token_id=4, hidden_act="gelu_new")),
}  # fmt: skip


@pytest.fixture(params=sorted(SHAPES), scope="module")
def models(request, randomize):
    torch.manual_seed(0)
    config_class, model_class, fields = SHAPES[request.param]
    config = getattr(transformers, config_class)(**fields, attn_implementation="eager")
    hf = randomize(getattr(transformers, model_class)(config))
    return hf, from_hf(hf)


def test_from_hf_builds_roberta_under_hfs_names(models):
    hf, ours = models
    expected = XLMRobertaModel if type(hf).__name__ == "XLMRobertaModel" else RobertaModel
    assert type(ours) is expected and not ours.training
    assert sorted(ours.state_dict()) == sorted(hf.state_dict())


def test_hidden_states_pooler_and_attentions_equal_hf_on_a_padded_batch(models):
    hf, ours = models
    input_ids, attention_mask = padded_batch(hf.config.vocab_size, 9, (0, 3, 5), pad_token_id=hf.config.pad_token_id)
    actual, expected = assert_encoder_equals_hf(hf, ours, input_ids, attention_mask, ATOL)
    torch.testing.assert_close(actual.pooler_output, expected.pooler_output, atol=ATOL, rtol=0)


def test_positions_are_counted_after_the_padding_index_as_hf_counts_them():
    input_ids = torch.tensor([[0, 31, 47, 2, 1, 1], [5, 1, 6, 7, 8, 1]])
    # transformers 5 keeps the function on the embeddings, transformers 4 in the module.
    modeling = transformers.models.roberta.modeling_roberta
    hf_function = getattr(modeling, "create_position_ids_from_input_ids", None)
    expected = (hf_function or modeling.RobertaEmbeddings.create_position_ids_from_input_ids)(input_ids, 1)
    actual = create_position_ids_from_input_ids(input_ids, padding_idx=1)
    assert torch.equal(actual, expected)
    assert actual[0].tolist() == [2, 3, 4, 5, 1, 1]


def test_bad_input_and_unsupported_configs_are_refused_by_name(models):
    hf, ours = models
    config = hf.config
    input_ids, _ = padded_batch(config.vocab_size, 4, (0, 1), pad_token_id=config.pad_token_id)
    # Positions run from pad_token_id + 1: the table holds max_position_embeddings - pad_token_id - 1 tokens.
    longest = config.max_position_embeddings - config.pad_token_id - 1
    assert_refuses_bad_input(ours, input_ids, "max_position_embeddings", config.vocab_size, longest)
    with pytest.raises(ValueError, match="is_decoder=True is not supported"):
        RobertaModel(transformers.RobertaConfig(is_decoder=True))
    with pytest.raises(TypeError, match="xlm-roberta"):
        XLMRobertaModel(transformers.RobertaConfig())
