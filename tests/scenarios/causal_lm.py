"""Shape scenario of the pretraining loop: two steps of a small Llama on a stream, one window of T tokens each."""

from __future__ import annotations

import torch
import transformers

import literate_transformer as lt

from . import DIMS, T, standard_sizes, with_dims


@with_dims(B=1, K=2, S=T)
def scenario_causal_lm_training():
    config = transformers.LlamaConfig(**standard_sizes(), intermediate_size=DIMS["F"], num_key_value_heads=2)
    stream = torch.randint(0, DIMS["V"], (40,))
    lt.train(lt.LlamaForCausalLM(config), stream, steps=2, batch_size=1, sequence_length=T)
