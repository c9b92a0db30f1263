"""M2M-100 on the site: its running example (the annotated source's values) and its proof (the badge)."""

from __future__ import annotations

import torch
from transformers import M2M100Config

from literate_transformer.models.m2m_100 import M2M100ForConditionalGeneration

from ..base import BOOK_DIMS, Proof, RunningExample
from .bart import SIZES, logits_difference, two_sources

#: A token of the vocabulary standing for the target language.
TARGET_LANGUAGE = 40


def _m2m_100_on_two_sources() -> None:
    torch.manual_seed(0)
    m2m = M2M100ForConditionalGeneration(M2M100Config(**SIZES)).eval()
    source, source_mask, target = two_sources()
    source = source.masked_fill(source_mask == 0, m2m.config.pad_token_id)
    m2m(source, source_mask, target, output_attentions=True)
    m2m.generate(source, source_mask, max_new_tokens=3, forced_bos_token_id=TARGET_LANGUAGE)


EXAMPLES = (
    RunningExample(
        "m2m_100",
        "a small random M2M-100 with the book example's sizes: 2 sources of 7 tokens, the second padded by 2, "
        f"targets of 5, then greedy decoding into 'language' {TARGET_LANGUAGE}",
        BOOK_DIMS,
        _m2m_100_on_two_sources,
    ),
)


PROOFS = (
    Proof(
        "models.m2m_100.M2M100ForConditionalGeneration",
        "transformers M2M100ForConditionalGeneration",
        "tests/models/test_m2m_100.py::test_logits_encoder_output_and_attentions_equal_hf_with_padded_sources",
        lambda: logits_difference("M2M100Config", "M2M100ForConditionalGeneration", pad_source_ids=True),
        example="m2m_100",
    ),
)
