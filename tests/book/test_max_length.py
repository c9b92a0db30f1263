"""generate(max_length=...) as transformers defines it: the whole sequence, prompt (or start token) included."""

from __future__ import annotations

import pytest
import torch
import transformers

import literate_transformer as lt


@pytest.fixture(scope="module")
def llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=50, hidden_size=24, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, eos_token_id=2,
    )  # fmt: skip
    hf = transformers.LlamaForCausalLM(config).eval()
    return hf, lt.from_hf(hf)


@pytest.fixture(scope="module")
def bart():
    torch.manual_seed(0)
    config = transformers.BartConfig(
        vocab_size=50, d_model=24, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=32,
        forced_eos_token_id=None, eos_token_id=49,
    )  # fmt: skip
    hf = transformers.BartForConditionalGeneration(config).eval()
    hf.generation_config.forced_eos_token_id = None
    hf.generation_config.forced_bos_token_id = None
    hf.generation_config.no_repeat_ngram_size = 0
    hf.generation_config.min_length = 0
    return hf, lt.from_hf(hf)


PROMPT = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])


@torch.no_grad()
def test_a_decoders_max_length_counts_the_prompt_as_transformers_counts_it(llama):
    hf, ours = llama
    written = ours.generate(PROMPT, max_length=9)
    assert written.shape == (2, 9)
    assert torch.equal(written, hf.generate(PROMPT, max_length=9, do_sample=False))
    assert torch.equal(written, ours.generate(PROMPT, max_new_tokens=5))
    # The module-level generate() reads it too, and beam search with it.
    assert torch.equal(lt.book.decoding.generate(ours, PROMPT, max_length=9, eos_token_id=2), written)
    beams = ours.generate(PROMPT, max_length=8, num_beams=2)
    assert torch.equal(beams, hf.generate(PROMPT, max_length=8, num_beams=2, do_sample=False))


@pytest.mark.filterwarnings("ignore:Both `max_new_tokens`")
@torch.no_grad()
def test_max_new_tokens_wins_over_max_length_as_in_transformers(llama):
    hf, ours = llama
    both = ours.generate(PROMPT, max_new_tokens=3, max_length=9)
    assert both.shape == (2, 7)
    assert torch.equal(both, hf.generate(PROMPT, max_new_tokens=3, max_length=9, do_sample=False))
    # Neither: 20 new tokens (transformers 5's default; 4.x counted 20 for the whole sequence).
    assert ours.generate(PROMPT).shape == (2, 24)


@torch.no_grad()
def test_an_encoder_decoders_max_length_counts_the_start_token(bart):
    hf, ours = bart
    written = ours.generate(PROMPT, max_length=6)
    assert written.shape[1] <= 6
    assert torch.equal(written, hf.generate(PROMPT, max_length=6, do_sample=False, num_beams=1))


def test_a_max_length_without_room_or_of_another_type_is_refused_by_name(llama, bart):
    with pytest.raises(ValueError, match="max_length=4 leaves no room for a new token after the prompt's 4 tokens"):
        llama[1].generate(PROMPT, max_length=4)
    with pytest.raises(ValueError, match="max_length=1 leaves no room for a new token after the start token"):
        bart[1].generate(PROMPT, max_length=1)
    with pytest.raises(TypeError, match="max_length must be an int, got float"):
        llama[1].generate(PROMPT, max_length=8.0)
