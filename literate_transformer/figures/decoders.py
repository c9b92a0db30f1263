r"""Chapter 14's figures: what each decoder family's change does, drawn from the package's own tensors.

* :func:`plot_rotary_pairs` turns one query by :class:`~literate_transformer.parts.rotary.RotaryEmbedding`'s
  angles at a few positions and draws some of its pairs of features as arrows of the plane: the fast pairs turn
  a lot from one position to the next, the slow ones barely;
* :func:`rotary_alignment` and :func:`plot_rotary_decay` measure what ``rope_theta`` does to a score as the
  distance grows: the mean of :math:`\cos(m\theta_i)` over a head's pairs, the score of a query against its own
  copy :math:`m` tokens away (relative to the same two at distance 0);
* :func:`window_reach` and :func:`plot_window_reach` compose a sliding-window mask with itself, layer after
  layer: which positions can reach the last token after 1, 2, 3 layers;
* :func:`plot_grouped_query_heads` draws which key/value head each query head reads
  (:func:`~literate_transformer.parts.heads.repeat_kv`'s order) for a config's grouping, beside one key/value
  head per query head and a single one, with what each keeps in the cache per token
  (:func:`~literate_transformer.models.llama.kv_cache_bytes_per_token`);
* :func:`plot_last_block_gradients` draws gradient norms measured at initialisation against the depth of the
  stack (the chapter measures them on GPT, post-LN, and GPT-2, pre-LN).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Circle
from matplotlib.ticker import FormatStrFormatter
from torch import Tensor

from ..core.validation import check_positive_int, check_tensor
from ..models.llama import head_dim_of, key_value_heads_of, kv_cache_bytes_per_token
from ..parts.heads import repeat_kv
from ..parts.rotary import RotaryEmbedding, apply_rotary, inverse_frequencies

__all__ = [
    "plot_rotary_pairs",
    "rotary_alignment",
    "plot_rotary_decay",
    "window_reach",
    "plot_window_reach",
    "plot_grouped_query_heads",
    "plot_last_block_gradients",
]


def _check_positions(values: object, name: str, minimum: int = 0, maximum: int | None = None) -> list[int]:
    """A non-empty sequence of distinct ints in ``[minimum, maximum]``."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise TypeError(f"{name} must be a non-empty sequence of ints, got {values!r}")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must hold ints, got {value!r}")
        if value < minimum or (maximum is not None and value > maximum):
            raise ValueError(f"{name} must hold ints in [{minimum}, {maximum}], got {value}")
    if len(set(values)) != len(values):
        raise ValueError(f"{name} must not repeat a value, got {list(values)}")
    return list(values)


def _check_base(base: object, name: str = "base") -> float:
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not base > 1:
        raise ValueError(f"{name} must be a number greater than 1 (rope_theta), got {base!r}")
    return float(base)


def plot_rotary_pairs(query: Tensor, positions: Sequence[int], pairs: Sequence[int], base: float = 10000.0) -> Figure:
    r"""One query's pairs of features as arrows of the plane, turned by the rotary angles of several positions.

    The query is turned as Llama turns it (:func:`~literate_transformer.parts.rotary.apply_rotary`, the angles of
    :class:`~literate_transformer.parts.rotary.RotaryEmbedding`), once per position :math:`m`; pair :math:`i` is
    feature :math:`i` and feature :math:`i + R/2`, drawn as the point :math:`(q'_i, q'_{i+R/2})`.  Each panel is
    one pair, each arrow one position, coloured by the position: pair :math:`i` turns by :math:`\theta_i` radians
    per position, so the first pair's arrows go round the circle in a few positions while the last pair's barely
    move.  Turning keeps a pair's length, so every arrow of a panel ends on the same circle.

    Args:
        query: ``(R,)`` one head's query (``R`` even).
        positions: The positions :math:`m` to turn it for.
        pairs: The pairs :math:`i` to draw, each in ``[0, R/2)``.
        base: ``rope_theta``.

    Returns:
        The figure, one panel per pair.

    Raises:
        TypeError: for a query that is not a 1-d float tensor, or positions and pairs that are not sequences of
            ints.
        ValueError: for an odd query size, a pair or position out of range, a repeated one, or a base not above 1.
    """
    check_tensor(query, "query", ndim=1, dtypes=("float",))
    rotary_dim = query.shape[0]
    if rotary_dim % 2:
        raise ValueError(f"query must have an even number of features (they turn in pairs), got {rotary_dim}")
    positions = _check_positions(positions, "positions")
    pairs = _check_positions(pairs, "pairs", maximum=rotary_dim // 2 - 1)
    base = _check_base(base)

    rotary = RotaryEmbedding(rotary_dim, base=base)
    # Each position's cos and sin, (1, P, R) each.
    cos, sin = rotary(torch.tensor([positions]))
    turned = apply_rotary(query.detach().float()[None], cos[0], sin[0])  # (P, R): the query at each position
    half = rotary_dim // 2
    colours = ScalarMappable(Normalize(min(positions), max(positions)), "viridis")

    figure = Figure(figsize=(2.7 * len(pairs) + 0.9, 3.2), layout="constrained")
    axes = figure.subplots(1, len(pairs), squeeze=False)[0]
    for ax, pair in zip(axes, pairs, strict=True):
        x, y = turned[:, pair], turned[:, pair + half]
        radius = float(torch.hypot(x[0], y[0]))
        ax.add_patch(Circle((0, 0), radius, fill=False, linestyle=":", color="0.6"))
        ax.quiver(
            torch.zeros(len(positions)),
            torch.zeros(len(positions)),
            x,
            y,
            color=colours.to_rgba(positions),
            angles="xy",
            scale_units="xy",
            scale=1,
            width=0.02,
        )
        theta = float(rotary.inv_freq[pair])
        if theta > 0.3:  # arrows far enough apart to be told by their position, written at their tips
            for position, tip_x, tip_y in zip(positions, x.tolist(), y.tolist(), strict=True):
                ax.annotate(str(position), (tip_x, tip_y), xytext=(1.12 * tip_x, 1.12 * tip_y), fontsize=7)
        limit = 1.25 * radius
        ax.set_xlim(-limit, limit)
        ax.set_ylim(-limit, limit)
        ax.set_aspect("equal")
        ax.set_title(f"pair {pair}: {theta:.3g} rad ({math.degrees(theta):.2g}°)\nper position", fontsize=9)
        ax.set_xlabel(f"feature {pair}")
        ax.set_ylabel(f"feature {pair + half}")
    figure.colorbar(colours, ax=list(axes), label="position m", shrink=0.8)
    figure.suptitle(f"One query turned for positions {min(positions)}..{max(positions)} (R = {rotary_dim})")
    return figure


def rotary_alignment(dim: int, base: float, distances: Tensor) -> Tensor:
    r"""The mean of :math:`\cos(m\theta_i)` over a head's pairs, for each distance :math:`m`.

    A query whose pairs all have the same length, scored against its own copy :math:`m` positions away, gets
    this fraction of the score the two have side by side (:math:`\langle R_m q, q\rangle / \lVert q\rVert^2`):
    1 at distance 0, then lower, with ripples, as the pairs' angles spread around the circle.  Computed in
    float64 (distances of :math:`10^5` times frequencies near 1 lose float32's digits).

    Args:
        dim: ``R``, the features turned per head (even).
        base: ``rope_theta``.
        distances: ``(N,)`` distances :math:`m`, ints or floats.

    Returns:
        ``(N,)`` float64 values in ``[-1, 1]``.

    Raises:
        TypeError: for distances that are not a 1-d tensor of numbers.
        ValueError: for an odd or non-positive ``dim``, or a base not above 1.
    """
    check_tensor(distances, "distances", ndim=1, dtypes=("int", "float"))
    frequencies = inverse_frequencies(dim, _check_base(base)).double()  # (R / 2,): ValueError for an odd dim
    return torch.cos(distances.double()[:, None] * frequencies).mean(-1)


def plot_rotary_decay(dim: int, bases: Sequence[float], max_distance: int) -> Figure:
    r"""How fast a query's score against its own copy falls with distance, for each ``rope_theta``.

    One line per base: :func:`rotary_alignment` at distances from 1 to ``max_distance`` on a log scale.  The
    larger the base, the slower the slow pairs turn, and the farther a query can still single out a key like
    itself: the lines fall later.

    Args:
        dim: ``R``, a head's rotated features.
        bases: The ``rope_theta`` values to compare.
        max_distance: The largest distance drawn.

    Returns:
        The figure.

    Raises:
        TypeError: for bases that are not a sequence.
        ValueError: for an empty ``bases``, a base not above 1, an odd ``dim`` or a ``max_distance`` below 2.
    """
    check_positive_int(max_distance, "max_distance", minimum=2)
    if isinstance(bases, (str, bytes)) or not isinstance(bases, Sequence):
        raise TypeError(f"bases must be a sequence of numbers, got {bases!r}")
    if not bases:
        raise ValueError("bases must name at least one rope_theta")
    distances = torch.logspace(0, torch.log10(torch.tensor(float(max_distance))), 400).round().unique()
    figure = Figure(figsize=(6.4, 3.4), layout="constrained")
    ax = figure.subplots()
    for base in bases:
        alignment = rotary_alignment(dim, base, distances)
        ax.plot(distances, alignment, label=f"rope_theta = {_check_base(base):,.0f}")
    ax.axhline(0, color="0.6", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("distance m between query and key (tokens)")
    ax.set_ylabel(r"mean of cos(m$\theta_i$) over the pairs")
    ax.set_title(f"A query against its own copy m tokens away (R = {dim})")
    ax.legend()
    return figure


def window_reach(mask: Tensor, layers: int) -> Tensor:
    r"""Which positions can influence the last query's state after each of ``layers`` layers with this mask.

    Layer :math:`k`'s state at position :math:`i` reads the states of layer :math:`k-1` at the keys its mask row
    allows, so influence travels along paths: position :math:`j` reaches the last token after :math:`k` layers
    when the :math:`k`-th power of the mask (as a 0/1 matrix) has a nonzero entry at (last, :math:`j`).

    Args:
        mask: ``(T, T)`` self-attention mask, boolean (``True`` = may attend) or additive (0 = may attend).
        layers: How many layers to stack.

    Returns:
        ``(layers, T)`` booleans: row :math:`k - 1` is what reaches the last token after :math:`k` layers.

    Raises:
        TypeError: for a mask that is not a boolean or float tensor.
        ValueError: for a mask that is not square, or ``layers`` below 1.
    """
    check_tensor(mask, "mask", ndim=2, dtypes=("bool", "float"))
    if mask.shape[0] != mask.shape[1]:
        raise ValueError(f"mask must be square (T, T) self-attention, got shape {tuple(mask.shape)}")
    check_positive_int(layers, "layers")
    if mask.is_floating_point():
        mask = mask > torch.finfo(mask.dtype).min / 2
    allowed = mask.detach().cpu().double()
    reached = torch.zeros(mask.shape[0], dtype=torch.float64)
    reached[-1] = 1.0  # the last token's own state, before any layer
    rows = []
    for _ in range(layers):
        reached = ((reached @ allowed) > 0).double()  # one more layer: every key a reached query reads
        rows.append(reached > 0)
    return torch.stack(rows)


def plot_window_reach(mask: Tensor, layers: int, window: int | None = None) -> Figure:
    """The positions that can influence the last token after 1, 2, ... layers, one row per depth.

    A row is :func:`window_reach`'s; its first reachable position is written at its end, with how far back it
    lies.  With a sliding window every layer reaches the same number of positions farther back, so the reach
    grows in steps of equal width.

    Args:
        mask: ``(T, T)`` self-attention mask (boolean or additive), the one every layer applies.
        layers: How many layers to stack.
        window: The window's width, for the title; ``None`` leaves it out.

    Returns:
        The figure.

    Raises:
        TypeError: as :func:`window_reach`.
        ValueError: as :func:`window_reach`, or for a ``window`` that is not a positive int.
    """
    reach = window_reach(mask, layers)
    if window is not None:
        check_positive_int(window, "window")
    length = reach.shape[1]
    figure = Figure(figsize=(max(5.0, 0.36 * length + 2.6), 0.55 * layers + 1.5), layout="constrained")
    ax = figure.subplots()
    ax.imshow(reach.int().numpy(), cmap="Blues", vmin=0, vmax=1.3, aspect="auto", interpolation="nearest")
    for row in range(layers):
        first = int(reach[row].int().argmax())
        ax.text(length - 0.4, row, f"  back to {first} ({length - 1 - first} before)", va="center", fontsize=8)
    ax.set_xticks(range(length))
    ax.set_yticks(range(layers), [f"after {k} layer{'s' if k > 1 else ''}" for k in range(1, layers + 1)])
    ax.set_xlabel("position (the last is the token being written)")
    ax.set_xlim(-0.5, length + 3.5)
    ax.set_title("Which positions can influence the last token" + (f", window {window}" if window else ""))
    return figure


def plot_grouped_query_heads(config: Any, bytes_per_number: int = 4) -> Figure:
    r"""Which key/value head each query head reads: one per query head, the config's groups, and a single one.

    Each panel draws the query heads in a row above the key/value heads and a line from each query head to the
    key/value head it reads, :func:`~literate_transformer.parts.heads.repeat_kv`'s order (query head :math:`h`
    reads key/value head :math:`h // (H/K)`), one colour per key/value head.  Its title gives what the cache keeps
    per token of context for that many key/value heads
    (:func:`~literate_transformer.models.llama.kv_cache_bytes_per_token`): the cache shrinks with :math:`K`, the
    queries do not.

    Args:
        config: A Llama-like config (``num_attention_heads``, ``num_key_value_heads``, ``num_hidden_layers``,
            the head size).
        bytes_per_number: 4 for float32, 2 for float16 and bfloat16.

    Returns:
        The figure: multi-head (:math:`K = H`), the config's grouping, multi-query (:math:`K = 1`), each once.

    Raises:
        TypeError: for a config without the heads' fields.
        ValueError: for query heads that do not divide into the key/value heads, or ``bytes_per_number`` below 1.
    """
    check_positive_int(bytes_per_number, "bytes_per_number")
    try:
        heads, kv_heads, layers = config.num_attention_heads, key_value_heads_of(config), config.num_hidden_layers
        head_dim_of(config)
    except AttributeError as error:
        raise TypeError(f"config must be a Llama-like config with the heads' fields, got {config!r:.80}") from error
    if heads % kv_heads:
        raise ValueError(f"num_attention_heads ({heads}) must be divisible by num_key_value_heads ({kv_heads})")
    kinds = {heads: "multi-head", kv_heads: "grouped-query", 1: "multi-query"}  # K = H or 1 keeps one name
    figure = Figure(figsize=(max(3.2, 0.42 * heads + 1.0) * len(kinds), 2.8), layout="constrained")
    axes = figure.subplots(1, len(kinds), sharey=True, squeeze=False)[0]
    for ax, (groups, kind) in zip(axes, sorted(kinds.items(), reverse=True), strict=True):
        variant = copy.deepcopy(config)
        variant.num_key_value_heads = groups
        # The key/value head each query head reads: repeat_kv applied to the key/value heads' own numbers.
        numbers = torch.arange(groups, dtype=torch.float32).view(1, groups, 1, 1)
        reads = repeat_kv(numbers, heads // groups).flatten().long().tolist()  # shape (H,)
        centres = [sum(h for h in range(heads) if reads[h] == k) / reads.count(k) for k in range(groups)]
        for head, kv_head in enumerate(reads):
            ax.plot([head, centres[kv_head]], [1, 0], color=f"C{kv_head % 10}", linewidth=1.2)
        ax.scatter(range(heads), [1] * heads, marker="s", s=110, color="0.35", zorder=3)
        ax.scatter(centres, [0] * groups, marker="s", s=170, c=[f"C{k % 10}" for k in range(groups)], zorder=3)
        cache = kv_cache_bytes_per_token(variant, bytes_per_number=bytes_per_number)
        ax.set_title(f"{kind}, K = {groups}\ncache: {cache:,} bytes a token", fontsize=9)
        ax.set_xlim(-0.7, heads - 0.3)
        ax.set_xticks(range(heads))
        ax.set_xlabel("query head")
    axes[0].set_yticks([0, 1], ["key/value\nheads", "query\nheads"])
    axes[0].set_ylim(-0.35, 1.35)
    figure.suptitle(f"{heads} query heads, {layers} layers, {bytes_per_number}-byte numbers")
    return figure


def plot_last_block_gradients(
    depths: Sequence[int], norms: Mapping[str, Tensor], reference: str | None = None
) -> Figure:
    r"""Gradient norms against the number of blocks, one line per arrangement, on log axes.

    Args:
        depths: The numbers of blocks measured.
        norms: A line's label to its ``(len(depths),)`` norms.
        reference: The label of a line to draw :math:`\propto 1/\sqrt{L}` through the first point of, dashed;
            ``None`` for none.

    Returns:
        The figure.

    Raises:
        TypeError: for depths that are not ints, or norms that are not 1-d float tensors in a mapping.
        ValueError: for norms of another length than ``depths``, or a ``reference`` that names no line.
    """
    depths = _check_positions(depths, "depths", minimum=1)
    if not isinstance(norms, Mapping) or not norms:
        raise TypeError(f"norms must be a non-empty mapping of label to a tensor of norms, got {norms!r:.80}")
    for label, values in norms.items():
        check_tensor(values, f"norms[{label!r}]", ndim=1, dtypes=("float",))
        if values.shape[0] != len(depths):
            raise ValueError(f"norms[{label!r}] has {values.shape[0]} values for {len(depths)} depths")
    if reference is not None and reference not in norms:
        raise ValueError(f"reference must name one of the lines {list(norms)}, got {reference!r}")
    figure = Figure(figsize=(6.0, 3.6), layout="constrained")
    ax = figure.subplots()
    for label, values in norms.items():
        ax.plot(depths, values.detach().cpu(), marker="o", label=label)
    if reference is not None:
        first = float(norms[reference][0])
        ax.plot(
            depths,
            [first * (depths[0] / depth) ** 0.5 for depth in depths],
            linestyle="--",
            color="0.5",
            label=r"$\propto 1/\sqrt{L}$",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FormatStrFormatter("%.2g"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%.2g"))
    ax.set_xticks(depths, [str(depth) for depth in depths])
    ax.set_xlabel("number of blocks L")
    ax.set_ylabel("gradient norm of the last block")
    ax.set_title("The last block's gradient at initialisation")
    ax.legend()
    return figure
