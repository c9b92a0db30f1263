"""GPT on the site: its running example (with sampling) and its proof (the badge)."""

from __future__ import annotations

from transformers import OpenAIGPTConfig

from literate_transformer.models.openai_gpt import OpenAIGPTLMHeadModel

from .decoder_branch import SIZES, decoder_family

#: The running example's model, in words, for the page.
MODEL = "a small random GPT (feed-forward width 4E = 96)"
#: GPT's feed-forward width is always 4E.
DIMS = {"F": 4 * SIZES["hidden_size"]}

EXAMPLES, PROOFS = decoder_family(
    OpenAIGPTLMHeadModel, OpenAIGPTConfig, SIZES, MODEL, DIMS, do_sample=True, top_k=10, top_p=0.9
)
