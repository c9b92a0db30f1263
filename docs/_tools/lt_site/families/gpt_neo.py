"""GPT-Neo on the site: its running example (sampling) and its proof (the badge)."""

from __future__ import annotations

from transformers import GPTNeoConfig

from literate_transformer.models.gpt_neo import GPTNeoForCausalLM

from ..base import BOOK_DIMS, config_sizes
from .decoder_branch import SIZES, decoder_family

#: The book example's sizes under GPT-Neo's names (num_heads, num_layers): a global layer, then a local one
#: with a band of 3.
NEO_SIZES = config_sizes(
    "gpt_neo",
    BOOK_DIMS,
    max_position_embeddings=SIZES["max_position_embeddings"],
    attention_types=[[["global", "local"], 1]],
    window_size=3,
)

#: The running example's model, in words, for the page.
MODEL = "a small random GPT-Neo (a global layer, then a local one with a band of 3)"

EXAMPLES, PROOFS = decoder_family(GPTNeoForCausalLM, GPTNeoConfig, NEO_SIZES, MODEL, do_sample=True, temperature=0.7)
