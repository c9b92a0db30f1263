"""Attention: the from-scratch code equals PyTorch's, in every mode the decoder needs.

Sizes are all distinct (B=2, T=5, S=7, H=4, D=6, E=24) so a transposed
dimension cannot go unnoticed.  fp32 comparisons use a max abs difference of
1e-5.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from literate_transformer.book.attention import (
    AttentionHead,
    AttentionOutput,
    MultiHeadAttention,
    scaled_dot_product_attention,
)
from literate_transformer.core.config import TransformerConfig
from literate_transformer.core.masks import causal_mask, padding_mask, to_additive

ATOL = 1e-5
B, T, S, H, D, E = 2, 5, 7, 4, 6, 24


def make_config(**changes) -> TransformerConfig:
    fields = dict(hidden_size=E, num_attention_heads=H, intermediate_size=40, attention_probs_dropout_prob=0.0)
    fields.update(changes)
    return TransformerConfig(**fields)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def to_torch_multihead_attention(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    """Load our per-head weights into torch's fused layer (q, k, v stacked in in_proj_weight)."""
    reference = nn.MultiheadAttention(ours.hidden_size, ours.num_heads, dropout=0.0, batch_first=True)
    with torch.no_grad():
        weights = [torch.cat([getattr(head, name).weight for head in ours.heads]) for name in "qkv"]
        biases = [torch.cat([getattr(head, name).bias for head in ours.heads]) for name in "qkv"]
        reference.in_proj_weight.copy_(torch.cat(weights))
        reference.in_proj_bias.copy_(torch.cat(biases))
        reference.out_proj.weight.copy_(ours.output_linear.weight)
        reference.out_proj.bias.copy_(ours.output_linear.bias)
    return reference.eval()


@pytest.fixture
def attention() -> MultiHeadAttention:
    return MultiHeadAttention(make_config()).eval()


# ---------------------------------------------------------------------------
# scaled_dot_product_attention
# ---------------------------------------------------------------------------


def test_sdpa_equals_torch_sdpa_without_mask():
    query, key, value = torch.randn(B, H, T, D), torch.randn(B, H, S, D), torch.randn(B, H, S, 3)
    ours = scaled_dot_product_attention(query, key, value)
    assert ours.shape == (B, H, T, 3)
    assert max_diff(ours, F.scaled_dot_product_attention(query, key, value)) <= ATOL


def test_sdpa_equals_torch_sdpa_with_boolean_mask():
    query, key, value = torch.randn(B, H, T, D), torch.randn(B, H, S, D), torch.randn(B, H, S, D)
    mask = torch.rand(B, 1, T, S) > 0.3
    mask[..., 0] = True  # every query sees at least one key (torch returns 0 for a fully masked row)
    ours = scaled_dot_product_attention(query, key, value, mask=mask)
    assert max_diff(ours, F.scaled_dot_product_attention(query, key, value, attn_mask=mask)) <= ATOL


def test_sdpa_additive_mask_equals_boolean_mask():
    query, key, value = torch.randn(B, T, D), torch.randn(B, S, D), torch.randn(B, S, D)
    mask = causal_mask(T, S)
    boolean = scaled_dot_product_attention(query, key, value, mask=mask)
    additive = scaled_dot_product_attention(query, key, value, mask=to_additive(mask))
    assert max_diff(boolean, additive) <= ATOL


def test_sdpa_weights_are_zero_on_masked_keys_and_rows_sum_to_one():
    query, key, value = torch.randn(B, T, D), torch.randn(B, S, D), torch.randn(B, S, D)
    mask = causal_mask(T, S)
    _, weights = scaled_dot_product_attention(query, key, value, mask=mask, return_weights=True)
    assert weights.shape == (B, T, S)
    assert weights.masked_select(~mask.expand(B, T, S)).abs().max().item() == 0.0
    assert max_diff(weights.sum(-1), torch.ones(B, T)) <= ATOL


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_fully_masked_row_gives_no_nan(dtype):
    query, key, value = (torch.randn(B, H, T, D, dtype=dtype) for _ in range(3))
    mask = torch.ones(B, 1, T, T, dtype=torch.bool)
    mask[1] = False  # the second example is all padding: every one of its rows is fully masked
    mask[0, :, 2] = False  # and one query of the first example sees nothing either
    output, weights = scaled_dot_product_attention(query, key, value, mask=mask, return_weights=True)
    assert torch.isfinite(output).all() and torch.isfinite(weights).all()
    # A fully masked row averages uniformly (1/T each) instead of producing 0/0.
    assert torch.allclose(weights[1].float(), torch.full((H, T, T), 1 / T), atol=1e-2)
    # Rows with visible keys are untouched by the fix.
    reference = F.scaled_dot_product_attention(query[:1].float(), key[:1].float(), value[:1].float())
    assert max_diff(output[0, :, :2].float(), reference[0, :, :2]) <= (ATOL if dtype == torch.float32 else 2e-2)


def test_sdpa_dropout_module_acts_on_weights_in_training_only():
    query, key, value = torch.randn(B, T, D), torch.randn(B, S, D), torch.randn(B, S, D)
    dropout = nn.Dropout(0.5)
    plain = scaled_dot_product_attention(query, key, value)
    dropout.eval()
    assert max_diff(scaled_dot_product_attention(query, key, value, dropout=dropout), plain) == 0.0
    dropout.train()
    assert max_diff(scaled_dot_product_attention(query, key, value, dropout=dropout), plain) > 1e-3


def test_sdpa_refuses_query_and_key_of_different_head_size():
    with pytest.raises(ValueError, match=r"query and key must have the same head size"):
        scaled_dot_product_attention(torch.randn(B, T, D), torch.randn(B, S, D + 1), torch.randn(B, S, D))


def test_sdpa_refuses_key_and_value_of_different_length():
    with pytest.raises(ValueError, match=r"key and value must have the same length S"):
        scaled_dot_product_attention(torch.randn(B, T, D), torch.randn(B, S, D), torch.randn(B, S + 1, D))


def test_sdpa_refuses_mismatched_batch_dimensions():
    with pytest.raises(ValueError, match=r"query, key and value must have matching"):
        scaled_dot_product_attention(torch.randn(B, T, D), torch.randn(B + 1, S, D), torch.randn(B + 1, S, D))


def test_sdpa_refuses_non_tensor_query():
    with pytest.raises(TypeError, match=r"query must be a torch.Tensor"):
        scaled_dot_product_attention([[1.0]], torch.randn(B, S, D), torch.randn(B, S, D))


def test_sdpa_refuses_integer_query():
    with pytest.raises(TypeError, match=r"query must have a float dtype"):
        scaled_dot_product_attention(torch.ones(B, T, D, dtype=torch.long), torch.randn(B, S, D), torch.randn(B, S, D))


def test_sdpa_refuses_mask_that_does_not_broadcast_to_scores():
    with pytest.raises(ValueError, match=r"mask must broadcast to the attention scores' shape \(2, 5, 7\)"):
        scaled_dot_product_attention(
            torch.randn(B, T, D), torch.randn(B, S, D), torch.randn(B, S, D), mask=torch.ones(B, T, T).bool()
        )


def test_sdpa_refuses_integer_mask():
    with pytest.raises(TypeError, match=r"mask must have a bool or float dtype"):
        scaled_dot_product_attention(
            torch.randn(B, T, D), torch.randn(B, S, D), torch.randn(B, S, D), mask=torch.ones(T, S, dtype=torch.long)
        )


# ---------------------------------------------------------------------------
# AttentionHead
# ---------------------------------------------------------------------------


def test_attention_head_is_sdpa_of_its_projections():
    head = AttentionHead(E, D)
    hidden, encoder = torch.randn(B, T, E), torch.randn(B, S, E)
    expected = F.scaled_dot_product_attention(head.q(hidden), head.k(encoder), head.v(encoder))
    assert head(hidden, encoder).shape == (B, T, D)
    assert max_diff(head(hidden, encoder), expected) <= ATOL


def test_attention_head_refuses_head_dim_larger_than_embed_dim():
    with pytest.raises(ValueError, match=r"head_dim \(30\) must not exceed embed_dim \(24\)"):
        AttentionHead(E, 30)


def test_attention_head_refuses_hidden_state_of_wrong_width():
    with pytest.raises(ValueError, match=r"hidden_state must have shape \(\*, \*, 24\)"):
        AttentionHead(E, D)(torch.randn(B, T, E + 1))


# ---------------------------------------------------------------------------
# MultiHeadAttention
# ---------------------------------------------------------------------------


def test_multi_head_attention_builds_num_heads_heads_of_head_size(attention):
    # Not one head of size num_heads (a mistake of one of the source notebooks).
    assert len(attention.heads) == H
    assert all(head.q.out_features == head.k.out_features == head.v.out_features == D for head in attention.heads)
    assert attention.output_linear.in_features == attention.output_linear.out_features == E


def test_multi_head_attention_equals_concatenated_heads(attention):
    # The book's formula: Concat(head_1, ..., head_H) W^O, each head called on its own.
    hidden = torch.randn(B, T, E)
    concatenated = torch.cat([head(hidden) for head in attention.heads], dim=-1)
    assert max_diff(attention(hidden), attention.output_linear(concatenated)) <= ATOL


def test_multi_head_attention_equals_torch_multihead_attention_with_key_padding_mask(attention):
    hidden = torch.randn(B, T, E)
    attention_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    real = attention_mask.bool()
    reference = to_torch_multihead_attention(attention)
    # torch's key_padding_mask uses True for "ignore"; ours True for "may attend".
    expected, expected_weights = reference(
        hidden, hidden, hidden, key_padding_mask=~real, need_weights=True, average_attn_weights=False
    )
    output, weights, _ = attention(hidden, mask=padding_mask(attention_mask), return_weights=True)
    assert max_diff(output[real], expected[real]) <= ATOL
    assert max_diff(weights.transpose(1, 2)[real], expected_weights.transpose(1, 2)[real]) <= ATOL


def test_cross_attention_equals_torch_multihead_attention(attention):
    hidden, encoder = torch.randn(B, T, E), torch.randn(B, S, E)
    expected, _ = to_torch_multihead_attention(attention)(hidden, encoder, encoder)
    output = attention(hidden, key_value_states=encoder)
    assert output.shape == (B, T, E)
    assert max_diff(output, expected) <= ATOL


def test_cross_attention_weights_have_source_length(attention):
    result = attention(torch.randn(B, T, E), key_value_states=torch.randn(B, S, E), return_weights=True)
    assert result.weights.shape == (B, H, T, S)


def test_incremental_decoding_with_past_key_value_equals_full_causal_attention(attention):
    hidden = torch.randn(B, T, E)
    full = attention(hidden, mask=causal_mask(T))
    # The first three positions at once, then one position at a time.
    first = attention(hidden[:, :3], mask=causal_mask(3), use_cache=True)
    outputs, cache = [first.output], first.key_value
    for position in range(3, T):
        step = attention(
            hidden[:, position : position + 1],
            mask=causal_mask(1, position + 1),
            past_key_value=cache,
            use_cache=True,
        )
        outputs.append(step.output)
        cache = step.key_value
    assert cache[0].shape == cache[1].shape == (B, H, T, D)
    assert max_diff(torch.cat(outputs, dim=1), full) <= ATOL


def test_past_key_value_is_prepended_to_the_new_keys_and_values(attention):
    hidden = torch.randn(B, 2, E)
    past = (torch.randn(B, H, 3, D), torch.randn(B, H, 3, D))
    keys, values = attention(hidden, past_key_value=past, use_cache=True).key_value
    new_keys, new_values = attention.project_key_value(hidden)
    assert torch.equal(keys, torch.cat([past[0], new_keys], dim=2))
    assert torch.equal(values, torch.cat([past[1], new_values], dim=2))


def test_precomputed_key_value_equals_projecting_key_value_states(attention):
    hidden, encoder = torch.randn(B, T, E), torch.randn(B, S, E)
    key_value = attention.project_key_value(encoder)
    assert key_value[0].shape == key_value[1].shape == (B, H, S, D)
    assert max_diff(attention(hidden, key_value=key_value), attention(hidden, key_value_states=encoder)) == 0.0


def test_precomputed_key_value_projects_nothing(attention):
    key_value = attention.project_key_value(torch.randn(B, S, E))
    calls = []
    for head in attention.heads:
        head.k.register_forward_hook(lambda *args: calls.append("k"))
        head.v.register_forward_hook(lambda *args: calls.append("v"))
    attention(torch.randn(B, T, E), key_value=key_value)
    assert calls == []


def test_use_cache_returns_the_keys_and_values_attended_to(attention):
    hidden = torch.randn(B, T, E)
    result = attention(hidden, use_cache=True)
    assert isinstance(result, AttentionOutput) and result.weights is None
    keys, values = attention.project_key_value(hidden)
    assert torch.equal(result.key_value[0], keys) and torch.equal(result.key_value[1], values)


def test_plain_call_returns_a_tensor_and_return_weights_a_named_tuple(attention):
    hidden = torch.randn(B, T, E)
    assert isinstance(attention(hidden), torch.Tensor)
    result = attention(hidden, return_weights=True)
    assert isinstance(result, AttentionOutput) and result.key_value is None
    assert result.weights.shape == (B, H, T, T)
    assert max_diff(result.output, attention(hidden)) == 0.0


def test_sdpa_implementation_equals_eager_and_stays_finite_on_padding():
    eager = MultiHeadAttention(make_config()).eval()
    fused = MultiHeadAttention(make_config(attn_implementation="sdpa")).eval()
    fused.load_state_dict(eager.state_dict())
    hidden = torch.randn(B, T, E)
    mask = padding_mask(torch.tensor([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0]]))  # second example: all padding
    output = fused(hidden, mask=mask)
    assert torch.isfinite(output).all()
    assert max_diff(output, eager(hidden, mask=mask)) <= ATOL


def test_attention_dropout_uses_config_probability():
    attention = MultiHeadAttention(make_config(attention_probs_dropout_prob=0.3))
    assert attention.dropout.p == 0.3
    hidden = torch.randn(B, T, E)
    attention.eval()
    evaluated = attention(hidden)
    attention.train()
    assert max_diff(attention(hidden), evaluated) > 1e-3


def test_multi_head_attention_accepts_a_transformers_config():
    from transformers import BertConfig

    attention = MultiHeadAttention(BertConfig(hidden_size=E, num_attention_heads=H))
    assert len(attention.heads) == H and attention.head_size == D


def test_multi_head_attention_refuses_hidden_state_of_wrong_width(attention):
    with pytest.raises(ValueError, match=r"hidden_state must have shape \(\*, \*, 24\)"):
        attention(torch.randn(B, T, D))


def test_multi_head_attention_refuses_key_value_states_of_other_batch_size(attention):
    with pytest.raises(ValueError, match=r"key_value_states must have batch size 2"):
        attention(torch.randn(B, T, E), key_value_states=torch.randn(B + 1, S, E))


def test_multi_head_attention_refuses_past_key_value_with_wrong_head_count(attention):
    past = (torch.randn(B, H + 1, 3, D), torch.randn(B, H + 1, 3, D))
    with pytest.raises(ValueError, match=r"past_key_value\[0\] \(keys\) must have shape \(2, 4, \*, 6\)"):
        attention(torch.randn(B, 1, E), past_key_value=past)


def test_multi_head_attention_refuses_key_value_that_is_not_a_pair(attention):
    with pytest.raises(TypeError, match=r"key_value must be a \(keys, values\) pair"):
        attention(torch.randn(B, T, E), key_value=torch.randn(B, H, S, D))


def test_multi_head_attention_refuses_a_tokenizer_mask_that_does_not_broadcast(attention):
    # A raw (B, S) attention_mask is not a (T, S) mask; padding_mask() makes it (B, 1, 1, S).
    with pytest.raises(ValueError, match=r"mask must broadcast .*padding_mask"):
        attention(torch.randn(B, T, E), mask=torch.ones(B, T + 1, dtype=torch.bool))
