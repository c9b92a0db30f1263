"""GPT-Neo on the site: its running example (sampling) and its proof (the badge)."""

from __future__ import annotations

from transformers import GPTNeoConfig

from literate_transformer.models.gpt_neo import GPTNeoForCausalLM

from ..base import BOOK_EXAMPLE_SIZES
from .decoder_branch import SIZES, decoder_example, logits_proof

#: The book example's sizes under GPT-Neo's names: a global layer, then a local one with a band of 3.
NEO_SIZES = dict(
    vocab_size=SIZES["vocab_size"],
    hidden_size=SIZES["hidden_size"],
    num_heads=SIZES["num_attention_heads"],
    num_layers=SIZES["num_hidden_layers"],
    intermediate_size=BOOK_EXAMPLE_SIZES["intermediate_size"],
    max_position_embeddings=SIZES["max_position_embeddings"],
    attention_types=[[["global", "local"], 1]],
    window_size=3,
)

EXAMPLES = (
    decoder_example(
        "gpt_neo",
        "a small random GPT-Neo (a global layer, then a local one with a band of 3)",
        lambda: GPTNeoForCausalLM(GPTNeoConfig(**NEO_SIZES, eos_token_id=2)),
        {},
        do_sample=True,
        temperature=0.7,
    ),
)

PROOFS = (logits_proof("gpt_neo", "GPTNeoForCausalLM", "GPTNeoConfig", NEO_SIZES),)
