r"""Chapter 18's figures: what a trained model does with its parts, read and changed with the lens.

Each function draws tensors the chapter computed with the lens on a trained model; none runs a model itself:

* :func:`plot_logit_lens`: the rank and the probability of one token when each layer's residual stream is read
  through the final norm and the head, as if the model stopped there;
* :func:`plot_loss_by_copy`: the loss at each position of a sequence of random tokens and of its repetition,
  the two copies one above the other;
* :func:`plot_layer_head_scores`: one number per head of every layer (an induction score, the change a
  switched-off head makes), the largest framed;
* :func:`plot_patching`: the share of a logit difference that one activation of a clean run restores in a
  corrupted run, for every layer and position, one panel per kind of activation;
* :func:`plot_head_attention`: the attention weights of a few heads on one sequence, queries down and keys
  across, the keys a head is expected to read framed (an induction head's stripe, a previous-token head's
  diagonal), as a static picture;
* :func:`plot_window_restoration`: the share of a logit difference that a window of consecutive layers'
  outputs, restored together at one position, brings back, one line per position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, MaxNLocator
from torch import Tensor

from ..core.validation import check_tensor

__all__ = [
    "plot_logit_lens",
    "plot_loss_by_copy",
    "plot_layer_head_scores",
    "plot_patching",
    "plot_head_attention",
    "plot_window_restoration",
]


def _check_labels(labels: object, count: int, name: str, what: str) -> list[str]:
    """``labels`` as a list of ``count`` strings, else a ``TypeError``/``ValueError`` naming ``name``."""
    if isinstance(labels, str) or not isinstance(labels, Sequence) or not all(isinstance(x, str) for x in labels):
        raise TypeError(f"{name} must be a sequence of strings, one per {what}, got {labels!r}")
    if len(labels) != count:
        raise ValueError(f"{name} must hold {count} strings, one per {what}, got {len(labels)}")
    return list(labels)


def _sparse_ticks(count: int, most: int = 12) -> list[int]:
    """Every index up to ``most`` of them; else every ``k``-th and the last, so that no two labels overlap."""
    if count <= most:
        return list(range(count))
    step = -(-count // most)
    return sorted({*range(0, count, step), count - 1})


def plot_logit_lens(ranks: Tensor, probabilities: Tensor, token: str, labels: Sequence[str] | None = None) -> Figure:
    """When a model knows its answer: one token's rank and probability, read from each layer's residual stream.

    The *logit lens* (nostalgebraist, 2020) sends the residual stream after each layer through the model's
    final norm and head, as if the model stopped there.  The left panel draws where ``token`` stands among
    the whole vocabulary at each reading (1: the top guess; a log scale, because it climbs from thousands),
    the right panel the probability the reading gives it: a token can rank first long before it is likely.

    Args:
        ranks: ``(N,)`` integer ranks, 0 for the top guess, one per reading.
        probabilities: ``(N,)`` the token's probability at each reading.
        token: The token, as text, for the titles.
        labels: ``N`` names of the readings, for the x axis; by default ``"embeddings"``, then ``"layer 0"``,
            ``"layer 1"``, ... (the embeddings, then each layer's output).

    Returns:
        The figure: two panels.
    """
    ranks = check_tensor(ranks, "ranks", ndim=1, dtypes=("int",))
    probabilities = check_tensor(probabilities, "probabilities", shape=(ranks.shape[0],), dtypes=("float",))
    if labels is None:
        labels = ["embeddings"] + [f"layer {index}" for index in range(ranks.shape[0] - 1)]
    if not isinstance(token, str):
        raise TypeError(f"token must be a string (the token as text), got {type(token).__name__}")
    if (ranks < 0).any():
        raise ValueError(f"ranks must be 0 or more (0: the top guess), got {ranks.min().item()}")
    if ((probabilities < 0) | (probabilities > 1)).any():
        raise ValueError("probabilities must lie in [0, 1]")
    labels = _check_labels(labels, ranks.shape[0], "labels", "reading")
    steps = list(range(ranks.shape[0]))
    ticks = _sparse_ticks(len(steps))

    figure = Figure(figsize=(10.0, 3.6), layout="constrained")
    left, right = figure.subplots(1, 2, sharex=True)
    left.plot(steps, (ranks + 1).numpy(), marker="o", markersize=3, color="tab:blue")
    left.set_yscale("log")
    left.invert_yaxis()  # the top guess at the top
    left.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    left.set_ylabel("rank among the vocabulary (1 = top guess)")
    left.set_title(f"rank of {token!r}")
    right.plot(steps, probabilities.numpy(), marker="o", markersize=3, color="tab:orange")
    right.set_ylim(0, 1)
    right.set_ylabel("probability")
    right.set_title(f"probability of {token!r}")
    for ax in (left, right):
        ax.set_xticks(ticks, [labels[i] for i in ticks], rotation=45, ha="right")
        ax.set_xlabel("residual stream read after")
        ax.grid(alpha=0.3)
    figure.suptitle("The logit lens: each layer's residual stream through the final norm and the head")
    return figure


def plot_loss_by_copy(first: Tensor, second: Tensor, baseline: tuple[str, float] | None = None) -> Figure:
    """The loss at each position of a sequence of random tokens (first copy) and of its repetition (second copy).

    Nothing in a random sequence predicts its next token; once the sequence repeats, everything does, for a
    model that looks back for what followed the current token last time.  The two copies are drawn against
    the position within the copy, each with its mean as a dashed line of its colour (the legend gives it).

    Args:
        first: ``(P,)`` the mean loss (nats) at each position of the first copy.
        second: ``(P,)`` the same positions of the second copy.
        baseline: ``(label, loss)`` drawn as a grey dotted line, e.g. a uniform guess over the vocabulary.

    Returns:
        The figure.
    """
    first = check_tensor(first, "first", ndim=1, dtypes=("float",))
    second = check_tensor(second, "second", shape=(first.shape[0],), dtypes=("float",))
    if baseline is not None and (
        not isinstance(baseline, tuple)
        or len(baseline) != 2
        or not isinstance(baseline[0], str)
        or not isinstance(baseline[1], (int, float))
    ):
        raise TypeError(f"baseline must be a (label, loss) pair or None, got {baseline!r}")
    # The first predicted token of each copy is its second: the first follows nothing of the pattern.
    positions = list(range(2, first.shape[0] + 2))

    figure = Figure(figsize=(8.0, 3.8), layout="constrained")
    ax = figure.add_subplot()
    for losses, name, colour in ((first, "first copy", "tab:red"), (second, "second copy", "tab:blue")):
        mean = losses.mean().item()
        ax.plot(positions, losses.numpy(), marker="o", markersize=3, color=colour, label=f"{name} (mean {mean:.2f})")
        ax.axhline(mean, color=colour, linestyle="--", linewidth=1)
    if baseline is not None:
        ax.axhline(baseline[1], color="0.5", linestyle=":", label=f"{baseline[0]} ({baseline[1]:.2f})")
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("position of the predicted token within its copy")
    ax.set_ylabel("loss (nats), mean over the batch")
    ax.set_title("Random tokens, then the same tokens again: the loss of each next-token prediction")
    ax.legend(loc="center right", fontsize="small")
    ax.grid(alpha=0.3)
    return figure


def plot_layer_head_scores(scores: Tensor, title: str, colorbar_label: str, cmap: str = "viridis") -> Figure:
    """One number per attention head, layers down and heads across, the largest framed and written in.

    Args:
        scores: ``(L, H)``, row ``l`` the heads of layer ``l``.
        title: The figure's title.
        colorbar_label: What a number is, for the colour bar.
        cmap: A matplotlib colour map.

    Returns:
        The figure.
    """
    scores = check_tensor(scores, "scores", ndim=2, dtypes=("float",))
    for value, name in ((title, "title"), (colorbar_label, "colorbar_label"), (cmap, "cmap")):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, got {type(value).__name__}")
    layers, heads = scores.shape
    layer, head = divmod(int(scores.argmax()), heads)

    figure = Figure(figsize=(min(2.0 + 0.45 * heads, 9.0), min(1.4 + 0.2 * layers, 7.5)), layout="constrained")
    ax = figure.add_subplot()
    image = ax.imshow(scores.numpy(), cmap=cmap, aspect="auto", interpolation="nearest")
    ax.add_patch(Rectangle((head - 0.5, layer - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
    ax.annotate(
        f"{scores[layer, head].item():.2g}",
        (head, layer),
        ha="center",
        va="center",
        fontsize=7,
        color="red",
        fontweight="bold",
    )
    ax.set_xticks(range(heads))
    ax.set_yticks(_sparse_ticks(layers, most=16))
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(f"{title}\n(framed: the largest, layer {layer}, head {head})", fontsize=10)
    figure.colorbar(image, ax=ax, label=colorbar_label)
    return figure


def plot_patching(restored: Mapping[str, Tensor], tokens: Sequence[str]) -> Figure:
    """Activation patching: how much of the clean answer each activation of the clean run restores.

    Each panel is one kind of activation (the residual stream after a layer, the attention's output, the
    MLP's output); its cell (layer ``l``, position ``t``) is the corrupted run with that one activation
    replaced by the clean run's: 0 where the patched run answers as the corrupted run did, 1 where it answers
    as the clean run did (the logit difference of the two answers, scaled so).  The colour scale is shared
    and centred on 0: blue restores the clean answer, red pushes further towards the corrupted one.

    Args:
        restored: ``{panel title: (L, T) tensor}``, every tensor of the same shape.
        tokens: The ``T`` tokens of the prompt, as text, for the x axis.

    Returns:
        The figure: one panel per entry, side by side.
    """
    if not isinstance(restored, Mapping) or not restored:
        raise TypeError(f"restored must be a non-empty mapping {{panel title: (L, T) tensor}}, got {restored!r}")
    shape = None
    for title, values in restored.items():
        if not isinstance(title, str):
            raise TypeError(f"restored's keys must be panel titles (strings), got {title!r}")
        check_tensor(values, f"restored[{title!r}]", ndim=2, dtypes=("float",))
        shape = shape or tuple(values.shape)
        if tuple(values.shape) != shape:
            raise ValueError(f"every panel must have shape (L, T) = {shape}, got {tuple(values.shape)} for {title!r}")
    layers, length = shape
    tokens = _check_labels(tokens, length, "tokens", "position")
    norm = Normalize(vmin=-1.0, vmax=1.0)

    figure = Figure(figsize=(3.6 * len(restored) + 1.2, 5.2), layout="constrained")
    panels = figure.subplots(1, len(restored), sharey=True, squeeze=False)[0]
    for ax, (title, values) in zip(panels, restored.items(), strict=True):
        image = ax.imshow(values.numpy(), cmap="RdBu", norm=norm, aspect="auto", interpolation="nearest")
        ax.set_xticks(range(length), tokens, rotation=60, ha="right")
        ax.set_title(title)
        ax.set_xlabel("position patched")
    panels[0].set_yticks(_sparse_ticks(layers, most=16))
    panels[0].set_ylabel("layer patched")
    figure.colorbar(image, ax=list(panels), label="share of the logit difference restored\n(0 = corrupted, 1 = clean)")
    figure.suptitle("Activation patching: one activation of the clean run put into the corrupted run")
    return figure


def plot_head_attention(
    patterns: Mapping[str, Tensor], tokens: Sequence[str] | None = None, expected: Mapping[str, Tensor] | None = None
) -> Figure:
    """A few heads' attention on one sequence, side by side: queries down, keys across, one shared colour scale.

    Each panel is one head's ``(T, S)`` weights (a row sums to 1).  Where ``expected`` gives a panel a key per
    query, that cell is framed: the token after the query's earlier occurrence for an induction head, the one
    before it for a previous-token head, so that the picture shows at a glance where the weight went and where
    the head was expected to put it.

    Args:
        patterns: ``{panel title: (T, S) tensor}`` of weights in ``[0, 1]``, every tensor of the same shape.
        tokens: The ``T`` tokens (queries and keys of a self-attention), for the ticks; ``None``: positions.
        expected: ``{panel title: (T,) integer tensor}``, the key expected for each query, ``-1`` for none.

    Returns:
        The figure.
    """
    if not isinstance(patterns, Mapping) or not patterns:
        raise TypeError(f"patterns must be a non-empty mapping {{panel title: (T, S) tensor}}, got {patterns!r}")
    shape = None
    for title, weights in patterns.items():
        if not isinstance(title, str):
            raise TypeError(f"patterns' keys must be panel titles (strings), got {title!r}")
        check_tensor(weights, f"patterns[{title!r}]", ndim=2, dtypes=("float",))
        shape = shape or tuple(weights.shape)
        if tuple(weights.shape) != shape:
            raise ValueError(f"every panel must have shape (T, S) = {shape}, got {tuple(weights.shape)} for {title!r}")
        if weights.min() < 0 or weights.max() > 1:
            raise ValueError(f"patterns[{title!r}] must hold attention weights, in [0, 1]")
    queries, keys = shape
    if tokens is not None:
        tokens = _check_labels(tokens, keys, "tokens", "position")
    expected = {} if expected is None else expected
    if not isinstance(expected, Mapping) or not set(expected) <= set(patterns):
        raise ValueError(f"expected must map some of the panel titles {list(patterns)} to (T,) tensors")
    for title, wanted in expected.items():
        wanted = check_tensor(wanted, f"expected[{title!r}]", shape=(queries,), dtypes=("int",))
        if ((wanted < -1) | (wanted >= keys)).any():
            raise ValueError(f"expected[{title!r}] must hold key positions in [0, {keys}) or -1 (none)")
    norm = Normalize(vmin=0.0, vmax=1.0)

    figure = Figure(figsize=(4.6 * len(patterns) + 1.0, 4.8), layout="constrained")
    panels = figure.subplots(1, len(patterns), squeeze=False)[0]
    for ax, (title, weights) in zip(panels, patterns.items(), strict=True):
        image = ax.imshow(weights.numpy(), cmap="Blues", norm=norm, interpolation="nearest")
        for query, key in enumerate(expected.get(title, []).tolist() if title in expected else []):
            if key >= 0:
                ax.add_patch(Rectangle((key - 0.5, query - 0.5), 1, 1, fill=False, edgecolor="tab:red", linewidth=1))
        # Keys labelled by their tokens; queries too where they are the same sequence (self-attention).
        ticks = _sparse_ticks(keys, most=24)
        ax.set_xticks(ticks, [tokens[i] if tokens else str(i) for i in ticks], rotation=90, fontsize=7)
        rows = _sparse_ticks(queries, most=24)
        ax.set_yticks(rows, [tokens[i] if tokens and queries == keys else str(i) for i in rows], fontsize=7)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("key (attended to)")
        ax.set_ylabel("query")
    label = "attention weight" + ("\n(red frames: the key expected)" if expected else "")
    figure.colorbar(image, ax=list(panels), label=label, shrink=0.8)
    return figure


def plot_window_restoration(
    restored: Tensor, tokens: Sequence[str], first_layers: Sequence[int], window: int, part: str = "MLP outputs"
) -> Figure:
    """Restoring a window of layers at one position: the share of the logit difference it brings back.

    Causal tracing after Meng et al. (2022) restores not one layer's output but those of ``window``
    consecutive layers together, at one position of the corrupted run: a computation spread over neighbouring
    layers shows as a plateau a single layer would miss.  One line per position, against the first layer of
    the window: 0 where the patched run answers as the corrupted run did, 1 where it answers as the clean one.

    Args:
        restored: ``(W, P)``: row ``w`` the window starting at ``first_layers[w]``, column ``p`` a position.
        tokens: The ``P`` positions' tokens, for the legend.
        first_layers: The ``W`` first layers of the windows.
        window: Layers per window.
        part: What was restored, for the title.

    Returns:
        The figure.
    """
    restored = check_tensor(restored, "restored", ndim=2, dtypes=("float",))
    windows, positions = restored.shape
    tokens = _check_labels(tokens, positions, "tokens", "position")
    if isinstance(first_layers, (str, bytes)) or not isinstance(first_layers, Sequence):
        raise TypeError(f"first_layers must be a sequence of ints, one per window, got {first_layers!r}")
    if len(first_layers) != windows or not all(isinstance(x, int) and x >= 0 for x in first_layers):
        raise ValueError(f"first_layers must hold {windows} layer numbers (ints >= 0), got {list(first_layers)!r}")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be a positive int, got {window!r}")
    if not isinstance(part, str):
        raise TypeError(f"part must be a string, got {type(part).__name__}")

    figure = Figure(figsize=(8.0, 3.8), layout="constrained")
    ax = figure.add_subplot()
    for column, token in enumerate(tokens):
        ax.plot(list(first_layers), restored[:, column].numpy(), marker="o", markersize=3, label=repr(token))
    ax.axhline(0, color="0.5", linewidth=0.8)
    ax.axhline(1, color="0.5", linewidth=0.8, linestyle="--")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(f"first layer of the window ({window} layers restored together)")
    ax.set_ylabel("share of the logit difference\nrestored (0 = corrupted, 1 = clean)")
    ax.set_title(f"{part} of {window} consecutive layers restored at one position", fontsize=10)
    ax.legend(title="position restored", fontsize="small")
    ax.grid(alpha=0.3)
    return figure
