"""GPT-J on the site: its running example (rotary angles on 4 of each head's 6 features) and its proof."""

from __future__ import annotations

from transformers import GPTJConfig

from literate_transformer.models.gptj import GPTJForCausalLM

from ..base import BOOK_EXAMPLE_SIZES
from .decoder_branch import SIZES, decoder_family

GPTJ_SIZES = dict(SIZES, n_inner=BOOK_EXAMPLE_SIZES["intermediate_size"], rotary_dim=4)
#: The running example's model, in words, for the page.
MODEL = "a small random GPT-J (rotary angles on the first 4 of each head's 6 features)"

EXAMPLES, PROOFS = decoder_family(GPTJForCausalLM, GPTJConfig, GPTJ_SIZES, MODEL, {"R": GPTJ_SIZES["rotary_dim"]})
