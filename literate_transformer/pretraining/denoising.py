r"""Denoising: how the encoder-decoder branch is pretrained, T5's span corruption and BART's infilling and shuffling.

An encoder-decoder learns from raw text by repairing it: the text is
corrupted, the encoder reads the corrupted version, and the decoder is
trained (teacher-forced, with the cross-entropy of every target token) to
write what the corruption took away.  The families of the branch differ in
the corruption and in what the decoder writes.

T5: span corruption
-------------------
T5 drops about 15% of the tokens, in spans of mean length 3 (Raffel et al.,
2020, §3.3.4, the objective its final models use, §3.7).  Each dropped span
becomes one *sentinel* in the input, a token that only marks a gap
(``<extra_id_0>``, ``<extra_id_1>``, ...: the last ids of T5's vocabulary,
counting down).  The target is short: each sentinel followed by the tokens
it replaced, and one more sentinel to close (Figure 2 of the paper)::

    original:  Thank you for inviting me to your party last week .
    input:     Thank you <X> me to your party <Y> week .
    target:    <X> for inviting <Y> last <Z>

Which tokens are dropped is decided by :func:`random_spans_noise_mask`,
the procedure of T5's code (``random_spans_noise_mask`` in
``t5.data.preprocessors``, which HuggingFace's ``run_t5_mlm_flax.py``
example ports): exactly ``round(length * noise_density)`` dropped tokens,
in ``round(dropped / mean_noise_span_length)`` spans whose lengths, and the
lengths of the kept runs between them, are random.  :func:`span_corruption`
builds input and target, :func:`restore_spans` puts the target's spans back
into the input: the original text, exactly (tests check it on many
random texts).

BART: text infilling and sentence permutation
---------------------------------------------
BART's decoder writes the *whole* original text, so its corruptions may be
harsher (Lewis et al., 2020, §2.2).  **Text infilling** samples spans with
lengths drawn from a Poisson distribution (:math:`\lambda = 3`) and
replaces each span by a single ``<mask>``, so the model must also infer how
many tokens are missing; a span of length 0 inserts a ``<mask>`` that hides
nothing.  **Sentence permutation** splits the document at full stops and
shuffles the sentences.  The large model used both, masking 30% of the
tokens (§5.1).  :func:`text_infilling` and :func:`sentence_permutation`
return the corrupted ids and the target, the original ids;
:func:`infilled_spans` reads off the target what each ``<mask>`` hid (the
round trip the tests check).

These functions work on one text at a time, a 1-D tensor of ids, and draw
their randomness from an optional :class:`torch.Generator`.  They are
written to be read, not to be fast; fairseq's ``DenoisingDataset`` also
masks whole words and replaces some masks by random tokens, which these
leave out.

>>> original = torch.arange(10, 30)                          # a text of 20 ids; sentinels 199, 198, ...
>>> generator = torch.Generator().manual_seed(0)
>>> inputs, targets = span_corruption(original, sentinel_start=199, generator=generator)
>>> inputs.tolist()                                            # round(20 * 0.15) = 3 tokens dropped
[10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 199]
>>> targets.tolist()
[199, 27, 28, 29, 198]
>>> torch.equal(restore_spans(inputs, targets, sentinel_start=199), original)
True
"""

from __future__ import annotations

import math
from functools import cache

import torch
from torch import Tensor

from ..core.validation import check_positive_int, check_tensor

__all__ = [
    "random_spans_noise_mask",
    "span_corruption",
    "restore_spans",
    "text_infilling",
    "infilled_spans",
    "sentence_permutation",
]


def _check_ids(input_ids: object, name: str = "input_ids") -> Tensor:
    input_ids = check_tensor(input_ids, name, ndim=1, dtypes=("int",))
    if len(input_ids) < 2:
        raise ValueError(f"{name} must hold at least 2 tokens (one to keep, one to corrupt), got {len(input_ids)}")
    return input_ids


def _random_segmentation(num_items: int, num_segments: int, generator: torch.Generator | None) -> Tensor:
    """``num_items`` split into ``num_segments`` runs of random positive lengths (they sum to ``num_items``)."""
    # num_segments - 1 distinct cut points among the num_items - 1 places between items.
    cuts = torch.randperm(num_items - 1, generator=generator)[: num_segments - 1] + 1
    bounds = torch.cat([torch.tensor([0]), cuts.sort().values, torch.tensor([num_items])])
    return bounds.diff()


def random_spans_noise_mask(
    length: int,
    noise_density: float = 0.15,
    mean_noise_span_length: float = 3.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Which of ``length`` tokens T5 drops: spans of dropped tokens between runs of kept ones, a kept run first.

    Args:
        length: The number of tokens, at least 2.
        noise_density: The fraction of tokens to drop (T5's 0.15).
        mean_noise_span_length: The mean length of a dropped span (T5's 3).
        generator: The random generator.

    Returns:
        A boolean ``(length,)`` mask, ``True`` for a dropped token.
    """
    check_positive_int(length, "length", minimum=2)
    if not 0 < noise_density < 1 or mean_noise_span_length < 1:
        raise ValueError(
            f"noise_density must be in (0, 1) and mean_noise_span_length at least 1, "
            f"got {noise_density} and {mean_noise_span_length}"
        )
    # How many tokens to drop (at least one, and at least one kept), and in how many spans.
    num_noise_tokens = min(max(round(length * noise_density), 1), length - 1)
    num_nonnoise_tokens = length - num_noise_tokens
    num_noise_spans = min(max(round(num_noise_tokens / mean_noise_span_length), 1), num_nonnoise_tokens)
    # Random lengths for the dropped spans, and for the kept runs between them.
    noise_span_lengths = _random_segmentation(num_noise_tokens, num_noise_spans, generator)
    nonnoise_span_lengths = _random_segmentation(num_nonnoise_tokens, num_noise_spans, generator)
    # Interleaved: kept, dropped, kept, dropped, ...
    run_lengths = torch.stack([nonnoise_span_lengths, noise_span_lengths], dim=1).flatten()
    is_noise_run = torch.arange(2 * num_noise_spans) % 2 == 1
    return is_noise_run.repeat_interleave(run_lengths)


def span_corruption(
    input_ids: Tensor,
    sentinel_start: int,
    noise_density: float = 0.15,
    mean_noise_span_length: float = 3.0,
    num_sentinels: int = 100,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """T5's pretraining example from a text: the input with a sentinel per dropped span, and the target.

    Args:
        input_ids: A text's ids, ``(n,)``, without sentinels.
        sentinel_start: The id of the first sentinel, ``<extra_id_0>``; the
            ``k``-th span gets ``sentinel_start - k`` (T5's tokenizer: 32099,
            32098, ...).
        noise_density: The fraction of tokens to drop.
        mean_noise_span_length: The mean length of a dropped span.
        num_sentinels: How many sentinels the vocabulary has (T5's 100).
        generator: The random generator.

    Returns:
        ``(inputs, targets)``: the kept tokens with one sentinel where each
        span was, and each sentinel followed by its span, one more sentinel last.

    Raises:
        ValueError: for a text of fewer than 2 tokens, one that holds sentinel
            ids, or more spans than sentinels.
    """
    input_ids = _check_ids(input_ids)
    if bool(((input_ids <= sentinel_start) & (input_ids > sentinel_start - num_sentinels)).any()):
        raise ValueError(
            f"input_ids must not hold sentinel ids ({sentinel_start - num_sentinels + 1}..{sentinel_start})"
        )
    noise = random_spans_noise_mask(len(input_ids), noise_density, mean_noise_span_length, generator)
    # A span starts where a dropped token follows a kept one.
    starts = noise & ~torch.cat([torch.tensor([False]), noise[:-1]])
    num_spans = int(starts.sum())
    if num_spans >= num_sentinels:
        raise ValueError(f"{num_spans} spans need {num_spans + 1} sentinels, more than num_sentinels={num_sentinels}")
    # Span k's sentinel, sentinel_start - k, at every position of span k.
    sentinels = (sentinel_start - (starts.cumsum(0) - 1)).to(input_ids.dtype)
    # Each position offers two tokens, its sentinel and itself; input and target each take some of them:
    pairs = torch.stack([sentinels, input_ids], dim=1)
    # the input, the sentinel where a span starts and every kept token;
    inputs = pairs[torch.stack([starts, ~noise], dim=1)]
    # the target, the sentinel where a span starts and every dropped token, then a closing sentinel.
    closing = input_ids.new_tensor([sentinel_start - num_spans])
    targets = torch.cat([pairs[torch.stack([starts, noise], dim=1)], closing])
    return inputs, targets


def restore_spans(inputs: Tensor, targets: Tensor, sentinel_start: int, num_sentinels: int = 100) -> Tensor:
    """The original text from T5's input and target: each sentinel of the input replaced by its span.

    Args:
        inputs: The input of :func:`span_corruption`.
        targets: Its target.
        sentinel_start: The id of ``<extra_id_0>``.
        num_sentinels: How many sentinels the vocabulary has.

    Returns:
        The original ids.
    """

    def is_sentinel(token: int) -> bool:
        return sentinel_start - num_sentinels < token <= sentinel_start

    # The target, read as {sentinel: the tokens after it, up to the next sentinel}.
    spans: dict[int, list[int]] = {}
    for token in targets.tolist():
        if is_sentinel(token):
            current = spans.setdefault(token, [])
        else:
            current.append(token)
    # The input, each sentinel replaced by its span.
    restored: list[int] = []
    for token in inputs.tolist():
        restored.extend(spans[token] if is_sentinel(token) else [token])
    return torch.tensor(restored, dtype=inputs.dtype)


def text_infilling(
    input_ids: Tensor,
    mask_token_id: int,
    mask_ratio: float = 0.3,
    poisson_lambda: float = 3.0,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """BART's text infilling: spans of Poisson lengths, each replaced by one ``<mask>``; the target is the text.

    Args:
        input_ids: A text's ids, ``(n,)``.
        mask_token_id: The id of ``<mask>``.
        mask_ratio: The fraction of tokens to hide (BART-large's 0.3), rounded up.
        poisson_lambda: The mean span length :math:`\\lambda` (3).
        generator: The random generator.

    Returns:
        ``(inputs, targets)``: the text with its spans masked, and the text.
    """
    input_ids = _check_ids(input_ids)
    if not 0 < mask_ratio < 1:
        raise ValueError(f"mask_ratio must be in (0, 1), got {mask_ratio}")
    if not poisson_lambda > 0:  # with 0, every span would be empty and the loop below would never end
        raise ValueError(f"poisson_lambda must be positive, got {poisson_lambda}")
    num_to_mask = math.ceil(len(input_ids) * mask_ratio)
    # Span lengths ~ Poisson(lambda) until they cover num_to_mask tokens; the last one cut to fit.
    lengths: list[int] = []
    while sum(lengths) < num_to_mask:
        lengths.append(int(torch.poisson(torch.tensor(float(poisson_lambda)), generator=generator)))
    lengths[-1] -= sum(lengths) - num_to_mask
    # The kept tokens in len(lengths) + 1 runs of random sizes (zero allowed), the spans between them.
    kept = len(input_ids) - num_to_mask
    cuts = torch.randint(0, kept + 1, (len(lengths),), generator=generator).sort().values
    gaps = torch.cat([torch.tensor([0]), cuts, torch.tensor([kept])]).diff().tolist()
    pieces, position = [], 0
    mask = input_ids.new_tensor([mask_token_id])
    for gap, span in zip(gaps, lengths, strict=False):
        # A kept run, then one <mask> for the whole span (a span of 0 tokens inserts one).
        pieces += [input_ids[position : position + gap], mask]
        position += gap + span
    pieces.append(input_ids[position:])
    return torch.cat(pieces), input_ids.clone()


def infilled_spans(inputs: Tensor, targets: Tensor, mask_token_id: int) -> list[Tensor] | None:
    """What each ``<mask>`` of a text-infilling input hid, read off the target: the spans, in order.

    A ``<mask>`` may stand for any run of tokens, empty included; the other
    tokens must be the target's, in order.  (One reading is returned where
    several fit: the masks' spans are then ambiguous, the text is not.)

    Args:
        inputs: The corrupted ids.
        targets: The original ids.
        mask_token_id: The id of ``<mask>``.

    Returns:
        One tensor per ``<mask>``, or ``None`` when the target does not fit the input.
    """
    pattern, text = inputs.tolist(), targets.tolist()

    @cache
    def match(i: int, j: int) -> tuple[tuple[int, int], ...] | None:
        """The masks' spans that fit pattern[i:] to text[j:], as (start, end) in text, or None."""
        if i == len(pattern):
            return () if j == len(text) else None
        if pattern[i] != mask_token_id:
            if j < len(text) and pattern[i] == text[j]:
                return match(i + 1, j + 1)
            return None
        # A <mask> hides text[j:end] for some end.
        for end in range(j, len(text) + 1):
            rest = match(i + 1, end)
            if rest is not None:
                return ((j, end), *rest)
        return None

    found = match(0, 0)
    return None if found is None else [targets[start:end] for start, end in found]


def sentence_permutation(
    input_ids: Tensor, full_stop_id: int, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """BART's sentence permutation: the sentences (each ending at a full stop) in a random order.

    Args:
        input_ids: A document's ids, ``(n,)``; text after the last full stop is a sentence too.
        full_stop_id: The id of the full stop.
        generator: The random generator.

    Returns:
        ``(inputs, targets)``: the shuffled document, and the document.
    """
    input_ids = _check_ids(input_ids)
    # A sentence ends after each full stop.
    ends = (input_ids == full_stop_id).nonzero().flatten() + 1
    sentences = [sentence for sentence in torch.tensor_split(input_ids, ends) if len(sentence)]
    order = torch.randperm(len(sentences), generator=generator)
    return torch.cat([sentences[index] for index in order]), input_ids.clone()
