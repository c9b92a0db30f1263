"""GPT-J on the site: its running example (rotary angles on 4 of each head's 6 features) and its proof."""

from __future__ import annotations

from transformers import GPTJConfig

from literate_transformer.models.gptj import GPTJForCausalLM

from ..base import BOOK_EXAMPLE_SIZES
from .decoder_branch import SIZES, decoder_example, logits_proof

GPTJ_SIZES = dict(SIZES, n_inner=BOOK_EXAMPLE_SIZES["intermediate_size"], rotary_dim=4)

EXAMPLES = (
    decoder_example(
        "gptj",
        "a small random GPT-J (rotary angles on the first 4 of each head's 6 features)",
        lambda: GPTJForCausalLM(GPTJConfig(**GPTJ_SIZES, eos_token_id=2)),
        {"R": GPTJ_SIZES["rotary_dim"]},
    ),
)

PROOFS = (logits_proof("gptj", "GPTJForCausalLM", "GPTJConfig", GPTJ_SIZES),)
