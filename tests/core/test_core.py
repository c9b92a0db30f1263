"""The shared core: the activation registry, the masks, the attention-kernel dispatch, the residual
sub-layer and validation at entry points, each written once and proved here.

Tolerance: fp32, absolute 1e-5 (1e-6 where both sides compute the same operations).
"""

from __future__ import annotations

import pytest
import torch
import transformers
from torch import nn

from literate_transformer.book.attention import MultiHeadAttention
from literate_transformer.book.feed_forward import FeedForward
from literate_transformer.core import masks, validation
from literate_transformer.core.activations import ACTIVATIONS, get_activation
from literate_transformer.core.kernels import (
    fused_attention,
    implementation_of,
    scaled_dot_product_attention,
    use_fused_attention,
)
from literate_transformer.core.residual import add_and_norm, sublayer_input

ATOL = 1e-5
B, H, T, S, D, E = 2, 3, 4, 6, 5, 15


# ---------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_every_activation_equals_huggingfaces_of_the_same_name(name):
    x = torch.linspace(-6, 6, 301)
    expected = transformers.activations.ACT2FN[name](x)
    torch.testing.assert_close(get_activation(name)(x), expected, atol=ATOL, rtol=0)


def test_each_call_builds_a_new_module():
    assert get_activation("gelu") is not get_activation("gelu")


@pytest.mark.parametrize(("name", "error"), [("gleu", ValueError), (None, TypeError)])
def test_unknown_activation_is_refused_with_the_known_names(name, error):
    with pytest.raises(error, match="hidden_act"):
        get_activation(name)
    if error is ValueError:
        with pytest.raises(ValueError, match=r"'gelu', 'gelu_new'"):
            get_activation(name)


# ---------------------------------------------------------------------------
# Masks
# ---------------------------------------------------------------------------
def test_build_attention_mask_combines_padding_and_causality():
    attention_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    mask = masks.build_attention_mask(attention_mask, query_length=4, causal=True)
    assert mask.shape == (2, 1, 4, 4) and mask.dtype == torch.bool
    expected = torch.tril(torch.ones(4, 4, dtype=torch.bool))[None] & attention_mask.bool()[:, None, :]
    assert torch.equal(mask[:, 0], expected)


def test_build_attention_mask_with_a_cache_sees_every_earlier_position():
    # Two new queries after three cached positions: query i sits at position 3 + i.
    mask = masks.build_attention_mask(None, query_length=2, causal=True, past_length=3)
    assert mask.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]


def test_build_attention_mask_is_none_when_nothing_is_hidden():
    assert masks.build_attention_mask(None, query_length=3) is None
    assert masks.build_attention_mask(None, query_length=3, causal=False, past_length=2) is None


def test_build_attention_mask_keeps_a_mask_of_ones_without_reading_it():
    # Finding out that a mask hides nothing would read it back to the host (a GPU sync): it is kept as it is.
    assert masks.build_attention_mask(torch.ones(2, 3), query_length=3).all()
    # On the meta device a tensor has no values: reading one back raises, building the mask must not.
    meta = masks.build_attention_mask(torch.ones(2, 3, device="meta"), query_length=3, causal=True)
    assert meta.shape == (2, 1, 3, 3) and meta.device.type == "meta"
    # Building it does not check it again either: the model's entry has (a float mask would be refused there).
    assert masks.build_attention_mask(torch.full((1, 2), 0.5), query_length=2).tolist() == [[[[True, True]]]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_fused_kernel_mask_is_finite_with_room_below_it(dtype):
    mask = masks.to_fused_kernel_mask(torch.tensor([True, False]), dtype)
    assert mask.dtype == dtype and torch.isfinite(mask).all()
    # Adding a very negative score to a masked entry stays finite (finfo.min itself would overflow in fp16).
    assert torch.isfinite(mask + torch.tensor(-1000.0, dtype=dtype)).all()
    assert mask[0] == 0 and mask[1] == torch.finfo(dtype).min / 2


def test_fused_kernel_mask_refuses_an_integer_mask():
    with pytest.raises(TypeError, match="mask must be boolean or floating point"):
        masks.to_fused_kernel_mask(torch.ones(3, dtype=torch.long), torch.float32)


# ---------------------------------------------------------------------------
# The attention kernels
# ---------------------------------------------------------------------------
def test_fused_kernel_is_used_only_when_nothing_needs_the_probabilities(tiny_config):
    sdpa, eager = implementation_of(tiny_config(attn_implementation="sdpa")), implementation_of(tiny_config())
    assert use_fused_attention(sdpa) and not use_fused_attention(eager)
    assert not use_fused_attention(sdpa, output_attentions=True)
    assert not use_fused_attention(sdpa, head_mask=torch.ones(3))


def test_the_implementation_is_read_from_either_kind_of_config():
    # The package's config says attn_implementation; a transformers config keeps _attn_implementation.
    gpt2 = transformers.GPT2Config(attn_implementation="sdpa")
    assert implementation_of(gpt2) == "sdpa"
    gpt2._attn_implementation = "flash_attention_2"  # HuggingFace's other kernels: the eager code here
    assert implementation_of(gpt2) == "eager" and implementation_of(transformers.GPT2Config()) == "eager"


@pytest.mark.parametrize("form", ["boolean", "additive"])
def test_fused_kernel_equals_the_eager_code_on_real_and_fully_masked_rows(form):
    query, key, value = torch.randn(B, H, T, D), torch.randn(B, H, S, D), torch.randn(B, H, S, D)
    mask = torch.rand(B, 1, T, S) > 0.4
    mask[..., 0] = True
    mask[1, :, 2] = False  # one query of the second example sees no key at all
    if form == "additive":
        mask = masks.to_additive(mask)
    eager, _ = scaled_dot_product_attention(query, key, value, mask)
    fused = fused_attention(query, key, value, mask)
    assert torch.isfinite(fused).all()
    # One rule for both kernels: even the fully masked row (a uniform average) agrees.
    torch.testing.assert_close(fused, eager, atol=ATOL, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fused_kernel_gives_no_nan_on_fully_masked_rows_in_half_precision(dtype):
    query, key, value = (torch.randn(B, H, T, D, dtype=dtype) for _ in range(3))
    query = query * 30  # very large scores: finfo.min + score would overflow without the headroom
    mask = torch.zeros(B, 1, T, T, dtype=torch.bool)
    assert torch.isfinite(fused_attention(query, key, value, mask)).all()


def test_one_module_uses_the_fused_kernel_exactly_when_the_rule_says(tiny_config, monkeypatch):
    from literate_transformer.core import kernels

    calls = []
    monkeypatch.setattr(kernels, "fused_attention", lambda *args: calls.append(args) or args[0])
    fused = MultiHeadAttention(tiny_config(attn_implementation="sdpa")).eval()
    hidden = torch.randn(B, T, fused.hidden_size)
    fused(hidden)
    assert len(calls) == 1
    fused(hidden, output_attentions=True)
    assert len(calls) == 1  # the probabilities were asked for: the eager code ran


# ---------------------------------------------------------------------------
# The residual sub-layer
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])
def test_residual_sub_layer_is_the_formula_of_its_arrangement(norm_first, randomize):
    norm, dropout = randomize(nn.LayerNorm(E)), nn.Dropout(0.5).eval()
    x = torch.randn(B, T, E)
    sublayer = randomize(nn.Linear(E, E))
    output = add_and_norm(x, sublayer(sublayer_input(x, norm, norm_first)), norm, norm_first, dropout)
    expected = x + sublayer(norm(x)) if norm_first else norm(x + sublayer(x))
    torch.testing.assert_close(output, expected, atol=1e-6, rtol=0)


def test_residual_dropout_acts_on_the_sub_layer_output_only():
    norm, dropout = nn.LayerNorm(E), nn.Dropout(0.5).train()
    x, change = torch.randn(B, T, E), torch.randn(B, T, E)
    output = add_and_norm(x, change, norm, norm_first=True, dropout=dropout)
    dropped = output - x  # what the dropout kept of the change: zeros and 2 * change
    kept = dropped != 0
    assert 0 < kept.float().mean() < 1
    torch.testing.assert_close(dropped[kept], 2 * change[kept], atol=1e-6, rtol=0)


# ---------------------------------------------------------------------------
# Validation at entry points
# ---------------------------------------------------------------------------
def test_a_module_called_directly_checks_its_input(tiny_config):
    with pytest.raises(ValueError, match=r"hidden_states must have shape \(\*, \*, 24\)"):
        FeedForward(tiny_config())(torch.randn(B, T, 7))


def test_inner_modules_trust_their_validated_caller(tiny_config, monkeypatch):
    from literate_transformer.book.encoder import TransformerEncoderLayer

    seen = []
    real_check = validation.check_hidden_states

    def spy(value, hidden_size, name="hidden_states"):
        seen.append(name)
        return real_check(value, hidden_size, name)

    for module in ("encoder", "feed_forward", "attention"):
        monkeypatch.setattr(f"literate_transformer.book.{module}.check_hidden_states", spy)
    layer = TransformerEncoderLayer(tiny_config()).eval()
    hidden = torch.randn(B, T, 24)
    layer(hidden)
    # One check, at the layer; its attention and feed-forward sub-layers trusted it.
    assert seen == ["hidden_states"]
    seen.clear()
    # The same sub-layer called on its own checks its input.
    layer.feed_forward(hidden)
    assert seen == ["hidden_states"]


def test_a_failed_call_leaves_the_next_call_checked(tiny_config):
    feed_forward = FeedForward(tiny_config())
    for _ in range(2):
        with pytest.raises(ValueError, match="hidden_states"):
            feed_forward(torch.randn(B, T, 7))
    assert getattr(validation._calls, "depth", 0) == 0


def test_a_check_reads_the_call_by_name_with_the_defaults_filled_in():
    received = []

    class Module(torch.nn.Module):
        @validation.validate_with(lambda module, args: received.append((module, vars(args))))
        def forward(self, hidden_states, attention_mask=None, *, output_attentions=False):
            return hidden_states

    module = Module()
    module(1, output_attentions=True)
    module(hidden_states=2, attention_mask=3)
    assert received == [
        (module, {"hidden_states": 1, "attention_mask": None, "output_attentions": True}),
        (module, {"hidden_states": 2, "attention_mask": 3, "output_attentions": False}),
    ]


def test_a_plain_function_is_checked_without_a_module():
    received = []

    @validation.validate_with(lambda args: received.append(vars(args)))
    def pool(last_hidden_state, attention_mask=None):
        return last_hidden_state

    assert pool(5) == 5 and received == [{"last_hidden_state": 5, "attention_mask": None}]


def test_a_call_that_does_not_fit_the_signature_names_the_function_and_the_argument(tiny_config):
    feed_forward = FeedForward(tiny_config())
    with pytest.raises(TypeError, match=r"FeedForward\.forward\(\): .*unexpected keyword argument 'mask'"):
        feed_forward(torch.randn(B, T, 24), mask=None)
    with pytest.raises(TypeError, match=r"FeedForward\.forward\(\): missing a required argument: 'hidden_states'"):
        feed_forward()


def test_validation_is_skipped_while_compiling(tiny_config, monkeypatch):
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    feed_forward = FeedForward(tiny_config())
    # Tracing once must not run Python-side checks; the bad width then fails inside torch instead.
    with pytest.raises(RuntimeError):
        feed_forward(torch.randn(B, T, 7))


@pytest.mark.parametrize(
    ("value", "minimum", "message"),
    [(0, 1, "a positive int"), (-1, 0, "a non-negative int"), (True, 1, "a positive int"), (2.0, 1, "a positive int")],
)
def test_check_positive_int_names_what_it_expected(value, minimum, message):
    with pytest.raises(ValueError, match=f"count must be {message}"):
        validation.check_positive_int(value, "count", minimum)
