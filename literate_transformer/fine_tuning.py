r"""Fine-tuning a pretrained encoder to classify sentences: a head on its sentence vectors, and the loop that trains it.

A pretrained encoder turns a sentence into vectors; a new task asks for a
label.  The smallest bridge is one linear layer, the **head**, reading the
sentence vector the checkpoint was trained to produce (the mean of its token
vectors, normalised to length 1:
:func:`~literate_transformer.models.bert.sentence_embeddings`):

.. math::

    \text{logits} = \operatorname{Dropout}(s)\, W^\top + b, \qquad W \in \mathbb{R}^{C \times E},

one unnormalised score per label, trained with the cross-entropy of the
right one.  What trains is a choice, and the two ends of it differ in cost
by orders of magnitude:

* **The head alone** (a *linear probe*).  With the encoder frozen, its
  sentence vectors never change: compute them once
  (:func:`~literate_transformer.fast.encode.encode` gives the same vectors,
  faster) and hand them to :class:`SentenceClassifier` as
  ``sentence_vectors``; each step then costs one small matrix product.
* **The whole model.**  Every weight of the encoder trains too, so each step
  runs the encoder forward and backward on its batch.  Starting from a head
  already trained alone, rather than a random one, spares the encoder the
  first steps' gradients of a head that knows nothing: Kumar et al. (2022,
  "Fine-Tuning can Distort Pretrained Features and Underperform
  Out-of-Distribution", arXiv:2202.10054) call the two stages *LP-FT*.

The loop
--------
:func:`fine_tune` is :func:`~literate_transformer.pretraining.causal_lm.train`'s
loop with a classifier's batches and loss; the decisions it shares are the
same lines (:func:`~literate_transformer.pretraining.causal_lm.parameter_groups`,
:func:`~literate_transformer.pretraining.causal_lm.learning_rate_at`):

* **Epochs of a seeded random order.**  A finite set of labelled sentences
  is read in a fresh random order each epoch, in full batches (the few
  left over wait for another epoch: ``DataLoader(shuffle=True,
  drop_last=True)``), and a seed repeats a run.
* **Padding trimmed.**  The inputs are tokenized once, padded to the longest
  sentence of all; each batch is cut to the longest sentence *it* holds, so
  a step pays for the tokens its batch has.
* **Batches of similar lengths**, with ``group_by_length``: each window of
  :data:`LENGTH_WINDOW` batches of the epoch's order is sorted by length
  before it is cut into batches, and the batches are then shuffled
  (``transformers``' ``LengthGroupedSampler``, its ``Trainer``'s
  ``train_sampling_strategy="group_by_length"``, sorts windows of up to 50
  batches the same way).  A batch of random sentences is padded to its
  longest, which may be several times the shortest; sorted, a batch wastes
  little on padding, and its sentences are still a random draw of the epoch.
* **AdamW, decay on matrices only, warmup then cosine decay, clipping**, as
  in pretraining.
* **Held-out accuracy** (and loss) before the first step and every
  ``eval_every`` steps, the same sentences each time, in evaluation mode;
  the last evaluation's predicted labels are kept.
* **Labels checked first.**  A label outside ``[0, C)`` would fail deep
  inside :func:`~torch.nn.functional.cross_entropy` (or on a GPU, as a
  device-side assert); here it is refused by name, with its position,
  before anything trains.

How this maps to ``transformers``
---------------------------------
``BertForSequenceClassification`` reads the ``[CLS]`` vector through
BERT's pooler; the site's checkpoint (``all-MiniLM-L6-v2``) was trained to be
read by mean pooling instead, so its head reads the mean
(:mod:`~literate_transformer.book.classification` says more).  The loop is what
``Trainer.train()`` runs (AdamW, a learning-rate schedule, gradient clipping
at ``max_grad_norm``), written out.

>>> import torch
>>> from literate_transformer import TransformerConfig
>>> from literate_transformer.models.bert import BertModel
>>> config = TransformerConfig(vocab_size=50, hidden_size=24, num_attention_heads=4, intermediate_size=40,
...                            num_hidden_layers=2, max_position_embeddings=16)
>>> classifier = SentenceClassifier(BertModel(config), num_labels=3)
>>> input_ids = torch.tensor([[2, 7, 11, 4], [3, 5, 0, 0]])
>>> attention_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
>>> classifier(input_ids, attention_mask).shape                      # (B, C)
torch.Size([2, 3])
>>> inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
>>> history = fine_tune(classifier, inputs, [0, 2], steps=3, batch_size=2, learning_rate=1e-3)
>>> history.steps, len(history.train_loss)
([1, 2, 3], 3)
>>> fine_tune(classifier, inputs, [0, 3], steps=1, batch_size=2, learning_rate=1e-3)
Traceback (most recent call last):
    ...
ValueError: labels must be label indices in [0, num_labels=3), got 3 (labels[1])
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .core.validation import Arguments, check_positive_int, check_tensor, validate_with
from .models.bert import sentence_embeddings
from .pretraining.causal_lm import learning_rate_at, parameter_groups

__all__ = ["LENGTH_WINDOW", "SentenceClassifier", "FineTuningHistory", "check_class_labels", "predict", "fine_tune"]

#: With ``group_by_length``, how many batches of an epoch's random order are sorted by length together.
LENGTH_WINDOW = 8


# ---------------------------------------------------------------------------
# The model: an encoder's sentence vector, read by a linear head
# ---------------------------------------------------------------------------
def _check_classifier_inputs(model: SentenceClassifier, args: Arguments) -> None:
    if (args.input_ids is None) == (args.sentence_vectors is None):
        raise ValueError(
            "give either input_ids (the encoder runs) or sentence_vectors (the head alone reads them), "
            f"not {'both' if args.input_ids is not None else 'neither'}"
        )
    if args.sentence_vectors is not None:
        check_tensor(args.sentence_vectors, "sentence_vectors", dtypes=("float",), shape=(None, model.hidden_size))


class SentenceClassifier(nn.Module):
    """A pretrained encoder's sentence vector (mean pooling, then length 1), dropout, and a linear head.

    Args:
        encoder: The encoder, a :class:`~literate_transformer.models.bert.BertModel` or any module whose output
            has a ``last_hidden_state`` ``(B, T, E)`` and whose ``config`` has a ``hidden_size``.
        num_labels: ``C``, the number of labels (at least 2).
        dropout: The probability of dropping a feature of the sentence vector before the head (training only).
    """

    def __init__(self, encoder: nn.Module, num_labels: int, dropout: float = 0.1) -> None:
        super().__init__()
        if not isinstance(encoder, nn.Module) or not isinstance(
            getattr(getattr(encoder, "config", None), "hidden_size", None), int
        ):
            raise TypeError(
                f"encoder must be a torch.nn.Module with a config.hidden_size (a BertModel), got {type(encoder).__name__}"
            )
        check_positive_int(num_labels, "num_labels", minimum=2)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise ValueError(f"dropout must be a probability in [0, 1), got {dropout!r}")
        #: The pretrained encoder.
        self.encoder = encoder
        #: ``C``, the number of labels.
        self.num_labels = num_labels
        #: ``E``, the width of the sentence vector.
        self.hidden_size = encoder.config.hidden_size
        #: Dropout on the sentence vector (training only).
        self.dropout = nn.Dropout(dropout)
        #: The head, one score per label from the sentence vector (E -> C).
        self.classifier = nn.Linear(self.hidden_size, num_labels)

    def encode(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> Tensor:
        """The sentence vectors: the encoder's token vectors averaged over the real tokens, each of length 1.

        Args:
            input_ids: ``(B, T)`` token ids.
            attention_mask: ``(B, T)``, 1 for real tokens and 0 for padding.
            token_type_ids: ``(B, T)`` segment ids, passed on when given.

        Returns:
            ``(B, E)``.
        """
        # The encoder's vector of every token (segment ids passed on only when given).
        segments = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        outputs = self.encoder(input_ids, attention_mask=attention_mask, **segments)
        hidden_states = outputs.last_hidden_state  # (B, T, E)
        # The checkpoint's sentence vector: the mean over the real tokens, normalised to length 1.
        vectors = sentence_embeddings(hidden_states, attention_mask)  # (B, E)
        return vectors

    @validate_with(_check_classifier_inputs)
    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        sentence_vectors: Tensor | None = None,
    ) -> Tensor:
        """Score every label of each sentence.

        Args:
            input_ids: ``(B, T)`` token ids: the encoder runs (the encoder checks them).
            attention_mask: ``(B, T)``, 1 for real tokens and 0 for padding.
            token_type_ids: ``(B, T)`` segment ids (a tokenizer's output may be passed whole).
            sentence_vectors: ``(B, E)`` vectors the encoder gave before, instead of ``input_ids``: the head
                alone runs (for a frozen encoder, the same logits for a fraction of the work).

        Returns:
            Logits ``(B, C)``.

        Raises:
            ValueError: for both ``input_ids`` and ``sentence_vectors``, or neither, or vectors that are not
                ``(B, E)``.
            TypeError: for vectors that are not a floating-point tensor.
        """
        if sentence_vectors is None:
            sentence_vectors = self.encode(input_ids, attention_mask, token_type_ids)
        # Dropout (training only), then one score per label.
        logits = self.classifier(self.dropout(sentence_vectors))  # (B, C)
        return logits


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------
def check_class_labels(labels: object, num_labels: int, count: int, name: str = "labels") -> Tensor:
    """Labels of ``count`` examples: ints in ``[0, num_labels)``, as a ``(count,)`` LongTensor.

    Args:
        labels: A sequence of ints or a 1-D integer tensor.
        num_labels: ``C``.
        count: How many examples the labels are for.
        name: The argument's name, for the messages.

    Raises:
        TypeError: for labels that are not ints (a float tensor, a list holding a string or a bool).
        ValueError: for a count other than ``count``, or a label outside ``[0, num_labels)``, naming its position.
    """
    if isinstance(labels, Tensor):
        check_tensor(labels, name, ndim=1, dtypes=("int",))
        labels = labels.detach().cpu().long()
    elif isinstance(labels, Sequence) and not isinstance(labels, (str, bytes)):
        for position, label in enumerate(labels):
            if not isinstance(label, int) or isinstance(label, bool):
                raise TypeError(f"{name} must be ints (label indices), got {label!r} at {name}[{position}]")
        labels = torch.tensor(list(labels), dtype=torch.long)
    else:
        raise TypeError(f"{name} must be a list of ints or a 1-D integer tensor, got {type(labels).__name__}")
    if len(labels) != count:
        raise ValueError(f"{name} must hold one label per example, {count}, got {len(labels)}")
    outside = ((labels < 0) | (labels >= num_labels)).nonzero()
    if len(outside):
        position = int(outside[0])
        raise ValueError(
            f"{name} must be label indices in [0, num_labels={num_labels}), got {int(labels[position])} "
            f"({name}[{position}])"
        )
    return labels


def _check_inputs(inputs: object, name: str) -> tuple[dict[str, Tensor], int]:
    """``inputs`` as a dict of tensors sharing their first size (the number of examples), and that number."""
    if not isinstance(inputs, Mapping) or not inputs:
        raise TypeError(
            f"{name} must be a non-empty dict of tensors, the model's arguments for every example "
            f"({{'input_ids': ..., 'attention_mask': ...}} or {{'sentence_vectors': ...}}), got {type(inputs).__name__}"
        )
    counts = {}
    for key, value in inputs.items():
        if not isinstance(value, Tensor) or value.dim() == 0:
            raise TypeError(f"{name}[{key!r}] must be a tensor with one row per example, got {type(value).__name__}")
        counts[key] = value.shape[0]
    if len(set(counts.values())) != 1:
        raise ValueError(f"{name}'s tensors must have one row per example each, got {counts}")
    count = next(iter(counts.values()))
    if count == 0:
        raise ValueError(f"{name} holds no example")
    return dict(inputs), count


def _check_number(value: object, name: str, allow_zero: bool = False) -> float:
    """A finite positive number (or non-negative, with ``allow_zero``), not a bool."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{name} must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {value!r}")
    return float(value)


def _num_labels(model: object) -> int:
    """The model's ``num_labels`` (``C``), which every label is checked against."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    num_labels = getattr(model, "num_labels", None)
    if not isinstance(num_labels, int) or isinstance(num_labels, bool) or num_labels < 2:
        raise TypeError(
            f"model must say how many labels it scores (a num_labels of at least 2, as SentenceClassifier has), "
            f"got {type(model).__name__} with num_labels={num_labels!r}"
        )
    return num_labels


# ---------------------------------------------------------------------------
# Batches and predictions
# ---------------------------------------------------------------------------
def _used_lengths(inputs: Mapping[str, Tensor]) -> Tensor | None:
    """Each example's tokens up to its last real one (the padding mask's last 1), or ``None`` without a mask."""
    mask = inputs.get("attention_mask")
    if mask is None or mask.dim() != 2:
        return None
    positions = torch.arange(1, mask.shape[1] + 1)
    # The last column holding a real token, counted from 1: right padding ends there.
    return (mask.detach().cpu().bool() * positions).amax(dim=1)


def _batch(inputs: Mapping[str, Tensor], rows: Tensor, lengths: Tensor | None, device: torch.device) -> dict:
    """The rows' inputs on ``device``, token tensors cut to the longest of these rows (padding trimmed)."""
    width = None if lengths is None else int(lengths[rows].max())
    length = None if lengths is None else inputs["attention_mask"].shape[1]
    batch = {}
    for key, value in inputs.items():
        value = value[rows.to(value.device)]
        if width is not None and value.dim() == 2 and value.shape[1] == length:
            value = value[:, :width]
        batch[key] = value.to(device)
    return batch


def _epoch(
    count: int, batch_size: int, lengths: Tensor | None, group_by_length: bool, generator: torch.Generator
) -> list[Tensor]:
    """One epoch's batches of example indices: a random order cut into full batches, similar lengths together."""
    order = torch.randperm(count, generator=generator)
    # Full batches only: the examples left over are in another place of the next epoch's order.
    order = order[: count // batch_size * batch_size]
    if not group_by_length or lengths is None:
        return list(order.split(batch_size))
    batches = []
    for window in order.split(batch_size * LENGTH_WINDOW):
        # A window of the random order, longest first, cut into batches of nearly one length each ...
        batches += window[lengths[window].argsort(descending=True, stable=True)].split(batch_size)
    # ... read in a random order, so that no run of steps holds only the long ones.
    return [batches[index] for index in torch.randperm(len(batches), generator=generator).tolist()]


@torch.no_grad()
def predict(model: nn.Module, inputs: Mapping[str, Tensor], batch_size: int = 64) -> Tensor:
    """The model's logits for every example, in evaluation mode (its mode is restored after).

    Longest first, as :func:`~literate_transformer.fast.encode.encode` batches, so each batch holds
    examples of nearly one length and little padding; the logits come back in the order of ``inputs``.

    Args:
        model: A classifier: ``model(**batch)`` returns ``(B, C)`` logits.
        inputs: The model's arguments for every example, a dict of tensors with one row per example.
        batch_size: Examples per forward pass.

    Returns:
        ``(N, C)`` logits on the CPU, ``N`` the number of examples.
    """
    inputs, count = _check_inputs(inputs, "inputs")
    check_positive_int(batch_size, "batch_size")
    device = next(model.parameters()).device
    lengths = _used_lengths(inputs)
    order = torch.arange(count) if lengths is None else lengths.argsort(descending=True, stable=True)
    was_training = model.training
    model.eval()
    logits = torch.empty(0)
    for rows in order.split(batch_size):
        scores = model(**_batch(inputs, rows, lengths, device)).float().cpu()  # (B, C)
        if not logits.numel():
            logits = scores.new_zeros(count, scores.shape[-1])
        logits[rows] = scores
    model.train(was_training)
    return logits


# ---------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------
@dataclass
class FineTuningHistory:
    """What :func:`fine_tune` measured, step by step.

    Attributes:
        steps: The steps taken, ``1, 2, ..., steps``.
        train_loss: Each step's cross-entropy on its batch.
        learning_rate: The learning rate each step used.
        grad_norm: The global norm of each step's gradients, before clipping.
        eval_steps: The steps after which the held-out set was scored (0: before the first step).
        held_out_accuracy: The share of held-out examples whose top-scoring label is theirs, at each of them.
        held_out_loss: The mean held-out cross-entropy at each of them.
        predictions: The held-out labels predicted at the last evaluation, ``(N,)`` (``None`` without a held-out
            set).
        seconds: The training steps' wall-clock time (evaluations left out).
    """

    steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    learning_rate: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    held_out_accuracy: list[float] = field(default_factory=list)
    held_out_loss: list[float] = field(default_factory=list)
    predictions: Tensor | None = None
    seconds: float = 0.0


def fine_tune(
    model: nn.Module,
    inputs: Mapping[str, Tensor],
    labels: Sequence[int] | Tensor,
    *,
    steps: int,
    learning_rate: float,
    batch_size: int = 16,
    held_out: tuple[Mapping[str, Tensor], Sequence[int] | Tensor] | None = None,
    eval_every: int | None = None,
    warmup_steps: int = 0,
    min_learning_rate: float | None = None,
    weight_decay: float = 0.01,
    max_grad_norm: float | None = 1.0,
    group_by_length: bool = False,
    seed: int = 0,
) -> FineTuningHistory:
    """Train a classifier's parameters that require gradients on labelled examples, scoring a held-out set.

    Args:
        model: A classifier with ``num_labels``: ``model(**batch)`` returns ``(B, C)`` logits
            (:class:`SentenceClassifier`).  Its parameters that require gradients train, in place; freeze the
            encoder (``model.encoder.requires_grad_(False)``) to train the head alone.  Left in evaluation mode.
        inputs: The model's arguments for every training example, a dict of tensors with one row each:
            ``{"input_ids": ..., "attention_mask": ...}`` (a tokenizer's padded output), or
            ``{"sentence_vectors": ...}`` for the head alone.
        labels: The training examples' labels, ints in ``[0, C)``.
        steps: Optimizer steps.
        learning_rate: The peak learning rate, reached at the end of the warmup.
        batch_size: Examples per step (all of them, if there are fewer).
        held_out: ``(inputs, labels)`` of examples never trained on, scored before the first step, every
            ``eval_every`` steps and after the last.
        eval_every: Steps between held-out evaluations (``None``: before the first step and after the last only).
        warmup_steps: Steps of linear warmup (0: start at the peak).
        min_learning_rate: Where the cosine decay ends (``learning_rate / 10`` when ``None``).
        weight_decay: AdamW's decoupled decay of the trained parameters of two or more dimensions.
        max_grad_norm: Clip the gradients' global norm to this (``None``: no clipping).
        group_by_length: Batch examples of similar lengths together (the lengths the ``attention_mask`` of
            ``inputs`` gives; without one, nothing changes).
        seed: Seeds the order of the examples and, inside the run only, PyTorch's own generator (dropout).

    Returns:
        The run's :class:`FineTuningHistory`.

    Raises:
        ValueError: a label outside ``[0, C)`` (naming it and its position), labels that do not match their
            inputs, a model with nothing to train, and settings out of range, each by name.
        TypeError: a model without ``num_labels``, inputs that are not a dict of tensors, labels that are not
            ints, a setting of the wrong type.
    """
    num_labels = _num_labels(model)
    inputs, count = _check_inputs(inputs, "inputs")
    labels = check_class_labels(labels, num_labels, count, "labels")
    if held_out is not None:
        if not isinstance(held_out, (tuple, list)) or len(held_out) != 2:
            raise TypeError("held_out must be a pair (inputs, labels) of examples never trained on")
        held_out_inputs, held_out_count = _check_inputs(held_out[0], "held_out inputs")
        held_out_labels = check_class_labels(held_out[1], num_labels, held_out_count, "held_out labels")
    check_positive_int(steps, "steps")
    check_positive_int(batch_size, "batch_size")
    check_positive_int(warmup_steps, "warmup_steps", minimum=0)
    if warmup_steps > steps:
        raise ValueError(f"warmup_steps={warmup_steps} is more than steps={steps}")
    if eval_every is not None:
        check_positive_int(eval_every, "eval_every")
    peak = _check_number(learning_rate, "learning_rate")
    low = peak / 10 if min_learning_rate is None else _check_number(min_learning_rate, "min_learning_rate", True)
    if low > peak:
        raise ValueError(f"min_learning_rate={min_learning_rate} is more than learning_rate={learning_rate}")
    _check_number(weight_decay, "weight_decay", allow_zero=True)
    if max_grad_norm is not None:
        _check_number(max_grad_norm, "max_grad_norm")
    if not isinstance(group_by_length, bool):
        raise TypeError(f"group_by_length must be True or False, got {group_by_length!r}")
    groups = parameter_groups(model, weight_decay)
    parameters = [parameter for group in groups for parameter in group["params"]]
    if not parameters:
        raise ValueError("model has no parameter that requires a gradient: there is nothing to train")

    device = parameters[0].device
    lengths = _used_lengths(inputs)
    history = FineTuningHistory()
    # The order's own generator, seeded: the same seed reads the examples in the same order.
    generator = torch.Generator().manual_seed(seed)
    batches: list[Tensor] = []
    batch_size = min(batch_size, count)
    # AdamW, decay on the matrices only.
    optimizer = torch.optim.AdamW(groups, lr=peak)

    def evaluate(step: int) -> None:
        if held_out is None:
            return
        logits = predict(model, held_out_inputs)
        history.eval_steps.append(step)
        history.predictions = logits.argmax(dim=-1)
        history.held_out_accuracy.append((history.predictions == held_out_labels).float().mean().item())
        history.held_out_loss.append(F.cross_entropy(logits, held_out_labels).item())

    # PyTorch's own generator (dropout) seeded too, and given back as it was after the run; gradients on, even
    # when the caller has turned them off.
    with torch.random.fork_rng(devices=[] if device.type == "cpu" else [device]), torch.enable_grad():
        torch.manual_seed(seed)
        evaluate(0)
        model.train()
        for step in range(steps):
            start = time.perf_counter()
            # This step's learning rate: warmup, then cosine decay.
            lr = learning_rate_at(
                step, steps=steps, learning_rate=peak, min_learning_rate=low, warmup_steps=warmup_steps
            )
            for group in optimizer.param_groups:
                group["lr"] = lr
            # The next batch of the epoch; a new epoch when they run out.
            if not batches:
                batches = _epoch(count, batch_size, lengths, group_by_length, generator)
            rows = batches.pop(0)
            batch = _batch(inputs, rows, lengths, device)
            # The cross-entropy of the right labels.
            logits = model(**batch)  # (B, C)
            loss = F.cross_entropy(logits, labels[rows].to(device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            # Clip: one factor scales every gradient when their global norm is above max_grad_norm.
            grad_norm = torch.nn.utils.clip_grad_norm_(parameters, max_grad_norm or math.inf)
            optimizer.step()
            history.steps.append(step + 1)
            history.train_loss.append(loss.item())
            history.learning_rate.append(lr)
            history.grad_norm.append(grad_norm.item())
            history.seconds += time.perf_counter() - start
            if step + 1 == steps or (eval_every is not None and (step + 1) % eval_every == 0):
                evaluate(step + 1)
                model.train()
    model.eval()
    return history
