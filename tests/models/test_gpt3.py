"""GPT-3: GPT-2 with banded layers.  transformers has no GPT-3; what it computes is proved from what it changes.

* With a band as wide as the context, GPT-3 *is* GPT-2: loaded with a
  ``transformers`` GPT-2's weights (the same names), it gives that model's
  logits within 1e-5 in float32 and the ids of its ``generate()``.
* A banded layer's query sees exactly the last ``window_size`` keys (its
  probabilities are 0 elsewhere, and > 0 there), and the band is the
  local mask of ``transformers``' GPT-Neo.
* A model of banded layers only cannot see farther back than its layers
  reach: a token changed beyond that leaves the later positions' logits
  unchanged, and one changed within it does not.
* Table 2.1's parameter counts, built on the meta device.
"""

from __future__ import annotations

import pytest
import torch
import transformers
from families import SEED, assert_cache_changes_nothing, right_padded_batch

from literate_transformer.core.masks import causal_mask
from literate_transformer.models.gpt3 import (
    TABLE_2_1,
    GPT3Config,
    GPT3LMHeadModel,
    check_gpt3_config,
    table_2_1_config,
)

SIZES = dict(
    vocab_size=61, n_embd=30, n_layer=2, n_head=5, n_positions=20, bos_token_id=1, eos_token_id=2, pad_token_id=0
)


@pytest.fixture(scope="module")
def gpt2_and_wide_gpt3(randomize):
    """A random transformers GPT-2, and a GPT-3 with its weights whose band covers the whole context."""
    torch.manual_seed(0)
    hf = randomize(transformers.GPT2LMHeadModel(transformers.GPT2Config(**SIZES, attn_implementation="eager")))
    gpt3 = GPT3LMHeadModel(GPT3Config(**SIZES, window_size=SIZES["n_positions"])).eval()
    gpt3.load_state_dict(hf.state_dict())
    return hf, gpt3


@torch.no_grad()
def test_a_band_as_wide_as_the_context_makes_gpt3_equal_hfs_gpt2(gpt2_and_wide_gpt3):
    hf, gpt3 = gpt2_and_wide_gpt3
    assert [block.attention_type for block in gpt3.transformer.h] == ["global", "local"]
    input_ids, attention_mask = right_padded_batch(SIZES["vocab_size"])
    real = attention_mask.bool()
    expected = hf(input_ids, attention_mask=attention_mask).logits
    actual = gpt3(input_ids, attention_mask=attention_mask).logits
    torch.testing.assert_close(actual[real], expected[real], atol=1e-5, rtol=0)
    prompt = input_ids[:, :5].flip(1)
    mask = attention_mask[:, :5].flip(1)
    for options in ({}, {"num_beams": 3}):
        torch.manual_seed(SEED)
        ids = gpt3.generate(prompt, mask, 6, **options)
        assert torch.equal(ids, hf.generate(prompt, attention_mask=mask, max_new_tokens=6, do_sample=False, **options))


@torch.no_grad()
def test_a_banded_layer_attends_to_exactly_the_last_window_size_keys():
    window = 3
    gpt3 = GPT3LMHeadModel(GPT3Config(**SIZES, window_size=window)).eval()
    probabilities = gpt3(torch.randint(3, 61, (1, 9)), output_attentions=True).attentions
    band = causal_mask(9, window=window)
    assert torch.equal(probabilities[1][0] > 0, band.expand(SIZES["n_head"], 9, 9))  # the local layer
    assert torch.equal(probabilities[0][0] > 0, causal_mask(9).expand(SIZES["n_head"], 9, 9))  # the dense one
    # The band is transformers' own local mask (GPT-Neo's local layers).
    neo = transformers.GPTNeoConfig(
        hidden_size=8,
        num_heads=2,
        num_layers=1,
        attention_types=[[["local"], 1]],
        window_size=window,
        max_position_embeddings=9,
    )
    from transformers.models.gpt_neo.modeling_gpt_neo import GPTNeoSelfAttention

    assert torch.equal(GPTNeoSelfAttention(neo, "local").bias[0, 0], band)


@torch.no_grad()
def test_a_banded_model_cannot_see_beyond_the_reach_of_its_layers():
    # Two banded layers of window 3: position i sees i - 2 directly, and i - 4 through the layer below.
    gpt3 = GPT3LMHeadModel(GPT3Config(**SIZES, window_size=3, attention_layers=["local", "local"])).eval()
    input_ids = torch.randint(3, 61, (1, 10))
    changed = input_ids.clone()
    changed[0, 2] = 3 if input_ids[0, 2] != 3 else 4
    difference = (gpt3(changed).logits - gpt3(input_ids).logits).abs().amax(dim=-1)[0]
    assert (difference[2:7] > 0).all()  # within reach: positions 2 .. 6
    assert difference[7:].max() == 0  # beyond it: not one bit changes


def test_cached_decoding_equals_uncached_decoding():
    torch.manual_seed(0)
    assert_cache_changes_nothing(GPT3LMHeadModel(GPT3Config(**SIZES, window_size=2)).eval())


def test_table_2_1_counts_on_the_meta_device_and_heads_do_not_change_them():
    def count(config):
        with torch.device("meta"):
            model = GPT3LMHeadModel(config)
        return sum(p.numel() for p in model.parameters())

    # V E + P E (the tables) + L (12 E^2 + 13 E) (the blocks) + 2 E (ln_f), with V = 50257 and P = 2048.
    layers, width = TABLE_2_1["GPT-3 Small"][1:3]
    expected = (50257 + 2048) * width + layers * (12 * width**2 + 13 * width) + 2 * width
    assert count(table_2_1_config("GPT-3 Small")) == expected == 125_226_240
    assert count(table_2_1_config("GPT-3 Small", n_head=1)) == expected


def test_attention_layers_that_do_not_fit_the_model_are_refused():
    with pytest.raises(ValueError, match=r"GPT3Config.attention_layers must give each of the 2 layers"):
        check_gpt3_config(GPT3Config(n_layer=2, attention_layers=["global"]))
    with pytest.raises(ValueError, match=r"GPT3Config.attention_layers must give each of the 2 layers"):
        check_gpt3_config(GPT3Config(n_layer=2, attention_layers=["global", "sparse"]))
    with pytest.raises(ValueError, match="GPT3Config.window_size must be a positive int"):
        check_gpt3_config(GPT3Config(n_layer=2, window_size=0))
    with pytest.raises(TypeError, match="GPT2Config"):
        check_gpt3_config(transformers.GPT2Config())
