"""GPT on the site: its running example (with sampling) and its proof (the badge)."""

from __future__ import annotations

from transformers import OpenAIGPTConfig

from literate_transformer.models.openai_gpt import OpenAIGPTLMHeadModel

from ..base import Proof
from .decoder_branch import SIZES, decoder_example, logits_difference

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

PROOFS = (
    Proof(
        "models.openai_gpt.OpenAIGPTLMHeadModel",
        "transformers OpenAIGPTLMHeadModel",
        "tests/models/test_openai_gpt.py::test_logits_equal_hfs_at_the_real_positions_of_a_right_padded_batch",
        lambda: logits_difference("OpenAIGPTConfig", "OpenAIGPTLMHeadModel", SIZES),
        example="openai_gpt",
    ),
)
