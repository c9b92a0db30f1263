"""BERT's pretraining objective: the masking equals DataCollatorForLanguageModeling's, the head and loss BertForMaskedLM's.

Masking: under the same seed the package's :func:`mask_tokens` and
``transformers``' collator draw the same numbers in the same order, so the
masked ids and the labels are *identical* (``torch.equal``), on real
tokenizer output with special tokens and padding.  Head and loss: a random
``BertForMaskedLM`` of odd shape (every parameter randomised), fp32, absolute
1e-5 on the logits at real positions and on the loss.
"""

from __future__ import annotations

import pytest
import torch
import transformers

from literate_transformer import from_hf
from literate_transformer.models.bert import BertForMaskedLM
from literate_transformer.pretraining.masked_lm import mask_tokens

ATOL = 1e-5


@pytest.fixture(scope="module")
def encoded(tokenizer):
    sentences = ["The quick brown fox jumps over the lazy dog.", "Transformers read every token at once.", "Hi."]
    return tokenizer(sentences, padding=True, return_tensors="pt", return_special_tokens_mask=True)


def test_masking_equals_the_data_collators_under_the_same_seed(tokenizer, encoded):
    collator = transformers.DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    input_ids, special = encoded["input_ids"], encoded["special_tokens_mask"]
    chosen = 0
    for seed in range(6):
        torch.manual_seed(seed)
        expected_inputs, expected_labels = collator.torch_mask_tokens(input_ids.clone(), special.clone())
        torch.manual_seed(seed)
        inputs, labels = mask_tokens(input_ids, tokenizer.mask_token_id, len(tokenizer), special)
        assert torch.equal(inputs, expected_inputs) and torch.equal(labels, expected_labels)
        chosen += int((labels != -100).sum())
        # Special tokens and padding are never chosen; the labels hold the original ids.
        assert not bool((labels[special.bool()] != -100).any())
        assert torch.equal(labels[labels != -100], input_ids[labels != -100])
    assert chosen > 0  # not vacuous: tokens were chosen


def test_the_80_10_10_split_holds_on_many_draws():
    input_ids = torch.randint(5, 1000, (64, 128))
    inputs, labels = mask_tokens(input_ids, 4, 1000, generator=torch.Generator().manual_seed(0))
    chosen = labels != -100
    masked = (inputs == 4) & chosen
    unchanged = (inputs == input_ids) & chosen
    assert chosen.float().mean().item() == pytest.approx(0.15, abs=0.01)
    assert (masked.sum() / chosen.sum()).item() == pytest.approx(0.8, abs=0.03)
    assert (unchanged.sum() / chosen.sum()).item() == pytest.approx(0.1, abs=0.03)


def test_bad_arguments_are_refused_by_name():
    ids = torch.tensor([[5, 6, 7]])
    with pytest.raises(ValueError, match="mask_token_id must be a token id"):
        mask_tokens(ids, 50, 10)
    with pytest.raises(ValueError, match="mlm_probability must be a probability"):
        mask_tokens(ids, 4, 10, mlm_probability=1.5)
    with pytest.raises(ValueError, match="special_tokens_mask must have shape"):
        mask_tokens(ids, 4, 10, torch.zeros(1, 4, dtype=torch.bool))


@torch.no_grad()
def test_bert_for_masked_lm_logits_and_loss_equal_hf(randomize):
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=53, hidden_size=15, num_hidden_layers=2, num_attention_heads=5,
                                     intermediate_size=22, layer_norm_eps=1e-6, hidden_act="gelu_new",
                                     max_position_embeddings=12, attn_implementation="eager")  # fmt: skip
    hf = randomize(transformers.BertForMaskedLM(config))
    ours = from_hf(hf)
    assert type(ours) is BertForMaskedLM and sorted(ours.state_dict()) == sorted(hf.state_dict())
    assert ours.cls.predictions.decoder.weight is ours.bert.embeddings.word_embeddings.weight
    input_ids = torch.randint(3, 53, (2, 9))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, -3:] = 0
    inputs, labels = mask_tokens(input_ids, 2, 53, attention_mask == 0, mlm_probability=0.4,
                                 generator=torch.Generator().manual_seed(1))  # fmt: skip
    expected = hf(input_ids=inputs, attention_mask=attention_mask, labels=labels)
    actual = ours(inputs, attention_mask, labels=labels)
    real = attention_mask.bool()
    torch.testing.assert_close(actual.logits[real], expected.logits[real], atol=ATOL, rtol=0)
    torch.testing.assert_close(actual.loss, expected.loss, atol=ATOL, rtol=0)
    assert int((labels != -100).sum()) > 0
