"""Shape scenarios of GPT-J: rotary angles for part of each head (R < D), parallel blocks, and cached decoding."""

from __future__ import annotations

import torch
from transformers import GPTJConfig

from literate_transformer.models.gptj import GPTJForCausalLM

from . import DIMS, T, standard_sizes, token_ids, with_dims


@with_dims(R=4)
def scenario_gptj():
    gptj = GPTJForCausalLM(GPTJConfig(**standard_sizes(), n_inner=DIMS["F"], rotary_dim=4, eos_token_id=2)).eval()
    mask = torch.ones(DIMS["B"], T, dtype=torch.long)
    mask[1, 0] = 0
    gptj(token_ids(), attention_mask=mask, output_attentions=True)
    gptj.generate(token_ids(), mask, max_new_tokens=2)
