"""lt.train: random windows of a stream, AdamW with decay on matrices only, warmup and cosine decay, clipping.

The loop is proved against a hand-written one: its first step gives the
same loss and the same parameters as the same step written out with
PyTorch's own calls.  The rest are its parts, one behaviour each: the
schedule's values (from the formula, written here), the weight-decay
groups, clipping, determinism, a repetitive stream learned, the same run
on ``transformers``' Llama, and every refusal by name.  The two baselines a
loss is read against are checked against their formulas written out here
with Python's counters.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections import Counter

import pytest
import torch
import transformers
from torch.optim.optimizer import register_optimizer_step_pre_hook

import literate_transformer as lt
from literate_transformer.pretraining.causal_lm import (
    bigram_loss,
    get_batch,
    learning_rate_at,
    parameter_groups,
    unigram_entropy,
)

#: A tiny Llama: 16 tokens, positions for windows of up to 24.
SIZES = dict(
    vocab_size=16,
    hidden_size=24,
    intermediate_size=40,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=24,
)
#: A stream the model can learn in a few steps: 0, 1, ..., 15 again and again.
STREAM = torch.arange(16).repeat(30)


def tiny_llama(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return lt.LlamaForCausalLM(transformers.LlamaConfig(**SIZES))


def test_the_learning_rate_rises_linearly_then_falls_along_half_a_cosine_to_the_minimum():
    peak, low, warmup, steps = 1.0, 0.1, 10, 101
    rate = lambda step: learning_rate_at(  # noqa: E731
        step, steps=steps, learning_rate=peak, min_learning_rate=low, warmup_steps=warmup
    )
    # Warmup: step s uses peak * (s + 1) / warmup.
    assert rate(0) == pytest.approx(0.1) and rate(4) == pytest.approx(0.5) and rate(9) == pytest.approx(1.0)
    # Decay over steps 10 ... 100: low + (peak - low) (1 + cos(pi p)) / 2, p the fraction done.
    assert rate(10) == pytest.approx(1.0)
    assert rate(10 + 45) == pytest.approx(low + (peak - low) / 2)  # p = 1/2: cos = 0
    assert rate(10 + 30) == pytest.approx(low + (peak - low) * (1 + math.cos(math.pi / 3)) / 2)
    assert rate(100) == pytest.approx(low)


def test_the_run_uses_the_schedule_at_every_step():
    history = lt.train(tiny_llama(), STREAM, steps=12, batch_size=2, sequence_length=8, warmup_steps=3)
    expected = [
        learning_rate_at(s, steps=12, learning_rate=1e-3, min_learning_rate=1e-4, warmup_steps=3) for s in range(12)
    ]
    assert history.learning_rate == pytest.approx(expected)
    assert history.steps == list(range(1, 13))


def test_weight_decay_falls_on_matrices_and_tables_not_on_biases_or_norms():
    config = transformers.LlamaConfig(**SIZES, attention_bias=True, tie_word_embeddings=True)
    model = lt.LlamaForCausalLM(config)
    decayed, kept = parameter_groups(model, 0.1)
    names = {id(parameter): name for name, parameter in model.named_parameters()}
    decayed_names = {names[id(parameter)] for parameter in decayed["params"]}
    kept_names = {names[id(parameter)] for parameter in kept["params"]}
    assert (decayed["weight_decay"], kept["weight_decay"]) == (0.1, 0.0)
    assert "model.embed_tokens.weight" in decayed_names and "model.layers.0.self_attn.q_proj.weight" in decayed_names
    assert "model.norm.weight" in kept_names and "model.layers.0.self_attn.q_proj.bias" in kept_names
    assert all(name.endswith(("norm.weight", ".bias")) for name in kept_names)
    # The tied head is the token table: one tensor, decayed once.
    assert len(decayed["params"]) + len(kept["params"]) == len(list(model.parameters()))


def test_clipping_scales_the_gradients_down_to_max_grad_norm_and_the_history_keeps_the_norm_before():
    seen = []

    def gradient_norm_at_the_step(optimizer, args, kwargs):
        gradients = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        seen.append(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in gradients])).item())

    handle = register_optimizer_step_pre_hook(gradient_norm_at_the_step)
    try:
        clipped = lt.train(tiny_llama(), STREAM, steps=3, batch_size=2, sequence_length=8, max_grad_norm=0.01)
        free = lt.train(tiny_llama(), STREAM, steps=3, batch_size=2, sequence_length=8, max_grad_norm=None)
    finally:
        handle.remove()
    assert min(clipped.grad_norm) > 0.01
    assert seen[:3] == pytest.approx([0.01] * 3, rel=1e-5)
    assert seen[3:] == pytest.approx(free.grad_norm, rel=1e-5)


def test_a_repetitive_stream_is_learned():
    history = lt.train(
        tiny_llama(), STREAM, steps=40, batch_size=4, sequence_length=16, learning_rate=1e-2, warmup_steps=5,
        validation_tokens=torch.arange(16).repeat(4), eval_every=20,
    )  # fmt: skip
    assert history.train_loss[-1] < history.train_loss[0] / 4
    assert history.val_steps == [0, 20, 40] and history.val_loss[-1] < history.val_loss[0] / 4
    assert history.tokens == 40 * 4 * 16 and history.tokens_per_second > 0


def test_the_same_seed_gives_the_same_run_and_another_seed_another():
    model = tiny_llama()
    runs = [copy.deepcopy(model) for _ in range(3)]
    histories = [lt.train(run, STREAM, steps=5, batch_size=2, sequence_length=8, seed=seed) for run, seed in
                 zip(runs, (3, 3, 4), strict=True)]  # fmt: skip
    for measured in ("train_loss", "grad_norm", "update_norm"):
        assert getattr(histories[0], measured) == getattr(histories[1], measured)
    for first, second in zip(runs[0].parameters(), runs[1].parameters(), strict=True):
        assert torch.equal(first, second)
    assert histories[2].train_loss != histories[0].train_loss


def test_the_first_step_is_the_hand_written_step():
    model, batch_size, length, peak, warmup, decay, clip, seed = tiny_llama(), 3, 10, 3e-3, 4, 0.1, 0.5, 11
    reference = copy.deepcopy(model).train()
    after_first = {}

    def keep(step, history):
        if step == 1:
            after_first.update({name: p.detach().clone() for name, p in model.named_parameters()})

    history = lt.train(
        model, STREAM, steps=8, batch_size=batch_size, sequence_length=length, learning_rate=peak,
        warmup_steps=warmup, weight_decay=decay, max_grad_norm=clip, eval_every=1, callback=keep, seed=seed,
    )  # fmt: skip

    # The same step by hand: windows at seeded random offsets (nanoGPT's get_batch), the window its own labels.
    generator = torch.Generator().manual_seed(seed)
    starts = torch.randint(len(STREAM) - length + 1, (batch_size,), generator=generator)
    batch = torch.stack([STREAM[start : start + length] for start in starts])
    named = list(reference.named_parameters())
    optimizer = torch.optim.AdamW(
        [
            {"params": [p for _, p in named if p.dim() >= 2], "weight_decay": decay},
            {"params": [p for _, p in named if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=peak / warmup,  # the first of the warmup's steps
        betas=(0.9, 0.95),
    )
    loss = reference(batch, labels=batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(reference.parameters(), clip)
    optimizer.step()

    assert history.train_loss[0] == pytest.approx(loss.item(), rel=1e-6)
    assert history.learning_rate[0] == pytest.approx(peak / warmup)
    for name, parameter in named:
        torch.testing.assert_close(after_first[name], parameter.detach(), atol=1e-7, rtol=1e-6, msg=name)


def test_training_the_package_llama_and_transformers_llama_gives_the_same_run():
    config = transformers.LlamaConfig(**SIZES, attn_implementation="eager")
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(config)
    ours = lt.from_hf(hf)
    settings = dict(steps=6, batch_size=2, sequence_length=12, learning_rate=1e-2, warmup_steps=2, seed=5)
    theirs_run, ours_run = lt.train(hf, STREAM, **settings), lt.train(ours, STREAM, **settings)
    assert ours_run.train_loss == pytest.approx(theirs_run.train_loss, rel=1e-5)
    assert ours_run.train_loss[-1] < ours_run.train_loss[0]
    for name, parameter in hf.named_parameters():
        torch.testing.assert_close(ours.get_parameter(name), parameter, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        (dict(steps=0), ValueError, "steps must be a positive int, got 0"),
        (dict(steps=-3), ValueError, "steps must be a positive int, got -3"),
        (dict(learning_rate=0.0), ValueError, "learning_rate must be positive, got 0.0"),
        (dict(learning_rate=-1e-3), ValueError, "learning_rate must be positive"),
        (dict(learning_rate=float("nan")), TypeError, "learning_rate must be a finite number"),
        (dict(batch_size=0), ValueError, "batch_size must be a positive int"),
        (
            dict(sequence_length=25),
            ValueError,
            "sequence_length=25 is more than the model's max_position_embeddings=24",
        ),
        (dict(sequence_length=1), ValueError, "sequence_length must be an int of at least 2"),
        (dict(tokens=torch.tensor([], dtype=torch.long)), ValueError, "tokens is empty"),
        (dict(tokens=[]), ValueError, "tokens is empty"),
        (dict(tokens=torch.arange(7)), ValueError, "tokens has 7 tokens, fewer than one window of sequence_length=8"),
        (
            dict(tokens=torch.tensor([1, 2, 16] * 4)),
            ValueError,
            r"tokens must be token ids in \[0, vocab_size=16\), found 16",
        ),
        (dict(tokens=[1, -2] * 8), ValueError, r"tokens must be token ids in \[0, vocab_size=16\), found -2"),
        (dict(tokens=STREAM[None]), TypeError, "tokens must be a 1-D tensor of integer token ids"),
        (dict(tokens=STREAM.float()), TypeError, "tokens must be a 1-D tensor of integer token ids"),
        (dict(tokens="0 1 2 3 4 5 6 7 8"), TypeError, "tokens must be a 1-D LongTensor or a list of int token ids"),
        (dict(validation_tokens=torch.full((9,), 99)), ValueError, "validation_tokens must be token ids"),
        (dict(min_learning_rate=2e-3), ValueError, "min_learning_rate=0.002 is more than learning_rate=0.001"),
        (dict(warmup_steps=5), ValueError, "warmup_steps=5 is more than steps=4"),
        (dict(max_grad_norm=0.0), ValueError, "max_grad_norm must be positive"),
        (dict(eval_every=0), ValueError, "eval_every must be a positive int"),
        (dict(callback="print"), TypeError, "callback must be callable"),
        (dict(model=torch.nn.ReLU()), TypeError, "model must be a torch.nn.Module with parameters"),
    ],
    ids=lambda value: None if isinstance(value, (dict, type)) else value[:40],
)
def test_bad_settings_are_refused_naming_them(changes, error, message):
    arguments = dict(model=tiny_llama(), tokens=STREAM, steps=4, batch_size=2, sequence_length=8) | changes
    model, tokens = arguments.pop("model"), arguments.pop("tokens")
    with pytest.raises(error, match=message):
        lt.train(model, tokens, **arguments)


def test_get_batch_cuts_windows_of_the_stream_at_the_offsets_the_generator_draws():
    generator = torch.Generator().manual_seed(2)
    batch = get_batch(STREAM, 5, 6, generator)
    assert batch.shape == (5, 6)
    # Each row is a window of the stream: consecutive tokens of 0 ... 15 (mod 16).
    assert ((batch[:, 1:] - batch[:, :-1]) % 16 == 1).all()
    assert torch.equal(batch, get_batch(STREAM, 5, 6, torch.Generator().manual_seed(2)))


def test_training_runs_where_the_caller_turned_gradients_off():
    with torch.no_grad():
        history = lt.train(tiny_llama(), STREAM, steps=2, batch_size=2, sequence_length=8)
        # ... and finds them off again after.
        assert not torch.is_grad_enabled()
    assert history.grad_norm[0] > 0


def test_the_unigram_entropy_is_that_of_the_streams_own_token_shares():
    stream = [3, 3, 3, 1, 1, 7]  # shares 1/2, 1/3, 1/6
    expected = -sum(p * math.log(p) for p in (1 / 2, 1 / 3, 1 / 6))
    assert unigram_entropy(stream) == pytest.approx(expected, rel=1e-12)
    assert unigram_entropy(torch.tensor(stream)) == pytest.approx(expected, rel=1e-12)
    assert unigram_entropy([5] * 10) == 0.0  # one token: nothing to guess


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_bigram_loss_is_the_mean_loss_of_the_add_k_counts_written_out(seed):
    generator = torch.Generator().manual_seed(seed)
    vocab_size, k = 7, 0.3
    train_stream = torch.randint(vocab_size, (200,), generator=generator).tolist()
    scored = torch.randint(vocab_size, (50,), generator=generator).tolist()
    pairs, firsts = Counter(itertools.pairwise(train_stream)), Counter(train_stream[:-1])
    expected = -sum(
        math.log((pairs[a, b] + k) / (firsts[a] + k * vocab_size)) for a, b in itertools.pairwise(scored)
    ) / (len(scored) - 1)
    assert bigram_loss(train_stream, scored, vocab_size, k) == pytest.approx(expected, rel=1e-12)


def test_a_pair_never_counted_keeps_k_over_the_count_of_its_first_token_plus_k_v():
    # 1 is followed once (by 0) in the training stream, never by 1; 3 never occurs at all.
    k, vocab_size = 0.5, 4
    assert bigram_loss([0, 1, 0, 1], [1, 1], vocab_size, k) == pytest.approx(-math.log(k / (1 + k * vocab_size)))
    assert bigram_loss([0, 1, 0, 1], [3, 2], vocab_size, k) == pytest.approx(math.log(vocab_size))


def test_a_large_smoothing_tends_to_the_uniform_guess():
    stream = torch.arange(10).repeat(5)
    assert bigram_loss(stream, stream, 10, 1e9) == pytest.approx(math.log(10), rel=1e-6)
    assert bigram_loss(stream, stream, 10, 1e-6) < 1e-4  # each token always follows the same one


def test_bad_baseline_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="smoothing must be positive, got 0"):
        bigram_loss([0, 1, 2], [0, 1], 3, 0)
    with pytest.raises(TypeError, match="smoothing must be a finite number"):
        bigram_loss([0, 1, 2], [0, 1], 3, float("inf"))
    with pytest.raises(ValueError, match="vocab_size must be a positive int, got 0"):
        bigram_loss([0, 1, 2], [0, 1], 0, 1.0)
    with pytest.raises(ValueError, match=r"tokens must be token ids in \[0, vocab_size=3\), found 3"):
        bigram_loss([0, 1, 2], [0, 3], 3, 1.0)
    with pytest.raises(ValueError, match=r"train_tokens has 1 tokens, fewer than two \(a pair\)"):
        bigram_loss([0], [0, 1], 3, 1.0)
    with pytest.raises(ValueError, match="tokens is empty"):
        unigram_entropy([])
    with pytest.raises(TypeError, match="tokens must be a 1-D tensor of integer token ids"):
        unigram_entropy(torch.ones(3))
