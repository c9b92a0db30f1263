"""CTRL, GPT-2's child with scaled token vectors and its own sinusoid, equals transformers.CTRLLMHeadModel.

Random CTRLs of unusual shapes (a single head, odd widths, tied and
untied heads), every parameter randomised.  Tolerances as for every family
of the branch (``tests/families.py``): fp32, 1e-5 on the logits at real
positions, the loss and cached decoding; the exact ids of ``generate()``.
"""

from __future__ import annotations

import families
import pytest
import torch
import transformers
from shapes import Shapes

from literate_transformer import from_hf
from literate_transformer.models.ctrl import (
    CTRLLMHeadModel,
    check_ctrl_config,
    ctrl_positional_encoding,
)
from literate_transformer.parts.positions import SinusoidalPositionalEncoding

#: The shapes CTRL is compared on, a row each: its CTRLConfig fields.
# fmt: off
SHAPES = Shapes(
    ("vocab_size", "n_embd", "dff", "n_layer", "n_head", "n_positions", "layer_norm_epsilon", "tie_word_embeddings"),
    {
        # name            V   E   F   L  H  positions  eps    tied
        "5_heads_tied":   (61, 30, 44, 2, 5, 20,        1e-6,  True),
        "1_head_untied":  (47, 18, 20, 1, 1, 14,        1e-3,  False),
    },
)
# fmt: on

models = families.hf_and_ours_fixture(transformers.CTRLConfig, transformers.CTRLLMHeadModel, SHAPES)


def test_from_hf_builds_ctrl_under_hfs_names(models):
    hf, ours = families.assert_from_hf_builds(models, CTRLLMHeadModel)
    # The blocks' layer norms keep CTRL's fixed epsilon; the final one reads the config's.
    assert ours.transformer.h[0].layernorm1.eps == 1e-6
    assert ours.transformer.layernorm.eps == hf.config.layer_norm_epsilon


class TestGenerationCacheLossAndBadInputs(families.DecoderFamilyTests):
    """CTRL's logits, ``generate()`` ids (greedy, sampled, beam), cache, loss and refusals, as every decoder's."""


def test_ctrls_table_is_hfs_and_the_2017_sinusoid_with_its_halves_interleaved():
    from transformers.models.ctrl.modeling_ctrl import positional_encoding

    ours = ctrl_positional_encoding(20, 30)
    torch.testing.assert_close(ours, positional_encoding(20, 30, torch.float32), atol=1e-6, rtol=0)
    # Sines in the first half, cosines in the second; the 2017 layout alternates them feature by feature.
    interleaved = torch.stack([ours[:, :15], ours[:, 15:]], dim=-1).flatten(1)
    torch.testing.assert_close(interleaved, SinusoidalPositionalEncoding(30, 20).encoding, atol=1e-5, rtol=0)


def test_key_map_names_a_missing_tensor(models):
    hf, ours = models
    families.assert_key_map_names_a_missing_tensor(
        CTRLLMHeadModel.map_hf_state_dict, hf.state_dict(), ours.state_dict(), "lm_head.bias"
    )


def test_unsupported_ctrl_configs_are_refused():
    with pytest.raises(TypeError, match="CTRLConfig"):
        check_ctrl_config(transformers.GPT2Config())
    with pytest.raises(ValueError, match=r"n_embd \(30\) must be divisible by n_head \(4\)"):
        check_ctrl_config(transformers.CTRLConfig(n_embd=30, n_head=4))


def test_an_odd_width_takes_one_sine_more_as_in_transformers():
    """n_embd = 15: 8 sines and 7 cosines per position, and the same logits as HF's."""
    torch.manual_seed(0)
    config = transformers.CTRLConfig(vocab_size=30, n_embd=15, n_head=3, dff=11, n_layer=2, n_positions=12)
    hf = transformers.CTRLLMHeadModel(config).eval()
    ours = from_hf(hf).eval()
    assert ctrl_positional_encoding(12, 15).shape == (12, 15)
    families.assert_logits_equal_at_real_positions(hf, ours, config.vocab_size)
