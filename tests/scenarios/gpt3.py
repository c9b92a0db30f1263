"""Shape scenarios of GPT-3: dense and banded layers on a padded batch, and beam search (one prompt, B beams)."""

from __future__ import annotations

import torch

from literate_transformer.models.gpt3 import GPT3Config, GPT3LMHeadModel

from . import DIMS, T, standard_sizes, token_ids


def scenario_gpt3():
    gpt3 = GPT3LMHeadModel(GPT3Config(**standard_sizes(), n_inner=DIMS["F"], window_size=2, eos_token_id=2)).eval()
    mask = torch.ones(DIMS["B"], T, dtype=torch.long)
    mask[1, 0] = 0
    gpt3(token_ids(), attention_mask=mask, output_attentions=True)
    # One prompt and B beams: the model reads B rows, as in every other scenario.
    gpt3.generate(token_ids()[:1], max_new_tokens=2, num_beams=DIMS["B"])
