"""The encoder-decoder branch's pretraining corruptions: each one's output gives the original text back.

Property tests over many random texts and seeds: T5's span corruption
(input and target together rebuild the text exactly, with the stated
number of dropped tokens and one sentinel per span, counting down), BART's
text infilling (the target fits the input with each ``<mask>`` read as a
span, the spans hiding exactly the stated number of tokens) and sentence
permutation (the same sentences, in another order).  There is no reference
implementation in ``transformers``' library to compare with: its T5 and
BART pretraining collators live in example scripts.
"""

from __future__ import annotations

import math

import pytest
import torch

from literate_transformer.pretraining.denoising import (
    infilled_spans,
    random_spans_noise_mask,
    restore_spans,
    sentence_permutation,
    span_corruption,
    text_infilling,
)

SENTINEL = 199
MASK, FULL_STOP = 3, 4
CASES = [(length, seed) for length in (2, 3, 7, 20, 64, 201) for seed in range(4)]


def text(length: int, seed: int) -> torch.Tensor:
    """Random ids in [5, 100): no sentinel, mask or full stop among them (repeats, so alignments can be ambiguous)."""
    return torch.randint(5, 100, (length,), generator=torch.Generator().manual_seed(1000 + seed))


@pytest.mark.parametrize(("length", "seed"), CASES)
def test_span_corruption_input_and_target_rebuild_the_text(length, seed):
    original = text(length, seed)
    inputs, targets = span_corruption(original, SENTINEL, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(restore_spans(inputs, targets, SENTINEL), original)
    sentinels_in_input = inputs[inputs > 100]
    num_spans = len(sentinels_in_input)
    # One sentinel per span, counting down from <extra_id_0>; the target closes with the next one.
    assert sentinels_in_input.tolist() == list(range(SENTINEL, SENTINEL - num_spans, -1))
    assert targets[targets > 100].tolist() == list(range(SENTINEL, SENTINEL - num_spans - 1, -1))
    # round(15%) of the tokens dropped (at least one, never all), each exactly once.
    dropped = len(targets) - num_spans - 1
    assert dropped == min(max(round(0.15 * length), 1), length - 1)
    assert len(inputs) - num_spans == length - dropped


def test_the_noise_mask_starts_with_a_kept_run_and_its_spans_average_the_mean_length():
    masks = [random_spans_noise_mask(500, generator=torch.Generator().manual_seed(seed)) for seed in range(20)]
    assert not any(bool(mask[0]) for mask in masks)
    starts = sum(int((mask[1:] & ~mask[:-1]).sum()) for mask in masks)
    assert sum(int(mask.sum()) for mask in masks) / starts == pytest.approx(3.0, abs=0.05)


@pytest.mark.parametrize(("length", "seed"), CASES)
def test_text_infilling_input_and_target_rebuild_the_text(length, seed):
    original = text(length, seed)
    inputs, targets = text_infilling(original, MASK, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(targets, original)
    spans = infilled_spans(inputs, targets, MASK)
    assert spans is not None and len(spans) == int((inputs == MASK).sum()) >= 1
    # Each <mask> replaced by the span it hid: the text.
    rebuilt, pieces = [], iter(spans)
    for token in inputs.tolist():
        rebuilt.extend(next(pieces).tolist() if token == MASK else [token])
    assert rebuilt == original.tolist()
    assert sum(len(span) for span in spans) == math.ceil(0.3 * length)


def test_infilled_spans_refuses_a_target_that_does_not_fit():
    assert infilled_spans(torch.tensor([5, MASK, 7]), torch.tensor([5, 6, 8]), MASK) is None
    spans = infilled_spans(torch.tensor([5, MASK, MASK, 7]), torch.tensor([5, 6, 7]), MASK)
    assert [span.tolist() for span in spans] == [[], [6]]


@pytest.mark.parametrize("seed", range(6))
def test_sentence_permutation_shuffles_whole_sentences(seed):
    sentences = [(10, 11, FULL_STOP), (12, FULL_STOP), (13, 14, 15, FULL_STOP), (16,)]
    document = torch.tensor([token for sentence in sentences for token in sentence])
    inputs, targets = sentence_permutation(document, FULL_STOP, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(targets, document)
    # The input, read sentence by sentence (each starts with its own token): the same sentences, reordered.
    order, position = [], 0
    while position < len(inputs):
        sentence = next(s for s in sentences if tuple(inputs[position : position + len(s)].tolist()) == s)
        order.append(sentence)
        position += len(sentence)
    assert sorted(order) == sorted(sentences)


def test_sentence_permutation_changes_the_order():
    document = torch.tensor([10, FULL_STOP, 11, FULL_STOP, 12, FULL_STOP])
    shuffled = [sentence_permutation(document, FULL_STOP, torch.Generator().manual_seed(seed))[0] for seed in range(6)]
    assert any(not torch.equal(inputs, document) for inputs in shuffled)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="input_ids must hold at least 2 tokens"):
        span_corruption(torch.tensor([5]), SENTINEL)
    with pytest.raises(ValueError, match="must not hold sentinel ids"):
        span_corruption(torch.tensor([5, SENTINEL]), SENTINEL)
    with pytest.raises(TypeError, match="input_ids must have an int dtype"):
        text_infilling(torch.tensor([5.0, 6.0]), MASK)
    with pytest.raises(ValueError, match="mask_ratio must be in"):
        text_infilling(torch.tensor([5, 6]), MASK, mask_ratio=1.5)
    with pytest.raises(ValueError, match="poisson_lambda must be positive"):
        text_infilling(torch.tensor([5, 6]), MASK, poisson_lambda=0.0)
