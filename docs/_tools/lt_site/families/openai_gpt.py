"""GPT on the site: its running example (with sampling) and its proof (the badge)."""

from __future__ import annotations

from transformers import OpenAIGPTConfig

from literate_transformer.models.openai_gpt import OpenAIGPTLMHeadModel

from .decoder_branch import SIZES, decoder_example, logits_proof

EXAMPLES = (
    decoder_example(
        "openai_gpt",
        "a small random GPT (feed-forward width 4E = 96)",
        lambda: OpenAIGPTLMHeadModel(OpenAIGPTConfig(**SIZES, eos_token_id=2)),
        {"F": 4 * SIZES["hidden_size"]},
        do_sample=True,
        top_k=10,
        top_p=0.9,
    ),
)

PROOFS = (logits_proof("openai_gpt", "OpenAIGPTLMHeadModel", "OpenAIGPTConfig", SIZES),)
