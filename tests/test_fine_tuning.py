"""Fine-tuning a classifier (literate_transformer.fine_tuning): the head reads the checkpoint's sentence vector, the
loop's first step is the same step written by hand, its batches cover an epoch and trim their padding, its held-out
scores are the model's own, and bad labels, inputs and settings are refused by name.

A small random BERT (no dropout) stands for the pretrained encoder; every comparison is in float32.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from literate_transformer.fine_tuning import SentenceClassifier, check_class_labels, fine_tune, predict
from literate_transformer.models.bert import BertModel

ATOL = 1e-5
#: Labels of the small classifiers.
C = 3


@pytest.fixture
def classifier(tiny_config, randomize) -> SentenceClassifier:
    """A random BERT (eval mode, no dropout) under a head of C labels, without dropout either."""
    torch.manual_seed(0)
    return SentenceClassifier(randomize(BertModel(tiny_config())), num_labels=C, dropout=0.0)


def _examples(count: int, vocab_size: int, seed: int = 1) -> dict[str, torch.Tensor]:
    """``count`` right-padded sentences of 2 to 9 tokens, padded to 9."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, 10, (count,), generator=generator)
    input_ids = torch.randint(1, vocab_size, (count, 9), generator=generator)
    attention_mask = (torch.arange(9) < lengths[:, None]).long()
    return {"input_ids": input_ids * attention_mask, "attention_mask": attention_mask}


class Recorder(nn.Module):
    """A linear classifier of one feature per example that records which examples each step's batch held."""

    num_labels = C

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(1, C)
        self.batches: list[list[int]] = []
        self.widths: list[int] = []

    def forward(self, example: torch.Tensor, input_ids: torch.Tensor | None = None, attention_mask=None):
        if self.training:
            self.batches.append(example[:, 0].long().tolist())
            if input_ids is not None:
                self.widths.append(input_ids.shape[1])
        return self.linear(example)


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------
def test_the_logits_are_a_linear_head_on_the_mean_of_the_real_tokens_normalised(classifier):
    batch = _examples(4, classifier.encoder.config.vocab_size)
    hidden = classifier.encoder(**batch).last_hidden_state
    # Written out: the mean over the real tokens only, scaled to length 1, then W s + b.
    mask = batch["attention_mask"][..., None].float()
    mean = (hidden * mask).sum(1) / mask.sum(1)
    expected = (mean / mean.norm(dim=-1, keepdim=True)) @ classifier.classifier.weight.T + classifier.classifier.bias
    torch.testing.assert_close(classifier(**batch), expected, atol=ATOL, rtol=0)


def test_the_head_alone_on_the_sentence_vectors_gives_the_whole_classifiers_logits(classifier):
    batch = _examples(4, classifier.encoder.config.vocab_size)
    vectors = classifier.encode(**batch)
    torch.testing.assert_close(classifier(sentence_vectors=vectors), classifier(**batch), atol=0, rtol=0)
    assert torch.allclose(vectors.norm(dim=-1), torch.ones(4))


def test_input_ids_and_sentence_vectors_together_or_neither_are_refused(classifier):
    batch = _examples(2, classifier.encoder.config.vocab_size)
    with pytest.raises(ValueError, match="either input_ids .* or sentence_vectors .*, not both"):
        classifier(**batch, sentence_vectors=torch.zeros(2, classifier.hidden_size))
    with pytest.raises(ValueError, match="not neither"):
        classifier()


def test_sentence_vectors_of_another_width_are_refused_naming_them(classifier):
    with pytest.raises(ValueError, match=r"sentence_vectors must have shape \(\*, 24\)"):
        classifier(sentence_vectors=torch.zeros(2, 5))


def test_fewer_than_two_labels_are_refused_naming_num_labels(tiny_config):
    with pytest.raises(ValueError, match="num_labels must be an int of at least 2, got 1"):
        SentenceClassifier(BertModel(tiny_config()), num_labels=1)


def test_an_encoder_without_a_hidden_size_is_refused_naming_encoder():
    with pytest.raises(TypeError, match="encoder must be a torch.nn.Module with a config.hidden_size"):
        SentenceClassifier(nn.Linear(3, 3), num_labels=2)


def test_a_dropout_outside_zero_to_one_is_refused_naming_dropout(tiny_config):
    with pytest.raises(ValueError, match="dropout must be a probability in"):
        SentenceClassifier(BertModel(tiny_config()), num_labels=2, dropout=1.0)


# ---------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------
def test_the_first_step_equals_the_same_step_written_by_hand(classifier):
    batch = _examples(6, classifier.encoder.config.vocab_size)
    labels = torch.tensor([0, 2, 1, 1, 0, 2])
    by_hand = copy.deepcopy(classifier).train()
    history = fine_tune(classifier, batch, labels, steps=1, batch_size=6, learning_rate=1e-3, max_grad_norm=0.1)
    # The same step: the whole set as one batch, in the order the seed draws and cut to its longest sentence (the
    # key's bias has a gradient of rounding errors only, which Adam scales up: another order would move it
    # otherwise), AdamW with decay on the matrices and tables only, the peak rate at once (no warmup), clipping
    # at 0.1.
    rows = torch.randperm(6, generator=torch.Generator().manual_seed(0))
    width = int(batch["attention_mask"].sum(1).max())
    batch, labels = {name: value[rows, :width] for name, value in batch.items()}, labels[rows]
    matrices = [p for p in by_hand.parameters() if p.dim() >= 2]
    vectors = [p for p in by_hand.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": matrices, "weight_decay": 0.01}, {"params": vectors, "weight_decay": 0.0}], lr=1e-3
    )
    loss = F.cross_entropy(by_hand(**batch), labels)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(list(by_hand.parameters()), 0.1)
    optimizer.step()
    assert history.train_loss[0] == pytest.approx(loss.item(), abs=1e-6)
    assert history.grad_norm[0] == pytest.approx(norm.item(), rel=1e-5) and norm > 0.1  # the clip did act
    for (name, trained), (_, expected) in zip(classifier.named_parameters(), by_hand.named_parameters(), strict=True):
        torch.testing.assert_close(trained, expected, atol=1e-6, rtol=0, msg=name)


def test_only_the_parameters_that_require_gradients_train(classifier):
    batch = _examples(6, classifier.encoder.config.vocab_size)
    encoder = copy.deepcopy(classifier.encoder.state_dict())
    head = classifier.classifier.weight.detach().clone()
    classifier.encoder.requires_grad_(False)
    fine_tune(classifier, batch, [0, 1, 2, 0, 1, 2], steps=2, batch_size=3, learning_rate=1e-2)
    assert all(torch.equal(value, classifier.encoder.state_dict()[key]) for key, value in encoder.items())
    assert not torch.equal(head, classifier.classifier.weight)


def test_an_epoch_reads_every_example_at_most_once_in_full_batches():
    model = Recorder()
    inputs = {"example": torch.arange(10.0)[:, None]}
    fine_tune(model, inputs, [0] * 10, steps=6, batch_size=3, learning_rate=1e-3)
    assert all(len(batch) == 3 for batch in model.batches)
    for epoch in (model.batches[:3], model.batches[3:]):  # 10 // 3 = 3 batches an epoch, one left over
        seen = [example for batch in epoch for example in batch]
        assert len(set(seen)) == 9
    assert model.batches[:3] != model.batches[3:]  # a fresh order each epoch


def test_each_batch_is_cut_to_its_longest_example_and_grouping_by_length_pads_less():
    lengths = torch.tensor([1, 9, 2, 8, 3, 7, 4, 6, 5, 9, 1, 8, 2, 7, 3, 6])
    mask = (torch.arange(10) < lengths[:, None]).long()
    inputs = {"example": torch.arange(16.0)[:, None], "input_ids": mask.clone(), "attention_mask": mask}
    padded = {}
    for grouped in (False, True):
        model = Recorder()
        fine_tune(model, inputs, [0] * 16, steps=4, batch_size=4, learning_rate=1e-3, group_by_length=grouped)
        assert model.widths == [max(lengths[batch].tolist()) for batch in model.batches]
        padded[grouped] = sum(
            4 * width - lengths[batch].sum().item() for width, batch in zip(model.widths, model.batches, strict=True)
        )
    # An epoch of 16 examples is 4 batches, less than a window of LENGTH_WINDOW: grouped, the whole epoch is sorted,
    # and each batch holds 4 neighbours in length.
    neighbours = lengths.sort(descending=True).values.view(4, 4)
    assert padded[True] == (4 * neighbours.amax(1) - neighbours.sum(1)).sum().item() < padded[False]


def test_the_same_seed_repeats_a_run_and_another_seed_does_not(classifier):
    batch = _examples(8, classifier.encoder.config.vocab_size)
    labels = [0, 1, 2, 0, 1, 2, 0, 1]
    runs = []
    for seed in (0, 0, 1):
        model = copy.deepcopy(classifier)
        model.dropout.p = 0.5  # the run's own generator draws the dropout too
        runs.append(fine_tune(model, batch, labels, steps=3, batch_size=2, learning_rate=1e-3, seed=seed).train_loss)
    assert runs[0] == runs[1] and runs[0] != runs[2]


def test_the_held_out_set_is_scored_before_the_first_step_every_eval_every_steps_and_after_the_last(classifier):
    vocab_size = classifier.encoder.config.vocab_size
    train, held_out = _examples(8, vocab_size), _examples(5, vocab_size, seed=2)
    held_out_labels = torch.tensor([0, 1, 2, 2, 1])
    history = fine_tune(
        classifier, train, [0, 1, 2] * 2 + [0, 1], steps=5, batch_size=4, learning_rate=1e-3, eval_every=2,
        held_out=(held_out, held_out_labels),
    )  # fmt: skip
    assert history.eval_steps == [0, 2, 4, 5]
    logits = classifier(**held_out)  # the model after the last step, on the whole padded set at once
    torch.testing.assert_close(history.predictions, logits.argmax(-1))
    assert history.held_out_accuracy[-1] == (logits.argmax(-1) == held_out_labels).float().mean().item()
    assert history.held_out_loss[-1] == pytest.approx(F.cross_entropy(logits, held_out_labels).item(), abs=1e-6)


def test_predict_gives_each_examples_logits_in_the_order_of_the_inputs(classifier):
    batch = _examples(7, classifier.encoder.config.vocab_size)
    # Sorted longest first and cut into batches of 3, each trimmed of its padding: the same logits.
    classifier.train()
    torch.testing.assert_close(predict(classifier, batch, batch_size=3), classifier(**batch), atol=ATOL, rtol=0)
    assert classifier.training  # predict scores in evaluation mode, and gives the mode back


def test_a_left_padded_batch_is_not_cut_short(classifier):
    batch = _examples(5, classifier.encoder.config.vocab_size)
    left = {name: value.flip(1) for name, value in batch.items()}  # padding first, the real tokens last
    torch.testing.assert_close(predict(classifier, left, batch_size=2), classifier(**left), atol=ATOL, rtol=0)


def test_the_head_alone_learns_a_task_its_vectors_separate(classifier):
    # Three labels, each a direction of the vector space: a linear head separates them.
    generator = torch.Generator().manual_seed(0)
    labels = torch.arange(60) % C
    vectors = F.one_hot(labels, classifier.hidden_size).float() + 0.1 * torch.randn(
        60, classifier.hidden_size, generator=generator
    )
    history = fine_tune(
        classifier, {"sentence_vectors": vectors[:45]}, labels[:45], steps=60, batch_size=15, learning_rate=0.1,
        held_out=({"sentence_vectors": vectors[45:]}, labels[45:]),
    )  # fmt: skip
    assert history.held_out_accuracy[0] < 0.7 and history.held_out_accuracy[-1] == 1.0
    assert history.train_loss[-1] < history.train_loss[0] / 4


# ---------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------
def test_a_label_out_of_range_is_refused_naming_it_and_its_position(classifier):
    batch = _examples(3, classifier.encoder.config.vocab_size)
    with pytest.raises(ValueError, match=r"labels must be label indices in \[0, num_labels=3\), got 3 \(labels\[1\]\)"):
        fine_tune(classifier, batch, [0, 3, 1], steps=1, learning_rate=1e-3)
    with pytest.raises(ValueError, match=r"got -1 \(labels\[2\]\)"):
        fine_tune(classifier, batch, torch.tensor([0, 1, -1]), steps=1, learning_rate=1e-3)


def test_a_held_out_label_out_of_range_is_refused_before_any_step(classifier):
    batch = _examples(3, classifier.encoder.config.vocab_size)
    before = copy.deepcopy(classifier.state_dict())
    with pytest.raises(ValueError, match=r"held_out labels must be label indices in \[0, num_labels=3\), got 7"):
        fine_tune(classifier, batch, [0, 1, 2], steps=1, learning_rate=1e-3, held_out=(batch, [0, 7, 1]))
    assert all(torch.equal(value, classifier.state_dict()[key]) for key, value in before.items())


@pytest.mark.parametrize(
    "labels, message",
    [
        (torch.tensor([0.0, 1.0]), "labels must have an int dtype"),
        ([0, "1"], r"labels must be ints \(label indices\), got '1' at labels\[1\]"),
        ([0, True], r"got True at labels\[1\]"),
        ("01", "labels must be a list of ints or a 1-D integer tensor, got str"),
    ],
)
def test_labels_that_are_not_ints_are_refused_naming_labels(labels, message):
    with pytest.raises(TypeError, match=message):
        check_class_labels(labels, num_labels=2, count=2)


def test_labels_of_another_count_than_the_examples_are_refused(classifier):
    batch = _examples(3, classifier.encoder.config.vocab_size)
    with pytest.raises(ValueError, match="labels must hold one label per example, 3, got 2"):
        fine_tune(classifier, batch, [0, 1], steps=1, learning_rate=1e-3)


def test_inputs_that_are_not_a_dict_of_tensors_of_one_count_are_refused_naming_inputs(classifier):
    batch = _examples(3, classifier.encoder.config.vocab_size)
    with pytest.raises(TypeError, match="inputs must be a non-empty dict of tensors"):
        fine_tune(classifier, batch["input_ids"], [0, 1, 2], steps=1, learning_rate=1e-3)
    with pytest.raises(ValueError, match="inputs's tensors must have one row per example each"):
        fine_tune(
            classifier, {**batch, "attention_mask": batch["attention_mask"][:2]}, [0, 1, 2], steps=1, learning_rate=1e-3
        )


def test_a_model_that_does_not_say_its_number_of_labels_is_refused_naming_model():
    with pytest.raises(TypeError, match="model must say how many labels it scores"):
        fine_tune(nn.Linear(2, 3), {"input": torch.zeros(2, 2)}, [0, 1], steps=1, learning_rate=1e-3)


def test_a_model_with_every_parameter_frozen_is_refused(classifier):
    batch = _examples(3, classifier.encoder.config.vocab_size)
    classifier.requires_grad_(False)
    with pytest.raises(ValueError, match="model has no parameter that requires a gradient"):
        fine_tune(classifier, batch, [0, 1, 2], steps=1, learning_rate=1e-3)


@pytest.mark.parametrize(
    "setting, error, message",
    [
        ({"steps": 0}, ValueError, "steps must be a positive int, got 0"),
        ({"batch_size": 0}, ValueError, "batch_size must be a positive int, got 0"),
        ({"learning_rate": 0.0}, ValueError, "learning_rate must be positive, got 0.0"),
        ({"learning_rate": math.nan}, TypeError, "learning_rate must be a finite number, got nan"),
        ({"warmup_steps": 3}, ValueError, "warmup_steps=3 is more than steps=2"),
        ({"eval_every": 0}, ValueError, "eval_every must be a positive int, got 0"),
        ({"min_learning_rate": 1.0}, ValueError, "min_learning_rate=1.0 is more than learning_rate=0.001"),
        ({"weight_decay": -1.0}, ValueError, "weight_decay must be non-negative, got -1.0"),
        ({"max_grad_norm": 0.0}, ValueError, "max_grad_norm must be positive, got 0.0"),
        ({"group_by_length": "yes"}, TypeError, "group_by_length must be True or False, got 'yes'"),
        ({"held_out": ([0], [1])}, TypeError, "held_out inputs must be a non-empty dict of tensors"),
        ({"held_out": "held out"}, TypeError, r"held_out must be a pair \(inputs, labels\)"),
    ],
)
def test_settings_out_of_range_are_refused_by_name(classifier, setting, error, message):
    batch = _examples(3, classifier.encoder.config.vocab_size)
    arguments = {"steps": 2, "learning_rate": 1e-3} | setting
    with pytest.raises(error, match=message):
        fine_tune(classifier, batch, [0, 1, 2], **arguments)
