"""The decoder: equal to PyTorch's own decoder, causal, and strict about its inputs."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import literate_transformer.book.decoder as decoder_module
from literate_transformer import TransformerConfig
from literate_transformer.book.decoder import (
    EncoderDecoderTransformer,
    LayerCache,
    TransformerDecoder,
    TransformerDecoderLayer,
)
from literate_transformer.core.masks import causal_mask, padding_mask

TOLERANCE = 1e-5


def tiny_config(**changes) -> TransformerConfig:
    """A small config without dropout, so outputs are deterministic."""
    values = dict(
        vocab_size=31,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        hidden_act="gelu",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        max_position_embeddings=24,
        layer_norm_eps=1e-5,
    )
    values.update(changes)
    return TransformerConfig(**values)


def randomize_layer_norms(module: nn.Module) -> None:
    """Layer norms start as the identity; random ones make the comparison meaningful."""
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, nn.LayerNorm):
                sub.weight.normal_(1.0, 0.2)
                sub.bias.normal_(0.0, 0.2)


def copy_attention(ours, theirs: nn.MultiheadAttention) -> None:
    """Stack our per-head q/k/v weights into torch's packed ``in_proj_weight``."""
    with torch.no_grad():
        weights = [torch.cat([getattr(head, name).weight for head in ours.heads]) for name in "qkv"]
        biases = [torch.cat([getattr(head, name).bias for head in ours.heads]) for name in "qkv"]
        theirs.in_proj_weight.copy_(torch.cat(weights))
        theirs.in_proj_bias.copy_(torch.cat(biases))
        theirs.out_proj.weight.copy_(ours.output_linear.weight)
        theirs.out_proj.bias.copy_(ours.output_linear.bias)


def copy_layer(ours: TransformerDecoderLayer, theirs: nn.TransformerDecoderLayer) -> None:
    copy_attention(ours.self_attention, theirs.self_attn)
    copy_attention(ours.cross_attention, theirs.multihead_attn)
    pairs = [
        (ours.feed_forward.linear_1, theirs.linear1),
        (ours.feed_forward.linear_2, theirs.linear2),
        (ours.layer_norm_1, theirs.norm1),
        (ours.layer_norm_2, theirs.norm2),
        (ours.layer_norm_3, theirs.norm3),
    ]
    with torch.no_grad():
        for mine, torchs in pairs:
            torchs.weight.copy_(mine.weight)
            torchs.bias.copy_(mine.bias)


def torch_layer(config: TransformerConfig, norm_first: bool) -> nn.TransformerDecoderLayer:
    return nn.TransformerDecoderLayer(
        d_model=config.hidden_size,
        nhead=config.num_attention_heads,
        dim_feedforward=config.intermediate_size,
        dropout=0.0,
        activation="gelu",
        batch_first=True,
        norm_first=norm_first,
        layer_norm_eps=config.layer_norm_eps,
    )


def torch_causal_mask(length: int) -> torch.Tensor:
    """PyTorch's convention: True = may NOT attend."""
    return ~causal_mask(length)


SOURCE_MASK = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])


# ---------------------------------------------------------------------------
# Equal to PyTorch
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
@pytest.mark.parametrize("source_padding", [False, True], ids=["no-padding", "source-padding"])
def test_decoder_layer_matches_torch_decoder_layer(norm_first, source_padding):
    config = tiny_config()
    ours = TransformerDecoderLayer(config, norm_first=norm_first).eval()
    randomize_layer_norms(ours)
    theirs = torch_layer(config, norm_first).eval()
    copy_layer(ours, theirs)
    target, memory = torch.randn(2, 5, 32), torch.randn(2, 6, 32)

    ours_mask = padding_mask(SOURCE_MASK) if source_padding else None
    theirs_mask = ~SOURCE_MASK.bool() if source_padding else None
    expected = theirs(target, memory, tgt_mask=torch_causal_mask(5), memory_key_padding_mask=theirs_mask)
    actual = ours(target, memory, causal_mask(5), ours_mask)

    assert actual.shape == (2, 5, 32)
    assert (actual - expected).abs().max().item() <= TOLERANCE
    # The comparison is not vacuous: the source padding changes the second example.
    other = ours(target, memory, causal_mask(5), None if source_padding else padding_mask(SOURCE_MASK))
    assert (other[1] - actual[1]).abs().max().item() > 1e-3


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
def test_decoder_stack_matches_torch_transformer_decoder(norm_first):
    config = tiny_config()
    ours = TransformerDecoder(config, norm_first=norm_first).eval()
    randomize_layer_norms(ours)
    layer = torch_layer(config, norm_first)
    theirs = nn.TransformerDecoder(layer, num_layers=config.num_hidden_layers).eval()
    for mine, torchs in zip(ours.layers, theirs.layers, strict=True):
        copy_layer(mine, torchs)
    input_ids = torch.randint(0, config.vocab_size, (2, 5))
    target_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]])
    memory = torch.randn(2, 6, 32)

    expected = theirs(
        ours.embeddings(input_ids),
        memory,
        tgt_mask=torch_causal_mask(5),
        tgt_key_padding_mask=~target_mask.bool(),
        memory_key_padding_mask=~SOURCE_MASK.bool(),
    )
    actual = ours(input_ids, memory, attention_mask=target_mask, encoder_attention_mask=SOURCE_MASK)

    assert actual.shape == (2, 5, 32)
    assert (actual - expected).abs().max().item() <= TOLERANCE


def test_fused_sdpa_attention_gives_the_same_decoder_outputs_as_eager():
    eager = EncoderDecoderTransformer(tiny_config()).eval()
    fused = EncoderDecoderTransformer(tiny_config(attn_implementation="sdpa")).eval()
    fused.load_state_dict(eager.state_dict())
    source, target = torch.randint(3, 31, (2, 6)), torch.randint(3, 31, (2, 5))
    target_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    expected = eager(source, target, SOURCE_MASK, target_mask).logits
    actual = fused(source, target, SOURCE_MASK, target_mask).logits
    assert (actual - expected).abs().max().item() <= TOLERANCE


# ---------------------------------------------------------------------------
# Causality
# ---------------------------------------------------------------------------
def _future_token_effect(decoder: TransformerDecoder) -> tuple[float, float]:
    """Change the last target token; return how much positions < last and the last one moved."""
    memory = torch.randn(1, 4, 32)
    input_ids = torch.tensor([[1, 5, 9, 13, 17]])
    changed = input_ids.clone()
    changed[0, -1] = 22
    before, after = decoder(input_ids, memory), decoder(changed, memory)
    earlier = (before[:, :-1] - after[:, :-1]).abs().max().item()
    last = (before[:, -1] - after[:, -1]).abs().max().item()
    return earlier, last


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
def test_changing_a_future_token_leaves_earlier_positions_unchanged(norm_first):
    decoder = TransformerDecoder(tiny_config(), norm_first=norm_first).eval()
    earlier, last = _future_token_effect(decoder)
    assert earlier == 0.0
    assert last > 1e-3  # the changed position itself does change


def test_without_the_causal_mask_the_future_leaks_into_earlier_positions(monkeypatch):
    """The causality check above can fail: remove the mask and it does."""
    decoder = TransformerDecoder(tiny_config()).eval()

    def no_mask(query_length, key_length=None, device=None):
        return torch.ones(query_length, key_length or query_length, dtype=torch.bool, device=device)

    monkeypatch.setattr(decoder_module, "causal_mask", no_mask)
    earlier, _ = _future_token_effect(decoder)
    assert earlier > 1e-3


def test_self_attention_weights_are_zero_above_the_diagonal():
    model = EncoderDecoderTransformer(tiny_config()).eval()
    output = model(torch.randint(3, 31, (2, 6)), torch.randint(3, 31, (2, 5)), return_weights=True)
    for weights in output.decoder_attentions:
        upper = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
        assert weights[..., upper].abs().max().item() == 0.0
        assert torch.allclose(weights.sum(-1), torch.ones(2, 4, 5))


def test_cross_attention_ignores_padded_source_tokens():
    model = EncoderDecoderTransformer(tiny_config()).eval()
    source = torch.randint(3, 31, (2, 6))
    output = model(source, torch.randint(3, 31, (2, 5)), attention_mask=SOURCE_MASK, return_weights=True)
    for weights in output.cross_attentions:
        assert weights.shape == (2, 4, 5, 6)
        assert weights[1, :, :, 3:].abs().max().item() == 0.0
        assert weights[0, :, :, 3:].min().item() > 0.0
    # Changing a padded source token therefore changes nothing.
    target = torch.randint(3, 31, (2, 5))
    changed = source.clone()
    changed[1, 4] = (changed[1, 4] + 1) % 31
    before = model(source, target, attention_mask=SOURCE_MASK).logits
    after = model(changed, target, attention_mask=SOURCE_MASK).logits
    assert (before - after).abs().max().item() <= TOLERANCE


def test_padded_target_positions_produce_no_nan():
    model = EncoderDecoderTransformer(tiny_config()).eval()
    target_mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 0, 0, 0]])
    output = model(torch.randint(3, 31, (2, 6)), torch.randint(3, 31, (2, 5)), decoder_attention_mask=target_mask)
    assert torch.isfinite(output.logits).all()


# ---------------------------------------------------------------------------
# The encoder-decoder model
# ---------------------------------------------------------------------------
def test_encoder_decoder_returns_logits_and_one_attention_tensor_per_layer():
    config = tiny_config(num_hidden_layers=3)
    model = EncoderDecoderTransformer(config).eval()
    output = model(torch.randint(0, 31, (2, 6)), torch.randint(0, 31, (2, 4)), return_weights=True)
    assert output.logits.shape == (2, 4, config.vocab_size)
    assert [w.shape for w in output.encoder_attentions] == [(2, 4, 6, 6)] * 3
    assert [w.shape for w in output.decoder_attentions] == [(2, 4, 4, 4)] * 3
    assert [w.shape for w in output.cross_attentions] == [(2, 4, 4, 6)] * 3
    plain = model(torch.randint(0, 31, (2, 6)), torch.randint(0, 31, (2, 4)))
    assert plain.encoder_attentions is None and plain.cross_attentions is None


def test_encoder_decoder_logits_are_lm_head_of_decoder_output():
    model = EncoderDecoderTransformer(tiny_config(), norm_first=False).eval()
    source, target = torch.randint(0, 31, (2, 6)), torch.randint(0, 31, (2, 4))
    output = model(source, target, attention_mask=SOURCE_MASK)
    encoded = model.encoder(source, attention_mask=SOURCE_MASK)
    expected = model.lm_head(model.decoder(target, encoded, encoder_attention_mask=SOURCE_MASK))
    assert (output.logits - expected).abs().max().item() <= TOLERANCE


def test_decoder_accepts_a_transformers_config():
    from transformers import BertConfig

    config = BertConfig(vocab_size=31, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64)
    decoder = TransformerDecoder(config)
    assert decoder(torch.tensor([[1, 2]]), torch.randn(1, 3, 32)).shape == (1, 2, 32)


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------
@pytest.fixture
def decoder():
    return TransformerDecoder(tiny_config()).eval()


def test_missing_encoder_states_is_a_clear_error(decoder):
    with pytest.raises(ValueError, match="encoder_hidden_states is required"):
        decoder(torch.tensor([[1, 2, 3]]), None)
    layer = decoder.layers[0]
    with pytest.raises(ValueError, match="encoder_hidden_states is required"):
        layer(torch.randn(1, 3, 32), None)


def test_encoder_decoder_batch_mismatch_is_a_clear_error(decoder):
    with pytest.raises(ValueError, match="encoder_hidden_states has batch size 3.*batch size 2"):
        decoder(torch.tensor([[1, 2], [3, 4]]), torch.randn(3, 5, 32))


def test_encoder_decoder_hidden_size_mismatch_is_a_clear_error(decoder):
    with pytest.raises(ValueError, match="encoder_hidden_states has hidden size 16.*hidden_size is 32"):
        decoder(torch.tensor([[1, 2]]), torch.randn(1, 5, 16))
    with pytest.raises(ValueError, match="encoder_hidden_states has hidden size 16"):
        decoder.layers[0](torch.randn(1, 2, 32), torch.randn(1, 5, 16))


def test_wrong_encoder_attention_mask_shape_is_a_clear_error(decoder):
    with pytest.raises(ValueError, match="encoder_attention_mask"):
        decoder(torch.tensor([[1, 2]]), torch.randn(1, 5, 32), encoder_attention_mask=torch.ones(1, 4))
    with pytest.raises(ValueError, match="encoder_attention_mask"):
        decoder(torch.tensor([[1, 2]]), torch.randn(1, 5, 32), encoder_attention_mask=torch.ones(2, 5))


def test_wrong_decoder_attention_mask_shape_is_a_clear_error(decoder):
    with pytest.raises(ValueError, match="attention_mask"):
        decoder(torch.tensor([[1, 2]]), torch.randn(1, 5, 32), attention_mask=torch.ones(1, 3))


def test_layer_masks_must_broadcast_to_the_scores(decoder):
    layer = decoder.layers[0]
    with pytest.raises(ValueError, match=r"self_attention_mask must broadcast to \(B, H, T, S\)"):
        layer(torch.randn(1, 3, 32), torch.randn(1, 5, 32), causal_mask(4))
    with pytest.raises(ValueError, match=r"encoder_attention_mask must broadcast to \(B, H, T, S\)"):
        layer(torch.randn(1, 3, 32), torch.randn(1, 5, 32), encoder_attention_mask=torch.ones(1, 1, 1, 4).bool())


def test_target_beyond_the_position_limit_is_a_clear_error(decoder):
    with pytest.raises(ValueError, match="max_position_embeddings=24"):
        decoder(torch.ones(1, 25, dtype=torch.long), torch.randn(1, 5, 32))


def test_past_key_values_of_the_wrong_length_is_a_clear_error(decoder):
    memory = torch.randn(1, 5, 32)
    cache = decoder(torch.tensor([[1]]), memory, use_cache=True).past_key_values
    assert all(isinstance(entry, LayerCache) for entry in cache)
    with pytest.raises(ValueError, match="one LayerCache per decoder layer"):
        decoder(torch.tensor([[2]]), memory, past_key_values=cache[:1])
