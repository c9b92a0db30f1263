"""Greedy generation: the key/value cache changes the cost, never the numbers."""

from __future__ import annotations

import pytest
import torch

from literate_transformer import TransformerConfig
from literate_transformer.book.decoder import EncoderDecoderTransformer
from literate_transformer.book.generation import GenerationOutput, greedy_generate
from literate_transformer.core.outputs import ModelOutput, Seq2SeqOutput

TOLERANCE = 1e-5
BOS, EOS = 1, 2


@pytest.fixture
def config(tiny_config):
    """This file's sizes (V=29, E=32, H=4, F=64), with dropout, to check that generation turns it off."""
    return lambda **changes: tiny_config(
        **{
            "vocab_size": 29,
            "hidden_size": 32,
            "intermediate_size": 64,
            "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1,
            **changes,
        }
    )


SOURCE = torch.tensor([[5, 6, 7, 8, 9, 10], [11, 12, 13, 0, 0, 0]])
SOURCE_MASK = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])


@pytest.fixture(params=[True, False], ids=["pre-LN", "post-LN"])
def model(request, config):
    return EncoderDecoderTransformer(config(), norm_first=request.param).eval()


def test_cached_decoding_gives_the_logits_of_full_recomputation_at_every_step(model):
    """Feeding one token at a time with a cache equals decoding the whole prefix."""
    target = torch.randint(3, 29, (2, 10))
    encoded = model.encode(SOURCE, SOURCE_MASK).last_hidden_state
    full = model.decode(target, encoded, SOURCE_MASK).logits  # every position at once
    cache = None
    for step in range(target.shape[1]):
        output = model.decode(target[:, step : step + 1], encoded, SOURCE_MASK, past_key_values=cache, use_cache=True)
        cache = output.past_key_values
        # The prefix recomputed from scratch, as use_cache=False does.
        recomputed = model.decode(target[:, : step + 1], encoded, SOURCE_MASK).logits[:, -1]
        assert (output.logits[:, -1] - recomputed).abs().max().item() <= TOLERANCE
        assert (output.logits[:, -1] - full[:, step]).abs().max().item() <= TOLERANCE
    # The self-attention cache grew to the whole target; the cross-attention cache is the source.
    keys, values = cache[0].self_attention
    assert keys.shape == values.shape == (2, 4, 10, 8)
    assert cache[0].cross_attention[0].shape == (2, 4, 6, 8)


def test_cross_attention_keys_and_values_are_computed_once(model, monkeypatch):
    calls = []
    layer = model.decoder.layers[0]
    original = layer.cross_attention.project_key_value

    def counting(states):
        calls.append(states.shape)
        return original(states)

    monkeypatch.setattr(layer.cross_attention, "project_key_value", counting)
    greedy_generate(model, SOURCE, max_new_tokens=5, bos_token_id=BOS, attention_mask=SOURCE_MASK)
    assert calls == [torch.Size([2, 6, 32])]
    calls.clear()
    greedy_generate(model, SOURCE, max_new_tokens=5, bos_token_id=BOS, attention_mask=SOURCE_MASK, use_cache=False)
    assert len(calls) == 5  # without a cache: projected again at every step


def test_greedy_generate_with_and_without_cache_agree(model):
    cached = greedy_generate(model, SOURCE, 12, BOS, attention_mask=SOURCE_MASK)
    full = greedy_generate(model, SOURCE, 12, BOS, attention_mask=SOURCE_MASK, use_cache=False)
    assert isinstance(cached, GenerationOutput)
    assert cached.sequences.shape == (2, 13)
    assert torch.equal(cached.sequences, full.sequences)
    assert cached.logits.shape == (2, 12, 29)
    assert (cached.logits - full.logits).abs().max().item() <= TOLERANCE


def test_cached_generation_with_fused_sdpa_attention_matches_eager(config):
    eager = EncoderDecoderTransformer(config()).eval()
    fused = EncoderDecoderTransformer(config(attn_implementation="sdpa")).eval()
    fused.load_state_dict(eager.state_dict())
    expected = greedy_generate(eager, SOURCE, 8, BOS, attention_mask=SOURCE_MASK)
    actual = greedy_generate(fused, SOURCE, 8, BOS, attention_mask=SOURCE_MASK)
    assert torch.equal(actual.sequences, expected.sequences)
    assert (actual.logits - expected.logits).abs().max().item() <= TOLERANCE


def test_greedy_generate_picks_the_most_likely_token_of_each_step(model):
    output = greedy_generate(model, SOURCE, 6, BOS, attention_mask=SOURCE_MASK)
    tokens = output.sequences[:, 1:]
    # The model itself, without a cache, reads the start token and the generated prefix (teacher-forced, one pass):
    prefix = torch.cat([torch.full((2, 1), BOS), tokens[:, :-1]], dim=1)
    again = model(SOURCE, prefix, attention_mask=SOURCE_MASK).logits
    # every generated token is the most likely one of that independent pass ...
    assert torch.equal(tokens, again.argmax(-1))
    # ... whose scores are the ones generation reported, step by step.
    assert (again - output.logits).abs().max().item() <= TOLERANCE


def test_generation_restores_training_mode_and_records_no_gradients(model):
    model.train()
    output = greedy_generate(model, SOURCE, 3, BOS)
    assert model.training
    assert not output.logits.requires_grad
    # Dropout was off: the same call in eval mode gives the same tokens.
    model.eval()
    assert torch.equal(greedy_generate(model, SOURCE, 3, BOS).sequences, output.sequences)


class ScriptedModel(torch.nn.Module):
    """A stand-in whose next token is scripted per sequence and step (to test the loop itself)."""

    is_encoder_decoder = True

    def __init__(self, script: list[list[int]], vocab_size: int = 10):
        super().__init__()
        self.config = TransformerConfig(vocab_size=vocab_size, hidden_size=4, num_attention_heads=1)
        self.script = torch.tensor(script)
        self.fed: list[torch.Tensor] = []

    def encode(self, input_ids, attention_mask=None):
        return ModelOutput(torch.zeros(input_ids.shape[0], input_ids.shape[1], 4))

    def decode(self, decoder_input_ids, encoder_hidden_states, encoder_attention_mask=None, **kwargs):
        self.fed.append(decoder_input_ids)
        step = len(self.fed) - 1
        logits = torch.zeros(decoder_input_ids.shape[0], decoder_input_ids.shape[1], self.config.vocab_size)
        logits[torch.arange(len(self.script)), -1, self.script[:, step]] = 1.0
        return Seq2SeqOutput(logits, logits, past_key_values=() if kwargs.get("use_cache") else None)


def test_generation_stops_at_eos_and_pads_finished_sequences():
    model = ScriptedModel([[5, EOS, 7, 7, 7], [6, 6, 8, EOS, 9]])
    output = greedy_generate(model, torch.tensor([[3], [3]]), max_new_tokens=5, bos_token_id=BOS, eos_token_id=EOS)
    sequences = output.sequences
    pad = model.config.pad_token_id
    assert sequences.tolist() == [[BOS, 5, EOS, pad, pad], [BOS, 6, 6, 8, EOS]]
    # It stopped after the step where the last sequence finished (4 of 5 steps).
    assert len(model.fed) == 4
    # With a cache only the newest token was fed each step.
    assert [fed.shape[1] for fed in model.fed] == [1, 1, 1, 1]


def test_without_eos_generation_writes_max_new_tokens():
    model = ScriptedModel([[5, EOS, 7], [6, 6, 8]])
    output = greedy_generate(model, torch.tensor([[3], [3]]), max_new_tokens=3, bos_token_id=BOS, use_cache=False)
    sequences = output.sequences
    assert sequences.tolist() == [[BOS, 5, EOS, 7], [BOS, 6, 6, 8]]
    assert [fed.shape[1] for fed in model.fed] == [1, 2, 3]  # the whole prefix, every step


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("max_new_tokens", [0, -3])
def test_non_positive_max_new_tokens_is_a_clear_error(model, max_new_tokens):
    with pytest.raises(ValueError, match=f"max_new_tokens must be at least 1, got {max_new_tokens}"):
        greedy_generate(model, SOURCE, max_new_tokens, BOS)


def test_non_integer_max_new_tokens_is_a_clear_error(model):
    with pytest.raises(TypeError, match="max_new_tokens must be an int"):
        greedy_generate(model, SOURCE, 2.5, BOS)


def test_generating_beyond_the_position_limit_is_a_clear_error(model):
    with pytest.raises(ValueError, match="max_new_tokens=17 .* beyond max_position_embeddings=16"):
        greedy_generate(model, SOURCE, 17, BOS)
    # The limit itself is fine: 16 positions, the 16th new token is written but never read.
    assert greedy_generate(model, SOURCE, 16, BOS).sequences.shape == (2, 17)


def test_source_mask_of_the_wrong_shape_is_a_clear_error(model):
    with pytest.raises(ValueError, match="attention_mask"):
        greedy_generate(model, SOURCE, 3, BOS, attention_mask=torch.ones(2, 5))
    with pytest.raises(ValueError, match="attention_mask"):
        greedy_generate(model, SOURCE, 3, BOS, attention_mask=torch.ones(3, 6))


def test_token_ids_out_of_the_vocabulary_are_a_clear_error(model):
    with pytest.raises(ValueError, match=r"bos_token_id must be a token id in \[0, vocab_size=29\)"):
        greedy_generate(model, SOURCE, 3, bos_token_id=29)
    with pytest.raises(ValueError, match="eos_token_id"):
        greedy_generate(model, SOURCE, 3, BOS, eos_token_id=-1)
    with pytest.raises(ValueError, match="input_ids"):
        greedy_generate(model, SOURCE + 100, 3, BOS)


def test_a_model_without_an_encoder_is_a_clear_error(config):
    from literate_transformer.book.encoder import TransformerEncoder

    with pytest.raises(TypeError, match="model must be an encoder-decoder model"):
        greedy_generate(TransformerEncoder(config()), SOURCE, 3, BOS)


def test_cache_with_a_mismatched_batch_is_a_clear_error(model):
    encoded = model.encode(SOURCE).last_hidden_state
    cache = model.decode(torch.tensor([[BOS], [BOS]]), encoded, use_cache=True).past_key_values
    with pytest.raises(ValueError, match="past_key_value"):
        model.decode(torch.tensor([[BOS]]), encoded[:1], past_key_values=cache)


def test_a_forced_first_token_is_written_first_and_the_rest_follows_the_model(model):
    # HuggingFace's forced_bos_token_id: the first token is the caller's, then greedy decoding from there.
    forced = 7
    output = greedy_generate(model, SOURCE, 4, BOS, attention_mask=SOURCE_MASK, forced_bos_token_id=forced)
    assert output.sequences[:, 1].tolist() == [forced, forced]
    prefix = torch.cat([torch.full((2, 1), BOS), output.sequences[:, 1:-1]], dim=1)
    again = model(SOURCE, prefix, attention_mask=SOURCE_MASK).logits
    assert torch.equal(output.sequences[:, 2:], again[:, 1:].argmax(-1))
    with pytest.raises(ValueError, match="forced_bos_token_id must be a token id"):
        greedy_generate(model, SOURCE, 4, BOS, forced_bos_token_id=-1)
