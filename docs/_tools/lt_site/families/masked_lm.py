"""BERT's masked-LM objective on the site: its running example and its proofs (the badges)."""

from __future__ import annotations

import torch

from literate_transformer.core.checkpoints import load_tokenizer
from literate_transformer.models.bert import BertForMaskedLM
from literate_transformer.pretraining.masked_lm import mask_tokens

from ..base import BOOK_DIMS, Proof, RunningExample, hf_and_ours, max_diff
from ._encoder_branch import BERT_SIZES, padded_batch

SENTENCES = ["the quick brown fox jumps over the lazy dog", "masked words are filled in"]


def _encoded():
    tokenizer = load_tokenizer()
    return tokenizer, tokenizer(SENTENCES, padding=True, return_tensors="pt", return_special_tokens_mask=True)


def _masked_lm_on_two_sequences() -> None:
    torch.manual_seed(0)
    ids, mask = padded_batch()
    inputs, labels = mask_tokens(ids, 1, BERT_SIZES["vocab_size"], mask == 0, mlm_probability=0.5)
    BertForMaskedLM(_config()).eval()(inputs, mask, labels=labels)


def _config():
    from literate_transformer.core.config import TransformerConfig

    return TransformerConfig(**BERT_SIZES, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _masking() -> float:
    """1 if any token of the seeded masking differs from DataCollatorForLanguageModeling's, else 0."""
    import transformers

    tokenizer, encoded = _encoded()
    collator = transformers.DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    ids, special = encoded["input_ids"], encoded["special_tokens_mask"]
    torch.manual_seed(0)
    expected = collator.torch_mask_tokens(ids.clone(), special.clone())
    torch.manual_seed(0)
    actual = mask_tokens(ids, tokenizer.mask_token_id, len(tokenizer), special)
    return float(not all(torch.equal(a, e) for a, e in zip(actual, expected, strict=True)))


@torch.no_grad()
def _loss() -> float:
    hf, ours = hf_and_ours("BertConfig", "BertForMaskedLM", BERT_SIZES)
    ids, mask = padded_batch()
    inputs, labels = mask_tokens(ids, 1, BERT_SIZES["vocab_size"], mask == 0, mlm_probability=0.5,
                                 generator=torch.Generator().manual_seed(0))  # fmt: skip
    return max_diff(
        ours(inputs, mask, labels=labels).loss, hf(input_ids=inputs, attention_mask=mask, labels=labels).loss
    )


EXAMPLES = (
    RunningExample(
        "masked_lm",
        "the book example's 2 sequences of 7 tokens (the second padded by 2) masked half at random, "
        "then scored by a small random BertForMaskedLM",
        dict(BOOK_DIMS, T=7),
        _masked_lm_on_two_sequences,
    ),
)

PROOFS = (
    Proof(
        "pretraining.masked_lm.mask_tokens",
        "transformers DataCollatorForLanguageModeling (same seed)",
        "tests/models/test_masked_lm.py::test_masking_equals_the_data_collators_under_the_same_seed",
        _masking,
        tolerance=0.0,
        example="masked_lm",
    ),
    Proof(
        "models.bert.BertForMaskedLM",
        "transformers BertForMaskedLM (loss)",
        "tests/models/test_masked_lm.py::test_bert_for_masked_lm_logits_and_loss_equal_hf",
        _loss,
        example="masked_lm",
    ),
)
