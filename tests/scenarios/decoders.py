"""Shape scenarios of what some decoder families run beyond their record's scenario (:mod:`scenarios.families`)."""

from __future__ import annotations

import torch
import transformers

from literate_transformer.core.records import record
from literate_transformer.models.gpt2 import GPT2LMHeadModel
from literate_transformer.models.mixtral import MixtralForCausalLM

from . import DIMS, T, token_ids, with_dims


def scenario_gpt2_given_positions():
    gpt2 = GPT2LMHeadModel(transformers.GPT2Config(**record("gpt2").sizes)).eval()
    gpt2(token_ids(), position_ids=torch.arange(T)[None], output_attentions=True)


@with_dims(**record("mixtral").dims)
def scenario_mixtral_router_scores():
    mixtral = MixtralForCausalLM(transformers.MixtralConfig(**record("mixtral").sizes)).eval()
    mask = torch.ones(DIMS["B"], T, dtype=torch.long)
    mask[1, 0] = 0
    mixtral(token_ids(), attention_mask=mask, output_router_logits=True)
