r"""Training: a tiny encoder-decoder learns to reverse digit sequences, from scratch.

Everything before this module can be checked against HuggingFace or PyTorch
with the same weights.  Whether the model can *learn* is a different
question, and the honest answer is to train one.  The task is small enough
for a laptop CPU and still needs every part of the model:

    source ``3 1 4 1 5``  ->  target ``5 1 4 1 3 [EOS]``

* The **encoder** must know where each digit sits, and where the sequence
  ends (sources have different lengths and are padded, so the padding mask
  matters).
* The **cross-attention** must find source position :math:`L - 1 - t` when it
  writes target token :math:`t`: its weights form an anti-diagonal.
* The **decoder** must count how far it has got and write ``[EOS]`` after the
  last digit; the causal mask stops it from reading the answer off its own
  input during training.

Teacher forcing
---------------
During training the decoder is given the *correct* previous tokens,
``[BOS] y_1 ... y_{T-1}``, and predicts ``y_1 ... y_T`` at every position in
one pass.  The loss is the mean cross-entropy of the correct next tokens,

.. math::

    \mathcal{L} = -\frac{1}{N} \sum_{b, t} \log p_\theta(y_{b,t} \mid y_{b,<t}, x_b),

over the :math:`N` real (unpadded) target tokens; padded positions carry the
label ``-100``, which :func:`torch.nn.functional.cross_entropy` ignores.

Optimisation
------------
:class:`torch.optim.AdamW` with a learning rate that rises linearly for
``warmup_steps`` (large updates at the start, when Adam's moment estimates are
still poor, tend to derail a transformer) and then decays linearly to zero.
The gradient norm is clipped at 1.

Evaluation
----------
Accuracy is measured the way the model will be used: the decoder writes each
held-out target itself with
:func:`~literate_transformer.book.generation.greedy_generate` (no teacher forcing),
and a sequence counts only if *every* token, ``[EOS]`` included, is right
(exact match).  The held-out sequences are never trained on: a sequence
belongs to the held-out set when a fixed checksum of its digits is divisible
by 10 (about one sequence in ten), and training batches never contain such
sequences.

:func:`train_reversal` prints its progress and returns a
:class:`TrainingResult` with the loss curve and the trained model; a test
requires at least 99% held-out exact match.  How long that takes is
measured where it is shown (``TrainingResult.seconds``), never asserted.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from ..core.config import TransformerConfig
from ..core.validation import check_positive_int
from .decoder import EncoderDecoderTransformer
from .generation import greedy_generate

__all__ = [
    "PAD_TOKEN_ID",
    "BOS_TOKEN_ID",
    "EOS_TOKEN_ID",
    "DIGIT_OFFSET",
    "VOCAB_SIZE",
    "ReversalBatch",
    "TrainingResult",
    "reversal_config",
    "is_held_out",
    "make_reversal_batch",
    "exact_match",
    "train_reversal",
]

#: Padding token (also the id of finished sequences' filler during generation).
PAD_TOKEN_ID = 0
#: The start token every target begins with.
BOS_TOKEN_ID = 1
#: The end token every target ends with.
EOS_TOKEN_ID = 2
#: Digit ``d`` is token ``d + DIGIT_OFFSET``.
DIGIT_OFFSET = 3
#: Three special tokens and ten digits.
VOCAB_SIZE = DIGIT_OFFSET + 10

#: Ignored by :func:`torch.nn.functional.cross_entropy` (padded target positions).
IGNORE_INDEX = -100


class ReversalBatch(NamedTuple):
    """A batch of the reversal task, ready for :class:`~literate_transformer.book.decoder.EncoderDecoderTransformer`."""

    #: Source digit tokens, right-padded, ``(B, S)``.
    input_ids: Tensor
    #: ``(B, S)``, 1 for digits and 0 for padding.
    attention_mask: Tensor
    #: ``[BOS]`` + reversed digits, padded, ``(B, T)``.
    decoder_input_ids: Tensor
    #: ``(B, T)``, 1 for real target tokens.
    decoder_attention_mask: Tensor
    #: Reversed digits + ``[EOS]``, ``-100`` where padded, ``(B, T)``.
    labels: Tensor


@dataclass
class TrainingResult:
    """What :func:`train_reversal` returns.

    Attributes:
        model: The trained model (in evaluation mode).
        config: Its configuration.
        losses: The training loss of every step (the learning curve).
        evaluations: ``(step, held-out exact match)`` pairs, one per evaluation.
        accuracy: The final held-out exact-match accuracy, in ``[0, 1]``.
        seconds: Wall-clock time of training and evaluation.
        steps: Number of optimisation steps taken.
    """

    model: EncoderDecoderTransformer
    config: TransformerConfig
    losses: list[float] = field(default_factory=list)
    evaluations: list[tuple[int, float]] = field(default_factory=list)
    accuracy: float = 0.0
    seconds: float = 0.0
    steps: int = 0


def reversal_config(
    hidden_size: int = 64,
    num_hidden_layers: int = 1,
    num_attention_heads: int = 2,
    intermediate_size: int = 128,
    max_length: int = 8,
) -> TransformerConfig:
    """The tiny model of the demo: no dropout (the data are unlimited), short positions."""
    return TransformerConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        intermediate_size=intermediate_size,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        max_position_embeddings=max_length + 1,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        pad_token_id=PAD_TOKEN_ID,
    )


def is_held_out(digits: Tensor, lengths: Tensor) -> Tensor:
    r"""Which sequences belong to the held-out set.

    A sequence :math:`d_0 \dots d_{L-1}` is held out when
    :math:`L + \sum_i (2i + 1)\, d_i` is divisible by 10: about one in ten of
    every length, chosen by content, so no training batch can contain one.

    Args:
        digits: ``(B, S)`` digits ``0-9`` (padding positions are ignored).
        lengths: ``(B,)`` the number of real digits of each sequence.

    Returns:
        A boolean ``(B,)`` tensor.
    """
    positions = torch.arange(digits.shape[1], device=digits.device)
    real = positions[None, :] < lengths[:, None]
    checksum = lengths + ((2 * positions + 1)[None, :] * digits * real).sum(dim=1)
    return checksum % 10 == 0


def _sample_digits(
    batch_size: int, min_length: int, max_length: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    lengths = torch.randint(min_length, max_length + 1, (batch_size,), generator=generator)
    digits = torch.randint(0, 10, (batch_size, max_length), generator=generator)
    digits = digits * (torch.arange(max_length)[None, :] < lengths[:, None])
    return digits, lengths


def make_reversal_batch(
    batch_size: int,
    min_length: int,
    max_length: int,
    generator: torch.Generator,
    held_out: bool = False,
) -> ReversalBatch:
    """Sample a batch of the reversal task.

    Args:
        batch_size: Number of sequences ``B``.
        min_length: Shortest source, in digits.
        max_length: Longest source, in digits (``S = max_length``,
            ``T = max_length + 1``).
        generator: The random generator (seeded by the caller).
        held_out: Sample only held-out sequences (``True``) or only training
            ones (``False``); see :func:`is_held_out`.

    Returns:
        A :class:`ReversalBatch`.

    Digit ``d`` is token ``d + 3``; ``0`` pads, ``1`` is ``[BOS]``, ``2`` is
    ``[EOS]``, and the label ``-100`` marks padding the loss ignores:

    >>> batch = make_reversal_batch(2, 2, 4, torch.Generator().manual_seed(0))
    >>> batch.input_ids
    tensor([[ 6,  3,  6, 12],
            [10,  6,  0,  0]])
    >>> batch.decoder_input_ids
    tensor([[ 1, 12,  6,  3,  6],
            [ 1,  6, 10,  2,  0]])
    >>> batch.labels
    tensor([[  12,    6,    3,    6,    2],
            [   6,   10,    2, -100, -100]])
    """
    if not 1 <= min_length <= max_length:
        raise ValueError(f"need 1 <= min_length <= max_length, got min_length={min_length}, max_length={max_length}")
    # Rejection sampling: keep drawing until every row is on the requested side of the split.
    digits, lengths = _sample_digits(batch_size, min_length, max_length, generator)
    wrong_side = is_held_out(digits, lengths) != held_out
    while bool(wrong_side.any()):
        new_digits, new_lengths = _sample_digits(int(wrong_side.sum()), min_length, max_length, generator)
        digits[wrong_side], lengths[wrong_side] = new_digits, new_lengths
        wrong_side = is_held_out(digits, lengths) != held_out

    positions = torch.arange(max_length)
    source_mask = positions[None, :] < lengths[:, None]  # (B, S)
    input_ids = torch.where(source_mask, digits + DIGIT_OFFSET, PAD_TOKEN_ID)
    # Target token t is source digit L - 1 - t, then [EOS] at t = L.
    source_index = (lengths[:, None] - 1 - positions[None, :]).clamp(min=0)
    reversed_digits = torch.gather(digits, 1, source_index) + DIGIT_OFFSET
    targets = torch.full((batch_size, max_length + 1), PAD_TOKEN_ID)
    targets[:, :max_length] = torch.where(source_mask, reversed_digits, PAD_TOKEN_ID)
    targets[torch.arange(batch_size), lengths] = EOS_TOKEN_ID
    target_mask = torch.arange(max_length + 1)[None, :] <= lengths[:, None]  # (B, T)
    # Teacher forcing: the decoder reads [BOS] y_1 ... y_{T-1} and predicts y_1 ... y_T.
    decoder_input_ids = torch.cat([torch.full((batch_size, 1), BOS_TOKEN_ID), targets[:, :-1]], dim=1)
    labels = targets.masked_fill(~target_mask, IGNORE_INDEX)
    return ReversalBatch(input_ids, source_mask.long(), decoder_input_ids, target_mask.long(), labels)


def exact_match(model: EncoderDecoderTransformer, batch: ReversalBatch) -> float:
    """Fraction of sequences the model writes exactly right, ``[EOS]`` included, by greedy decoding."""
    device = next(model.parameters()).device
    generated = (
        greedy_generate(
            model,
            batch.input_ids.to(device),
            max_new_tokens=batch.labels.shape[1],
            bos_token_id=BOS_TOKEN_ID,
            eos_token_id=EOS_TOKEN_ID,
            attention_mask=batch.attention_mask.to(device),
        )
        .sequences[:, 1:]
        .cpu()
    )
    # Compare on the real target positions; generation may stop before the padded tail.
    written = torch.full_like(batch.labels, PAD_TOKEN_ID)
    written[:, : generated.shape[1]] = generated
    real = batch.labels != IGNORE_INDEX
    correct = ((written == batch.labels) | ~real).all(dim=1)
    return correct.float().mean().item()


def train_reversal(
    *,
    steps: int = 400,
    batch_size: int = 64,
    min_length: int = 3,
    max_length: int = 8,
    learning_rate: float = 5e-3,
    warmup_steps: int = 50,
    weight_decay: float = 0.01,
    eval_every: int = 50,
    eval_size: int = 500,
    target_accuracy: float | None = 0.995,
    config: TransformerConfig | None = None,
    seed: int = 0,
    device: str | torch.device | None = None,
    num_threads: int | None = 1,
    verbose: bool = True,
) -> TrainingResult:
    """Train an :class:`~literate_transformer.book.decoder.EncoderDecoderTransformer` to reverse digit sequences.

    Args:
        steps: Maximum number of optimisation steps.
        batch_size: Sequences per step.
        min_length: Shortest source sequence.
        max_length: Longest source sequence.
        learning_rate: Peak learning rate of :class:`torch.optim.AdamW`.
        warmup_steps: Steps of linear warm-up before the linear decay.
        weight_decay: AdamW's decoupled weight decay.
        eval_every: Measure held-out exact match every this many steps.
        eval_size: Number of held-out sequences.
        target_accuracy: Stop early once held-out exact match reaches this
            (``None``: always train for ``steps``).
        config: The model's config (default: :func:`reversal_config`).
        seed: Seeds the model's initialisation and the data.
        device: Where to train (default: CUDA when available, else CPU).
        num_threads: CPU threads for PyTorch during training (restored
            afterwards); ``None`` keeps the current setting.  A model this
            small gains little from a second thread, and on a two-core
            machine that other processes keep busy, threads that wait for
            each other can make every step many times slower.
        verbose: Print step, loss and held-out exact match at each evaluation.

    Returns:
        A :class:`TrainingResult`.
    """
    for name, value in (("steps", steps), ("batch_size", batch_size), ("eval_every", eval_every)):
        check_positive_int(value, name)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    config = config or reversal_config(max_length=max_length)
    if config.vocab_size != VOCAB_SIZE or config.max_position_embeddings < max_length + 1:
        raise ValueError(
            f"config must have vocab_size={VOCAB_SIZE} and max_position_embeddings >= max_length + 1 "
            f"= {max_length + 1}, got {config.vocab_size} and {config.max_position_embeddings}"
        )
    previous_threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        return _train(
            steps,
            batch_size,
            min_length,
            max_length,
            learning_rate,
            warmup_steps,
            weight_decay,
            eval_every,
            eval_size,
            target_accuracy,
            config,
            seed,
            device,
            verbose,
        )
    finally:
        torch.set_num_threads(previous_threads)


def _train(
    steps: int,
    batch_size: int,
    min_length: int,
    max_length: int,
    learning_rate: float,
    warmup_steps: int,
    weight_decay: float,
    eval_every: int,
    eval_size: int,
    target_accuracy: float | None,
    config: TransformerConfig,
    seed: int,
    device: str | torch.device,
    verbose: bool,
) -> TrainingResult:
    torch.manual_seed(seed)
    data = torch.Generator().manual_seed(seed)
    held_out = make_reversal_batch(eval_size, min_length, max_length, torch.Generator().manual_seed(seed + 1), True)

    model = EncoderDecoderTransformer(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=weight_decay)

    def schedule(step: int) -> float:
        # Linear warm-up to the peak, then linear decay to zero at `steps`.
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (steps - step) / max(1, steps - warmup_steps))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    result = TrainingResult(model=model, config=config)
    start = time.perf_counter()
    for step in range(1, steps + 1):
        model.train()
        batch = make_reversal_batch(batch_size, min_length, max_length, data)
        batch = ReversalBatch(*(tensor.to(device) for tensor in batch))
        # Teacher-forced forward pass: logits for every target position at once.
        logits = model(
            batch.input_ids, batch.decoder_input_ids, batch.attention_mask, batch.decoder_attention_mask
        ).logits
        # Mean cross-entropy over the real target tokens.
        loss = F.cross_entropy(logits.flatten(0, 1), batch.labels.flatten(), ignore_index=IGNORE_INDEX)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        result.losses.append(loss.item())
        result.steps = step

        if step % eval_every == 0 or step == steps:
            accuracy = exact_match(model, held_out)
            result.evaluations.append((step, accuracy))
            if verbose:
                print(
                    f"step {step:5d}  loss {loss.item():.4f}  held-out exact match {accuracy:6.1%}  "
                    f"({time.perf_counter() - start:.1f} s)",
                    flush=True,
                )
            if target_accuracy is not None and accuracy >= target_accuracy:
                break
    result.seconds = time.perf_counter() - start
    result.accuracy = result.evaluations[-1][1]
    model.eval()
    if verbose:
        print(
            f"held-out exact match {result.accuracy:.1%} on {eval_size} sequences after {result.steps} steps, "
            f"{result.seconds:.1f} s",
            flush=True,
        )
    if not math.isfinite(result.losses[-1]):
        raise RuntimeError(f"training diverged: loss {result.losses[-1]}")
    return result
