"""Llama on the site: its running example (4 query heads sharing 2 key/value heads) and its proof."""

from __future__ import annotations

from transformers import LlamaConfig

from literate_transformer.models.llama import LlamaForCausalLM

from ..base import BOOK_EXAMPLE_SIZES
from .decoder_branch import SIZES, decoder_family

#: The book example's sizes, and 2 key/value heads for the 4 query heads.
LLAMA_SIZES = dict(SIZES, intermediate_size=BOOK_EXAMPLE_SIZES["intermediate_size"], num_key_value_heads=2)
#: The legend's sizes that differ from the book example's: K key/value heads; every feature of a head turns.
LLAMA_DIMS = {"K": 2, "R": 6}

#: The running example's model, in words, for the page.
MODEL = "a small random Llama (4 query heads sharing 2 key/value heads)"

EXAMPLES, PROOFS = decoder_family(LlamaForCausalLM, LlamaConfig, LLAMA_SIZES, MODEL, LLAMA_DIMS, num_beams=2)
