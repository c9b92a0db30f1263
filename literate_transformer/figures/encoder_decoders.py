r"""Chapter 15's figures: who reads whom in an encoder-decoder, T5's distance buckets, and the two denoising objectives.

Each figure is drawn from the package's own code run on small inputs:

* :func:`plot_information_flow` draws the three masks of an encoder-decoder, as
  :func:`~literate_transformer.core.masks.build_attention_mask` builds them: the encoder's self-attention (the
  whole source, padding aside), the decoder's (causal) and the cross-attention (every target token reads the
  whole source), with the tokens named on the axes;
* :func:`plot_relative_position_buckets` draws T5's distance buckets, from
  :func:`~literate_transformer.parts.positions.relative_position_bucket`, for the encoder's rule and the
  decoder's, and how many distances each bucket holds: one each nearby, ever more far away;
* :func:`plot_denoising_objectives` corrupts one sentence with BART's
  :func:`~literate_transformer.pretraining.denoising.text_infilling` and T5's
  :func:`~literate_transformer.pretraining.denoising.span_corruption` under one seed and draws, as rows of
  tokens, what each encoder reads and what each decoder must write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Real

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from torch import Tensor

from ..core.masks import build_attention_mask
from ..parts.positions import relative_position_bucket
from ..pretraining.denoising import infilled_spans, span_corruption, text_infilling

__all__ = ["plot_information_flow", "plot_relative_position_buckets", "plot_denoising_objectives"]

#: One colour per hidden span (and its <mask> or sentinel), the same in both panels of the denoising figure.
_SPAN_COLOURS = ("tab:orange", "tab:green", "tab:purple", "tab:red", "tab:cyan", "tab:pink", "tab:olive", "tab:brown")
_KEPT = "#e4e4e4"


def _check_tokens(tokens: object, name: str, maximum: int = 40) -> list[str]:
    if isinstance(tokens, str) or not isinstance(tokens, Sequence) or not all(isinstance(t, str) for t in tokens):
        raise TypeError(f"{name} must be a sequence of strings (one per token), got {tokens!r}")
    if not 1 <= len(tokens) <= maximum:
        raise ValueError(f"{name} must hold 1 to {maximum} tokens (more would not be legible), got {len(tokens)}")
    return list(tokens)


#: What ``t5`` and ``bart`` of :func:`plot_denoising_objectives` may set: the rates of each corruption.
_T5_OPTIONS = ("noise_density", "mean_noise_span_length")
_BART_OPTIONS = ("mask_ratio", "poisson_lambda")


def _check_options(options: object, name: str, accepted: tuple[str, ...]) -> dict[str, float]:
    """``options`` as keyword arguments: ``None`` for none, else a mapping from some of ``accepted`` to numbers."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(f"{name} must be a mapping of keyword arguments or None, got {options!r}")
    unknown = [key for key in options if key not in accepted]
    if unknown:
        raise ValueError(f"{name} may set only {', '.join(accepted)}; got {', '.join(map(repr, unknown))}")
    for key, value in options.items():
        if not isinstance(value, Real) or isinstance(value, bool):
            raise TypeError(f"{name}[{key!r}] must be a number, got {value!r}")
    return dict(options)


# ---------------------------------------------------------------------------
# Who reads whom
# ---------------------------------------------------------------------------
def plot_information_flow(
    source_tokens: Sequence[str], target_tokens: Sequence[str], source_mask: Tensor | Sequence[int] | None = None
) -> Figure:
    """The three attentions of an encoder-decoder side by side: who may read whom, as the masks say.

    Left, the encoder's self-attention: every source token reads the whole source (the padding's columns
    empty).  Middle, the decoder's self-attention: each target token reads itself and the target tokens
    before it, never a later one (the causal triangle).  Right, the cross-attention: each target token,
    the first included, reads the whole source; this is the only way the source reaches the decoder.
    The masks are :func:`~literate_transformer.core.masks.build_attention_mask`'s, the ones every model of
    the package builds at its entry; a coloured cell may be read, a white one may not.

    Args:
        source_tokens: The source's tokens, one string each (the key axis of the left and right panels).
        target_tokens: The target's tokens, its start token first (the query axis of the middle and right).
        source_mask: ``(S,)`` ones for real source tokens and zeros for padding; ``None`` for no padding.

    Returns:
        The figure; each panel's title says how many of its (query, key) pairs may be read.
    """
    source_tokens = _check_tokens(source_tokens, "source_tokens")
    target_tokens = _check_tokens(target_tokens, "target_tokens")
    length, target_length = len(source_tokens), len(target_tokens)
    if source_mask is None:
        padding = None
    else:
        if not isinstance(source_mask, (Tensor, Sequence)) or isinstance(source_mask, str):
            raise TypeError(f"source_mask must be a tensor or a sequence of 0 and 1, got {source_mask!r}")
        padding = torch.as_tensor(source_mask)
        if padding.shape != (length,):
            raise ValueError(
                f"source_mask must have one entry per source token, ({length},), got {tuple(padding.shape)}"
            )
        if not bool(((padding == 0) | (padding == 1)).all()) or not bool(padding.any()):
            raise ValueError(f"source_mask must hold only 0 and 1, and at least one 1, got {padding.tolist()}")
        padding = padding.long()[None]  # shape (1, S)
    masks = {
        "encoder self-attention": _dense(build_attention_mask(padding, query_length=length), length, length),
        "decoder self-attention (causal)": _dense(
            build_attention_mask(None, query_length=target_length, causal=True), target_length, target_length
        ),
        "cross-attention": _dense(build_attention_mask(padding, query_length=target_length), target_length, length),
    }
    axes_tokens = {
        "encoder self-attention": (source_tokens, source_tokens, "source token (query)", "source token (key)"),
        "decoder self-attention (causal)": (target_tokens, target_tokens, "target token (query)", "target token (key)"),
        "cross-attention": (target_tokens, source_tokens, "target token (query)", "source token (key)"),
    }
    colours = {
        "encoder self-attention": "Blues",
        "decoder self-attention (causal)": "Oranges",
        "cross-attention": "Greens",
    }
    figure = Figure(figsize=(12.0, 4.4), layout="constrained")
    axes = figure.subplots(1, 3, gridspec_kw={"width_ratios": [length, target_length, length]})
    for ax, (name, mask) in zip(axes, masks.items(), strict=True):
        rows, columns, ylabel, xlabel = axes_tokens[name]
        ax.imshow(mask.long().numpy(), cmap=colours[name], vmin=0, vmax=1.4, interpolation="nearest")
        ax.set_xticks(range(len(columns)), columns, rotation=60, fontsize=8)
        ax.set_yticks(range(len(rows)), rows, fontsize=8)
        ax.set_xticks([i - 0.5 for i in range(1, len(columns))], minor=True)
        ax.set_yticks([i - 0.5 for i in range(1, len(rows))], minor=True)
        ax.grid(which="minor", color="white", linewidth=1.0)
        ax.tick_params(which="minor", length=0)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{name}\n{int(mask.sum())} of {mask.numel()} pairs may be read", fontsize=10)
    figure.suptitle("Who reads whom in an encoder-decoder (coloured: the query may read the key)")
    return figure


def _dense(mask: Tensor | None, rows: int, columns: int) -> Tensor:
    """A mask of :func:`build_attention_mask` (``None``, ``(T, S)`` or ``(B, 1, 1|T, S)``) as one ``(T, S)`` bool."""
    if mask is None:
        return torch.ones(rows, columns, dtype=torch.bool)
    while mask.dim() > 2:
        mask = mask[0]
    return mask.expand(rows, columns)


# ---------------------------------------------------------------------------
# T5's buckets
# ---------------------------------------------------------------------------
def plot_relative_position_buckets(num_buckets: int = 32, max_distance: int = 128, span: int | None = None) -> Figure:
    """T5's distance buckets: exact nearby, logarithmic far, for the encoder's rule and the decoder's.

    Left, the bucket of every key position minus query position ``j - i`` in ``[-span, span]``, from
    :func:`~literate_transformer.parts.positions.relative_position_bucket`: the encoder's rule
    (bidirectional) keeps half its buckets for keys after the query; the decoder's (unidirectional) is drawn
    for the keys at or before the query only, the only ones it reads, and spends all its buckets there.
    Right, for keys before the query, how many distances each bucket holds up to ``max_distance``: one each
    nearby, then ever wider bins; the last bucket also holds every farther distance.

    Args:
        num_buckets: The number of buckets (T5's 32), even and at least 4.
        max_distance: The distance from which on all keys share the last bucket (T5's 128), at least
            ``num_buckets``.
        span: The largest ``|j - i|`` drawn on the left; default ``max_distance * 5 // 4``.

    Returns:
        The figure.
    """
    for value, name in ((num_buckets, "num_buckets"), (max_distance, "max_distance")):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if num_buckets < 4 or num_buckets % 2:
        raise ValueError(f"num_buckets must be even and at least 4, got {num_buckets}")
    if max_distance < num_buckets:
        raise ValueError(f"max_distance must be at least num_buckets={num_buckets}, got {max_distance}")
    span = max_distance * 5 // 4 if span is None else span
    if not isinstance(span, int) or isinstance(span, bool):
        raise TypeError(f"span must be an int or None, got {span!r}")
    if span < 1:
        raise ValueError(f"span must be positive, got {span}")
    relative = torch.arange(-span, span + 1)
    rules = {"encoder (bidirectional)": True, "decoder (keys at or before the query)": False}
    figure = Figure(figsize=(12.0, 4.2), layout="constrained")
    left, right = figure.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    for (label, bidirectional), colour in zip(rules.items(), ("tab:blue", "tab:orange"), strict=True):
        positions = relative if bidirectional else relative[relative <= 0]
        buckets = relative_position_bucket(positions, bidirectional, num_buckets, max_distance)
        left.step(positions.tolist(), buckets.tolist(), where="mid", color=colour, label=label)
    for side in (-max_distance, max_distance):
        left.axvline(side, color="grey", linestyle=":", linewidth=1)
    left.text(-max_distance, num_buckets - 1, f" max_distance={max_distance}", fontsize=8, va="top", color="grey")
    left.set_xlabel("key position - query position (j - i)")
    left.set_ylabel("bucket")
    left.set_title("The bucket of each distance", fontsize=10)
    left.legend(fontsize=8, loc="center right")
    # Right: keys before the query, distances 0 .. max_distance - 1, counted per bucket.
    distances = torch.arange(max_distance)
    width = 0.4
    for offset, ((label, bidirectional), colour) in zip(
        (-width / 2, width / 2), zip(rules.items(), ("tab:blue", "tab:orange"), strict=True), strict=True
    ):
        buckets = relative_position_bucket(-distances, bidirectional, num_buckets, max_distance)
        counts = torch.bincount(buckets, minlength=num_buckets // 2 if bidirectional else num_buckets)
        right.bar([b + offset for b in range(len(counts))], counts.tolist(), width, color=colour, label=label)
    right.set_xlabel("bucket (keys before the query)")
    right.set_ylabel(f"distances it holds, of 0..{max_distance - 1}")
    right.set_title(
        "One bucket per distance nearby, ever wider bins far away\n(the last bucket: every farther one too)",
        fontsize=10,
    )
    right.legend(fontsize=8, loc="upper left")
    figure.suptitle(
        f"T5's relative positions: {num_buckets} buckets, exact near the query, logarithmic up to {max_distance}"
    )
    return figure


# ---------------------------------------------------------------------------
# Denoising
# ---------------------------------------------------------------------------
def _span_of_each_position(inputs: list[int], spans: list[list[int]], is_placeholder: set[int]) -> list[int]:
    """For each token of the original text, the index of the span that hid it, or -1 (kept).

    ``inputs`` is the corrupted text, each placeholder standing for the next of ``spans`` in order.
    """
    owner: list[int] = []
    span_index = 0
    for token in inputs:
        if token in is_placeholder:
            owner += [span_index] * len(spans[span_index])
            span_index += 1
        else:
            owner.append(-1)
    return owner


def plot_denoising_objectives(
    words: Sequence[str],
    seed: int = 0,
    *,
    t5: Mapping[str, float] | None = None,
    bart: Mapping[str, float] | None = None,
) -> Figure:
    """BART's text infilling beside T5's span corruption, on one sentence under one seed, as rows of tokens.

    Each panel has three rows: the text, with the tokens its corruption hides coloured (one colour per
    span); what the encoder reads; what the decoder is trained to write.  BART's
    :func:`~literate_transformer.pretraining.denoising.text_infilling` replaces each span by one ``<mask>``
    (a span may be empty) and its decoder writes the whole text; T5's
    :func:`~literate_transformer.pretraining.denoising.span_corruption` replaces each span by a sentinel
    (``<X>``, ``<Y>``, ... as in Figure 2 of the T5 paper) and its decoder writes only the sentinels and
    the spans, one more sentinel to close.  Each function draws from its own
    :class:`torch.Generator` seeded with ``seed``, as a chapter cell calling it with
    ``torch.Generator().manual_seed(seed)`` does.  Each corruption runs with its function's defaults, the
    rates of its paper, unless ``t5`` or ``bart`` overrides some of them.

    Args:
        words: The sentence, one string per token (2 to 40 tokens).
        seed: The seed of both generators.
        t5: Keyword arguments for ``span_corruption``, some of ``noise_density`` and
            ``mean_noise_span_length``; ``None`` for its defaults.
        bart: Keyword arguments for ``text_infilling``, some of ``mask_ratio`` and ``poisson_lambda``;
            ``None`` for its defaults.

    Returns:
        The figure; each panel's title says how many tokens its decoder writes.

    Raises:
        TypeError: if ``words`` is not a sequence of strings, ``seed`` not an int, ``t5`` or ``bart`` not a
            mapping (or ``None``), or one of their values not a number.
        ValueError: if ``words`` holds fewer than 2 or more than 40 tokens, ``t5`` or ``bart`` names an
            argument its function does not take here, or a value is out of its function's range.
    """
    words = _check_tokens(words, "words")
    if len(words) < 2:
        raise ValueError(f"words must hold at least 2 tokens (one to keep, one to hide), got {len(words)}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {seed!r}")
    t5_options = _check_options(t5, "t5", _T5_OPTIONS)
    bart_options = _check_options(bart, "bart", _BART_OPTIONS)
    # Ids: the words from 10 on, BART's <mask> 3, T5's 100 sentinels counting down from the top.
    vocabulary = {word: index for index, word in enumerate(dict.fromkeys(words), start=10)}
    original = torch.tensor([vocabulary[word] for word in words])
    mask_id, num_sentinels = 3, 100
    sentinel_start = 10 + len(vocabulary) + num_sentinels - 1
    names = {index: word for word, index in vocabulary.items()}
    names[mask_id] = "<mask>"
    for k in range(num_sentinels):
        names[sentinel_start - k] = f"<{'XYZ'[k]}>" if k < 3 else f"<extra_id_{k}>"

    bart_inputs, bart_targets = text_infilling(
        original, mask_id, generator=torch.Generator().manual_seed(seed), **bart_options
    )
    t5_inputs, t5_targets = span_corruption(
        original,
        sentinel_start,
        num_sentinels=num_sentinels,
        generator=torch.Generator().manual_seed(seed),
        **t5_options,
    )
    # BART: what each <mask> hid, read off the target; T5: the target read as sentinel, span, sentinel, ...
    bart_spans = [span.tolist() for span in infilled_spans(bart_inputs, bart_targets, mask_id)]
    sentinels = set(range(sentinel_start - num_sentinels + 1, sentinel_start + 1))
    t5_spans: list[list[int]] = []
    for token in t5_targets.tolist()[:-1]:
        if token in sentinels:
            t5_spans.append([])
        else:
            t5_spans[-1].append(token)
    bart_owner = _span_of_each_position(bart_inputs.tolist(), bart_spans, {mask_id})
    t5_owner = _span_of_each_position(t5_inputs.tolist(), t5_spans, sentinels)

    def coloured(tokens: list[int], owner: list[int] | None, placeholders: set[int]) -> list[tuple[str, str]]:
        """(name, colour) per token: a hidden token or a placeholder in its span's colour, a kept one grey."""
        cells, span_index = [], 0
        for position, token in enumerate(tokens):
            if token in placeholders:  # the input's placeholders stand for the spans, in order
                colour = _SPAN_COLOURS[span_index % len(_SPAN_COLOURS)]
                span_index += 1
            elif owner is not None and owner[position] >= 0:
                colour = _SPAN_COLOURS[owner[position] % len(_SPAN_COLOURS)]
            else:
                colour = _KEPT
            cells.append((names[token], colour))
        return cells

    def t5_target_cells() -> list[tuple[str, str]]:
        cells, span_index = [], -1
        for token in t5_targets.tolist():
            if token in sentinels:
                span_index += 1
                closing = span_index >= len(t5_spans)
                colour = "#555555" if closing else _SPAN_COLOURS[span_index % len(_SPAN_COLOURS)]
            else:
                colour = _SPAN_COLOURS[span_index % len(_SPAN_COLOURS)]
            cells.append((names[token], colour))
        return cells

    text = original.tolist()
    bart_title = f"BART, text infilling: the decoder writes the whole text, {len(bart_targets)} tokens of {len(text)}"
    t5_title = (
        f"T5, span corruption: the decoder writes the spans only, {len(t5_targets)} tokens for a text of {len(text)}"
    )
    # The positions of BART's <mask>s that hide an empty span (a span of length 0), marked below them.
    mask_positions = [position for position, token in enumerate(bart_inputs.tolist()) if token == mask_id]
    empty = {(bart_title, 1): [p for p, span in zip(mask_positions, bart_spans, strict=True) if not span]}
    panels = {
        bart_title: [
            ("text", coloured(text, bart_owner, set())),
            ("encoder reads", coloured(bart_inputs.tolist(), None, {mask_id})),
            ("decoder writes", coloured(bart_targets.tolist(), bart_owner, set())),
        ],
        t5_title: [
            ("text", coloured(text, t5_owner, set())),
            ("encoder reads", coloured(t5_inputs.tolist(), None, sentinels)),
            ("decoder writes", t5_target_cells()),
        ],
    }
    longest = max(len(cells) for rows in panels.values() for _, cells in rows)
    figure = Figure(figsize=(max(8.0, 0.78 * longest + 1.6), 5.6), layout="constrained")
    axes = figure.subplots(2, 1)
    for ax, (title, rows) in zip(axes, panels.items(), strict=True):
        for row, (_, cells) in enumerate(rows):
            for position, (name, colour) in enumerate(cells):
                ax.add_patch(Rectangle((position + 0.04, row - 0.38), 0.92, 0.76, facecolor=colour, edgecolor="white"))
                dark = colour in _SPAN_COLOURS or colour == "#555555"
                ax.text(
                    position + 0.5, row, name, ha="center", va="center", fontsize=8, color="white" if dark else "black"
                )
            for position in empty.get((title, row), ()):
                ax.text(position + 0.5, row + 0.47, "hides nothing", ha="center", va="center", fontsize=6)
        ax.set_xlim(0, longest)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_yticks(range(len(rows)), [label for label, _ in rows])
        ax.set_xticks([p + 0.5 for p in range(longest)], [str(p) for p in range(longest)], fontsize=7)
        ax.set_xlabel("position in the sequence")
        ax.set_title(title, fontsize=10)
        for spine in ("top", "right"):
            ax.spines[spine].set_visible(False)
    legend = [
        Patch(facecolor=_KEPT, label="kept"),
        Patch(facecolor=_SPAN_COLOURS[0], label="a hidden span, and the <mask> or sentinel for it"),
        Patch(facecolor="#555555", label="T5's closing sentinel"),
    ]
    figure.legend(handles=legend, loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    figure.suptitle(f"The same sentence corrupted for BART and for T5 (seed {seed})")
    return figure
