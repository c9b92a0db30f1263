"""Shape scenarios of GPT-2: a padded prompt, its attentions, and cached greedy decoding."""

from __future__ import annotations

import torch
from transformers import GPT2Config

from literate_transformer.models.gpt2 import GPT2LMHeadModel

from . import DIMS, T, standard_sizes, token_ids


def scenario_gpt2():
    gpt2 = GPT2LMHeadModel(GPT2Config(**standard_sizes(), n_inner=DIMS["F"], eos_token_id=2)).eval()
    prompt_mask = torch.ones(DIMS["B"], T, dtype=torch.long)
    prompt_mask[1, 0] = 0
    gpt2(token_ids(), attention_mask=prompt_mask, position_ids=torch.arange(T)[None], output_attentions=True)
    gpt2.generate(token_ids(), prompt_mask, max_new_tokens=2)
