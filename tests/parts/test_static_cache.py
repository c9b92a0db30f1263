"""Decoding over a static cache writes what the eager loop writes, on every decoding, and refuses what it refuses.

``generate()`` of Llama and the families built on it runs over the static
cache by default, so their family tests (``tests/families.py``) already
prove its ids equal to ``transformers``' (greedy, sampled under one seed,
beam search, on left-padded prompts).  Here the static path is run beside
the eager one on random models of every family whose record says it decodes
over a static cache (its running example's sizes, and the options its record
adds), each with an end token that occurs (so that finished rows
are padded and beams end): the same ids, and the same scores within
``1e-5`` at every step; the compiled step (traced, without Inductor's C++
build, which the benchmark runs) writes the same ids; a weight changed after
a call is read by the next; and bad input gets the eager path's errors.
"""

from __future__ import annotations

import importlib

import pytest
import torch
import transformers
from families import generate_both_ways
from shapes import LLAMA_GROUPED, padded_batch

from literate_transformer.book.decoding import generate
from literate_transformer.book.generation import greedy_generate
from literate_transformer.core.records import records
from literate_transformer.models.gpt2 import GPT2LMHeadModel
from literate_transformer.models.llama import LlamaForCausalLM
from literate_transformer.parts.static_cache import StaticCache, static_cache_applies

NEW_TOKENS = 6
#: Every decoding of ``generate()``, by transformers' names; beam search under each stopping rule.
DECODINGS = {
    "greedy": {},
    "sampled": {"do_sample": True, "temperature": 0.8, "top_k": 7, "top_p": 0.9},
    "beam": {"num_beams": 3},
    "beam_early_stopping": {"num_beams": 2, "early_stopping": True, "length_penalty": 2.0},
    "beam_sampling": {"num_beams": 3, "do_sample": True},
}


def _families() -> dict:
    """Every family whose record says it decodes over a static cache (and that this release of transformers has):
    its config's class, its language model, and the fields its record adds (the options its cache must honour)."""
    families = {}
    for key, family in records().items():
        if family.static_cache is not None and family.in_transformers():
            module = importlib.import_module(f"literate_transformer.{family.module}")
            config = dict(family.sizes, **family.static_cache)
            families[key] = (getattr(transformers, family.config), getattr(module, family.example_model), config)
    return families


FAMILIES = _families()


def _prompts(vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Three prompts of 6, two left-padded (by 2 and 4)."""
    return padded_batch(vocab_size, 6, (0, 2, 4), seed=2, side="left")


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def model(request, randomize):
    """A random model of the family whose end token is the one it writes most often (so that rows finish)."""
    config_class, model_class, fields = FAMILIES[request.param]
    config = config_class(**fields, bos_token_id=1, eos_token_id=None, pad_token_id=0)
    torch.manual_seed(0)
    ours = randomize(model_class(config), scale=0.5)
    input_ids, attention_mask = _prompts(config.vocab_size)
    written = ours.generate(input_ids, attention_mask, 8, cache_implementation="dynamic")[:, 6:]
    ours.config.eos_token_id = int(written.flatten().mode().values)
    return ours


@pytest.mark.parametrize("decoding", list(DECODINGS))
def test_generate_over_the_static_cache_writes_the_eager_loops_ids(model, decoding, monkeypatch):
    input_ids, attention_mask = _prompts(model.config.vocab_size)
    static, eager, steps = generate_both_ways(
        model, model, input_ids, attention_mask, NEW_TOKENS, DECODINGS[decoding], 3, monkeypatch
    )
    assert torch.equal(static, eager), f"{decoding}:\nstatic {static.tolist()}\neager  {eager.tolist()}"
    # One call per step, the prompt's first (beam search may run steps past the longest sequence it keeps).
    assert steps >= static.shape[1] - input_ids.shape[1] > 0
    if decoding == "greedy":
        # Not vacuous: the end token occurs, and rows that finished early are padded.
        assert (static[:, 6:] == model.config.eos_token_id).any()


@torch.no_grad()
def test_every_steps_scores_equal_the_eager_loops(model):
    input_ids, attention_mask = _prompts(model.config.vocab_size)
    model.config.eos_token_id, eos = None, model.config.eos_token_id  # every step written
    try:
        decoder = model.static_cache_decoder(input_ids.shape[1] + NEW_TOKENS)
        static = greedy_generate(decoder, input_ids, NEW_TOKENS, attention_mask=attention_mask)
        eager = greedy_generate(model, input_ids, NEW_TOKENS, attention_mask=attention_mask)
    finally:
        model.config.eos_token_id = eos
    assert torch.equal(static.sequences, eager.sequences)
    torch.testing.assert_close(static.logits, eager.logits, atol=1e-5, rtol=0)
    assert static.logits.shape == (3, NEW_TOKENS, model.config.vocab_size)


def test_the_compiled_step_writes_the_eager_loops_ids(randomize):
    # Traced as torch.compile traces it ("eager" backend: Dynamo's graph run as it is, without Inductor's C++
    # build, which would take the suite's time; the benchmark runs Inductor), on a one-layer Llama.
    config = transformers.LlamaConfig(**dict(LLAMA_GROUPED, num_hidden_layers=1), eos_token_id=None)
    torch.manual_seed(0)
    ours = randomize(LlamaForCausalLM(config), scale=0.5)
    input_ids, attention_mask = _prompts(config.vocab_size)
    eager = ours.generate(input_ids, attention_mask, 4, cache_implementation="dynamic")
    assert ours.compile(backend="eager") is ours
    compiled_calls = [0]
    step = ours._compiled_step

    def counted(*args):
        compiled_calls[0] += 1
        return step(*args)

    ours._compiled_step = counted
    assert torch.equal(ours.generate(input_ids, attention_mask, 4), eager)
    assert compiled_calls[0] == 3  # every step after the prompt's
    # Its cache is rounded up, so that calls of other lengths share one compilation.
    assert ours.static_cache_decoder(10).capacity == 128


def test_a_weight_changed_after_a_call_is_read_by_the_next(model):
    # The steps are the model's own forward: no copy of a weight to go stale.  The weights: every one of the first
    # layer's attention (its projections, fused or not, whatever the family names them), given noise as large as
    # their own values.
    input_ids, attention_mask = _prompts(model.config.vocab_size)
    before = model.generate(input_ids, attention_mask, NEW_TOKENS)
    weights = list(getattr(model, model.stack_name).layers[0].sublayers()[0].layer.parameters())
    saved = [weight.detach().clone() for weight in weights]
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for weight, values in zip(weights, saved, strict=True):
            weight.add_(torch.randn(values.shape, generator=generator) * values.std())
    try:
        eager = model.generate(input_ids, attention_mask, NEW_TOKENS, cache_implementation="dynamic")
        after = model.generate(input_ids, attention_mask, NEW_TOKENS)
        assert torch.equal(after, eager)
        # Not vacuous: the change changes what is written.
        assert not torch.equal(after, before)
    finally:
        with torch.no_grad():
            for weight, values in zip(weights, saved, strict=True):
                weight.copy_(values)


def test_beams_take_over_their_parents_cached_positions():
    cache = StaticCache(num_layers=2, batch_size=3, num_key_value_heads=1, capacity=4, head_size=2)
    with torch.inference_mode():
        for layer in cache.keys:
            layer[:, :, :2] = torch.arange(3.0)[:, None, None, None]
    cache.length = 2
    cache.reorder(torch.tensor([2, 2, 0]))
    for layer in cache.keys:
        assert layer[:, 0, :2, 0].tolist() == [[2.0, 2.0], [2.0, 2.0], [0.0, 0.0]]
        assert layer[:, :, 2:].abs().sum() == 0  # positions not yet written are left alone


def test_bad_input_gets_the_eager_paths_errors(model):
    vocab_size = model.config.vocab_size
    prompt = torch.tensor([[3, 4, 5]])
    for cache_implementation in (None, "dynamic"):
        options = dict(max_new_tokens=2, cache_implementation=cache_implementation)
        with pytest.raises(ValueError, match=rf"input_ids must be token ids in \[0, vocab_size={vocab_size}\)"):
            model.generate(torch.tensor([[1, vocab_size]]), **options)
        with pytest.raises(ValueError, match=r"attention_mask must have shape \(1, 3\)"):
            model.generate(prompt, torch.ones(1, 4, dtype=torch.long), **options)
        with pytest.raises(ValueError, match="max_new_tokens must be at least 1"):
            model.generate(prompt, max_new_tokens=0, cache_implementation=cache_implementation)
        with pytest.raises(ValueError, match="top_p must be a number in"):
            model.generate(prompt, do_sample=True, top_p=0.0, **options)
        with pytest.raises(ValueError, match="num_beams must be a positive int"):
            model.generate(prompt, num_beams=0, **options)


def test_the_cache_options_are_checked():
    model = LlamaForCausalLM(transformers.LlamaConfig(**LLAMA_GROUPED)).eval()
    prompt = torch.tensor([[3, 4, 5]])
    with pytest.raises(ValueError, match=r"cache_implementation must be one of \(None, 'static', 'dynamic'\)"):
        model.generate(prompt, max_new_tokens=2, cache_implementation="offloaded")
    with pytest.raises(ValueError, match="cache_implementation='static' needs use_cache=True"):
        model.generate(prompt, max_new_tokens=2, cache_implementation="static", use_cache=False)
    gpt2 = GPT2LMHeadModel(transformers.GPT2Config(vocab_size=20, n_embd=12, n_layer=1, n_head=2)).eval()
    with pytest.raises(ValueError, match="GPT2LMHeadModel's family does not decode over a static cache"):
        generate(gpt2, prompt, max_new_tokens=2, cache_implementation="static")
    assert static_cache_applies(gpt2) is not None
    # Static, asked for, is what the default runs.
    assert torch.equal(
        model.generate(prompt, max_new_tokens=3, cache_implementation="static"),
        model.generate(prompt, max_new_tokens=3),
    )


def test_compile_refuses_an_unknown_backend():
    model = LlamaForCausalLM(transformers.LlamaConfig(**LLAMA_GROUPED)).eval()
    with pytest.raises(ValueError, match=r"backend must be one of \[.*'inductor'.*\], got 'nope'"):
        model.compile(backend="nope")
    with pytest.raises(TypeError, match="backend must be a string such as 'inductor', got int"):
        model.compile(backend=3)
    with pytest.raises(TypeError, match="dynamic must be True, False or None, got 'yes'"):
        model.compile(dynamic="yes")
    with pytest.raises(ValueError, match=r"mode must be one of \(None, 'default', 'reduce-overhead'.*got 'fast'"):
        model.compile(mode="fast")
    with pytest.raises(ValueError, match="mode applies to the 'inductor' backend only, got backend='eager'"):
        model.compile(backend="eager", mode="reduce-overhead")
    assert model._compiled_step is None  # nothing compiled by a refused call


def test_a_replayed_step_reads_the_cache_and_the_tables_in_place(randomize, monkeypatch):
    # CUDA graphs need a GPU: torch.compile is replaced by the step itself, which records what it was given.
    config = transformers.LlamaConfig(**dict(LLAMA_GROUPED, num_hidden_layers=1), eos_token_id=None)
    torch.manual_seed(0)
    ours = randomize(LlamaForCausalLM(config), scale=0.5)
    input_ids, attention_mask = _prompts(config.vocab_size)
    eager = ours.generate(input_ids, attention_mask, 4, cache_implementation="dynamic")
    given = []

    def compile_as_given(step, backend, dynamic, mode):
        assert (backend, mode) == ("inductor", "reduce-overhead")

        def recorded(input_ids, cache):
            given.append((input_ids, cache.keys[0], cache.values[0], cache.tables.position_ids))
            return step(input_ids, cache)

        return recorded

    monkeypatch.setattr(torch, "compile", compile_as_given)
    assert torch.equal(ours.compile(mode="reduce-overhead").generate(input_ids, attention_mask, 4), eager)
    assert len(given) == 3  # every step after the prompt's
    (*in_place,) = (getattr(tensor, "_dynamo_static_input_type", None) for tensor in given[0][1:])
    assert in_place == ["unguarded"] * 3
    # The new token's ids are copied into the graph's input: they are not marked.
    assert not hasattr(given[0][0], "_dynamo_static_input_type")


def _llama(randomize) -> LlamaForCausalLM:
    config = transformers.LlamaConfig(**LLAMA_GROUPED, eos_token_id=None)
    torch.manual_seed(0)
    return randomize(LlamaForCausalLM(config), scale=0.5)


def test_a_model_the_cache_cannot_serve_is_told_why_and_decodes_over_the_growing_cache(randomize):
    model = _llama(randomize)
    input_ids, attention_mask = _prompts(model.config.vocab_size)
    expected = model.generate(input_ids, attention_mask, 3, cache_implementation="dynamic")
    model.model.layers[1].self_attn.layer_idx = None  # its attention no longer knows the cache entry it writes
    assert static_cache_applies(model) == "layer 1's attention has layer_idx=None: the cache entry it writes"
    with pytest.warns(UserWarning, match="LlamaForCausalLM decodes over the growing cache.*layer 1's attention"):
        written = model.generate(input_ids, attention_mask, 3)
    assert torch.equal(written, expected)
    with pytest.raises(ValueError, match="cache_implementation='static' cannot run this model: layer 1's attention"):
        model.generate(input_ids, attention_mask, 3, cache_implementation="static")


def test_an_attention_that_does_not_write_the_cache_is_refused_by_name_not_decoded_wrong(randomize, monkeypatch):
    model = _llama(randomize)
    input_ids, attention_mask = _prompts(model.config.vocab_size)
    attention = model.model.layers[1].self_attn
    forward = type(attention).forward

    def without_the_cache(self, hidden_states, *args, past_key_value=None, **kwargs):
        # A forward of its own that drops the cache object: the static cache's entry for it would stay empty.
        return forward(self, hidden_states, *args, past_key_value=None, **kwargs)

    monkeypatch.setattr(attention, "forward", without_the_cache.__get__(attention))
    with pytest.raises(RuntimeError, match=r"the attention of layers \[1\] did not write the static cache"):
        model.generate(input_ids, attention_mask, 3)


@torch.no_grad()
def test_the_decoder_refuses_a_cache_it_did_not_make_and_positions_past_its_capacity():
    model = LlamaForCausalLM(transformers.LlamaConfig(**LLAMA_GROUPED)).eval()
    decoder = model.static_cache_decoder(4)
    with pytest.raises(
        TypeError,
        match="past_key_values must be None at the first call, then the StaticCache this decoder returned, got StaticCache",
    ):
        decoder(torch.tensor([[3]]), past_key_values=StaticCache(2, 1, 2, 4, 8))
    cache = decoder(torch.tensor([[3, 4, 5]])).past_key_values
    assert cache.length == 3
    with pytest.raises(ValueError, match="the cache holds 4 positions and 3 are written: no room for 2 more"):
        decoder(torch.tensor([[3, 4]]), past_key_values=cache)
    with pytest.raises(TypeError, match="got tuple"):
        decoder(torch.tensor([[3]]), past_key_values=())


@pytest.mark.parametrize("training", [False, True])
def test_generate_leaves_the_model_in_the_mode_it_found_it_in(training):
    torch.manual_seed(0)
    model = LlamaForCausalLM(transformers.LlamaConfig(**LLAMA_GROUPED)).train(training)
    model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=2)
    assert model.training is training
