"""Gemma 2, Llama with local and global layers, soft-capped scores and four norms a layer, equals transformers'.

Random Gemma 2s: grouped and ungrouped key/value heads, head sizes other
than E/H, a query scale other than the head size, windows shorter than the
test's sequences (so that the local layers differ from the global ones),
both soft-caps small enough to bend the scores and the logits, tied and
untied heads, biased projections, and another activation than the tanh
GELU.  Tolerances as for every family of the branch (``tests/families.py``).
"""

from __future__ import annotations

import copy
import types

import pytest

pytest.importorskip(
    "transformers.models.gemma2", reason="this transformers has no Gemma 2 (added in 4.42): nothing to compare with"
)

import families  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from shapes import LLAMA_GROUPED, LLAMA_HEAD_OF_10  # noqa: E402

from literate_transformer.core.kernels import scaled_dot_product_attention  # noqa: E402
from literate_transformer.core.masks import causal_mask, to_additive  # noqa: E402
from literate_transformer.models.gemma2 import Gemma2ForCausalLM, Gemma2RMSNorm, check_gemma2_config  # noqa: E402

#: Soft-caps small enough to matter for random weights: the scores and logits of these models reach past them.
CAPS = dict(attn_logit_softcapping=2.0, final_logit_softcapping=3.0)

#: name: Gemma2Config fields.
SHAPES = {
    "4_heads_2_kv_heads_of_6_window_3_tied": dict(
        LLAMA_GROUPED, num_hidden_layers=3, head_dim=6, sliding_window=3, query_pre_attn_scalar=10, **CAPS
    ),
    "3_heads_of_10_global_first_window_2_untied": dict(
        LLAMA_HEAD_OF_10,
        num_hidden_layers=2,
        num_attention_heads=3,
        num_key_value_heads=3,
        layer_types=["full_attention", "sliding_attention"],
        sliding_window=2,
        query_pre_attn_scalar=7,
        attention_bias=True,
        hidden_activation="gelu",
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        **CAPS,
    ),
}


models = families.hf_and_ours_fixture(transformers.Gemma2Config, transformers.Gemma2ForCausalLM, SHAPES)


def test_from_hf_builds_gemma2_under_hfs_names(models):
    _, ours = families.assert_from_hf_builds(models, Gemma2ForCausalLM)
    layer = ours.model.layers[0]
    norms = [name for name, module in layer.named_children() if isinstance(module, Gemma2RMSNorm)]
    assert norms == [
        "input_layernorm",
        "post_attention_layernorm",
        "pre_feedforward_layernorm",
        "post_feedforward_layernorm",
    ]
    assert isinstance(ours.model.norm, Gemma2RMSNorm)


class TestGenerationCacheLossAndBadInputs(families.DecoderFamilyTests):
    """Gemma 2's logits, ``generate()`` ids (greedy, sampled, beam), cache, loss and refusals, as every decoder's."""


@torch.no_grad()
def test_attention_and_hidden_states_equal_hfs_in_every_layer(models):
    # Each layer's probabilities (local ones banded) and output, at the real positions of a padded batch.
    hf, ours = models
    input_ids, attention_mask = families.right_padded_batch(hf.config.vocab_size)
    families.assert_encoder_equals_hf(hf.model, ours.model, input_ids, attention_mask, families.ATOL, padded_rows=False)


@torch.no_grad()
def test_local_layers_attend_within_the_window_and_global_ones_do_not(models):
    hf, ours = models
    probabilities = ours(torch.randint(3, hf.config.vocab_size, (1, 8)), output_attentions=True).attentions
    band = causal_mask(8, window=hf.config.sliding_window)
    kinds = [torch.equal(layer[0, 0] > 0, band) for layer in probabilities]
    assert kinds == [kind == "sliding_attention" for kind in hf.config.layer_types]
    assert not all(kinds)


def _logits_change(ours, change) -> float:
    """The largest change of the logits of a sequence longer than the windows when ``change`` edits a copy."""
    input_ids = torch.arange(3, 11)[None]
    changed = copy.deepcopy(ours)
    with torch.no_grad():
        change(changed)
        return (changed(input_ids).logits - ours(input_ids).logits).abs().max().item()


# Not vacuous: each of Gemma 2's differences changes these models' logits, so the comparisons above prove each.
@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda m: setattr(m.config, "sliding_window", 100), id="no_band"),
        pytest.param(lambda m: [setattr(layer.self_attn, "softcap", None) for layer in m.model.layers], id="no_cap"),
        pytest.param(lambda m: setattr(m.config, "final_logit_softcapping", None), id="no_final_cap"),
        pytest.param(lambda m: [setattr(layer.self_attn, "scale", None) for layer in m.model.layers], id="1/sqrt(D)"),
        pytest.param(
            lambda m: [layer.post_feedforward_layernorm.weight.zero_() for layer in m.model.layers], id="post_norm"
        ),
    ],
)
def test_each_of_gemma2s_differences_changes_the_logits(models, change):
    _, ours = models
    assert _logits_change(ours, change) > 1e-3


def test_the_caps_bound_the_scores_and_the_logits(models):
    hf, ours = models
    with torch.no_grad():
        output = ours(torch.arange(3, 11)[None], output_attentions=True)
        uncapped = copy.deepcopy(ours)
        uncapped.config.final_logit_softcapping = None
        logits = uncapped(torch.arange(3, 11)[None]).logits
    assert output.logits.abs().max() <= hf.config.final_logit_softcapping < logits.abs().max()


@torch.no_grad()
def test_the_capped_attention_runs_the_eager_code_under_sdpa(models):
    # The fused kernel has no cap: a model that asks for it gets the eager code, and the same logits.
    _, ours = models
    fused = copy.deepcopy(ours)
    fused.config._attn_implementation = "sdpa"
    input_ids = torch.arange(3, 11)[None]
    torch.testing.assert_close(fused(input_ids).logits, ours(input_ids).logits, atol=0, rtol=0)


@torch.no_grad()
def test_the_kernels_cap_is_transformers_gemma2_eager_attention():
    # The one step core.kernels gained for Gemma 2, against transformers' own function, large scores included.
    gemma2_code = pytest.importorskip("transformers.models.gemma2.modeling_gemma2")
    if not hasattr(gemma2_code, "eager_attention_forward"):
        pytest.skip(f"transformers {transformers.__version__}'s Gemma 2 has no eager_attention_forward")
    query, key, value = (
        4 * torch.randn(2, 3, 5, 6, generator=torch.Generator().manual_seed(seed)) for seed in range(3)
    )
    mask = to_additive(causal_mask(5, window=2))[None, None]
    module = types.SimpleNamespace(num_key_value_groups=1, training=False)
    expected, expected_probs = gemma2_code.eager_attention_forward(
        module, query, key, value, mask, scaling=0.3, softcap=2.0
    )
    context, probs = scaled_dot_product_attention(query, key, value, mask, scale=0.3, softcap=2.0)
    torch.testing.assert_close(context.transpose(1, 2), expected, atol=families.ATOL, rtol=0)
    torch.testing.assert_close(probs, expected_probs, atol=families.ATOL, rtol=0)
    # Not vacuous: uncapped, the probabilities are others.
    assert (scaled_dot_product_attention(query, key, value, mask, scale=0.3)[1] - probs).abs().max() > 1e-2
    with pytest.raises(ValueError, match="softcap must be positive"):
        scaled_dot_product_attention(query, key, value, mask, softcap=0.0)


def test_the_norm_multiplies_by_one_plus_its_weight_in_float32():
    norm = Gemma2RMSNorm(4, eps=0.0)
    hidden_states = torch.tensor([[1.0, 2.0, 3.0, 6.0]], dtype=torch.bfloat16)
    with torch.no_grad():
        norm.weight.fill_(0.5)
    expected = (hidden_states.float() / hidden_states.float().pow(2).mean().sqrt() * 1.5).to(torch.bfloat16)
    assert norm(hidden_states).dtype == torch.bfloat16
    torch.testing.assert_close(norm(hidden_states), expected, atol=0, rtol=0)


def _config(**fields) -> transformers.Gemma2Config:
    return transformers.Gemma2Config(**{**LLAMA_GROUPED, "head_dim": 8, **fields})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"use_bidirectional_attention": True}, "Gemma2Config.use_bidirectional_attention=True is not supported"),
        ({"sliding_window": 0}, "Gemma2Config.sliding_window must be a positive int"),
        ({"hidden_activation": "quick_gelu"}, "Gemma2Config.hidden_activation='quick_gelu' is not supported"),
        ({"attn_logit_softcapping": 0.0}, "Gemma2Config.attn_logit_softcapping=0.0 must be a positive number"),
        ({"query_pre_attn_scalar": 0}, "Gemma2Config.query_pre_attn_scalar=0 must be a positive number"),
        ({"num_key_value_heads": 3}, "num_attention_heads \\(4\\) must be divisible by num_key_value_heads \\(3\\)"),
    ],
)
def test_what_is_not_built_is_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        check_gemma2_config(_config(**fields))


def test_layer_types_of_another_kind_or_count_are_refused_and_other_configs_too():
    config = _config()
    for layer_types in (["banded", "full_attention"], ["full_attention"]):
        config.layer_types = layer_types  # transformers 5 checks them when a config is made, not when changed
        with pytest.raises(ValueError, match="Gemma2Config.layer_types=.* must name one of .* for each layer"):
            check_gemma2_config(config)
    with pytest.raises(TypeError, match="config must be a transformers Gemma2Config, got LlamaConfig"):
        check_gemma2_config(transformers.LlamaConfig())
    # Without a local layer, no window is needed.
    check_gemma2_config(_config(layer_types=["full_attention"] * 2, sliding_window=None))
