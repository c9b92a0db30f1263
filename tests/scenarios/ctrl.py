"""Shape scenarios of CTRL: its scaled token vectors and sines, through the pre-LN stack, and cached decoding."""

from __future__ import annotations

import torch
from transformers import CTRLConfig

from literate_transformer.models.ctrl import CTRLLMHeadModel

from . import DIMS, T, standard_sizes, token_ids


def scenario_ctrl():
    ctrl = CTRLLMHeadModel(CTRLConfig(**standard_sizes(), dff=DIMS["F"], eos_token_id=2)).eval()
    mask = torch.ones(DIMS["B"], T, dtype=torch.long)
    mask[1, 0] = 0
    ctrl(token_ids(), attention_mask=mask, output_attentions=True)
    ctrl.generate(token_ids(), mask, max_new_tokens=2)
