"""The training demo: a tiny encoder-decoder learns to reverse digit sequences, quickly."""

from __future__ import annotations

import pytest
import torch

from literate_transformer.book import training
from literate_transformer.book.decoder import EncoderDecoderTransformer
from literate_transformer.book.training import TrainingResult


@pytest.fixture(scope="module")
def trained() -> TrainingResult:
    return training.train_reversal(seed=0)


def test_reversal_demo_reaches_99_percent_held_out_exact_match(trained):
    # How long it takes is the chapter's and the benchmark's to report, not a unit test's to assert.
    assert trained.accuracy >= 0.99
    assert trained.seconds > 0
    assert isinstance(trained.model, EncoderDecoderTransformer)
    assert not trained.model.training


def test_reported_accuracy_is_the_models_exact_match_on_held_out_sequences(trained):
    """Re-measure on a fresh held-out sample: the number is the model's, not a constant."""
    fresh = training.make_reversal_batch(300, 3, 8, torch.Generator().manual_seed(123), held_out=True)
    assert training.exact_match(trained.model, fresh) >= 0.97
    # An untrained model of the same shape gets (almost) none right.
    torch.manual_seed(1)
    untrained = EncoderDecoderTransformer(trained.config).eval()
    assert training.exact_match(untrained, fresh) <= 0.05


def test_trained_cross_attention_looks_at_the_mirrored_source_position(trained):
    """The decoder's docstring says the cross-attention weights form an anti-diagonal: check it."""
    batch = training.make_reversal_batch(100, 3, 8, torch.Generator().manual_seed(7), held_out=True)
    with torch.no_grad():
        output = trained.model(
            batch.input_ids,
            batch.decoder_input_ids,
            batch.attention_mask,
            batch.decoder_attention_mask,
            output_attentions=True,
        )
    weights = output.cross_attentions[0].mean(dim=1)  # averaged over heads: (B, T, S)
    lengths = batch.attention_mask.sum(dim=1)
    hits = total = 0
    for example, length in enumerate(lengths.tolist()):
        for t in range(length):  # target token t is source digit length - 1 - t
            hits += int(weights[example, t].argmax()) == length - 1 - t
            total += 1
    assert hits / total >= 0.9


def test_loss_curve_has_one_decreasing_loss_per_step(trained):
    assert len(trained.losses) == trained.steps
    first, last = sum(trained.losses[:20]) / 20, sum(trained.losses[-20:]) / 20
    assert last < 0.1 * first
    # The last evaluation was made after the last step, on the model as it was returned: measured again on the
    # same held-out sequences (the training's own sample, seed + 1), the trained model scores what was reported.
    step, _ = trained.evaluations[-1]
    assert step == trained.steps
    held_out = training.make_reversal_batch(500, 3, 8, torch.Generator().manual_seed(1), held_out=True)
    assert training.exact_match(trained.model, held_out) == trained.accuracy


def test_training_is_deterministic_given_the_seed():
    first = training.train_reversal(steps=5, eval_every=5, eval_size=20, target_accuracy=None, verbose=False)
    second = training.train_reversal(steps=5, eval_every=5, eval_size=20, target_accuracy=None, verbose=False)
    assert first.losses == second.losses


def test_training_prints_step_loss_and_held_out_exact_match(capsys):
    training.train_reversal(steps=4, eval_every=2, eval_size=10, target_accuracy=None)
    printed = capsys.readouterr().out
    assert "step     2  loss" in printed and "step     4  loss" in printed
    assert "held-out exact match" in printed


def test_training_restores_the_thread_count():
    before = torch.get_num_threads()
    other = 1 if before != 1 else 2  # so that a missing restore shows
    training.train_reversal(steps=1, eval_every=1, eval_size=4, verbose=False, num_threads=other)
    assert torch.get_num_threads() == before


# ---------------------------------------------------------------------------
# The data
# ---------------------------------------------------------------------------
def test_targets_are_the_reversed_sources_followed_by_eos():
    batch = training.make_reversal_batch(64, 3, 8, torch.Generator().manual_seed(0))
    for source, mask, decoder_input, labels in zip(
        batch.input_ids, batch.attention_mask, batch.decoder_input_ids, batch.labels, strict=True
    ):
        length = int(mask.sum())
        assert 3 <= length <= 8
        digits = source[:length].tolist()
        assert all(training.DIGIT_OFFSET <= token < training.DIGIT_OFFSET + 10 for token in digits)
        assert (source[length:] == training.PAD_TOKEN_ID).all()
        assert labels[: length + 1].tolist() == digits[::-1] + [training.EOS_TOKEN_ID]
        assert (labels[length + 1 :] == -100).all()
        # Teacher forcing: the decoder input is the labels shifted right behind [BOS].
        assert decoder_input[: length + 1].tolist() == [training.BOS_TOKEN_ID] + digits[::-1]


def test_held_out_and_training_sequences_never_overlap():
    generator = torch.Generator().manual_seed(0)
    train = training.make_reversal_batch(2000, 3, 4, generator)
    held = training.make_reversal_batch(300, 3, 4, generator, held_out=True)

    def as_set(batch):
        return {tuple(row[row != training.PAD_TOKEN_ID].tolist()) for row in batch.input_ids}

    assert as_set(train).isdisjoint(as_set(held))
    # About one sequence in ten is held out.
    digits, lengths = torch.randint(0, 10, (10000, 8)), torch.randint(3, 9, (10000,))
    digits = digits * (torch.arange(8) < lengths[:, None])
    assert 0.08 < training.is_held_out(digits, lengths).float().mean().item() < 0.12


def test_bad_training_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="steps must be a positive int"):
        training.train_reversal(steps=0)
    with pytest.raises(ValueError, match="min_length <= max_length"):
        training.make_reversal_batch(2, 5, 3, torch.Generator())
    with pytest.raises(ValueError, match="max_position_embeddings >= max_length"):
        training.train_reversal(config=training.reversal_config(max_length=4), max_length=8)
