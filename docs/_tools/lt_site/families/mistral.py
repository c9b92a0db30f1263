"""Mistral on the site: its running example (a sliding window of 3) and its proof (the badge)."""

from __future__ import annotations

from transformers import MistralConfig

from literate_transformer.models.mistral import MistralForCausalLM

from .decoder_branch import decoder_example, logits_proof
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

PROOFS = (logits_proof("mistral", "MistralForCausalLM", "MistralConfig", MISTRAL_SIZES),)
