"""Mistral, Llama with a sliding window in every layer, equals transformers.MistralForCausalLM.

Random Mistrals whose windows are shorter than the test's sequences (so
that the band hides keys), and one without a window; grouped-query and
multi-query attention.  Tolerances as for every family of the branch
(``tests/families.py``).  Rows with a head size other than E/H skip where
``transformers`` has no ``head_dim`` (4.41), saying so.
"""

from __future__ import annotations

import families
import pytest
import torch
import transformers
from shapes import LLAMA_GROUPED, LLAMA_HEAD_OF_10

from literate_transformer.core.masks import causal_mask
from literate_transformer.models.mistral import MistralForCausalLM, check_mistral_config

HAS_HEAD_DIM = getattr(transformers.MistralConfig(), "head_dim", None) is not None


def _hf_eager_mistral_band() -> torch.Tensor:
    """Which keys transformers' eager Mistral lets each of 6 queries see with ``sliding_window=2``."""
    sizes = dict(LLAMA_GROUPED, num_hidden_layers=1)  # any small Mistral: one layer's first head is read
    config = transformers.MistralConfig(**sizes, sliding_window=2, attn_implementation="eager")
    with torch.no_grad():
        probabilities = transformers.MistralForCausalLM(config).eval()(torch.arange(1, 7)[None], output_attentions=True)
    return probabilities.attentions[0][0, 0] > 0


#: transformers 5 counts the window as the package does (the query's own key and window - 1 before it); 4.41's
#: eager attention lets one more key through.
HF_COUNTS_THE_WINDOW_AS_WE_DO = torch.equal(_hf_eager_mistral_band(), causal_mask(6, window=2))

#: name: MistralConfig fields.
SHAPES = {
    "4_heads_2_kv_heads_window_3": dict(LLAMA_GROUPED, sliding_window=3),
    "3_heads_1_kv_head_of_10_no_window_tied": dict(
        LLAMA_HEAD_OF_10, num_attention_heads=3, num_key_value_heads=1, sliding_window=None, tie_word_embeddings=True
    ),
}
NEEDS = {
    "3_heads_1_kv_head_of_10_no_window_tied": pytest.mark.skipif(
        not HAS_HEAD_DIM, reason=f"transformers {transformers.__version__}'s MistralConfig has no head_dim"
    ),
    "4_heads_2_kv_heads_window_3": pytest.mark.skipif(
        not HF_COUNTS_THE_WINDOW_AS_WE_DO,
        reason=f"transformers {transformers.__version__}'s eager Mistral counts sliding_window otherwise than "
        "transformers 5 and the package (one more key)",
    ),
}


models = families.hf_and_ours_fixture(transformers.MistralConfig, transformers.MistralForCausalLM, SHAPES, NEEDS)


def test_from_hf_builds_mistral_under_hfs_names(models):
    _, ours = families.assert_from_hf_builds(models, MistralForCausalLM)
    assert all(layer.bias is None for layer in ours.modules() if isinstance(layer, torch.nn.Linear))


class TestGenerationCacheLossAndBadInputs(families.DecoderFamilyTests):
    """Mistral's logits, ``generate()`` ids (greedy, sampled, beam), cache, loss and refusals, as every decoder's."""


@torch.no_grad()
def test_every_layer_attends_within_the_window(models):
    hf, ours = models
    window = hf.config.sliding_window
    probabilities = ours(torch.randint(3, hf.config.vocab_size, (1, 8)), output_attentions=True).attentions
    for layer in probabilities:
        assert torch.equal(layer[0, 0] > 0, causal_mask(8, window=window))


def test_a_window_that_is_not_a_positive_int_is_refused():
    with pytest.raises(ValueError, match="MistralConfig.sliding_window must be a positive int"):
        check_mistral_config(transformers.MistralConfig(sliding_window=0))
