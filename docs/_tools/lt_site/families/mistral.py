"""Mistral on the site: its running example (a sliding window of 3) and its proof (the badge)."""

from __future__ import annotations

from transformers import MistralConfig

from literate_transformer.models.mistral import MistralForCausalLM

from .decoder_branch import decoder_family
from .llama import LLAMA_DIMS, LLAMA_SIZES

MISTRAL_SIZES = dict(LLAMA_SIZES, sliding_window=3)
#: The running example's model, in words, for the page.
MODEL = "a small random Mistral (4 query heads sharing 2 key/value heads, a sliding window of 3)"

EXAMPLES, PROOFS = decoder_family(MistralForCausalLM, MistralConfig, MISTRAL_SIZES, MODEL, LLAMA_DIMS)
