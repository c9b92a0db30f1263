"""Shape scenarios of Llama, Qwen3, Mistral, Mixtral and Gemma 2: grouped-query attention (K < H), rotary angles on whole heads."""

from __future__ import annotations

import torch
import transformers

from literate_transformer.models.llama import LlamaForCausalLM
from literate_transformer.models.mistral import MistralForCausalLM
from literate_transformer.models.mixtral import MixtralForCausalLM

from . import DIMS, T, standard_sizes, token_ids, with_dims


def _config(config_class, **fields):
    return config_class(
        **standard_sizes(), intermediate_size=DIMS["F"], num_key_value_heads=2, eos_token_id=2, **fields
    )


@with_dims(K=2)
def scenario_llama_family():
    mask = torch.ones(DIMS["B"], T, dtype=torch.long)
    mask[1, 0] = 0
    llama = LlamaForCausalLM(_config(transformers.LlamaConfig)).eval()
    llama(token_ids(), attention_mask=mask, output_attentions=True)
    llama.generate(token_ids(), mask, max_new_tokens=2)
    mistral = MistralForCausalLM(_config(transformers.MistralConfig, sliding_window=2)).eval()
    mistral(token_ids(), attention_mask=mask)
    mixtral = MixtralForCausalLM(_config(transformers.MixtralConfig, num_local_experts=3, sliding_window=2)).eval()
    mixtral(token_ids(), attention_mask=mask, output_router_logits=True)
    if hasattr(transformers, "Qwen3Config"):  # transformers 4.41 has no Qwen3
        from literate_transformer.models.qwen3 import Qwen3ForCausalLM

        qwen3 = Qwen3ForCausalLM(_config(transformers.Qwen3Config, head_dim=DIMS["D"])).eval()
        qwen3(token_ids(), attention_mask=mask)
    if hasattr(transformers, "Gemma2Config"):  # transformers 4.41 has no Gemma 2
        from literate_transformer.models.gemma2 import Gemma2ForCausalLM

        gemma2 = Gemma2ForCausalLM(_config(transformers.Gemma2Config, head_dim=DIMS["D"], sliding_window=2)).eval()
        gemma2(token_ids(), attention_mask=mask)
