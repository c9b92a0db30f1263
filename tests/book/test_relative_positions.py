"""T5's bucketed relative attention bias, written out line by line, equals transformers' T5Attention.

Buckets: exactly equal (integers) to ``T5Attention._relative_position_bucket``,
for encoder (bidirectional) and decoder (causal) attention, several bucket
counts and distances, and distances far beyond ``max_distance`` in both
directions.  Bias: exactly equal (the same table rows) to
``T5Attention.compute_bias``, including a decoder's cached step
(``past_length``).
"""

from __future__ import annotations

import pytest
import torch
import transformers
from shapes import T5
from transformers.models.t5.modeling_t5 import T5Attention

from literate_transformer.book.attention import MultiHeadAttention
from literate_transformer.core.kernels import scaled_dot_product_attention
from literate_transformer.parts.positions import RelativePositionBias, relative_position_bucket

DISTANCES = torch.arange(-300, 301)


@pytest.mark.parametrize("bidirectional", [True, False], ids=["encoder", "decoder"])
@pytest.mark.parametrize(("num_buckets", "max_distance"), [(32, 128), (8, 20), (10, 64)])
def test_buckets_equal_t5s(bidirectional, num_buckets, max_distance):
    expected = T5Attention._relative_position_bucket(DISTANCES, bidirectional, num_buckets, max_distance)
    actual = relative_position_bucket(DISTANCES, bidirectional, num_buckets, max_distance)
    assert torch.equal(actual, expected)
    assert actual.min() == 0 and actual.max() == num_buckets - 1


def test_buckets_are_exact_near_the_query_and_shared_far_from_it():
    buckets = relative_position_bucket(DISTANCES)  # T5's 32 buckets, max_distance 128, bidirectional
    zero = 300
    # Distances 0..7 after the query have a bucket each; keys before it use the other half, 0..15.
    assert buckets[zero : zero + 8].tolist() == [0] + list(range(17, 24))
    assert buckets[zero - 7 : zero + 1].flip(0).tolist() == list(range(8))
    # From max_distance on, every distance shares the last bucket of its side.
    assert set(buckets[zero + 128 :].tolist()) == {31} and set(buckets[: zero - 127].tolist()) == {15}


@pytest.mark.parametrize("is_decoder", [False, True], ids=["encoder", "decoder"])
def test_bias_equals_t5_compute_bias(is_decoder, hf_api):
    config = transformers.T5Config(**T5("3_heads_of_8", is_decoder=is_decoder))
    theirs = hf_api.t5_attention_with_bias(config)
    ours = RelativePositionBias(num_heads=3, num_buckets=12, max_distance=40, bidirectional=not is_decoder)
    with torch.no_grad():
        theirs.relative_attention_bias.weight.normal_()
        ours.relative_attention_bias.weight.copy_(theirs.relative_attention_bias.weight)
        for query_length, key_length, past in ((5, 9, 0), (1, 50, 49), (45, 45, 0)):
            # A cached step's rows are the last rows of the bias over every position (how every version slices it).
            expected = theirs.compute_bias(past + query_length, key_length)[:, :, past:]
            actual = ours(query_length, key_length, past_length=past)
            assert actual.shape == (1, 3, query_length, key_length)
            assert torch.equal(actual, expected)


@torch.no_grad()
def test_the_bias_enters_attention_as_an_additive_mask(tiny_config):
    attention = MultiHeadAttention(tiny_config()).eval()
    bias = RelativePositionBias(num_heads=attention.num_heads, num_buckets=8, max_distance=16)
    torch.nn.init.normal_(bias.relative_attention_bias.weight)
    hidden_states = torch.randn(2, 5, attention.hidden_size)
    probs = attention(hidden_states, attention_mask=bias(5, 5), output_attentions=True).attention_probs
    query = torch.stack([head.q(hidden_states) for head in attention.heads], dim=1)
    key = torch.stack([head.k(hidden_states) for head in attention.heads], dim=1)
    scores = query @ key.transpose(-2, -1) / attention.head_size**0.5
    torch.testing.assert_close(probs, torch.softmax(scores + bias(5, 5), dim=-1), atol=1e-6, rtol=0)
    _, unbiased = scaled_dot_product_attention(query, key, key)
    assert (probs - unbiased).abs().max() > 1e-2


def test_bad_lengths_are_refused():
    bias = RelativePositionBias(num_heads=2)
    with pytest.raises(ValueError, match="query_length must be a positive int"):
        bias(0, 3)
    with pytest.raises(ValueError, match="past_length must be a non-negative int"):
        bias(1, 3, past_length=-1)
