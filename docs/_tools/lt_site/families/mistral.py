"""Mistral on the site: its running example (a sliding window of 3) and its proof (the badge)."""

from __future__ import annotations

from transformers import MistralConfig

from literate_transformer.models.mistral import MistralForCausalLM

from ..base import Proof
from .decoder_branch import decoder_example, logits_difference
from .llama import LLAMA_DIMS, LLAMA_SIZES

MISTRAL_SIZES = dict(LLAMA_SIZES, sliding_window=3)

EXAMPLES = (
    decoder_example(
        "mistral",
        "a small random Mistral (4 query heads sharing 2 key/value heads, a sliding window of 3)",
        lambda: MistralForCausalLM(MistralConfig(**MISTRAL_SIZES, eos_token_id=2)),
        LLAMA_DIMS,
    ),
)

PROOFS = (
    Proof(
        "models.mistral.MistralForCausalLM",
        "transformers MistralForCausalLM",
        "tests/models/test_mistral.py::test_logits_equal_hfs_at_the_real_positions_of_a_right_padded_batch",
        lambda: logits_difference("MistralConfig", "MistralForCausalLM", MISTRAL_SIZES),
        example="mistral",
    ),
)
