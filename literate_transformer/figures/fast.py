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
  :func:`machine_description`;
* :func:`profile_decoding_step`, :func:`measure_machine_rates` and :func:`time_step_multiplies` measure
  where one decoding step of a trained decoder spends its time, how fast the machine reads memory and
  multiplies matrices, and what the step's multiplies alone cost at several batch sizes;
  :func:`plot_decoding_budget` sets the step against the time to read the weights and the time to do the
  arithmetic, with the rate at which each measured bar read the weights, and draws the multiplies on a
  roofline;
* :func:`memory_caches` reads the sizes of the processor's caches, against which the chapter sets the eager
  kernel's score tensor;
* :func:`plot_decoding_rates` draws each decoding path's tokens per second against the floors the bytes it
  reads per token set (one for float32 weights, one for 4-bit ones), each bar labelled with the rate at which
  it read its weights.

Timings are the best of a few runs (:func:`time.perf_counter`), the least disturbed by whatever else the
machine is doing; they differ from machine to machine and from run to run, so nothing here asserts a speed.
"""

from __future__ import annotations

import math
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
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
from ..parts.static_cache import static_cache_applies

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
    "StepProfile",
    "profile_decoding_step",
    "MachineRates",
    "measure_machine_rates",
    "MultiplyTimings",
    "time_step_multiplies",
    "plot_decoding_budget",
    "memory_caches",
    "plot_decoding_rates",
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


# ---------------------------------------------------------------------------
# One decoding step of a trained decoder: where its time goes, and the machine's limits
# ---------------------------------------------------------------------------
#: The operators that multiply matrices in a decoder's step on the CPU (a linear layer without bias, with one).
MATMUL_OPERATORS = ("aten::mm", "aten::addmm")


class StepProfile(NamedTuple):
    """One decoding step (one new token, batch 1): its time, and what PyTorch's profiler saw inside it."""

    #: Seconds of the step, the best of several calls without the profiler.
    seconds: float
    #: Seconds spent inside operators (the sum of every operator's own time, in one profiled call).
    operator_seconds: float
    #: Of those, the matrix multiplies' (``aten::mm`` and ``aten::addmm``).
    matmul_seconds: float
    #: Matrix multiplies called.
    matmul_calls: int
    #: Operators called, those called by other operators included.
    operators_called: int
    #: The operators with the most time of their own, each ``(name, seconds, calls)``, the most first.
    top: list[tuple[str, float, int]]


def _check_static_cache_model(model: object) -> nn.Module:
    if not isinstance(model, nn.Module) or not callable(getattr(model, "static_cache_decoder", None)):
        raise TypeError(
            "model must be a language model of the package that decodes over a static cache (such as "
            f"LlamaForCausalLM), got {type(model).__name__}"
        )
    reason = static_cache_applies(model)
    if reason is not None:
        raise ValueError(f"model cannot decode over a static cache: {reason}")
    return model


@contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """The process's error stream (file descriptor 2) sent to the null device, then restored.

    The profiler's tracing library writes a line to it as it starts and as it stops, past Python's
    ``sys.stderr``: in a notebook those lines would show as the cell's errors.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _profiled(step: Callable[[], object], repeats: int) -> StepProfile:
    """Time ``step`` (the best of ``repeats`` calls after one untimed), then profile one more call.

    The profiler is ``torch.autograd.profiler.profile``, the recorder ``torch.profiler.profile`` runs,
    called directly: the same events, without the front end's first-call import of the compiler (a second).
    """
    from torch.autograd.profiler import profile

    step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    with _native_stderr_silenced(), profile() as profiler:
        step()
    events = profiler.key_averages()
    matmuls = [event for event in events if event.key in MATMUL_OPERATORS]
    ranked = sorted(events, key=lambda event: -event.self_cpu_time_total)[:5]
    return StepProfile(
        seconds=min(times),
        operator_seconds=sum(event.self_cpu_time_total for event in events) / 1e6,
        matmul_seconds=sum(event.self_cpu_time_total for event in matmuls) / 1e6,
        matmul_calls=sum(event.count for event in matmuls),
        operators_called=sum(event.count for event in events),
        top=[(event.key, event.self_cpu_time_total / 1e6, event.count) for event in ranked],
    )


def profile_decoding_step(model: nn.Module, context: int = 32, repeats: int = 5) -> dict[str, StepProfile]:
    """One step of greedy decoding at batch 1, the eager way and over the static cache, timed and profiled.

    Each step is timed without the profiler (the best of ``repeats`` calls, after one untimed), then run
    once under PyTorch's profiler, which records every operator the step calls and the time spent inside
    each; the time of the step that no operator accounts for is spent between operators (Python, the
    calls into PyTorch).

    Both steps read one new token after ``context`` random tokens whose keys and values are cached: the
    eager one is the model's own forward with the cache it returned for them (each call extends that cache
    into new tensors, so every call is the same step); the other is the model's
    :class:`~literate_transformer.parts.static_cache.StaticCacheDecoder`, which ``generate()`` runs by
    default, its cache set back one position after each call.  Everything runs under
    :class:`torch.inference_mode`, with the threads PyTorch is set to use.

    Args:
        model: A language model of the package that decodes over a static cache (such as
            :class:`~literate_transformer.models.llama.LlamaForCausalLM`).
        context: Tokens already cached.
        repeats: Timed calls of each step; the best is kept.

    Returns:
        A :class:`StepProfile` for ``"eager"`` and for ``"static cache"``.
    """
    model = _check_static_cache_model(model)
    context = check_positive_int(context, "context")
    repeats = check_positive_int(repeats, "repeats")
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(model.config.vocab_size, (1, context), generator=generator)
    new_token = torch.randint(model.config.vocab_size, (1, 1), generator=generator)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            eager_cache = model(input_ids, use_cache=True).past_key_values
            decoder = model.static_cache_decoder(context + 1)
            static_cache = decoder(input_ids).past_key_values

            def eager_step() -> object:
                return model(new_token, past_key_values=eager_cache, use_cache=True)

            def static_step() -> object:
                output = decoder(new_token, past_key_values=static_cache)
                static_cache.length -= 1  # the same position again at the next call
                return output

            return {"eager": _profiled(eager_step, repeats), "static cache": _profiled(static_step, repeats)}
    finally:
        model.train(was_training)


class MachineRates(NamedTuple):
    """How fast this machine reads memory and multiplies matrices, each the best of a few runs."""

    #: Bytes per second read by summing a float32 tensor larger than the caches.
    streaming_bytes_per_s: float
    #: Floating-point operations per second of a large float32 matrix multiply (``2 n^3`` for ``n x n``).
    matmul_flops_per_s: float
    #: :func:`machine_description` of the machine that measured them.
    machine: str


def measure_machine_rates(megabytes: int = 256, size: int = 1024, repeats: int = 5) -> MachineRates:
    """The rate at which the machine streams memory and the rate at which it multiplies matrices.

    Streaming: the best time to sum a float32 tensor of ``megabytes`` (every byte read once, little
    arithmetic).  Arithmetic: the best time to multiply two float32 ``size x size`` matrices, whose
    ``2 size^3`` operations reuse every number read ``size`` times.  Both with the threads PyTorch is set
    to use, under :class:`torch.inference_mode`, after one untimed call each.

    Args:
        megabytes: The summed tensor's size (MiB); larger than the processor's caches to measure the memory.
        size: The multiplied matrices' side.
        repeats: Timed calls of each; the best is kept.

    Returns:
        A :class:`MachineRates`.
    """
    megabytes = check_positive_int(megabytes, "megabytes")
    size = check_positive_int(size, "size")
    repeats = check_positive_int(repeats, "repeats")
    generator = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        streamed = torch.ones(megabytes * 2**20 // 4)
        left, right = torch.randn(2, size, size, generator=generator).unbind(0)
        best = _best_of({"stream": streamed.sum, "multiply": partial(torch.mm, left, right)}, repeats)
    return MachineRates(
        streaming_bytes_per_s=streamed.numel() * streamed.element_size() / best["stream"],
        matmul_flops_per_s=2 * size**3 / best["multiply"],
        machine=machine_description(torch.float32),
    )


class MultiplyTimings(NamedTuple):
    """A decoding step's matrix multiplies alone, at several batch sizes (best-of-``repeats`` seconds)."""

    #: The rows multiplied, one new token per sequence of the batch.
    batch_sizes: tuple[int, ...]
    #: Seconds to multiply every matrix once by that many rows, one value per batch size.
    seconds: list[float]
    #: Numbers in the matrices (each row multiplied costs two operations per number).
    weight_numbers: int
    #: Bytes of the matrices (what a step reads, however many rows it multiplies).
    weight_bytes: int
    #: :func:`machine_description` of the machine that ran them.
    machine: str


def time_step_multiplies(
    model: nn.Module, batch_sizes: Sequence[int] = (1, 8, 64), repeats: int = 3
) -> MultiplyTimings:
    """Time a step's matrix multiplies and nothing else: every linear layer's weight times ``B`` rows.

    The weights are those of every :class:`torch.nn.Linear` of the model, each once (a head tied to the
    token table is one of them, and the table is not looked up); each is multiplied by ``B`` random rows
    with ``torch.nn.functional.linear``, under :class:`torch.inference_mode`, with the threads PyTorch
    is set to use.  What a step costs if it only multiplied: a floor for the step's time at that batch size.

    Args:
        model: A model; its linear layers are multiplied.
        batch_sizes: Rows per multiply, each a positive int.
        repeats: Timed passes over the weights per batch size, after one untimed; the best is kept.

    Returns:
        A :class:`MultiplyTimings`.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(batch_sizes, (str, bytes)) or not isinstance(batch_sizes, Sequence) or not batch_sizes:
        raise TypeError(f"batch_sizes must be a non-empty sequence of positive ints, got {batch_sizes!r}")
    batch_sizes = tuple(check_positive_int(size, "batch_sizes") for size in batch_sizes)
    repeats = check_positive_int(repeats, "repeats")
    weights = list(
        {id(module.weight): module.weight for module in model.modules() if isinstance(module, nn.Linear)}.values()
    )
    if not weights:
        raise ValueError(f"{type(model).__name__} has no linear layer to multiply")
    generator = torch.Generator().manual_seed(0)
    seconds = []
    with torch.inference_mode():
        for size in batch_sizes:
            inputs = {
                width: torch.randn(size, width, generator=generator, dtype=weights[0].dtype)
                for width in {weight.shape[1] for weight in weights}
            }

            def multiply_all(inputs: dict[int, Tensor] = inputs) -> None:
                for weight in weights:
                    F.linear(inputs[weight.shape[1]], weight)

            seconds.append(_best_of({"all": multiply_all}, repeats)["all"])
    return MultiplyTimings(
        batch_sizes,
        seconds,
        sum(weight.numel() for weight in weights),
        sum(weight.numel() * weight.element_size() for weight in weights),
        machine_description(weights[0].dtype),
    )


def plot_decoding_budget(
    weight_bytes: int,
    flops_per_token: float,
    rates: MachineRates,
    steps: dict[str, StepProfile],
    multiplies: MultiplyTimings,
) -> Figure:
    """Where a decoding step's time goes, against what reading the weights and doing the arithmetic take.

    Left, milliseconds per new token at batch 1: the time to read ``weight_bytes`` at the measured streaming
    rate; the time to do ``flops_per_token`` operations at the measured matrix-multiply rate; the step's
    multiplies alone (the first batch size of ``multiplies``); and each measured step, cut into its matrix
    multiplies, its other operators and the rest of its time, spent between operators (Python, the calls
    into PyTorch; the rest is the step's time less its operators', at least 0).  Right, a roofline: the
    operations per second a multiply can reach against its operations per byte of weights read, capped by
    the streaming rate times that intensity (the slanted line) and by the matrix-multiply rate (the flat
    one); each point is the step's multiplies at one batch size, ``2 B`` operations per weight of 4 bytes.

    Args:
        weight_bytes: The bytes a step reads (every weight once).
        flops_per_token: The operations a step computes per new token (about two per weight).
        rates: What :func:`measure_machine_rates` returned.
        steps: What :func:`profile_decoding_step` returned (each step by its name).
        multiplies: What :func:`time_step_multiplies` returned.

    Returns:
        The figure; the machine the measurements ran on is in its title.
    """
    import numpy as np

    weight_bytes = check_positive_int(weight_bytes, "weight_bytes")
    if isinstance(flops_per_token, bool) or not isinstance(flops_per_token, (int, float)) or flops_per_token <= 0:
        raise ValueError(f"flops_per_token must be a positive number, got {flops_per_token!r}")
    if not isinstance(rates, MachineRates):
        raise TypeError(f"rates must be a MachineRates (from measure_machine_rates), got {rates!r}")
    if not isinstance(multiplies, MultiplyTimings):
        raise TypeError(f"multiplies must be a MultiplyTimings (from time_step_multiplies), got {multiplies!r}")
    if not isinstance(steps, dict) or not steps or not all(isinstance(s, StepProfile) for s in steps.values()):
        raise TypeError(f"steps must be a dict of StepProfile (from profile_decoding_step), got {steps!r}")

    reading_ms = 1000 * weight_bytes / rates.streaming_bytes_per_s
    arithmetic_ms = 1000 * flops_per_token / rates.matmul_flops_per_s
    figure = Figure(figsize=(12.0, 5.0), layout="constrained")
    bars, roofline = figure.subplots(1, 2, width_ratios=(1.4, 1.0))

    labels = [
        f"read every weight once\n{weight_bytes / 1e6:,.0f} MB at {rates.streaming_bytes_per_s / 1e9:.1f} GB/s",
        f"do the arithmetic\n{flops_per_token / 1e6:,.0f} MFLOP at {rates.matmul_flops_per_s / 1e9:,.0f} GFLOP/s",
        f"the multiplies alone\n(B = {multiplies.batch_sizes[0]}, measured)",
    ]
    # A measured bar's time, and the rate at which it read the weights in that time.
    achieved = {
        "multiplies": multiplies.weight_bytes / multiplies.seconds[0],
        **{name: weight_bytes / step.seconds for name, step in steps.items()},
    }
    bars.barh(0, reading_ms, color="tab:blue")
    bars.barh(1, arithmetic_ms, color="tab:orange")
    bars.barh(2, 1000 * multiplies.seconds[0], color="tab:green")
    parts = (("matrix multiplies", "tab:green"), ("other operators", "tab:purple"), ("between operators", "tab:grey"))
    ends = []
    for row, (name, step) in enumerate(steps.items(), start=3):
        segments = (
            step.matmul_seconds,
            step.operator_seconds - step.matmul_seconds,
            max(step.seconds - step.operator_seconds, 0.0),
        )
        left = 0.0
        for (part, colour), seconds in zip(parts, segments, strict=True):
            bars.barh(row, 1000 * seconds, left=left, color=colour, label=part if row == 3 else None)
            left += 1000 * seconds
        ends.append(left)  # where the step's label goes: past its bar (its operators may outlast it)
        labels.append(f"{name} step, measured\n{step.operators_called:,} operators")
    for row, patch in enumerate(bars.patches[:2]):
        bars.text(patch.get_width(), row, f" {patch.get_width():.1f} ms", va="center", fontsize=8)
    bars.text(
        1000 * multiplies.seconds[0],
        2,
        f" {1000 * multiplies.seconds[0]:.1f} ms: {achieved['multiplies'] / 1e9:.1f} GB/s read",
        va="center",
        fontsize=8,
    )
    for row, (name, step), end in zip(range(3, 3 + len(steps)), steps.items(), ends, strict=True):
        bars.text(
            end,
            row,
            f" {1000 * step.seconds:.1f} ms: {achieved[name] / 1e9:.1f} GB/s read",
            va="center",
            fontsize=8,
        )
    bars.axvline(reading_ms, color="tab:blue", linestyle="--", linewidth=1, label="one read of the weights")
    longest = max(reading_ms, arithmetic_ms, 1000 * multiplies.seconds[0], *(1000 * s.seconds for s in steps.values()))
    bars.set_xlim(0, 1.8 * longest)  # room on the right for the legend, clear of the bars and their labels
    bars.set_yticks(range(len(labels)), labels, fontsize=8)
    bars.invert_yaxis()
    bars.set_xlabel("milliseconds per new token (batch 1)")
    bars.legend(loc="upper right", fontsize=8)
    bars.set_title("one step: reading the weights sets the pace, not the arithmetic", fontsize=10)

    bandwidth, peak = rates.streaming_bytes_per_s, rates.matmul_flops_per_s
    intensity = [2 * size * multiplies.weight_numbers / multiplies.weight_bytes for size in multiplies.batch_sizes]
    achieved = [
        2 * size * multiplies.weight_numbers / seconds
        for size, seconds in zip(multiplies.batch_sizes, multiplies.seconds, strict=True)
    ]
    ridge = peak / bandwidth
    low, high = min(*intensity, ridge) / 4, max(*intensity, ridge) * 4
    x = np.geomspace(low, high, 200)
    roofline.plot(x, np.minimum(bandwidth * x, peak) / 1e9, color="black", label="the roof: min(stream × x, multiply)")
    roofline.plot(
        intensity, [value / 1e9 for value in achieved], "o", color="tab:green", label="the multiplies, measured"
    )
    for size, at, value in zip(multiplies.batch_sizes, intensity, achieved, strict=True):
        roofline.annotate(f"B = {size}", (at, value / 1e9), textcoords="offset points", xytext=(4, -12), fontsize=8)
    roofline.axvline(ridge, color="grey", linestyle=":", linewidth=1)
    roofline.text(ridge, peak / 1e9 / 30, f" ridge: {ridge:.1f} FLOP/byte", color="grey", fontsize=8)
    roofline.set_xscale("log")
    roofline.set_yscale("log")
    roofline.set_xlabel("operations per byte of weights read (B / 2 in float32)")
    roofline.set_ylabel("GFLOP/s")
    roofline.grid(True, which="both", alpha=0.3)
    roofline.legend(loc="lower right", fontsize=8)
    roofline.set_title(
        "the multiplies at batch B, on a roofline:\nleft of the ridge memory-bound, right of it arithmetic-bound",
        fontsize=10,
    )
    figure.suptitle(f"A decoding step against the machine's limits\n{rates.machine}", fontsize=10)
    return figure


#: Where Linux describes the first processor's caches, one folder (``index0``, ``index1``, ...) per cache.
CACHE_FOLDER = Path("/sys/devices/system/cpu/cpu0/cache")


def memory_caches(folder: str | os.PathLike[str] = CACHE_FOLDER) -> dict[str, int]:
    """The sizes of the processor's caches, in bytes, by name: ``"L1d"``, ``"L1i"``, ``"L2"``, ``"L3"``.

    Read from Linux's description of the first processor (``level``, ``type`` and ``size`` of each
    ``index*`` folder); a cache another processor shares is counted once.  Another system, or a folder that
    does not describe caches, gives an empty dict: a page says so rather than guess.

    Args:
        folder: The folder to read (Linux's, unless a test gives another).

    Returns:
        Each cache's size in bytes.
    """
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    found: dict[str, int] = {}
    folder = Path(folder)
    for index in sorted(folder.glob("index*")) if folder.is_dir() else []:
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if not level.isdigit() or not size or not size.rstrip("KMG").isdigit():
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
        found[f"L{level}{suffix}"] = int(size.rstrip("KMG")) * units.get(size[-1], 1)
    return found


def plot_decoding_rates(
    rates: dict[str, float], bytes_per_token: dict[str, int], floors: dict[str, float], title: str = ""
) -> Figure:
    """Each decoding path's tokens per second against the floors that the bytes it reads per token set.

    A path that reads every weight once per token can write no faster than the memory reads those bytes:
    each ``floors`` entry is such a limit (tokens per second), drawn as a dashed line.  Each bar is a path,
    labelled with its tokens per second and the rate at which it read its weights: ``bytes_per_token`` times
    its tokens per second.

    Args:
        rates: Tokens per second, by path, in the order to draw them.
        bytes_per_token: The bytes of weights each path reads per token, by path.
        floors: A label (``"one read of the float32 weights"``) to a limit in tokens per second.
        title: The figure's title.

    Returns:
        The figure.
    """
    if not isinstance(rates, dict) or not rates:
        raise TypeError(f"rates must be a non-empty dict of path to tokens per second, got {rates!r}")
    if not isinstance(bytes_per_token, dict) or set(bytes_per_token) != set(rates):
        raise ValueError(f"bytes_per_token must give the bytes read per token of every path of rates: {list(rates)}")
    if not isinstance(floors, dict):
        raise TypeError(f"floors must be a dict of label to tokens per second, got {floors!r}")
    for name, value in (*rates.items(), *floors.items(), *bytes_per_token.items()):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{name!r}: a rate, a floor or a byte count must be a positive number, got {value!r}")
    figure = Figure(figsize=(9.0, 0.45 * len(rates) + 1.8), layout="constrained")
    ax = figure.add_subplot()
    names = list(rates)
    ax.barh(range(len(names)), [rates[name] for name in names], color="tab:green")
    for row, name in enumerate(names):
        read = rates[name] * bytes_per_token[name] / 1e9
        ax.text(rates[name], row, f" {rates[name]:.1f} tokens/s: {read:.1f} GB/s read", va="center", fontsize=8)
    for index, (label, limit) in enumerate(floors.items()):
        ax.axvline(limit, color=_COLOURS[index], linestyle="--", linewidth=1.2, label=f"{label}: {limit:,.0f} tokens/s")
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.15 * max(*rates.values(), *floors.values()))
    ax.set_xlabel("tokens per second")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title, fontsize=9)
    return figure
