"""Shape scenarios of GPT: a padded batch through the post-LN stack, and cached greedy decoding."""

from __future__ import annotations

import torch
from transformers import OpenAIGPTConfig

from literate_transformer.models.openai_gpt import OpenAIGPTLMHeadModel

from . import DIMS, T, standard_sizes, token_ids, with_dims


@with_dims(F=4 * DIMS["E"])  # GPT's feed-forward width is always 4E
def scenario_openai_gpt():
    gpt = OpenAIGPTLMHeadModel(OpenAIGPTConfig(**standard_sizes(), eos_token_id=2)).eval()
    mask = torch.ones(DIMS["B"], T, dtype=torch.long)
    mask[1, -1] = 0
    gpt(token_ids(), attention_mask=mask, output_attentions=True)
    gpt.generate(token_ids(), max_new_tokens=2)
