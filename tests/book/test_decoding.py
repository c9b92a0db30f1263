"""Sampling and beam search: each filter equals transformers' logits warper, and every decoding its generate().

* temperature, top-k and top-p equal ``TemperatureLogitsWarper``,
  ``TopKLogitsWarper`` and ``TopPLogitsWarper`` (exactly: the same
  operations), and :func:`filter_scores` their ``LogitsProcessorList`` in
  HuggingFace's order;
* sampled and beam-searched ids are those of ``generate()`` (same seed),
  with end-of-sequence tokens that do occur: sequences that finish early
  are padded as HuggingFace pads them, under every stopping rule of beam
  search, for a decoder-only model (GPT-2) and an encoder-decoder one (BART);
* and what the options mean: ``top_k=1`` sampling is greedy decoding.
"""

from __future__ import annotations

import pytest
import torch
import transformers
from shapes import BART
from transformers.generation.logits_process import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from literate_transformer import from_hf
from literate_transformer.book.decoding import (
    apply_temperature,
    filter_scores,
    generate,
    top_k_filter,
    top_p_filter,
)
from literate_transformer.book.generation import greedy_generate

SCORES = torch.randn(4, 37, generator=torch.Generator().manual_seed(0)) * 3


@pytest.mark.parametrize("temperature", [0.3, 1.7])
def test_temperature_equals_transformers_warper(temperature):
    assert torch.equal(apply_temperature(SCORES, temperature), TemperatureLogitsWarper(temperature)(None, SCORES))


@pytest.mark.parametrize(("top_k", "keep"), [(1, 1), (5, 1), (5, 7), (50, 1)])
def test_top_k_equals_transformers_warper(top_k, keep):
    expected = TopKLogitsWarper(top_k, min_tokens_to_keep=keep)(None, SCORES)
    actual = top_k_filter(SCORES, top_k, min_tokens_to_keep=keep)
    assert torch.equal(actual, expected)
    assert (actual > -float("inf")).sum(dim=-1).tolist() == [min(max(top_k, keep), 37)] * 4


@pytest.mark.parametrize(("top_p", "keep"), [(0.05, 1), (0.5, 1), (0.9, 1), (0.5, 6)])
def test_top_p_equals_transformers_warper(top_p, keep):
    expected = TopPLogitsWarper(top_p, min_tokens_to_keep=keep)(None, SCORES)
    actual = top_p_filter(SCORES, top_p, min_tokens_to_keep=keep)
    assert torch.equal(actual, expected)
    # What is kept holds at least top_p of the probability.
    assert (SCORES.softmax(-1) * (actual > -float("inf"))).sum(-1).min() >= top_p


def test_the_three_filters_apply_in_transformers_order():
    warpers = LogitsProcessorList([TemperatureLogitsWarper(0.7), TopKLogitsWarper(9), TopPLogitsWarper(0.8)])
    assert torch.equal(filter_scores(SCORES, 0.7, 9, 0.8), warpers(None, SCORES))
    # Not vacuous: another order keeps other tokens.
    other = TopKLogitsWarper(9)(None, TopPLogitsWarper(0.8)(None, apply_temperature(SCORES, 0.7)))
    assert not torch.equal(filter_scores(SCORES, 0.7, 9, 0.8), other)


#: Whether transformers' beam search is the one the package follows (5's ``_beam_search``, with
#: ``_get_top_k_continuations``); the older ``BeamSearchScorer`` pads and ranks finished beams otherwise.
BEAM_SEARCH_AS_FOLLOWED = hasattr(transformers.GenerationMixin, "_get_top_k_continuations")
OLD_BEAM_SEARCH = pytest.mark.skipif(
    not BEAM_SEARCH_AS_FOLLOWED,
    reason=f"transformers {transformers.__version__}'s beam search (BeamSearchScorer) is not the _beam_search "
    "of transformers 5 that the package follows once sequences end",
)
#: Decodings whose stopping rules differ once end-of-sequence tokens occur.
OPTIONS = {
    "greedy": {},
    "sampled": {"do_sample": True, "top_k": 0},
    "beam": {"num_beams": 3},
    "beam_length_penalty_2": {"num_beams": 2, "length_penalty": 2.0},
    "beam_early_stopping": {"num_beams": 3, "early_stopping": True},
    "beam_never_stop_early_negative_penalty": {"num_beams": 4, "early_stopping": "never", "length_penalty": -0.5},
    "beam_sampling": {"num_beams": 3, "do_sample": True},
}


def _random_gpt2(randomize, seed: int, vocab_size: int, eos_token_id: int | None, pad_token_id: int | None):
    sizes = dict(vocab_size=vocab_size, n_embd=12, n_layer=1, n_head=3, n_positions=16)
    special = dict(bos_token_id=1, eos_token_id=eos_token_id, pad_token_id=pad_token_id)
    config = transformers.GPT2Config(**sizes, **special, attn_implementation="eager")
    torch.manual_seed(seed)
    return randomize(transformers.GPT2LMHeadModel(config), scale=0.5)


@pytest.fixture(scope="module")
def models_that_end(randomize):
    """Random GPT-2s whose end token is the one they write most often, with a padding id of 0, another, or none."""
    vocab_size = 23
    input_ids = torch.randint(3, vocab_size, (4, 5), generator=torch.Generator().manual_seed(1))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, :2] = attention_mask[3, :1] = 0
    input_ids = input_ids.masked_fill(attention_mask == 0, 0)
    found = []
    for seed, pad_token_id in ((0, 0), (1, 7), (2, None)):
        model = from_hf(_random_gpt2(randomize, seed, vocab_size, None, pad_token_id))
        with torch.no_grad():
            written = greedy_generate(model, input_ids, 8, attention_mask=attention_mask).sequences[:, 5:]
        eos_token_id = int(written.flatten().mode().values)
        hf = _random_gpt2(randomize, seed, vocab_size, eos_token_id, pad_token_id)
        found.append((hf, from_hf(hf)))
    return found, input_ids, attention_mask


@pytest.mark.parametrize(
    "decoding",
    [pytest.param(name, marks=OLD_BEAM_SEARCH if "beam" in name else ()) for name in OPTIONS],
)
@torch.no_grad()
def test_every_decoding_with_end_of_sequence_tokens_gives_hfs_ids(models_that_end, decoding):
    models, input_ids, attention_mask = models_that_end
    options = OPTIONS[decoding]
    ended = 0
    for hf, ours in models:
        torch.manual_seed(3)
        actual = ours.generate(input_ids, attention_mask, 8, **options)
        torch.manual_seed(3)
        expected = hf.generate(
            input_ids, attention_mask=attention_mask, max_new_tokens=8, **{"do_sample": False, **options}
        )
        assert torch.equal(actual, expected), f"eos {hf.config.eos_token_id}:\n{actual}\n{expected}"
        ended += bool((actual[:, 5:] == hf.config.eos_token_id).any())
    # Not vacuous: every model wrote its end token.
    assert ended == len(models)


def test_some_decodings_stop_before_max_new_tokens(models_that_end):
    models, input_ids, attention_mask = models_that_end
    lengths = [ours.generate(input_ids, attention_mask, 8, **OPTIONS["beam"]).shape[1] for _, ours in models]
    assert min(lengths) < 13


@torch.no_grad()
def test_beam_search_and_sampling_of_an_encoder_decoder_model_give_hfs_ids(hf_api):
    torch.manual_seed(0)
    config = transformers.BartConfig(**BART("deeper_decoder_3_and_4_heads"), attn_implementation="eager")
    hf = transformers.BartForConditionalGeneration(config).eval()
    for parameter in hf.parameters():
        parameter.add_(0.3 * torch.randn_like(parameter))
    hf_api.greedy_generate(hf, torch.tensor([[5, 6]]), None, max_new_tokens=1)  # switches off BART's forced tokens
    ours = from_hf(hf)
    source = torch.randint(3, 53, (2, 7))
    mask = torch.ones_like(source)
    mask[1, -2:] = 0
    special = dict(bos_token_id=config.decoder_start_token_id, eos_token_id=config.eos_token_id)
    for options in ({"num_beams": 3}, {"do_sample": True, "top_k": 5}):
        torch.manual_seed(1)
        actual = generate(ours, source, mask, 8, **special, **options)
        torch.manual_seed(1)
        expected = hf.generate(source, attention_mask=mask, max_new_tokens=8, **{"do_sample": False, **options})
        assert torch.equal(actual, expected), options


@torch.no_grad()
def test_sampling_among_the_single_most_likely_token_is_greedy_decoding(randomize):
    torch.manual_seed(0)
    hf = randomize(transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=31, n_embd=12, n_layer=1, n_head=2)))
    ours = from_hf(hf)
    prompt = torch.tensor([[3, 4, 5], [6, 7, 8]])
    greedy = greedy_generate(ours, prompt, 6).sequences
    assert torch.equal(ours.generate(prompt, max_new_tokens=6, do_sample=True, top_k=1), greedy)
    # ... and plain sampling is not (not vacuous).
    torch.manual_seed(0)
    assert not torch.equal(ours.generate(prompt, max_new_tokens=6, do_sample=True, temperature=2.0, top_k=0), greedy)


def test_decoding_options_out_of_range_are_refused():
    model = from_hf(
        transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=31, n_embd=12, n_layer=1, n_head=2))
    )
    prompt = torch.tensor([[3, 4]])
    with pytest.raises(ValueError, match="early_stopping must be True, False or 'never'"):
        model.generate(prompt, max_new_tokens=2, num_beams=2, early_stopping="sometimes")
    with pytest.raises(TypeError, match="do_sample must be a bool"):
        model.generate(prompt, max_new_tokens=2, do_sample="yes")
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_option'"):
        model.generate(prompt, max_new_tokens=2, no_such_option=1)
