r"""Pretraining a language model on a stream of tokens: the loop every run shares, one line a decision.

A causal language model learns from nothing but text: cut a window of
:math:`T` tokens out of the corpus, ask the model to predict every token
from the ones before it, and move the weights a little against the
gradient of its mean cross-entropy (the model's own ``labels=`` loss,
:func:`~literate_transformer.parts.heads.causal_lm_loss`, which shifts the
labels inside).  :func:`train` is that loop, in the shape of nanoGPT's
``train.py``; each decision in it is one line with its reason:

* **Random windows** (:func:`get_batch`, nanoGPT's ``get_batch``): each batch
  is ``batch_size`` windows starting at random offsets of the stream, drawn
  from a generator seeded once, so that a run is repeatable and no epoch
  walks the corpus in order.
* **AdamW** (Loshchilov and Hutter, 2019): Adam's per-weight step size, with
  *decoupled* weight decay, :math:`\theta \leftarrow \theta - \eta\lambda\theta`
  applied beside the gradient step rather than folded into the gradient.
* **Weight decay where it belongs** (:func:`parameter_groups`): on every
  parameter with two or more dimensions (the weight matrices, and the token
  and position tables), not on biases and norms' gains, which are few, shift
  or scale a whole feature, and regularise nothing by shrinking; nanoGPT's
  rule (``p.dim() >= 2``).  A tied head is the token table: one tensor,
  decayed once.
* **Warmup, then cosine decay** (:func:`learning_rate_at`): the learning rate
  rises linearly for ``warmup_steps`` (Adam's second-moment estimate is
  poor at first, and a full step on it can throw the model far from where
  it started), then follows half a cosine down to ``min_learning_rate`` at
  the last step (large steps early, small ones to settle at the end),

  .. math::

      \eta_s = \eta_\text{min} + \tfrac12 (\eta_\text{max} - \eta_\text{min})
      \left(1 + \cos \pi \tfrac{s - s_w}{S - 1 - s_w}\right).

* **Gradient clipping** (``max_grad_norm``): when the global norm of all
  gradients exceeds it, every gradient is scaled down by one factor, so that
  a rare batch with a huge gradient takes a step of bounded size in the same
  direction.

Two baselines say what a loss is worth (:func:`unigram_entropy`,
:func:`bigram_loss`): a model that ignores the context can do no better on
a stream than the entropy of the stream's own token frequencies, and a
model that reads one token back is a table of next-token counts.  A loss
below the bigram's is something a table of pairs could not learn.

Each step records its loss, learning rate, gradient norm (before clipping)
and update norm (:math:`\lVert\theta_{s+1} - \theta_s\rVert`, how far the step
moved the weights); a validation stream, when given, is scored before the
first step and every ``eval_every`` steps on the same windows each time, and
``callback(step, history)`` runs at those checkpoints (samples from the model,
say).  :func:`train` returns it all as a :class:`TrainingHistory`.

>>> import torch, transformers, literate_transformer as lt
>>> config = transformers.LlamaConfig(vocab_size=16, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
...                                   num_attention_heads=2, max_position_embeddings=32)
>>> model = lt.LlamaForCausalLM(config)
>>> history = lt.train(model, torch.arange(16).repeat(40), steps=30, batch_size=4, sequence_length=16,
...                    learning_rate=1e-2, warmup_steps=5)
>>> history.train_loss[-1] < history.train_loss[0] / 4       # a repetitive stream is learned quickly
True
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from ..core.validation import check_positive_int

__all__ = [
    "TrainingHistory",
    "learning_rate_at",
    "parameter_groups",
    "get_batch",
    "evaluate",
    "train",
    "unigram_entropy",
    "bigram_loss",
]


@dataclass
class TrainingHistory:
    r"""What :func:`train` measured, step by step.

    Attributes:
        steps: The steps taken, ``1, 2, ..., steps``.
        train_loss: Each step's loss on its batch.
        learning_rate: The learning rate each step used.
        grad_norm: The global norm of each step's gradients, before clipping.
        update_norm: How far each step moved the parameters, :math:`\lVert\theta_{s+1} - \theta_s\rVert`.
        val_steps: The steps after which the validation loss was measured (0: before the first step).
        val_loss: The validation loss at each of them.
        tokens: The tokens the training batches held.
        seconds: The training steps' wall-clock time (validation and callbacks left out).
    """

    steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    learning_rate: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    update_norm: list[float] = field(default_factory=list)
    val_steps: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    tokens: int = 0
    seconds: float = 0.0

    @property
    def tokens_per_second(self) -> float:
        """The training throughput, the tokens of the batches over the steps' time."""
        return self.tokens / self.seconds if self.seconds else 0.0


def learning_rate_at(
    step: int, *, steps: int, learning_rate: float, min_learning_rate: float, warmup_steps: int
) -> float:
    """The learning rate of step ``step`` (counted from 0): linear warmup, then cosine decay to the minimum.

    Step ``warmup_steps - 1`` reaches ``learning_rate``; the last step, ``steps - 1``, uses ``min_learning_rate``.

    >>> [round(learning_rate_at(s, steps=6, learning_rate=1.0, min_learning_rate=0.0, warmup_steps=2), 3)
    ...  for s in range(6)]
    [0.5, 1.0, 1.0, 0.75, 0.25, 0.0]
    """
    if step < warmup_steps:
        # Warmup: a straight line up to the peak.
        return learning_rate * (step + 1) / warmup_steps
    # Cosine decay: the fraction of the decay done, 0 at the first step after warmup, 1 at the last.
    progress = (step - warmup_steps) / max(1, steps - 1 - warmup_steps)
    return min_learning_rate + 0.5 * (learning_rate - min_learning_rate) * (1 + math.cos(math.pi * progress))


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW's two groups: decay on every parameter of two or more dimensions, none on the others.

    Matrices and embedding tables are decayed; biases and norms' gains (vectors) are not (nanoGPT's rule,
    ``p.dim() >= 2``).  A parameter shared by two modules (a tied head) is listed once.

    Returns:
        ``[{"params": [...], "weight_decay": weight_decay}, {"params": [...], "weight_decay": 0.0}]``.
    """
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    return [
        {"params": [parameter for parameter in trained if parameter.dim() >= 2], "weight_decay": weight_decay},
        {"params": [parameter for parameter in trained if parameter.dim() < 2], "weight_decay": 0.0},
    ]


def get_batch(tokens: Tensor, batch_size: int, sequence_length: int, generator: torch.Generator) -> Tensor:
    """``batch_size`` windows of ``sequence_length`` tokens at random offsets of the stream, ``(B, T)``.

    The model reads each window and predicts each of its tokens from the ones before (the labels are the
    window itself, shifted inside the model's loss).

    >>> get_batch(torch.arange(10), 2, 4, torch.Generator().manual_seed(0))
    tensor([[4, 5, 6, 7],
            [3, 4, 5, 6]])
    """
    # Every offset whose window fits, equally likely.
    starts = torch.randint(len(tokens) - sequence_length + 1, (batch_size,), generator=generator)
    batch = torch.stack([tokens[start : start + sequence_length] for start in starts.tolist()])  # (B, T)
    return batch


def _validation_windows(tokens: Tensor, sequence_length: int, count: int) -> Tensor:
    """At most ``count`` windows of the validation stream, evenly spaced from its start to its end: ``(N, T)``."""
    count = max(1, min(count, len(tokens) // sequence_length))
    starts = torch.linspace(0, len(tokens) - sequence_length, count).long()
    return torch.stack([tokens[start : start + sequence_length] for start in starts.tolist()])


@torch.no_grad()
def evaluate(model: nn.Module, windows: Tensor, batch_size: int) -> float:
    """The model's mean loss over ``windows`` (``(N, T)`` token ids), a batch of ``batch_size`` at a time,
    in evaluation mode (its mode is restored after)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    losses = []
    for batch in windows.split(batch_size):
        batch = batch.to(device)
        losses.append(model(batch, labels=batch).loss.item() * len(batch))
    model.train(was_training)
    return sum(losses) / len(windows)


def _as_tokens(
    tokens: object, name: str, vocab_size: int | None, sequence_length: int, least: str | None = None
) -> Tensor:
    """A stream of token ids as a 1-D long tensor of at least ``sequence_length`` tokens (``least`` says why), or a
    clear error naming ``name``."""
    if isinstance(tokens, Tensor):
        if tokens.dim() != 1 or tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
            raise TypeError(f"{name} must be a 1-D tensor of integer token ids, got {tokens.dim()}-D {tokens.dtype}")
        tokens = tokens.long()
    elif isinstance(tokens, Sequence) and not isinstance(tokens, (str, bytes)):
        if not all(isinstance(token, int) and not isinstance(token, bool) for token in tokens):
            raise TypeError(f"{name} must be a list of int token ids")
        tokens = torch.tensor(list(tokens), dtype=torch.long)
    else:
        raise TypeError(f"{name} must be a 1-D LongTensor or a list of int token ids, got {type(tokens).__name__}")
    if len(tokens) == 0:
        raise ValueError(f"{name} is empty: there is nothing to train on")
    if len(tokens) < sequence_length:
        least = least or f"one window of sequence_length={sequence_length}"
        raise ValueError(f"{name} has {len(tokens)} tokens, fewer than {least}")
    low, high = int(tokens.min()), int(tokens.max())
    if low < 0 or (vocab_size is not None and high >= vocab_size):
        raise ValueError(f"{name} must be token ids in [0, vocab_size={vocab_size}), found {low if low < 0 else high}")
    return tokens


def _positive_number(value: object, name: str, allow_zero: bool = False) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise TypeError(f"{name} must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {value!r}")
    return float(value)


def _check_settings(
    config: Any,
    steps: object,
    batch_size: object,
    sequence_length: object,
    learning_rate: object,
    min_learning_rate: object,
    warmup_steps: object,
    weight_decay: object,
    max_grad_norm: object,
    eval_every: object,
    eval_batches: object,
    callback: object,
) -> None:
    """Refuse, by name, a setting :func:`train` cannot run with."""
    check_positive_int(steps, "steps")
    check_positive_int(batch_size, "batch_size")
    # One prediction needs two tokens: the one read and the one predicted.
    check_positive_int(sequence_length, "sequence_length", minimum=2)
    check_positive_int(warmup_steps, "warmup_steps", minimum=0)
    if warmup_steps > steps:
        raise ValueError(f"warmup_steps={warmup_steps} is more than steps={steps}")
    peak = _positive_number(learning_rate, "learning_rate")
    if _positive_number(min_learning_rate, "min_learning_rate", allow_zero=True) > peak:
        raise ValueError(f"min_learning_rate={min_learning_rate} is more than learning_rate={learning_rate}")
    _positive_number(weight_decay, "weight_decay", allow_zero=True)
    if max_grad_norm is not None:
        _positive_number(max_grad_norm, "max_grad_norm")
    if eval_every is not None:
        check_positive_int(eval_every, "eval_every")
    check_positive_int(eval_batches, "eval_batches")
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable as callback(step, history), got {callback!r}")
    positions = getattr(config, "max_position_embeddings", None)
    if positions is not None and sequence_length > positions:
        raise ValueError(
            f"sequence_length={sequence_length} is more than the model's max_position_embeddings={positions}"
        )


def train(
    model: nn.Module,
    tokens: Tensor | Sequence[int],
    *,
    steps: int,
    batch_size: int = 16,
    sequence_length: int = 64,
    learning_rate: float = 1e-3,
    min_learning_rate: float | None = None,
    warmup_steps: int = 0,
    weight_decay: float = 0.1,
    betas: tuple[float, float] = (0.9, 0.95),
    max_grad_norm: float | None = 1.0,
    validation_tokens: Tensor | Sequence[int] | None = None,
    eval_every: int | None = None,
    eval_batches: int = 8,
    callback: Callable[[int, TrainingHistory], object] | None = None,
    seed: int = 0,
) -> TrainingHistory:
    """Train a causal language model on a token stream: random windows, AdamW, warmup and cosine decay, clipping.

    Args:
        model: Any causal language model of the package (or of ``transformers``): ``model(input_ids,
            labels=input_ids)`` returns an output whose ``loss`` is the next-token loss.  Trained in place, and
            left in evaluation mode.
        tokens: The training stream, a 1-D LongTensor or a list of token ids.
        steps: Optimizer steps.
        batch_size: Windows per step.
        sequence_length: Tokens per window (at most the model's ``max_position_embeddings``).
        learning_rate: The peak learning rate, reached at the end of the warmup.
        min_learning_rate: Where the cosine decay ends (``learning_rate / 10`` when ``None``, as in nanoGPT).
        warmup_steps: Steps of linear warmup (0: start at the peak).
        weight_decay: AdamW's decoupled decay of the parameters of two or more dimensions
            (:func:`parameter_groups`).
        betas: AdamW's moment decay rates (nanoGPT's 0.9 and 0.95).
        max_grad_norm: Clip the gradients' global norm to this (``None``: no clipping).
        validation_tokens: A held-out stream, scored at every checkpoint on the same windows (at most
            ``eval_batches * batch_size`` of them, evenly spaced over it).
        eval_every: Steps between checkpoints (``None``: only before the first step and after the last).
        eval_batches: Batches of validation windows at each checkpoint.
        callback: ``callback(step, history)`` at each checkpoint (step 0 before training), after the
            validation loss is recorded: draw samples, print progress.
        seed: Seeds the windows' generator and, inside the run only, PyTorch's own (dropout).

    Returns:
        The run's :class:`TrainingHistory`.

    Raises:
        ValueError: a non-positive ``steps``, ``batch_size`` or ``learning_rate``, a ``sequence_length`` past the
            model's positions, an empty stream or one shorter than a window, a token outside the vocabulary,
            and the other settings out of range, each by name.
        TypeError: a model without parameters, or a stream or setting of the wrong type.
    """
    if not isinstance(model, nn.Module) or next(model.parameters(), None) is None:
        raise TypeError(f"model must be a torch.nn.Module with parameters, got {type(model).__name__}")
    if min_learning_rate is None and isinstance(learning_rate, (int, float)):
        min_learning_rate = learning_rate / 10
    config = getattr(model, "config", None)
    _check_settings(
        config, steps, batch_size, sequence_length, learning_rate, min_learning_rate, warmup_steps, weight_decay,
        max_grad_norm, eval_every, eval_batches, callback,
    )  # fmt: skip
    vocab_size = getattr(config, "vocab_size", None)
    tokens = _as_tokens(tokens, "tokens", vocab_size, sequence_length)
    windows = None
    if validation_tokens is not None:
        validation_tokens = _as_tokens(validation_tokens, "validation_tokens", vocab_size, sequence_length)
        windows = _validation_windows(validation_tokens, sequence_length, eval_batches * batch_size)
    device = next(model.parameters()).device
    history = TrainingHistory()
    # The windows' own generator, seeded: the same seed draws the same batches.
    generator = torch.Generator().manual_seed(seed)
    # AdamW, decay on the matrices and tables only.
    optimizer = torch.optim.AdamW(parameter_groups(model, weight_decay), lr=learning_rate, betas=betas)
    parameters = [parameter for group in optimizer.param_groups for parameter in group["params"]]

    def checkpoint(step: int) -> None:
        if windows is not None:
            history.val_steps.append(step)
            history.val_loss.append(evaluate(model, windows, batch_size))
        if callback is not None:
            callback(step, history)
        model.train()

    # PyTorch's own generator (dropout) seeded too, and given back as it was after the run; gradients on, even
    # when the caller has turned them off.
    with torch.random.fork_rng(devices=[] if device.type == "cpu" else [device]), torch.enable_grad():
        torch.manual_seed(seed)
        checkpoint(0)
        for step in range(steps):
            start = time.perf_counter()
            # This step's learning rate: warmup, then cosine decay.
            lr = learning_rate_at(
                step, steps=steps, learning_rate=learning_rate, min_learning_rate=min_learning_rate,
                warmup_steps=warmup_steps,
            )  # fmt: skip
            for group in optimizer.param_groups:
                group["lr"] = lr
            batch = get_batch(tokens, batch_size, sequence_length, generator).to(device)
            # The next-token loss: the window is its own labels (the model shifts them).
            loss = model(batch, labels=batch).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            # Clip: one factor scales every gradient when their global norm is above max_grad_norm.
            grad_norm = torch.nn.utils.clip_grad_norm_(parameters, max_grad_norm or math.inf)
            before = [parameter.detach().clone() for parameter in parameters]
            optimizer.step()
            # How far the step moved the weights, all of them together.
            update_norm = torch.linalg.vector_norm(
                torch.stack([torch.linalg.vector_norm(p.detach() - b) for p, b in zip(parameters, before, strict=True)])
            )
            history.steps.append(step + 1)
            history.train_loss.append(loss.item())
            history.learning_rate.append(lr)
            history.grad_norm.append(grad_norm.item())
            history.update_norm.append(update_norm.item())
            history.tokens += batch.numel()
            history.seconds += time.perf_counter() - start
            if step + 1 == steps or (eval_every is not None and (step + 1) % eval_every == 0):
                checkpoint(step + 1)
    model.eval()
    return history


def unigram_entropy(tokens: Tensor | Sequence[int]) -> float:
    r"""The entropy of a stream's own token frequencies, in nats: :math:`-\sum_v p_v \ln p_v`, :math:`p_v` the share of
    the stream that is token :math:`v`.

    It is the loss on the stream of the best model that ignores the context, given the stream's own counts: no
    model that predicts every token with the same distribution does better on it.  A language model earns its
    context below this line.

    >>> round(unigram_entropy([0, 0, 1, 2]), 4)  # shares 1/2, 1/4, 1/4: 1.5 ln 2
    1.0397

    Raises:
        TypeError: for a stream that is not token ids.
        ValueError: for an empty stream or a negative id.
    """
    tokens = _as_tokens(tokens, "tokens", None, 1)
    counts = torch.bincount(tokens).double()
    shares = counts[counts > 0] / len(tokens)
    return float(-(shares * shares.log()).sum())


def bigram_loss(
    train_tokens: Tensor | Sequence[int], tokens: Tensor | Sequence[int], vocab_size: int, smoothing: float
) -> float:
    r"""The mean next-token loss on ``tokens`` of a bigram model counted on ``train_tokens``, smoothed by add-:math:`k`.

    The model reads one token back: the probability that :math:`b` follows :math:`a` is the share of the
    :math:`a`'s of the training stream that :math:`b` follows, each of the :math:`V` counts given :math:`k`
    more, so that a pair never seen keeps a little probability (with :math:`k = 0` it would have none, and an
    infinite loss):

    .. math:: P(b \mid a) = \frac{\operatorname{count}(a, b) + k}{\operatorname{count}(a) + kV}.

    The pairs are counted where they occur (a sorted list of the distinct pairs), not in a :math:`V \times V`
    table, so a large vocabulary costs no more memory than the stream.

    >>> round(bigram_loss([0, 1, 0, 1, 0], [0, 1, 0], vocab_size=2, smoothing=1.0), 4)  # P(1|0) = 3/4, P(0|1) = 3/4
    0.2877

    Args:
        train_tokens: The stream the pairs are counted on.
        tokens: The stream scored: each of its tokens after the first, predicted from the one before.
        vocab_size: :math:`V`, the tokens the model could predict.
        smoothing: :math:`k > 0`; larger spreads more probability over the pairs not seen.

    Raises:
        TypeError: for streams that are not token ids, or a ``smoothing`` that is not a number.
        ValueError: for a stream of fewer than two tokens or with an id outside ``[0, vocab_size)``, a
            ``vocab_size`` that is not a positive int, or a ``smoothing`` that is not positive.
    """
    check_positive_int(vocab_size, "vocab_size")
    _positive_number(smoothing, "smoothing")
    train_tokens = _as_tokens(train_tokens, "train_tokens", vocab_size, 2, least="two (a pair)")
    tokens = _as_tokens(tokens, "tokens", vocab_size, 2, least="two (a pair)")
    # Each pair (a, b) as one number, a V + b: the training stream's distinct pairs, sorted, and how often each occurs.
    pairs, pair_counts = torch.unique(train_tokens[:-1] * vocab_size + train_tokens[1:], return_counts=True)
    # count(a): how often each token is followed by another in the training stream.
    first_counts = torch.bincount(train_tokens[:-1], minlength=vocab_size)
    # count(a, b) of each pair scored: found in the sorted list, or 0 where the training stream never had it.
    scored = tokens[:-1] * vocab_size + tokens[1:]
    found = torch.searchsorted(pairs, scored).clamp(max=len(pairs) - 1)
    counts = torch.where(pairs[found] == scored, pair_counts[found], 0).double()
    probabilities = (counts + smoothing) / (first_counts[tokens[:-1]].double() + smoothing * vocab_size)
    return float(-probabilities.log().mean())
