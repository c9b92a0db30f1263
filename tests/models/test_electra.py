"""ELECTRA, BERT's layers behind narrower embeddings, and its discriminator head, equal transformers'.

Random models of unusual shapes (an embedding width other than the hidden
width and the same one, odd head counts), every parameter randomised.
Tolerance: fp32, absolute 1e-5 on the hidden states at real positions, every
attention probability, the replaced-token logits and the loss.
"""

from __future__ import annotations

import pytest
import torch
import transformers
from families import assert_encoder_equals_hf, assert_refuses_bad_input
from shapes import padded_batch

from literate_transformer import from_hf
from literate_transformer.models.electra import ElectraForPreTraining, ElectraModel

ATOL = 1e-5

SHAPES = {
    "embeddings_10_hidden_15": dict(vocab_size=47, embedding_size=10, hidden_size=15, num_hidden_layers=2,
                                    num_attention_heads=5, intermediate_size=23, max_position_embeddings=12,
                                    layer_norm_eps=1e-5, hidden_act="gelu_new"),
    "embeddings_equal_hidden_14": dict(vocab_size=53, embedding_size=14, hidden_size=14, num_hidden_layers=1,
                                       num_attention_heads=7, intermediate_size=30, max_position_embeddings=10,
                                       type_vocab_size=3),
}  # fmt: skip


@pytest.fixture(params=sorted(SHAPES), scope="module")
def models(request, randomize):
    torch.manual_seed(0)
    config = transformers.ElectraConfig(**SHAPES[request.param], attn_implementation="eager")
    hf = randomize(transformers.ElectraForPreTraining(config))
    return hf, from_hf(hf)


def test_from_hf_builds_electra_under_hfs_names(models):
    hf, ours = models
    assert type(ours) is ElectraForPreTraining and type(from_hf(hf.electra)) is ElectraModel
    assert sorted(ours.state_dict()) == sorted(hf.state_dict())
    # The projection exists exactly when the two widths differ.
    assert hasattr(ours.electra, "embeddings_project") == (hf.config.embedding_size != hf.config.hidden_size)


def test_the_encoder_equals_hf_on_a_padded_batch(models):
    hf, ours = models
    input_ids, attention_mask = padded_batch(hf.config.vocab_size, 8, (0, 2, 5))
    assert_encoder_equals_hf(hf.electra, ours.electra, input_ids, attention_mask, ATOL)


@torch.no_grad()
def test_replaced_token_detection_logits_and_loss_equal_hf(models):
    hf, ours = models
    input_ids, attention_mask = padded_batch(hf.config.vocab_size, 8, (0, 2, 5))
    labels = torch.randint(0, 2, input_ids.shape, generator=torch.Generator().manual_seed(3))
    expected = hf(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    actual = ours(input_ids, attention_mask, labels=labels)
    real = attention_mask.bool()
    torch.testing.assert_close(actual.logits[real], expected.logits[real], atol=ATOL, rtol=0)
    torch.testing.assert_close(actual.loss, expected.loss, atol=ATOL, rtol=0)


def test_bad_input_is_refused_by_name(models):
    hf, ours = models
    input_ids, _ = padded_batch(hf.config.vocab_size, 4, (0, 1))
    assert_refuses_bad_input(ours, input_ids, "max_position_embeddings", hf.config.vocab_size,
                             hf.config.max_position_embeddings)  # fmt: skip
    with pytest.raises(ValueError, match="labels must be 1 where a token was replaced"):
        ours(input_ids, labels=torch.full_like(input_ids, 2))
