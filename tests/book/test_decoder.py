"""The decoder: equal to PyTorch's own decoder, causal, and strict about its inputs."""

from __future__ import annotations

import pytest
import torch

import literate_transformer.core.masks as masks_module
from literate_transformer.book.decoder import EncoderDecoderTransformer, TransformerDecoder, TransformerDecoderLayer
from literate_transformer.core.masks import causal_mask, padding_mask
from literate_transformer.core.outputs import LayerCache, ModelOutput, Seq2SeqOutput
from literate_transformer.interop import book_decoder_layer_to_torch, book_decoder_to_torch

TOLERANCE = 1e-5


@pytest.fixture
def config(tiny_config):
    """This file's sizes: V=31, E=32, H=4, F=64, two layers, positions up to 24."""
    return lambda **changes: tiny_config(
        **{
            "vocab_size": 31,
            "hidden_size": 32,
            "intermediate_size": 64,
            "max_position_embeddings": 24,
            "layer_norm_eps": 1e-5,
            **changes,
        }
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
def test_decoder_layer_matches_torch_decoder_layer(norm_first, source_padding, config, randomize):
    ours = randomize(TransformerDecoderLayer(config(), norm_first=norm_first), scale=0.1)
    theirs = book_decoder_layer_to_torch(ours)
    target, memory = torch.randn(2, 5, 32), torch.randn(2, 6, 32)

    ours_mask = padding_mask(SOURCE_MASK) if source_padding else None
    theirs_mask = ~SOURCE_MASK.bool() if source_padding else None
    expected = theirs(target, memory, tgt_mask=torch_causal_mask(5), memory_key_padding_mask=theirs_mask)
    actual = ours(target, memory, causal_mask(5), ours_mask).hidden_states

    assert actual.shape == (2, 5, 32)
    assert (actual - expected).abs().max().item() <= TOLERANCE
    # The comparison is not vacuous: the source padding changes the second example.
    other = ours(target, memory, causal_mask(5), None if source_padding else padding_mask(SOURCE_MASK)).hidden_states
    assert (other[1] - actual[1]).abs().max().item() > 1e-3


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
def test_decoder_stack_matches_torch_transformer_decoder(norm_first, config, randomize):
    ours = randomize(TransformerDecoder(config(), norm_first=norm_first), scale=0.1)
    theirs = book_decoder_to_torch(ours)
    input_ids = torch.randint(0, ours.config.vocab_size, (2, 5))
    target_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]])
    memory = torch.randn(2, 6, 32)

    expected = theirs(
        ours.embeddings(input_ids),
        memory,
        tgt_mask=torch_causal_mask(5),
        tgt_key_padding_mask=~target_mask.bool(),
        memory_key_padding_mask=~SOURCE_MASK.bool(),
    )
    actual = ours(input_ids, memory, attention_mask=target_mask, encoder_attention_mask=SOURCE_MASK).last_hidden_state

    assert actual.shape == (2, 5, 32)
    assert (actual - expected).abs().max().item() <= TOLERANCE


def test_fused_sdpa_attention_gives_the_same_decoder_outputs_as_eager(config):
    eager = EncoderDecoderTransformer(config()).eval()
    fused = EncoderDecoderTransformer(config(attn_implementation="sdpa")).eval()
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
    before, after = decoder(input_ids, memory).last_hidden_state, decoder(changed, memory).last_hidden_state
    earlier = (before[:, :-1] - after[:, :-1]).abs().max().item()
    last = (before[:, -1] - after[:, -1]).abs().max().item()
    return earlier, last


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
def test_changing_a_future_token_leaves_earlier_positions_unchanged(norm_first, config):
    decoder = TransformerDecoder(config(), norm_first=norm_first).eval()
    earlier, last = _future_token_effect(decoder)
    assert earlier == 0.0
    assert last > 1e-3  # the changed position itself does change


def test_without_the_causal_mask_the_future_leaks_into_earlier_positions(monkeypatch, config):
    """The causality check above can fail: remove the mask and it does."""
    decoder = TransformerDecoder(config()).eval()

    def no_mask(query_length, key_length=None, device=None, window=None):
        return torch.ones(query_length, key_length or query_length, dtype=torch.bool, device=device)

    monkeypatch.setattr(masks_module, "causal_mask", no_mask)
    earlier, _ = _future_token_effect(decoder)
    assert earlier > 1e-3


def test_self_attention_weights_are_zero_above_the_diagonal(config):
    model = EncoderDecoderTransformer(config()).eval()
    output = model(torch.randint(3, 31, (2, 6)), torch.randint(3, 31, (2, 5)), output_attentions=True)
    for weights in output.decoder_attentions:
        upper = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
        assert weights[..., upper].abs().max().item() == 0.0
        assert torch.allclose(weights.sum(-1), torch.ones(2, 4, 5))


def test_cross_attention_ignores_padded_source_tokens(config):
    model = EncoderDecoderTransformer(config()).eval()
    source = torch.randint(3, 31, (2, 6))
    output = model(source, torch.randint(3, 31, (2, 5)), attention_mask=SOURCE_MASK, output_attentions=True)
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


def test_padded_target_positions_produce_no_nan(config):
    model = EncoderDecoderTransformer(config()).eval()
    target_mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 0, 0, 0]])
    output = model(torch.randint(3, 31, (2, 6)), torch.randint(3, 31, (2, 5)), decoder_attention_mask=target_mask)
    assert torch.isfinite(output.logits).all()


# ---------------------------------------------------------------------------
# The encoder-decoder model
# ---------------------------------------------------------------------------
def test_encoder_decoder_returns_logits_and_one_attention_tensor_per_layer(config):
    config = config(num_hidden_layers=3)
    model = EncoderDecoderTransformer(config).eval()
    output = model(torch.randint(0, 31, (2, 6)), torch.randint(0, 31, (2, 4)), output_attentions=True)
    assert isinstance(output, Seq2SeqOutput)
    assert all(isinstance(field, tuple) for field in (output.encoder_attentions, output.decoder_attentions))
    assert output.logits.shape == (2, 4, config.vocab_size)
    assert [w.shape for w in output.encoder_attentions] == [(2, 4, 6, 6)] * 3
    assert [w.shape for w in output.decoder_attentions] == [(2, 4, 4, 4)] * 3
    assert [w.shape for w in output.cross_attentions] == [(2, 4, 4, 6)] * 3
    plain = model(torch.randint(0, 31, (2, 6)), torch.randint(0, 31, (2, 4)))
    assert plain.encoder_attentions is None and plain.cross_attentions is None


def test_encoder_decoder_logits_are_lm_head_of_decoder_output(config):
    model = EncoderDecoderTransformer(config(), norm_first=False).eval()
    source, target = torch.randint(0, 31, (2, 6)), torch.randint(0, 31, (2, 4))
    output = model(source, target, attention_mask=SOURCE_MASK)
    encoded = model.encoder(source, attention_mask=SOURCE_MASK).last_hidden_state
    decoded = model.decoder(target, encoded, encoder_attention_mask=SOURCE_MASK)
    assert isinstance(decoded, ModelOutput)
    expected = model.lm_head(decoded.last_hidden_state)
    assert (output.logits - expected).abs().max().item() <= TOLERANCE


def test_decoder_accepts_a_transformers_config():
    from transformers import BertConfig

    config = BertConfig(vocab_size=31, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64)
    decoder = TransformerDecoder(config)
    assert decoder(torch.tensor([[1, 2]]), torch.randn(1, 3, 32)).last_hidden_state.shape == (1, 2, 32)


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------
@pytest.fixture
def decoder(config):
    return TransformerDecoder(config()).eval()


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
    with pytest.raises(
        ValueError, match=r"attention_mask must broadcast to the attention scores' shape \(1, 4, 3, 3\)"
    ):
        layer(torch.randn(1, 3, 32), torch.randn(1, 5, 32), causal_mask(4))
    with pytest.raises(ValueError, match=r"encoder_attention_mask must broadcast to the attention scores' shape"):
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
