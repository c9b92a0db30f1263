"""Shape scenarios of GPT-Neo: global and local layers with unscaled scores, and sampling."""

from __future__ import annotations

import torch
from transformers import GPTNeoConfig

from literate_transformer.core.records import config_sizes
from literate_transformer.models.gpt_neo import GPTNeoForCausalLM

from . import DIMS, T, token_ids


def scenario_gpt_neo():
    config = GPTNeoConfig(
        **config_sizes("gpt_neo", DIMS, max_position_embeddings=16),
        attention_types=[[["global", "local"], 1], [["global"], 1]],
        window_size=2,
        eos_token_id=2,
    )
    neo = GPTNeoForCausalLM(config).eval()
    mask = torch.ones(DIMS["B"], T, dtype=torch.long)
    mask[1, 0] = 0
    neo(token_ids(), attention_mask=mask, output_attentions=True)
    torch.manual_seed(0)
    neo.generate(token_ids(), mask, max_new_tokens=2, do_sample=True, top_k=5, top_p=0.9, temperature=0.7)
