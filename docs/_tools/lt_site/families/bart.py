"""BART on the site: its running example (the annotated source's values) and its proof (the badge)."""

from __future__ import annotations

import torch
from transformers import BartConfig

from literate_transformer.core.records import record
from literate_transformer.models.bart import BartForConditionalGeneration

from ..base import BOOK_DIMS, Proof, RunningExample, book_example, hf_and_ours, max_diff

#: The book example's sizes under BART's names, for encoder and decoder alike (its record's).
SIZES = dict(record("bart").sizes)


def two_sources() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The running example's inputs: 2 random sources of 7 tokens, the second padded by 2, and 2 targets of 5."""
    source = torch.randint(3, SIZES["vocab_size"], (2, 7))
    source_mask = torch.ones(2, 7, dtype=torch.long)
    source_mask[1, -2:] = 0
    target = torch.randint(3, SIZES["vocab_size"], (2, 5))
    return source, source_mask, target


def _bart_on_two_sources() -> None:
    torch.manual_seed(0)
    bart = BartForConditionalGeneration(BartConfig(**SIZES, scale_embedding=True)).eval()
    source, source_mask, target = two_sources()
    bart(source, source_mask, target, output_attentions=True)
    bart(source, source_mask)  # no targets: the source shifted right, as HuggingFace's BART does
    bart.generate(source, source_mask, max_new_tokens=3)


EXAMPLES = (
    RunningExample(
        "bart",
        "a small random BART with the book example's sizes: 2 sources of 7 tokens, the second padded by 2, "
        "targets of 5, then greedy decoding",
        BOOK_DIMS,
        _bart_on_two_sources,
    ),
)


@torch.no_grad()
def logits_difference(config_class: str, model_class: str, pad_source_ids: bool = False) -> float:
    """max |ours - transformers| of the logits on the book example's sources, their first 5 ids as the targets.

    Args:
        config_class: The ``transformers`` config's class name.
        model_class: The ``transformers`` model's class name (the package's has the same).
        pad_source_ids: Put the padding id where the mask says padding (a family that counts its positions
            from the ids, as M2M-100 does, needs it there).
    """
    example = book_example()
    special = dict(record("bart").ids)
    hf, ours = hf_and_ours(config_class, model_class, SIZES, **special)
    ids, mask = example["source_ids"], example["source_mask"]
    if pad_source_ids:
        ids = ids.masked_fill(mask == 0, special["pad_token_id"])
    target = ids[:, :5]
    logits = ours(ids, mask, target).logits
    return max_diff(logits, hf(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits)


PROOFS = (
    Proof(
        "models.bart.BartForConditionalGeneration",
        "transformers BartForConditionalGeneration",
        "tests/models/test_bart.py::test_logits_encoder_output_and_attentions_equal_hf_with_padded_sources",
        lambda: logits_difference("BartConfig", "BartForConditionalGeneration"),
        example="bart",
    ),
)
