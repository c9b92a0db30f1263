"""GPT-Neo, GPT-3's child with unscaled scores, equals transformers.GPTNeoForCausalLM.

Random GPT-Neos whose layers mix global and local attention with small
windows (so that the band hides keys in the test's sequences), odd head
counts, tied and untied heads.  Tolerances as for every family of the
branch (``tests/families.py``).
"""

from __future__ import annotations

import families
import pytest
import torch
import transformers
from shapes import Shapes

from literate_transformer.core.masks import causal_mask
from literate_transformer.models.gpt_neo import GPTNeoForCausalLM, check_gpt_neo_config

#: The shapes GPT-Neo is compared on, a row each: its GPTNeoConfig fields (``attention_types``: each
#: pattern of global and local layers, and how many times it repeats).
# fmt: off
SHAPES = Shapes(
    ("vocab_size", "hidden_size", "num_layers", "num_heads", "window_size", "max_position_embeddings",
     "attention_types", "intermediate_size", "activation_function", "tie_word_embeddings"),
    {
        # name                            V   E   L  H  window  positions  attention_types
        #                                 F     activation  tied
        "global_local_global_5_heads":   (61, 30, 3, 5, 3,      20,        [[["global", "local"], 1], [["global"], 1]],
                                          None, "gelu_new", True),
        "two_local_3_heads_relu_untied": (47, 18, 2, 3, 2,      14,        [[["local"], 2]],
                                          28,   "relu",     False),
    },
)
# fmt: on

models = families.hf_and_ours_fixture(transformers.GPTNeoConfig, transformers.GPTNeoForCausalLM, SHAPES)


def test_from_hf_builds_gpt_neo_under_hfs_names(models):
    hf, ours = families.assert_from_hf_builds(models, GPTNeoForCausalLM)
    assert [block.attention_type for block in ours.transformer.h] == hf.config.attention_layers
    # GPT-Neo's scores are not divided by sqrt(D): transformers' _attn has no division either.
    assert all(block.attn.attention.scale == 1.0 for block in ours.transformer.h)


class TestGenerationCacheLossAndBadInputs(families.DecoderFamilyTests):
    """GPT-Neo's logits, ``generate()`` ids (greedy, sampled, beam), cache, loss and refusals, as every decoder's."""


def test_the_local_band_is_transformers_local_mask(models):
    hf, _ = models
    for layer, kind in zip(hf.transformer.h, hf.config.attention_layers, strict=True):
        length = hf.config.max_position_embeddings
        window = hf.config.window_size if kind == "local" else None
        assert torch.equal(causal_mask(length, window=window), layer.attn.attention.bias[0, 0])


def test_key_map_names_a_missing_tensor_and_drops_old_mask_buffers(models):
    hf, ours = models
    state, expected = hf.state_dict(), ours.state_dict()
    key = "transformer.h.0.attn.attention.q_proj.weight"
    families.assert_key_map_names_a_missing_tensor(GPTNeoForCausalLM.map_hf_state_dict, state, expected, key)
    old = dict(state, **{"transformer.h.0.attn.attention.bias": torch.ones(1, 1, 4, 4, dtype=torch.bool)})
    assert sorted(GPTNeoForCausalLM.map_hf_state_dict(old, expected, hf.config.tie_word_embeddings)) == sorted(expected)


def test_unsupported_gpt_neo_configs_are_refused():
    with pytest.raises(TypeError, match="GPTNeoConfig"):
        check_gpt_neo_config(transformers.GPT2Config())
    with pytest.raises(ValueError, match=r"hidden_size \(30\) must be divisible by num_heads \(4\)"):
        check_gpt_neo_config(transformers.GPTNeoConfig(hidden_size=30, num_heads=4))
    with pytest.raises(ValueError, match="GPTNeoConfig.activation_function='quick_gelu' is not supported"):
        check_gpt_neo_config(transformers.GPTNeoConfig(activation_function="quick_gelu"))
