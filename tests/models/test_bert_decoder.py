"""BERT as a decoder (causal self-attention + cross-attention) equals transformers' on the same random weights.

Tolerance: fp32, absolute 1e-5 on real (non-padding) tokens.
"""

from __future__ import annotations

import pytest
import torch
import transformers
from shapes import BERT

from literate_transformer.models.bert import BertModel

ATOL = 1e-5
# The NaN checks also run on a GPU when there is one (fused SDPA kernels differ there).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

FIELDS = BERT("decoder_5_heads", is_decoder=True, add_cross_attention=True)


def random_hf_decoder(implementation: str) -> transformers.BertModel:
    """A random HuggingFace BERT decoder; every parameter perturbed so layer norms are not the identity."""
    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig(**FIELDS, attn_implementation=implementation)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return model


@pytest.fixture(scope="module")
def hf_decoder():
    return random_hf_decoder("eager")


@pytest.fixture(scope="module")
def inputs():
    """Two targets (the second padded) and two encoder outputs (the second padded)."""
    generator = torch.Generator().manual_seed(3)
    input_ids = torch.randint(1, FIELDS["vocab_size"], (2, 7), generator=generator)
    attention_mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2])
    encoder_hidden_states = torch.randn(2, 4, FIELDS["hidden_size"], generator=generator)
    encoder_attention_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    return dict(
        input_ids=input_ids,
        attention_mask=attention_mask,
        encoder_hidden_states=encoder_hidden_states,
        encoder_attention_mask=encoder_attention_mask,
    )


@torch.no_grad()
def test_decoder_matches_hf_hidden_states_self_and_cross_attentions(hf_decoder, inputs):
    ours = BertModel.from_hf(hf_decoder)
    assert hasattr(ours.encoder.layer[0], "crossattention")
    expected = hf_decoder(**inputs, use_cache=False, output_attentions=True)
    actual = ours(**inputs, output_attentions=True)
    real = inputs["attention_mask"].bool()
    torch.testing.assert_close(actual.last_hidden_state[real], expected.last_hidden_state[real], atol=ATOL, rtol=0)
    assert len(actual.attentions) == len(actual.cross_attentions) == FIELDS["num_hidden_layers"]
    for ours_probs, hf_probs in zip(actual.attentions, expected.attentions, strict=True):
        assert ours_probs.shape == (2, FIELDS["num_attention_heads"], 7, 7)
        torch.testing.assert_close(ours_probs.transpose(1, 2)[real], hf_probs.transpose(1, 2)[real], atol=ATOL, rtol=0)
    for ours_probs, hf_probs in zip(actual.cross_attentions, expected.cross_attentions, strict=True):
        assert ours_probs.shape == (2, FIELDS["num_attention_heads"], 7, 4)
        torch.testing.assert_close(ours_probs, hf_probs, atol=ATOL, rtol=0)


@torch.no_grad()
def test_decoder_self_attention_is_causal_and_cross_attention_skips_encoder_padding(hf_decoder, inputs):
    actual = BertModel.from_hf(hf_decoder)(**inputs, output_attentions=True)
    future = torch.ones(7, 7, dtype=torch.bool).triu(diagonal=1)
    for probs in actual.attentions:
        assert probs[..., future].abs().max() == 0
    for probs in actual.cross_attentions:
        assert probs[1, :, :, 2:].abs().max() < 1e-6
        assert probs[0, :, :, 2:].abs().max() > 1e-3


@torch.no_grad()
def test_decoder_sdpa_matches_hf_sdpa_and_our_eager_path(hf_decoder, inputs):
    hf_sdpa = random_hf_decoder("sdpa")
    hf_sdpa.load_state_dict(hf_decoder.state_dict())
    ours_sdpa = BertModel.from_hf(hf_sdpa)
    ours_eager = BertModel.from_hf(hf_decoder)
    real = inputs["attention_mask"].bool()
    expected = hf_sdpa(**inputs, use_cache=False).last_hidden_state
    actual = ours_sdpa(**inputs).last_hidden_state
    torch.testing.assert_close(actual[real], expected[real], atol=ATOL, rtol=0)
    torch.testing.assert_close(actual[real], ours_eager(**inputs).last_hidden_state[real], atol=ATOL, rtol=0)
    # Without any padding the SDPA path runs the fused causal kernel with no mask tensor.
    unpadded = dict(inputs, attention_mask=None, encoder_attention_mask=None)
    torch.testing.assert_close(
        ours_sdpa(**unpadded).last_hidden_state,
        hf_sdpa(**unpadded, use_cache=False).last_hidden_state,
        atol=ATOL,
        rtol=0,
    )


@torch.no_grad()
def test_a_future_token_does_not_change_earlier_outputs(hf_decoder, inputs):
    ours = BertModel.from_hf(hf_decoder)
    changed = inputs["input_ids"].clone()
    changed[:, -1] = (changed[:, -1] + 1) % FIELDS["vocab_size"]
    before = ours(**dict(inputs, attention_mask=None)).last_hidden_state
    after = ours(**dict(inputs, attention_mask=None, input_ids=changed)).last_hidden_state
    torch.testing.assert_close(after[:, :-1], before[:, :-1], atol=ATOL, rtol=0)
    assert (after[:, -1] - before[:, -1]).abs().max() > 1e-3


@torch.no_grad()
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_decoder_fully_masked_rows_give_no_nan(hf_decoder, inputs, dtype, implementation):
    model = BertModel.from_hf(hf_decoder, attn_implementation=implementation).to(DEVICE, dtype)
    # Left padding: the first two queries of example 1 see no key at all (causal + padding);
    # example 1's encoder output is padding only: its cross-attention rows are fully masked.
    attention_mask = torch.tensor([[1] * 7, [0, 0] + [1] * 5], device=DEVICE)
    encoder_attention_mask = torch.tensor([[1, 1, 1, 1], [0, 0, 0, 0]], device=DEVICE)
    output = model(
        inputs["input_ids"].to(DEVICE),
        attention_mask,
        encoder_hidden_states=inputs["encoder_hidden_states"].to(DEVICE, dtype),
        encoder_attention_mask=encoder_attention_mask,
        output_hidden_states=True,
    )
    for tensor in (*output.hidden_states, output.pooler_output):
        assert torch.isfinite(tensor).all()
