"""The online softmax over key tiles equals PyTorch's attention; the memory counts equal real tensors' sizes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from literate_transformer.core.kernels import fused_attention
from literate_transformer.core.masks import build_attention_mask
from literate_transformer.fast.flash import attention_scores_bytes, flash_attention, kv_cache_bytes

ATOL = 1e-6
B, H, T, S, D = 2, 3, 7, 11, 8


@pytest.fixture
def qkv():
    return torch.randn(B, H, T, D), torch.randn(B, H, S, D), torch.randn(B, H, S, D)


@pytest.mark.parametrize("block_size", [1, 4, 11, 64])
def test_tiles_of_any_size_equal_pytorchs_attention(qkv, block_size):
    query, key, value = qkv
    expected = F.scaled_dot_product_attention(query, key, value)
    torch.testing.assert_close(flash_attention(query, key, value, block_size=block_size), expected, atol=ATOL, rtol=0)


def test_a_padding_mask_and_a_causal_mask_are_applied_as_pytorch_applies_them():
    query = key = value = torch.randn(B, H, S, D)
    attention_mask = torch.ones(B, S, dtype=torch.long)
    attention_mask[1, 6:] = 0
    for causal in (False, True):
        boolean = build_attention_mask(attention_mask, query_length=S, causal=causal)
        expected = F.scaled_dot_product_attention(query, key, value, attn_mask=boolean)
        additive = build_attention_mask(attention_mask, query_length=S, causal=causal, dtype=torch.float32)
        for mask in (boolean, additive):
            actual = flash_attention(query, key, value, mask, block_size=4)
            torch.testing.assert_close(actual, expected, atol=ATOL, rtol=0)


def test_a_row_with_every_key_hidden_is_finite_and_uniform_as_on_the_packages_paths(qkv):
    query, key, value = qkv
    mask = torch.rand(B, 1, T, S) > 0.5
    mask[0, 0, 2] = False  # one query sees no key at all
    actual = flash_attention(query, key, value, mask, block_size=3)
    assert torch.isfinite(actual).all()
    torch.testing.assert_close(actual, fused_attention(query, key, value, mask), atol=ATOL, rtol=0)
    torch.testing.assert_close(actual[0, :, 2], value[0].mean(dim=1), atol=ATOL, rtol=0)


def test_bad_input_is_refused_by_name(qkv):
    query, key, value = qkv
    with pytest.raises(ValueError, match="block_size"):
        flash_attention(query, key, value, block_size=0)
    with pytest.raises(ValueError, match="must agree"):
        flash_attention(query, key[..., :4], value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_scores_bytes_are_those_of_the_scores_tensor(qkv, dtype):
    query, key, _ = (tensor.to(dtype) for tensor in qkv)
    scores = query @ key.transpose(-2, -1)
    assert attention_scores_bytes(B, H, T, S, dtype) == scores.numel() * scores.element_size()


@pytest.mark.parametrize("kv_heads", [12, 4, 1], ids=["multi-head", "grouped-query", "multi-query"])
def test_the_cache_bytes_are_those_of_a_key_and_a_value_tensor_per_layer(kv_heads):
    layers, batch_size, length, head_dim = 3, 2, 10, 16
    cache = [torch.zeros(batch_size, kv_heads, length, head_dim, dtype=torch.float16) for _ in range(2 * layers)]
    real = sum(tensor.numel() * tensor.element_size() for tensor in cache)
    assert kv_cache_bytes(layers, kv_heads, head_dim, length, batch_size, torch.float16) == real
