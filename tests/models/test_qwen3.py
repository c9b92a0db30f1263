"""Qwen3, Llama with RMS-normalised queries and keys, equals transformers.Qwen3ForCausalLM.

Random Qwen3s: grouped and ungrouped key/value heads, head sizes other
than E/H, biased projections, tied and untied heads.  Tolerances as for
every family of the branch (``tests/families.py``).
"""

from __future__ import annotations

import pytest

pytest.importorskip(
    "transformers.models.qwen3", reason="this transformers has no Qwen3 (added in 4.51): nothing to compare with"
)

import families  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from shapes import LLAMA_GROUPED, LLAMA_HEAD_OF_10  # noqa: E402

from literate_transformer.models.qwen3 import Qwen3ForCausalLM, check_qwen3_config  # noqa: E402

#: name: Qwen3Config fields.
SHAPES = {
    "4_heads_2_kv_heads_of_6_tied": dict(LLAMA_GROUPED, head_dim=6, tie_word_embeddings=True),
    "3_heads_of_10_biases_untied": dict(
        LLAMA_HEAD_OF_10, num_attention_heads=3, num_key_value_heads=3, attention_bias=True, rms_norm_eps=1e-5
    ),
}


models = families.hf_and_ours_fixture(transformers.Qwen3Config, transformers.Qwen3ForCausalLM, SHAPES)


def test_from_hf_builds_qwen3_under_hfs_names(models):
    hf, ours = families.assert_from_hf_builds(models, Qwen3ForCausalLM)
    attention = ours.model.layers[0].self_attn
    assert attention.q_norm.weight.shape == attention.k_norm.weight.shape == (hf.config.head_dim,)


class TestGenerationCacheLossAndBadInputs(families.DecoderFamilyTests):
    """Qwen3's logits, ``generate()`` ids (greedy, sampled, beam), cache, loss and refusals, as every decoder's."""


@torch.no_grad()
def test_the_query_and_key_norms_matter(models):
    # Not vacuous: a Qwen3 whose q_norm and k_norm gains are changed computes other logits.
    _, ours = models
    input_ids = torch.tensor([[3, 4, 5, 6]])
    before = ours(input_ids).logits
    attention = ours.model.layers[0].self_attn
    saved = attention.q_norm.weight.clone()
    attention.q_norm.weight.mul_(2.0)
    try:
        assert (ours(input_ids).logits - before).abs().max() > 1e-3
    finally:
        attention.q_norm.weight.copy_(saved)


def test_sliding_window_layers_are_refused():
    config = transformers.Qwen3Config(use_sliding_window=True, sliding_window=4, max_window_layers=0)
    with pytest.raises(ValueError, match="Qwen3Config.use_sliding_window=True is not supported"):
        check_qwen3_config(config)
    with pytest.raises(TypeError, match="Qwen3Config"):
        check_qwen3_config(transformers.LlamaConfig())
