"""Llama, from the parts, equals transformers.LlamaForCausalLM: RMS norms, RoPE, SwiGLU, grouped-query attention.

Random Llamas of unusual shapes: key/value heads shared by 2 query heads
and by all of them (multi-query), a head size other than E/H, biases on,
tied and untied heads, Llama 3.1's rotary scaling with a short original
context (so that the scaling changes the frequencies the test uses).
Tolerances as for every family of the branch (``tests/families.py``).
Rows that need what ``transformers`` 4.41 lacks (``head_dim``, the
``llama3`` rotary scaling) skip there, saying so.
"""

from __future__ import annotations

import families
import pytest
import torch
import transformers
from shapes import LLAMA_GROUPED, LLAMA_HEAD_OF_10

from literate_transformer.models.llama import (
    LlamaForCausalLM,
    check_llama_config,
    kv_cache_bytes_per_token,
)

#: transformers releases whose LlamaConfig has head_dim (4.41 does not).
HAS_HEAD_DIM = getattr(transformers.LlamaConfig(), "head_dim", None) is not None
try:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    HAS_LLAMA3_ROPE = "llama3" in ROPE_INIT_FUNCTIONS
except ImportError:
    HAS_LLAMA3_ROPE = False
LLAMA3_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8,
}

#: name: LlamaConfig fields.
SHAPES = {
    "4_heads_2_kv_heads_untied": dict(LLAMA_GROUPED, rms_norm_eps=1e-5),
    "6_heads_1_kv_head_of_10_biases_llama3_tied": dict(
        LLAMA_HEAD_OF_10,
        num_attention_heads=6,
        num_key_value_heads=1,
        attention_bias=True,
        mlp_bias=True,
        tie_word_embeddings=True,
        rope_theta=500.0,
        rope_scaling=LLAMA3_ROPE,
    ),
}
NEEDS = {
    "6_heads_1_kv_head_of_10_biases_llama3_tied": pytest.mark.skipif(
        not (HAS_HEAD_DIM and HAS_LLAMA3_ROPE),
        reason=f"transformers {transformers.__version__} has no head_dim or no llama3 rotary scaling in Llama",
    )
}


models = families.hf_and_ours_fixture(transformers.LlamaConfig, transformers.LlamaForCausalLM, SHAPES, NEEDS)


def test_from_hf_builds_llama_under_hfs_names(models):
    hf, ours = families.assert_from_hf_builds(models, LlamaForCausalLM)
    attention = ours.model.layers[0].self_attn
    assert (attention.num_heads, attention.num_key_value_heads) == (
        hf.config.num_attention_heads,
        hf.config.num_key_value_heads,
    )


class TestGenerationCacheLossAndBadInputs(families.DecoderFamilyTests):
    """Llama's logits, ``generate()`` ids (greedy, sampled, beam), cache, loss and refusals, as every decoder's."""


@torch.no_grad()
def test_the_cache_holds_kv_cache_bytes_per_token_for_every_token(models):
    _, ours = models
    cache = ours(torch.tensor([[3, 4, 5, 6, 7]]), use_cache=True).past_key_values
    stored = sum(tensor.numel() * tensor.element_size() for layer in cache for tensor in layer.self_attention)
    # float32 here: 4 bytes a number; K key/value heads per layer, not H.
    assert stored == 5 * kv_cache_bytes_per_token(ours.config, bytes_per_number=4)
    assert cache[0].self_attention[0].shape[1] == ours.config.num_key_value_heads


def test_key_map_names_a_missing_tensor_and_refuses_an_untied_head(models):
    hf, ours = models
    state, expected = hf.state_dict(), ours.state_dict()
    key = "model.layers.0.self_attn.k_proj.weight"
    families.assert_key_map_names_a_missing_tensor(LlamaForCausalLM.map_hf_state_dict, state, expected, key)
    if hf.config.tie_word_embeddings:
        refuse = lambda state, expected: LlamaForCausalLM.map_hf_state_dict(state, expected, tied=True)  # noqa: E731
        families.assert_key_map_refuses_a_changed_copy(refuse, state, expected, "lm_head.weight", "not tied")


def test_unsupported_llama_configs_are_refused_naming_the_field():
    with pytest.raises(TypeError, match="LlamaConfig"):
        check_llama_config(transformers.GPT2Config())
    with pytest.raises(ValueError, match=r"num_attention_heads \(6\) must be divisible by num_key_value_heads \(4\)"):
        check_llama_config(transformers.LlamaConfig(hidden_size=24, num_attention_heads=6, num_key_value_heads=4))
    linear = {"rope_type": "linear", "factor": 2.0} if HAS_LLAMA3_ROPE else {"type": "linear", "factor": 2.0}
    with pytest.raises(ValueError, match="LlamaConfig.rope_scaling=.* rope_type 'linear'"):
        check_llama_config(transformers.LlamaConfig(rope_scaling=linear))
