r"""Chapter 16's figures: the online softmax's tiles, Megatron's split, and what the fast paths save, timed.

Each figure is drawn from the package's own code run on small inputs:

* :func:`plot_online_softmax` runs :func:`~literate_transformer.fast.flash.flash_attention` on one head with
  small tiles and draws what it keeps after each tile (the running maximum :math:`m`, the running sum
  :math:`\ell` and the unnormalised accumulator :math:`a`) beside the score matrix it never holds;
* :func:`plot_tensor_parallel_split` splits a BERT layer with
  :mod:`~literate_transformer.fast.parallel` and colours every number of its weights by the process that
  keeps it;
* :func:`time_attention_kernels` and :func:`time_generation` time the eager kernel, PyTorch's fused one and
  the tiled loop, and generation with and without the key/value cache, on the machine that runs them;
  :func:`plot_attention_timings` and :func:`plot_generation_timings` draw those timings, labelled with
  :func:`machine_description`.

Timings are the best of a few runs (:func:`time.perf_counter`), the least disturbed by whatever else the
machine is doing; they differ from machine to machine and from run to run, so nothing here asserts a speed.
"""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Callable, Sequence
from functools import partial
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

import torch
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from torch import Tensor, nn

from ..book.generation import generate_step_by_step, most_likely_token
from ..core.kernels import fused_attention, scaled_dot_product_attention
from ..core.validation import check_positive_int, check_tensor
from ..fast.flash import flash_attention
from ..fast.parallel import shard_attention, shard_feed_forward
from ..models.bert import BertLayer

__all__ = [
    "AttentionTimings",
    "GenerationTimings",
    "machine_description",
    "plot_online_softmax",
    "plot_tensor_parallel_split",
    "time_attention_kernels",
    "plot_attention_timings",
    "time_generation",
    "plot_generation_timings",
]

#: One colour per process (and per query followed), the same in every figure of the chapter.
_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive")


def machine_description(dtype: torch.dtype = torch.float32) -> str:
    """What a timing ran on: the CPU's model, its cores, the threads PyTorch uses, PyTorch's version, the dtype.

    The CPU's name is Linux's ``/proc/cpuinfo`` ``model name``, else :func:`platform.processor`, else
    :func:`platform.machine`.
    """
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, got {dtype!r}")
    cpu = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if "model name" in line]
        cpu = names[0] if names else ""
    cpu = cpu or platform.processor() or platform.machine() or "an unnamed CPU"
    threads = torch.get_num_threads()
    return (
        f"{cpu}, {os.cpu_count()} cores ({threads} thread{'s' if threads > 1 else ''} used), "
        f"torch {torch.__version__}, {str(dtype).removeprefix('torch.')}"
    )


def _check_queries(queries: object, length: int) -> list[int]:
    if not isinstance(queries, range) or len(queries) == 0 or queries.step != 1:
        raise TypeError(f"queries must be a non-empty range of query positions, e.g. range(8, 12), got {queries!r}")
    if queries.start < 0 or queries.stop > length:
        raise ValueError(f"queries must lie within the {length} queries, got {queries!r}")
    return list(queries)


def plot_online_softmax(query: Tensor, key: Tensor, value: Tensor, block_size: int, queries: range) -> Figure:
    r"""The online softmax tile by tile: what :func:`~literate_transformer.fast.flash.flash_attention` keeps.

    Left, the ``(T, S)`` scores :math:`q_i \cdot k_j / \sqrt{D}` of one head, which the tiled loop never holds
    whole, cut into tiles of ``block_size`` keys; the block of ``queries`` the right-hand panels follow is
    framed, and its scores against one tile filled: on a GPU that block's queries and running values, one tile
    of keys and values and that tile's scores are what sits in the chip's fast memory at one step.  Right,
    after each tile, for each query of the block: the running maximum :math:`m` (it rises when a tile holds a
    larger score than any before), the running sum :math:`\ell` and the size :math:`\Vert a \Vert` of the
    unnormalised accumulator (what they had summed is multiplied by :math:`c = e^{m - m'}` when :math:`m`
    rises), and how far :math:`a / \ell` still is from the eager softmax's output.  The black stars are the
    values computed from the whole rows, as the eager softmax sees them: the last tile lands on them.

    Args:
        query: One head's queries ``(T, D)``.
        key: Its keys ``(S, D)``.
        value: Its values ``(S, D)``.
        block_size: Keys per tile.
        queries: The query positions to follow, a range such as ``range(8, 12)``.

    Returns:
        The figure; its title gives the largest difference between the tiled output and the eager one.
    """
    import numpy as np

    query = check_tensor(query, "query", ndim=2, dtypes=("float",))
    key = check_tensor(key, "key", ndim=2, dtypes=("float",))
    value = check_tensor(value, "value", shape=key.shape, dtypes=("float",))
    if key.shape[1] != query.shape[1]:
        raise ValueError(f"query (T, D) and key (S, D) must share D, got {tuple(query.shape)} and {tuple(key.shape)}")
    block_size = check_positive_int(block_size, "block_size")
    rows = _check_queries(queries, query.shape[0])

    # The package's tiled loop on this one head, keeping (m, l, a) after every tile.
    history: list[tuple[Tensor, Tensor, Tensor]] = []
    with torch.inference_mode():
        tiled = flash_attention(query[None, None], key[None, None], value[None, None], None, block_size, history)
        eager, _ = scaled_dot_product_attention(query, key, value)
        # The whole score matrix, drawn here; the loop never holds it.
        scores = query @ key.T / math.sqrt(query.shape[1])
    tiled = tiled[0, 0]
    # One row per tile, one column per query followed.
    running_max = torch.stack([m[0, 0, rows, 0] for m, _, _ in history])
    running_sum = torch.stack([s[0, 0, rows, 0] for _, s, _ in history])
    accumulator_size = torch.stack([a[0, 0, rows].norm(dim=-1) for _, _, a in history])
    distance = torch.stack([(a[0, 0, rows] / s[0, 0, rows] - eager[rows]).norm(dim=-1) for _, s, a in history])
    # The same quantities from the whole rows, as the eager softmax sees them.
    whole_max = scores[rows].amax(dim=-1)
    whole_sum = torch.exp(scores[rows] - whole_max[:, None]).sum(dim=-1)
    whole_size = (whole_sum[:, None] * eager[rows]).norm(dim=-1)
    difference = (tiled - eager).abs().max().item()
    tiles = len(history)
    steps = np.arange(1, tiles + 1)

    figure = Figure(figsize=(12.0, 5.4), layout="constrained")
    left, right = figure.subfigures(1, 2, width_ratios=(1.0, 1.35))
    ax = left.add_subplot()
    image = ax.imshow(scores.numpy(), cmap="viridis", aspect="auto", interpolation="nearest")
    for boundary in range(block_size, key.shape[0], block_size):
        ax.axvline(boundary - 0.5, color="white", linewidth=1.5)
    ax.add_patch(Rectangle((-0.5, rows[0] - 0.5), key.shape[0], len(rows), fill=False, edgecolor="red", linewidth=2.0))
    starts = range(0, key.shape[0], block_size)
    ax.set_xticks([start + (min(block_size, key.shape[0] - start) - 1) / 2 for start in starts], [*map(str, steps)])
    ax.set_xlabel(f"keys, in tiles of {block_size}, read left to right (tile number)")
    ax.set_ylabel("query position i")
    ax.set_title(f"scores of one head ({query.shape[0]} × {key.shape[0]}), never held whole", fontsize=10)
    left.colorbar(image, ax=ax, label=r"score $q_i \cdot k_j / \sqrt{D}$", shrink=0.8)
    # One step of a GPU kernel: this block of queries against one tile of keys, the only scores in fast memory.
    shown = min(3, tiles - 1)
    width = min(block_size, key.shape[0] - shown * block_size)
    ax.add_patch(Rectangle((shown * block_size - 0.5, rows[0] - 0.5), width, len(rows), facecolor="red", alpha=0.55))
    left.supxlabel(
        f"framed: the {len(rows)} queries followed on the right; filled: their {len(rows)} × {width} scores\n"
        f"against tile {shown + 1}, on a GPU the only scores in fast memory at that step",
        color="red",
        fontsize=9,
    )

    panels = right.subplots(2, 2, sharex=True)
    drawn = (
        (panels[0, 0], running_max, whole_max, "running maximum $m$", "linear"),
        (panels[0, 1], running_sum, whole_sum, r"running sum $\ell$ (relative to $m$)", "linear"),
        (panels[1, 0], accumulator_size, whole_size, r"accumulator $\Vert a \Vert$ (not divided)", "linear"),
        (panels[1, 1], distance, None, r"$\Vert a/\ell - $ eager output$\Vert$", "log"),
    )
    for panel, values, whole, label, scale in drawn:
        for index, row in enumerate(rows):
            series = values[:, index].numpy()
            if scale == "log":
                series = np.maximum(series, 1e-9)  # an exact 0 has no place on a log axis
            panel.plot(steps, series, marker="o", color=_COLOURS[index % len(_COLOURS)], label=f"query {row}")
        if whole is not None:
            panel.plot([tiles] * len(rows), whole.numpy(), "k*", markersize=11, label="whole row (eager)", zorder=3)
        panel.set_yscale(scale)
        panel.set_title(label, fontsize=10)
        panel.set_xticks(steps)
    for panel in panels[1]:
        panel.set_xlabel("key tiles read")
    handles, labels = panels[0, 0].get_legend_handles_labels()
    right.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=8)
    right.suptitle(
        f"what the loop keeps per query after each tile (largest difference from eager: {difference:.1e})",
        fontsize=10,
    )
    figure.suptitle("FlashAttention's online softmax: keys in tiles, three running values per query")
    return figure


def _owners(whole: Tensor, pieces: Sequence[Tensor], kept: str) -> Tensor:
    """For each number of ``whole`` (out, in), the index of the piece holding its row (``kept="rows"``) or column.

    The pieces are matched by their numbers, not by where they are expected to be: a row (or column) of a piece
    equal to a row of the whole marks that row as the piece's; ``-1`` where no piece holds it.
    """
    matrix = whole if kept == "rows" else whole.T
    holder = {}
    for index, piece in enumerate(pieces):
        for line in piece if kept == "rows" else piece.T:
            holder[line.numpy().tobytes()] = index
    found = torch.tensor([holder.get(line.numpy().tobytes(), -1) for line in matrix])
    owners = found[:, None].expand(matrix.shape)
    return owners if kept == "rows" else owners.T


def plot_tensor_parallel_split(layer: BertLayer, world_size: int = 2) -> Figure:
    """Megatron's split of one BERT layer: each number of each weight coloured by the process that keeps it.

    The pieces are those :func:`~literate_transformer.fast.parallel.shard_attention` and
    :func:`~literate_transformer.fast.parallel.shard_feed_forward` build for each rank (what each process of
    :func:`~literate_transformer.fast.parallel.split_bert_layer` builds), and each number is found in them by
    value.  The weights are drawn in PyTorch's ``(out, in)`` layout: the column-parallel layers (the query, key
    and value projections; the feed-forward layer's first matrix) keep *rows*, one block of heads or hidden
    units per process; the row-parallel ones (the attention's output projection; the feed-forward layer's second
    matrix) keep *columns*, and their partial sums meet in one all-reduce each.  Thin lines mark the heads.
    Shading follows the weights' own values, so the picture is of the layer's numbers, not a diagram.

    Args:
        layer: A :class:`~literate_transformer.models.bert.BertLayer`; a small one draws legibly.
        world_size: The number of processes; it must divide the number of heads and the intermediate size.

    Returns:
        The figure.
    """
    import numpy as np

    if not isinstance(layer, BertLayer):
        raise TypeError(f"layer must be a literate_transformer.models.bert.BertLayer, got {type(layer).__name__}")
    world_size = check_positive_int(world_size, "world_size")
    if world_size > len(_COLOURS):
        raise ValueError(f"world_size must be at most {len(_COLOURS)} (one colour each), got {world_size}")
    pieces = [
        (shard_attention(layer.attention, rank, world_size), shard_feed_forward(layer, rank, world_size))
        for rank in range(world_size)
    ]
    attention, head_size = layer.attention, layer.attention.self.attention_head_size
    rows = (
        (
            ("query", attention.self.query.weight, [a.query.weight for a, _ in pieces], "rows", head_size),
            ("key", attention.self.key.weight, [a.key.weight for a, _ in pieces], "rows", head_size),
            ("value", attention.self.value.weight, [a.value.weight for a, _ in pieces], "rows", head_size),
            (
                "output projection $W^O$",
                attention.output.dense.weight,
                [a.dense.weight for a, _ in pieces],
                "columns",
                head_size,
            ),
        ),
        (
            (
                "intermediate.dense",
                layer.intermediate.dense.weight,
                [f.intermediate.weight for _, f in pieces],
                "rows",
                None,
            ),
            ("output.dense", layer.output.dense.weight, [f.output.weight for _, f in pieces], "columns", None),
        ),
    )
    titles = (
        "self-attention: Q, K, V column-parallel (rows: each process's heads), $W^O$ row-parallel (columns)"
        " → partial sums, 1 all-reduce (thin lines: heads)",
        "feed-forward: first matrix column-parallel (rows: hidden units), second row-parallel (columns)"
        " → partial sums, 1 all-reduce",
    )
    colours = np.array([to_rgb(colour) for colour in _COLOURS[:world_size]] + [to_rgb("lightgrey")])
    hidden, intermediate = layer.intermediate.dense.in_features, layer.intermediate.dense.out_features
    figure = Figure(figsize=(12.0, 7.6), layout="constrained")
    subfigures = figure.subfigures(2, 1, height_ratios=(hidden, max(hidden, intermediate)))
    for subfigure, matrices, title in zip(subfigures, rows, titles, strict=True):
        widths = [weight.shape[1] for _, weight, _, _, _ in matrices]
        axes = subfigure.subplots(1, len(matrices), width_ratios=widths)
        for ax, (name, weight, kept, along, group) in zip(axes, matrices, strict=True):
            whole = weight.detach()
            owners = _owners(whole, [piece.detach() for piece in kept], along).numpy()
            # Colour: the keeper; brightness: the weight's own value (|w| scaled to this matrix).
            shade = (whole.abs() / whole.abs().max()).numpy()[..., None]
            rgb = colours[owners] * (0.55 + 0.45 * shade) + (1 - (0.55 + 0.45 * shade)) * 1.0
            ax.imshow(rgb, interpolation="nearest")
            if group is not None:
                for boundary in range(group, whole.shape[0 if along == "rows" else 1], group):
                    line = ax.axhline if along == "rows" else ax.axvline
                    line(boundary - 0.5, color="black", linewidth=0.6)
            ax.set_title(f"{name} {tuple(whole.shape)}\nkeeps {along}", fontsize=9)
            ax.set_xlabel("in (input feature)", fontsize=8)
            ax.set_ylabel("out (output feature)", fontsize=8)
            ax.tick_params(labelsize=7)
        subfigure.suptitle(title, fontsize=10)
    handles = [Patch(color=_COLOURS[rank], label=f"process {rank}") for rank in range(world_size)]
    figure.legend(handles=handles, loc="outside lower center", ncols=world_size)
    figure.suptitle(f"Megatron's split of one BERT layer across {world_size} processes (weights as (out, in))")
    return figure


class AttentionTimings(NamedTuple):
    """One attention call per kernel and sequence length: best-of-``repeats`` seconds."""

    #: The sequence lengths ``T = S``.
    lengths: tuple[int, ...]
    #: For each kernel (``"eager"``, ``"sdpa"``, ``"tiled"``), its seconds per call, a value per length.
    seconds: dict[str, list[float]]
    #: Heads and head size of the inputs (batch 1).
    num_heads: int
    head_dim: int
    #: The tiled loop's keys per tile.
    block_size: int
    #: :func:`machine_description` of the machine that ran them.
    machine: str


#: The kernels :func:`time_attention_kernels` times, by the names its results use.
ATTENTION_KERNELS: dict[str, str] = {
    "eager": "eager (scores held whole)",
    "sdpa": "PyTorch's fused SDPA",
    "tiled": "tiled online softmax (flash_attention)",
}


def _best_of(calls: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Best-of-``repeats`` seconds of each call, the calls taken in turn so that a slow moment hits them alike."""
    best = dict.fromkeys(calls, math.inf)
    for call in calls.values():
        call()  # one untimed call each: first-call costs (allocations, dispatch) are not what is measured
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def time_attention_kernels(
    lengths: Sequence[int], num_heads: int = 4, head_dim: int = 64, repeats: int = 5, block_size: int = 64
) -> AttentionTimings:
    """Time the eager kernel, PyTorch's fused SDPA and the tiled loop on random inputs of each length.

    The eager kernel is :func:`~literate_transformer.core.kernels.scaled_dot_product_attention` (every score,
    then the softmax), the fused one :func:`~literate_transformer.core.kernels.fused_attention`
    (:func:`torch.nn.functional.scaled_dot_product_attention`) and the tiled one
    :func:`~literate_transformer.fast.flash.flash_attention`; batch 1, no mask, float32, under
    :class:`torch.inference_mode`, with the threads PyTorch is set to use.

    Args:
        lengths: Sequence lengths (queries = keys), each a positive int.
        num_heads: Heads.
        head_dim: Head size ``D``.
        repeats: Timed calls per kernel and length; the best is kept.
        block_size: Keys per tile of the tiled loop.

    Returns:
        An :class:`AttentionTimings`.
    """
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence) or not lengths:
        raise TypeError(f"lengths must be a non-empty sequence of positive ints, got {lengths!r}")
    lengths = tuple(check_positive_int(length, "lengths") for length in lengths)
    for value, name in (
        (num_heads, "num_heads"),
        (head_dim, "head_dim"),
        (repeats, "repeats"),
        (block_size, "block_size"),
    ):
        check_positive_int(value, name)
    kernels: dict[str, Callable[[Tensor, Tensor, Tensor], Tensor]] = {
        "eager": lambda query, key, value: scaled_dot_product_attention(query, key, value)[0],
        "sdpa": fused_attention,
        "tiled": partial(flash_attention, block_size=block_size),
    }
    generator = torch.Generator().manual_seed(0)
    seconds: dict[str, list[float]] = {name: [] for name in kernels}
    with torch.inference_mode():
        for length in lengths:
            inputs = torch.randn(3, 1, num_heads, length, head_dim, generator=generator).unbind(0)
            best = _best_of({name: partial(kernel, *inputs) for name, kernel in kernels.items()}, repeats)
            for name in kernels:
                seconds[name].append(best[name])
    return AttentionTimings(lengths, seconds, num_heads, head_dim, block_size, machine_description(torch.float32))


def plot_attention_timings(timings: AttentionTimings) -> Figure:
    """Time per attention call against sequence length, one line per kernel, on log-log axes.

    On log-log axes a cost that grows with the square of the length is a line of slope 2; the machine the
    timings ran on is in the subtitle.

    Args:
        timings: What :func:`time_attention_kernels` returned.

    Returns:
        The figure (milliseconds on the vertical axis).
    """
    if not isinstance(timings, AttentionTimings):
        raise TypeError(f"timings must be an AttentionTimings (from time_attention_kernels), got {timings!r}")
    figure = Figure(figsize=(7.6, 4.8), layout="constrained")
    ax = figure.add_subplot()
    for index, (name, seconds) in enumerate(timings.seconds.items()):
        milliseconds = [1000 * value for value in seconds]
        ax.plot(
            timings.lengths, milliseconds, marker="o", color=_COLOURS[index], label=ATTENTION_KERNELS.get(name, name)
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(timings.lengths, [f"{length:,}" for length in timings.lengths])
    ax.set_xlabel("sequence length T = S")
    ax.set_ylabel("milliseconds per call (best of several)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    ax.set_title(
        f"One attention call: batch 1, {timings.num_heads} heads of {timings.head_dim}, tiles of {timings.block_size}"
        f"\n{timings.machine}",
        fontsize=9,
    )
    return figure


class GenerationTimings(NamedTuple):
    """Seconds per generation step, with the key/value cache and without it (best of ``repeats``)."""

    #: Seconds of step ``t`` (the ``t + 1``-th new token) with the cache.
    with_cache: list[float]
    #: The same without it (the whole sequence decoded again at every step).
    without_cache: list[float]
    #: Tokens in the prompt.
    prompt_length: int
    #: Whether both ways wrote the same tokens.
    same_tokens: bool
    #: The model's class, and its layers and width where its config names them.
    model: str
    #: :func:`machine_description` of the machine that ran them.
    machine: str


def time_generation(model: nn.Module, prompt: Tensor, max_new_tokens: int, repeats: int = 3) -> GenerationTimings:
    """Time each step of greedy generation with the key/value cache and without it.

    Both runs are the package's own loop, :func:`~literate_transformer.book.generation.generate_step_by_step`;
    the rule that picks each token (the most likely) also notes the time, so step ``t`` lasts from one pick to
    the next (the first from the call).  Each way runs ``repeats`` times, in turn, and each step keeps its best.

    Args:
        model: A decoder-only language model (such as :class:`~literate_transformer.models.gpt2.GPT2LMHeadModel`).
        prompt: The prompt's ids ``(1, P)``.
        max_new_tokens: Tokens to write (no end-of-sequence stop).
        repeats: Runs per way; each step keeps its best.

    Returns:
        A :class:`GenerationTimings`.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (a decoder-only language model), got {type(model).__name__}")
    prompt = check_tensor(prompt, "prompt", ndim=2, dtypes=("int",))
    if prompt.shape[0] != 1:
        raise ValueError(f"prompt must be one sequence, shape (1, P), got {tuple(prompt.shape)}")
    max_new_tokens = check_positive_int(max_new_tokens, "max_new_tokens")
    repeats = check_positive_int(repeats, "repeats")
    best = {True: [math.inf] * max_new_tokens, False: [math.inf] * max_new_tokens}
    written = {}
    for _ in range(repeats):
        for use_cache in (True, False):
            stamps = [time.perf_counter()]

            def pick(scores: Tensor, stamps: list[float] = stamps) -> Tensor:
                stamps.append(time.perf_counter())
                return most_likely_token(scores)

            output = generate_step_by_step(model, prompt, max_new_tokens, use_cache=use_cache, choose_next_token=pick)
            written[use_cache] = output.sequences
            steps = [after - before for before, after in pairwise(stamps)]
            best[use_cache] = [min(old, new) for old, new in zip(best[use_cache], steps, strict=True)]
    same = bool(torch.equal(written[True], written[False]))
    config = getattr(model, "config", None)
    layers, width = getattr(config, "num_hidden_layers", None), getattr(config, "hidden_size", None)
    plural = "" if layers == 1 else "s"
    name = type(model).__name__ + (f", {layers} layer{plural} of width {width}" if layers and width else "")
    return GenerationTimings(best[True], best[False], prompt.shape[1], same, name, machine_description(torch.float32))


def plot_generation_timings(timings: GenerationTimings) -> Figure:
    """Milliseconds per new token against tokens written, with the key/value cache and without it.

    Without the cache each step decodes the whole sequence again, so its cost grows with every token written;
    with it each step after the first decodes one token against the cached keys and values.  The first step
    reads the whole prompt either way.

    Args:
        timings: What :func:`time_generation` returned.

    Returns:
        The figure; the legend gives each way's tokens per second over the whole run.
    """
    if not isinstance(timings, GenerationTimings):
        raise TypeError(f"timings must be a GenerationTimings (from time_generation), got {timings!r}")
    figure = Figure(figsize=(7.6, 4.6), layout="constrained")
    ax = figure.add_subplot()
    steps = range(1, len(timings.with_cache) + 1)
    for index, (name, seconds) in enumerate(
        (("with the cache", timings.with_cache), ("without it", timings.without_cache))
    ):
        rate = len(seconds) / sum(seconds)
        ax.plot(
            steps,
            [1000 * value for value in seconds],
            marker=".",
            color=_COLOURS[index],
            label=f"{name}: {rate:,.0f} tokens/s",
        )
    ax.set_xlabel(f"new tokens written (after a prompt of {timings.prompt_length})")
    ax.set_ylabel("milliseconds for that token (best of several)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.set_title(f"Greedy generation, step by step: {timings.model}\n{timings.machine}", fontsize=9)
    return figure
