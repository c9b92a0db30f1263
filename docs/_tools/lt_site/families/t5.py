"""T5 on the site: its running example (the annotated source's values) and its proof (the badge)."""

from __future__ import annotations

import torch
from transformers import T5Config

from literate_transformer.core.records import record
from literate_transformer.models.t5 import T5ForConditionalGeneration

from ..base import BOOK_DIMS, Proof, RunningExample, book_example, hf_and_ours, max_diff

#: The book example's sizes under T5's names (heads of D = E / H features, 8 buckets up to distance 16): its
#: record's.
SIZES = dict(record("t5").sizes)


def _t5_on_two_sources() -> None:
    torch.manual_seed(0)
    source = torch.randint(2, SIZES["vocab_size"], (2, 7))
    source_mask = torch.ones(2, 7, dtype=torch.long)
    source_mask[1, -2:] = 0
    target = torch.randint(2, SIZES["vocab_size"], (2, 5))
    for feed_forward_proj in ("relu", "gated-gelu"):
        t5 = T5ForConditionalGeneration(T5Config(**SIZES, feed_forward_proj=feed_forward_proj)).eval()
        t5(source, source_mask, t5._shift_right(target), output_attentions=True)
        t5.generate(source, source_mask, max_new_tokens=3)


EXAMPLES = (
    RunningExample(
        "t5",
        "a small random T5 with the book example's sizes, ReLU and gated-GELU feed-forward: 2 sources of 7 tokens, "
        "the second padded by 2, targets of 5, then greedy decoding",
        BOOK_DIMS,
        _t5_on_two_sources,
    ),
)


@torch.no_grad()
def _t5() -> float:
    example = book_example()
    hf, ours = hf_and_ours("T5Config", "T5ForConditionalGeneration", SIZES, **record("t5").ids)
    ids, mask = example["source_ids"], example["source_mask"]
    target = ours._shift_right(ids[:, :5])
    logits = ours(ids, mask, target).logits
    return max_diff(logits, hf(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits)


PROOFS = (
    Proof(
        "models.t5.T5ForConditionalGeneration",
        "transformers T5ForConditionalGeneration",
        "tests/models/test_t5.py::test_logits_encoder_output_and_attentions_equal_hf_with_padded_sources",
        _t5,
        example="t5",
    ),
)
