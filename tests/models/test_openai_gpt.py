"""GPT, the root of the decoder branch, equals transformers.OpenAIGPTLMHeadModel.

Random GPTs of unusual shapes (odd head counts and widths, GPT's own
``afn`` table, tied and untied heads), every parameter randomised so that
no layer norm is the identity, are converted with ``from_hf``.

Tolerance: fp32, absolute 1e-5 on the logits at every real position of a
right-padded batch, on the ``labels=`` loss, and between cached and
uncached decoding.  Generation: exactly the ids of ``generate()``, greedy,
sampled (same seed) and beam search.
"""

from __future__ import annotations

import functools

import families
import pytest
import torch
import transformers

from literate_transformer import from_hf
from literate_transformer.models.openai_gpt import (
    OpenAIGPTLMHeadModel,
    OpenAIGPTModel,
    check_openai_gpt_config,
)

#: name: OpenAIGPTConfig fields (odd sizes, GPT's own activation names, tied and untied heads).
SHAPES = {
    "5_heads_gelu_tied": dict(vocab_size=61, n_embd=30, n_layer=2, n_head=5, n_positions=20, afn="gelu"),
    "3_heads_relu_untied": dict(
        vocab_size=47, n_embd=18, n_layer=1, n_head=3, n_positions=14, afn="relu", tie_word_embeddings=False
    ),
}


models = families.hf_and_ours_fixture(transformers.OpenAIGPTConfig, transformers.OpenAIGPTLMHeadModel, SHAPES)


def test_from_hf_builds_gpt_under_hfs_names_with_the_head_tied_as_the_config_says(models):
    hf, ours = families.assert_from_hf_builds(models, OpenAIGPTLMHeadModel)
    tied = ours.lm_head.weight is ours.transformer.tokens_embed.weight
    assert tied == hf.config.tie_word_embeddings == (hf.lm_head.weight is hf.transformer.tokens_embed.weight)
    # Post-LN: no final layer norm.
    assert not hasattr(ours.transformer, "ln_f") and ours.transformer.h[0].norm_first is False


class TestGenerationCacheLossAndBadInputs(families.DecoderFamilyTests):
    """GPT's logits, ``generate()`` ids (greedy, sampled, beam), cache, loss and refusals, as every decoder's.

    transformers' GPT keeps no cache; the package's blocks do, and change no number by it.
    """


def test_gpt_without_head_equals_hfs_openai_gpt_model(randomize):
    hf = randomize(transformers.OpenAIGPTModel(transformers.OpenAIGPTConfig(**SHAPES["5_heads_gelu_tied"])))
    ours = from_hf(hf)
    assert type(ours) is OpenAIGPTModel
    input_ids = torch.randint(0, 61, (2, 7))
    with torch.no_grad():
        torch.testing.assert_close(
            ours(input_ids).last_hidden_state, hf(input_ids).last_hidden_state, atol=1e-5, rtol=0
        )


def test_key_map_names_a_missing_tensor_drops_old_buffers_and_refuses_an_untied_head(models):
    hf, ours = models
    state, expected = hf.state_dict(), ours.state_dict()
    families.assert_key_map_names_a_missing_tensor(
        OpenAIGPTLMHeadModel.map_hf_state_dict, state, expected, "transformer.h.0.mlp.c_fc.bias"
    )
    old = dict(state, **{"transformer.h.0.attn.bias": torch.ones(1, 1, 4, 4)})
    assert sorted(OpenAIGPTLMHeadModel.map_hf_state_dict(old, expected, hf.config.tie_word_embeddings)) == sorted(
        expected
    )
    if hf.config.tie_word_embeddings:
        families.assert_key_map_refuses_a_changed_copy(
            functools.partial(OpenAIGPTLMHeadModel.map_hf_state_dict, tied=True),
            state,
            expected,
            "lm_head.weight",
            "not tied",
        )


def test_unsupported_gpt_configs_are_refused_naming_the_field():
    with pytest.raises(TypeError, match="OpenAIGPTConfig"):
        check_openai_gpt_config(transformers.GPT2Config())
    with pytest.raises(ValueError, match="OpenAIGPTConfig.afn='tanh' is not supported"):
        check_openai_gpt_config(transformers.OpenAIGPTConfig(afn="tanh"))
    with pytest.raises(ValueError, match=r"n_embd \(30\) must be divisible by n_head \(4\)"):
        check_openai_gpt_config(transformers.OpenAIGPTConfig(n_embd=30, n_head=4))
