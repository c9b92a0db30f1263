"""GPT-J, GPT-Neo's child with rotary positions and parallel blocks, equals transformers.GPTJForCausalLM.

Random GPT-Js of unusual shapes: rotary angles on part of each head and on
all of it, odd head counts, biased heads tied and untied.  Tolerances as for
every family of the branch (``tests/families.py``).
"""

from __future__ import annotations

import families
import pytest
import transformers
from shapes import Shapes

from literate_transformer.models.gptj import GPTJForCausalLM, check_gptj_config

#: The shapes GPT-J is compared on, a row each: its GPTJConfig fields.
# fmt: off
SHAPES = Shapes(
    ("vocab_size", "n_embd", "n_layer", "n_head", "rotary_dim", "n_positions", "n_inner", "activation_function",
     "tie_word_embeddings"),
    {
        # name                             V   E   L  H  rotary  positions  F     activation  tied
        "5_heads_rotary_4_of_6_untied":   (61, 30, 2, 5, 4,      20,        None, "gelu_new", False),
        "2_heads_rotary_whole_head_tied": (47, 24, 1, 2, 12,     14,        20,   "gelu",     True),
    },
)
# fmt: on

models = families.hf_and_ours_fixture(transformers.GPTJConfig, transformers.GPTJForCausalLM, SHAPES)


def test_from_hf_builds_gptj_under_hfs_names(models):
    _, ours = families.assert_from_hf_builds(models, GPTJForCausalLM)
    # One layer norm per block (attention and MLP read it in parallel), no position table.
    assert not hasattr(ours.transformer.h[0], "ln_2") and not hasattr(ours.transformer, "wpe")


class TestGenerationCacheLossAndBadInputs(families.DecoderFamilyTests):
    """GPT-J's logits, ``generate()`` ids (greedy, sampled, beam), cache, loss and refusals, as every decoder's."""


def test_key_map_names_a_missing_tensor(models):
    hf, ours = models
    key = "transformer.h.0.attn.out_proj.weight"
    families.assert_key_map_names_a_missing_tensor(
        GPTJForCausalLM.map_hf_state_dict, hf.state_dict(), ours.state_dict(), key
    )


def test_a_rotary_dim_that_is_odd_or_wider_than_a_head_is_refused():
    with pytest.raises(ValueError, match="GPTJConfig.rotary_dim=5 must be an even number of features, at most"):
        check_gptj_config(transformers.GPTJConfig(n_embd=24, n_head=2, rotary_dim=5))
    with pytest.raises(ValueError, match="GPTJConfig.rotary_dim=14 must be an even number of features, at most"):
        check_gptj_config(transformers.GPTJConfig(n_embd=24, n_head=2, rotary_dim=14))
    with pytest.raises(TypeError, match="GPTJConfig"):
        check_gptj_config(transformers.GPT2Config())
