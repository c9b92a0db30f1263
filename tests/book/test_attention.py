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

from literate_transformer.book.attention import AttentionHead, MultiHeadAttention
from literate_transformer.core.kernels import scaled_dot_product_attention
from literate_transformer.core.masks import causal_mask, padding_mask, to_additive
from literate_transformer.core.outputs import AttentionOutput
from literate_transformer.interop import book_attention_to_torch

ATOL = 1e-5
B, T, S, H, D, E = 2, 5, 7, 4, 6, 24


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


@pytest.fixture
def make_config(tiny_config):
    """Sizes of this file's legend: E=24, H=4 (D=6), no attention dropout."""
    return lambda **changes: tiny_config(hidden_size=E, num_attention_heads=H, intermediate_size=40, **changes)


@pytest.fixture
def attention(make_config) -> MultiHeadAttention:
    return MultiHeadAttention(make_config()).eval()


# ---------------------------------------------------------------------------
# scaled_dot_product_attention
# ---------------------------------------------------------------------------


def test_sdpa_equals_torch_sdpa_without_mask():
    query, key, value = torch.randn(B, H, T, D), torch.randn(B, H, S, D), torch.randn(B, H, S, 3)
    ours, _ = scaled_dot_product_attention(query, key, value)
    assert ours.shape == (B, H, T, 3)
    assert max_diff(ours, F.scaled_dot_product_attention(query, key, value)) <= ATOL


def test_sdpa_equals_torch_sdpa_with_boolean_mask():
    query, key, value = torch.randn(B, H, T, D), torch.randn(B, H, S, D), torch.randn(B, H, S, D)
    mask = torch.rand(B, 1, T, S) > 0.3
    mask[..., 0] = True  # every query sees at least one key (torch returns 0 for a fully masked row)
    ours, _ = scaled_dot_product_attention(query, key, value, attention_mask=mask)
    assert max_diff(ours, F.scaled_dot_product_attention(query, key, value, attn_mask=mask)) <= ATOL


def test_sdpa_additive_mask_equals_boolean_mask():
    query, key, value = torch.randn(B, T, D), torch.randn(B, S, D), torch.randn(B, S, D)
    mask = causal_mask(T, S)
    boolean, _ = scaled_dot_product_attention(query, key, value, attention_mask=mask)
    additive, _ = scaled_dot_product_attention(query, key, value, attention_mask=to_additive(mask))
    assert max_diff(boolean, additive) <= ATOL


def test_sdpa_weights_are_zero_on_masked_keys_and_rows_sum_to_one():
    query, key, value = torch.randn(B, T, D), torch.randn(B, S, D), torch.randn(B, S, D)
    mask = causal_mask(T, S)
    _, weights = scaled_dot_product_attention(query, key, value, attention_mask=mask)
    assert weights.shape == (B, T, S)
    assert weights.masked_select(~mask.expand(B, T, S)).abs().max().item() == 0.0
    assert max_diff(weights.sum(-1), torch.ones(B, T)) <= ATOL


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_fully_masked_row_gives_no_nan(dtype):
    query, key, value = (torch.randn(B, H, T, D, dtype=dtype) for _ in range(3))
    mask = torch.ones(B, 1, T, T, dtype=torch.bool)
    mask[1] = False  # the second example is all padding: every one of its rows is fully masked
    mask[0, :, 2] = False  # and one query of the first example sees nothing either
    output, weights = scaled_dot_product_attention(query, key, value, attention_mask=mask)
    assert torch.isfinite(output).all() and torch.isfinite(weights).all()
    # A fully masked row averages uniformly (1/T each) instead of producing 0/0.
    assert torch.allclose(weights[1].float(), torch.full((H, T, T), 1 / T), atol=1e-2)
    # Rows with visible keys are untouched by the fix.
    reference = F.scaled_dot_product_attention(query[:1].float(), key[:1].float(), value[:1].float())
    assert max_diff(output[0, :, :2].float(), reference[0, :, :2]) <= (ATOL if dtype == torch.float32 else 2e-2)


def test_sdpa_dropout_module_acts_on_weights_in_training_only():
    query, key, value = torch.randn(B, T, D), torch.randn(B, S, D), torch.randn(B, S, D)
    dropout = nn.Dropout(0.5)
    plain, _ = scaled_dot_product_attention(query, key, value)
    dropout.eval()
    assert max_diff(scaled_dot_product_attention(query, key, value, dropout=dropout)[0], plain) == 0.0
    dropout.train()
    assert max_diff(scaled_dot_product_attention(query, key, value, dropout=dropout)[0], plain) > 1e-3


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
    with pytest.raises(ValueError, match=r"attention_mask must broadcast to the attention scores' shape \(2, 5, 7\)"):
        scaled_dot_product_attention(
            torch.randn(B, T, D), torch.randn(B, S, D), torch.randn(B, S, D), attention_mask=torch.ones(B, T, T).bool()
        )


def test_sdpa_refuses_integer_mask():
    with pytest.raises(TypeError, match=r"attention_mask must have a bool or float dtype"):
        scaled_dot_product_attention(
            torch.randn(B, T, D),
            torch.randn(B, S, D),
            torch.randn(B, S, D),
            attention_mask=torch.ones(T, S, dtype=torch.long),
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
    with pytest.raises(ValueError, match=r"hidden_states must have shape \(\*, \*, 24\)"):
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
    assert max_diff(attention(hidden).hidden_states, attention.output_linear(concatenated)) <= ATOL


def test_multi_head_attention_equals_torch_multihead_attention_with_key_padding_mask(attention):
    hidden = torch.randn(B, T, E)
    attention_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    real = attention_mask.bool()
    reference = book_attention_to_torch(attention)
    # torch's key_padding_mask uses True for "ignore"; ours True for "may attend".
    expected, expected_weights = reference(
        hidden, hidden, hidden, key_padding_mask=~real, need_weights=True, average_attn_weights=False
    )
    output, weights, _ = attention(hidden, attention_mask=padding_mask(attention_mask), output_attentions=True)
    assert max_diff(output[real], expected[real]) <= ATOL
    assert max_diff(weights.transpose(1, 2)[real], expected_weights.transpose(1, 2)[real]) <= ATOL


def test_cross_attention_equals_torch_multihead_attention(attention):
    hidden, encoder = torch.randn(B, T, E), torch.randn(B, S, E)
    expected, _ = book_attention_to_torch(attention)(hidden, encoder, encoder)
    output = attention(hidden, key_value_states=encoder).hidden_states
    assert output.shape == (B, T, E)
    assert max_diff(output, expected) <= ATOL


def test_cross_attention_weights_have_source_length(attention):
    result = attention(torch.randn(B, T, E), key_value_states=torch.randn(B, S, E), output_attentions=True)
    assert result.attention_probs.shape == (B, H, T, S)


def test_incremental_decoding_with_past_key_value_equals_full_causal_attention(attention):
    hidden = torch.randn(B, T, E)
    full = attention(hidden, attention_mask=causal_mask(T)).hidden_states
    # The first three positions at once, then one position at a time.
    first = attention(hidden[:, :3], attention_mask=causal_mask(3), use_cache=True)
    outputs, cache = [first.hidden_states], first.past_key_value
    for position in range(3, T):
        step = attention(
            hidden[:, position : position + 1],
            attention_mask=causal_mask(1, position + 1),
            past_key_value=cache,
            use_cache=True,
        )
        outputs.append(step.hidden_states)
        cache = step.past_key_value
    assert cache[0].shape == cache[1].shape == (B, H, T, D)
    assert max_diff(torch.cat(outputs, dim=1), full) <= ATOL


def test_past_key_value_is_prepended_to_the_new_keys_and_values(attention):
    hidden = torch.randn(B, 2, E)
    past = (torch.randn(B, H, 3, D), torch.randn(B, H, 3, D))
    keys, values = attention(hidden, past_key_value=past, use_cache=True).past_key_value
    new_keys, new_values = attention.project_key_value(hidden)
    assert torch.equal(keys, torch.cat([past[0], new_keys], dim=2))
    assert torch.equal(values, torch.cat([past[1], new_values], dim=2))


def test_cached_cross_attention_key_value_equals_projecting_key_value_states(attention):
    hidden, encoder = torch.randn(B, T, E), torch.randn(B, S, E)
    key_value = attention.project_key_value(encoder)
    assert key_value[0].shape == key_value[1].shape == (B, H, S, D)
    cached = attention(hidden, key_value_states=encoder, past_key_value=key_value).hidden_states
    assert max_diff(cached, attention(hidden, key_value_states=encoder).hidden_states) == 0.0


def test_cached_cross_attention_key_value_projects_nothing(attention):
    encoder = torch.randn(B, S, E)
    key_value = attention.project_key_value(encoder)
    calls = []
    for head in attention.heads:
        head.k.register_forward_hook(lambda *args: calls.append("k"))
        head.v.register_forward_hook(lambda *args: calls.append("v"))
    result = attention(torch.randn(B, T, E), key_value_states=encoder, past_key_value=key_value, use_cache=True)
    assert calls == []
    # The cache of a cross-attention call is the encoder's keys and values, unchanged.
    assert result.past_key_value[0] is key_value[0] and result.past_key_value[1] is key_value[1]


def test_use_cache_returns_the_keys_and_values_attended_to(attention):
    hidden = torch.randn(B, T, E)
    result = attention(hidden, use_cache=True)
    assert isinstance(result, AttentionOutput) and result.attention_probs is None
    keys, values = attention.project_key_value(hidden)
    assert torch.equal(result.past_key_value[0], keys) and torch.equal(result.past_key_value[1], values)


def test_every_call_returns_an_attention_output_and_flags_only_fill_its_fields(attention):
    hidden = torch.randn(B, T, E)
    plain = attention(hidden)
    assert isinstance(plain, AttentionOutput) and plain.attention_probs is None and plain.past_key_value is None
    result = attention(hidden, output_attentions=True)
    assert isinstance(result, AttentionOutput) and result.past_key_value is None
    assert result.attention_probs.shape == (B, H, T, T)
    assert max_diff(result.hidden_states, plain.hidden_states) == 0.0


def test_sdpa_implementation_equals_eager_and_stays_finite_on_padding(make_config):
    eager = MultiHeadAttention(make_config()).eval()
    fused = MultiHeadAttention(make_config(attn_implementation="sdpa")).eval()
    fused.load_state_dict(eager.state_dict())
    hidden = torch.randn(B, T, E)
    mask = padding_mask(torch.tensor([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0]]))  # second example: all padding
    output = fused(hidden, attention_mask=mask).hidden_states
    assert torch.isfinite(output).all()
    assert max_diff(output, eager(hidden, attention_mask=mask).hidden_states) <= ATOL


def test_attention_dropout_uses_config_probability(make_config):
    attention = MultiHeadAttention(make_config(attention_probs_dropout_prob=0.3))
    assert attention.dropout.p == 0.3
    hidden = torch.randn(B, T, E)
    attention.eval()
    evaluated = attention(hidden).hidden_states
    attention.train()
    assert max_diff(attention(hidden).hidden_states, evaluated) > 1e-3


def test_multi_head_attention_accepts_a_transformers_config():
    from transformers import BertConfig

    attention = MultiHeadAttention(BertConfig(hidden_size=E, num_attention_heads=H))
    assert len(attention.heads) == H and attention.head_size == D


def test_multi_head_attention_refuses_hidden_state_of_wrong_width(attention):
    with pytest.raises(ValueError, match=r"hidden_states must have shape \(\*, \*, 24\)"):
        attention(torch.randn(B, T, D))


def test_multi_head_attention_refuses_key_value_states_of_other_batch_size(attention):
    with pytest.raises(ValueError, match=r"key_value_states must have batch size 2"):
        attention(torch.randn(B, T, E), key_value_states=torch.randn(B + 1, S, E))


def test_multi_head_attention_refuses_past_key_value_with_wrong_head_count(attention):
    past = (torch.randn(B, H + 1, 3, D), torch.randn(B, H + 1, 3, D))
    with pytest.raises(ValueError, match=r"past_key_value\[0\] \(keys\) must have shape \(2, 4, \*, 6\)"):
        attention(torch.randn(B, 1, E), past_key_value=past)


def test_multi_head_attention_refuses_past_key_value_that_is_not_a_pair(attention):
    with pytest.raises(TypeError, match=r"past_key_value must be a \(keys, values\) pair"):
        attention(torch.randn(B, T, E), key_value_states=torch.randn(B, S, E), past_key_value=torch.randn(B, H, S, D))


def test_multi_head_attention_refuses_a_tokenizer_mask_that_does_not_broadcast(attention):
    # A raw (B, S) attention_mask is not a (T, S) mask; padding_mask() makes it (B, 1, 1, S).
    with pytest.raises(ValueError, match=r"attention_mask must broadcast .*padding_mask"):
        attention(torch.randn(B, T, E), attention_mask=torch.ones(B, T + 1, dtype=torch.bool))
