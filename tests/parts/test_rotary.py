"""Rotary position embeddings: equal to transformers' (Llama's and GPT-J's), and a relative position method.

Tolerance: fp32, absolute 1e-5 (1e-6 on the angles' cosines and sines).
"""

from __future__ import annotations

import pytest
import torch
import transformers

from literate_transformer.parts.rotary import (
    RotaryEmbedding,
    apply_rotary,
    inverse_frequencies,
    llama3_inverse_frequencies,
    rotate_every_two,
    rotate_half,
    rotate_queries_and_keys,
)

POSITIONS = torch.tensor([[0, 1, 2, 5, 9, 17], [3, 0, 1, 2, 3, 4]])


def test_llamas_cos_and_sin_equal_transformers_rotary_embedding():
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = transformers.LlamaConfig(hidden_size=48, num_attention_heads=4, max_position_embeddings=32)
    try:
        theirs = LlamaRotaryEmbedding(config=config)
    except TypeError:  # transformers 4.41 builds it from its sizes
        theirs = LlamaRotaryEmbedding(12, max_position_embeddings=32)
    expected = theirs(torch.zeros(1, dtype=torch.float32), POSITIONS)
    ours = RotaryEmbedding(12, inv_freq=theirs.inv_freq)(POSITIONS)
    assert torch.equal(theirs.inv_freq, inverse_frequencies(12, 10000.0))
    for mine, hf in zip(ours, expected, strict=True):
        torch.testing.assert_close(mine, hf, atol=1e-6, rtol=0)


def test_llama3s_frequencies_equal_transformers():
    rope_utils = pytest.importorskip("transformers.modeling_rope_utils")
    if "llama3" not in rope_utils.ROPE_INIT_FUNCTIONS:
        pytest.skip(f"transformers {transformers.__version__} has no llama3 rotary scaling")
    scaling = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    config = transformers.LlamaConfig(
        hidden_size=256,
        num_attention_heads=4,
        max_position_embeddings=512,
        rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", **scaling},
    )
    expected, _ = rope_utils.ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
    ours = llama3_inverse_frequencies(inverse_frequencies(64, 500000.0), **scaling)
    torch.testing.assert_close(ours, expected, atol=0, rtol=1e-6)
    # Not vacuous: the slow frequencies were divided by the factor, the fast ones kept.
    plain = inverse_frequencies(64, 500000.0)
    assert ours[-1] == pytest.approx(plain[-1].item() / 8.0) and ours[0] == plain[0]


def test_gptjs_interleaved_angles_and_rotation_equal_transformers():
    from transformers.models.gptj import modeling_gptj

    rotary_dim = 8
    table = modeling_gptj.create_sinusoidal_positions(32, rotary_dim)  # (positions, R): sines then cosines
    sin, cos = table[POSITIONS].split(rotary_dim // 2, dim=-1)
    x = torch.randn(2, 6, 3, rotary_dim)  # GPT-J rotates (B, T, H, R)
    expected = modeling_gptj.apply_rotary_pos_emb(x, sin, cos)
    ours_cos, ours_sin = RotaryEmbedding(rotary_dim, interleaved=True)(POSITIONS)
    actual = apply_rotary(x, ours_cos[:, :, None], ours_sin[:, :, None], interleaved=True)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=0)


def test_llamas_halves_rotation_equals_transformers():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    query, key = torch.randn(2, 3, 6, 12), torch.randn(2, 1, 6, 12)  # (B, H, T, D), (B, K, T, D)
    cos, sin = RotaryEmbedding(12)(POSITIONS)
    expected = apply_rotary_pos_emb(query, key, cos, sin)
    actual = rotate_queries_and_keys(query, key, (cos, sin))
    for mine, hf in zip(actual, expected, strict=True):
        torch.testing.assert_close(mine, hf, atol=1e-5, rtol=0)


@pytest.mark.parametrize("interleaved", [False, True], ids=["halves", "interleaved"])
def test_a_score_depends_only_on_the_offset_between_query_and_key(interleaved):
    torch.manual_seed(0)
    rotary = RotaryEmbedding(16, interleaved=interleaved)
    query, key = torch.randn(16), torch.randn(16)

    def score(m: int, n: int) -> torch.Tensor:
        cos, sin = rotary(torch.tensor([[m, n]]))
        turned_query = apply_rotary(query, cos[0, 0], sin[0, 0], interleaved)
        turned_key = apply_rotary(key, cos[0, 1], sin[0, 1], interleaved)
        return turned_query @ turned_key

    for m, n in ((5, 2), (2, 5), (7, 7)):
        for shift in (1, 10, 100):
            torch.testing.assert_close(score(m + shift, n + shift), score(m, n), atol=1e-5, rtol=0)
    # Not vacuous: another offset gives another score.
    assert (score(5, 2) - score(5, 3)).abs() > 1e-3


def test_the_two_pairings_are_one_rotation_of_permuted_features():
    torch.manual_seed(0)
    x = torch.randn(4, 10)
    # Evens first, then odds: neighbours (2i, 2i + 1) become (i, i + R/2).
    permutation = torch.cat([torch.arange(0, 10, 2), torch.arange(1, 10, 2)])
    cos, sin = RotaryEmbedding(10)(torch.arange(4)[None])
    cos_pairs, sin_pairs = RotaryEmbedding(10, interleaved=True)(torch.arange(4)[None])
    halves = apply_rotary(x[:, permutation], cos[0], sin[0])
    neighbours = apply_rotary(x, cos_pairs[0], sin_pairs[0], interleaved=True)
    torch.testing.assert_close(halves, neighbours[:, permutation], atol=1e-6, rtol=0)
    assert torch.equal(rotate_half(x[:, permutation]), rotate_every_two(x)[:, permutation])


def test_a_rotation_keeps_lengths_and_the_unrotated_features_pass_unchanged():
    query, key = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    cos, sin = RotaryEmbedding(4, interleaved=True)(torch.arange(5)[None])
    turned_query, turned_key = rotate_queries_and_keys(query, key, (cos, sin), interleaved=True)
    assert torch.equal(turned_query[..., 4:], query[..., 4:]) and torch.equal(turned_key[..., 4:], key[..., 4:])
    pair_lengths = query[..., :4].unflatten(-1, (2, 2)).norm(dim=-1)
    torch.testing.assert_close(turned_query[..., :4].unflatten(-1, (2, 2)).norm(dim=-1), pair_lengths)
    assert not torch.allclose(turned_query[..., :4], query[..., :4])


def test_an_odd_number_of_rotated_features_is_refused():
    with pytest.raises(ValueError, match="dim must be even"):
        inverse_frequencies(5)
