r"""Chapter 19's figures: a tokenizer and a language model trained on the page, drawn from what they measured.

Each function draws numbers it is given (a run's
:class:`~literate_transformer.pretraining.causal_lm.TrainingHistory`, losses read with the lens); none trains
anything itself:

* :func:`plot_tokens_per_word`: how many tokens a word costs, against the size of the vocabulary;
* :func:`plot_losses`: the training loss of every step (and its running mean), the validation loss at the
  checkpoints, and the baselines a loss is read against, as horizontal lines;
* :func:`plot_optimizer`: what the optimizer did at each step: the learning rate (warmup, then cosine decay),
  the gradients' norm before clipping beside the clipping threshold, and how far the step moved the weights;
* :func:`plot_runs`: short runs that differ in one setting, their training losses on one axis;
* :func:`plot_lens_losses`: the loss of each layer's residual stream read through the final norm and the head
  (the logit lens), for several models.

:func:`running_mean` is the smoothing the curves use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from torch import Tensor

from ..core.validation import check_positive_int, check_tensor
from ..pretraining.causal_lm import TrainingHistory

__all__ = ["running_mean", "plot_tokens_per_word", "plot_losses", "plot_optimizer", "plot_runs", "plot_lens_losses"]


def running_mean(values: Sequence[float], window: int) -> list[float]:
    """The mean of the last ``window`` values at each step (of all the values so far, for the first ones).

    A step's loss is one batch's: noisy.  The running mean shows the trend, late by about half a window.

    >>> running_mean([4.0, 2.0, 3.0, 1.0], 2)
    [4.0, 3.0, 2.5, 2.0]

    Raises:
        ValueError: for a ``window`` that is not a positive int.
    """
    check_positive_int(window, "window")
    values = torch.as_tensor(list(values), dtype=torch.float64)
    # Prefix sums: the sum of values[i - window + 1 : i + 1] is sums[i + 1] - sums[max(0, i + 1 - window)].
    sums = torch.cat([torch.zeros(1, dtype=torch.float64), values.cumsum(0)])
    ends = torch.arange(1, len(values) + 1)
    starts = (ends - window).clamp(min=0)
    return ((sums[ends] - sums[starts]) / (ends - starts)).tolist()


def _figure(figure: object, size: tuple[float, float]) -> Figure:
    """The figure to draw in: the one given (``plt.figure()``, where pyplot must show it), else a new one."""
    if figure is None:
        return Figure(figsize=size, layout="constrained")
    if not isinstance(figure, Figure):
        raise TypeError(f"figure must be a matplotlib Figure (plt.figure()) or None, got {type(figure).__name__}")
    return figure


def _check_history(history: object, name: str) -> TrainingHistory:
    if not isinstance(history, TrainingHistory):
        raise TypeError(f"{name} must be the TrainingHistory lt.train returned, got {type(history).__name__}")
    if not history.steps:
        raise ValueError(f"{name} holds no step: train for at least one step")
    return history


def _check_baselines(baselines: object) -> dict[str, float]:
    if baselines is None:
        return {}
    if not isinstance(baselines, Mapping) or not all(
        isinstance(label, str) and isinstance(value, (int, float)) for label, value in baselines.items()
    ):
        raise TypeError(f"baselines must be a mapping {{label: loss}}, got {baselines!r}")
    return dict(baselines)


def plot_tokens_per_word(
    ours: Mapping[int, float], others: Mapping[str, tuple[int, float]], figure: Figure | None = None
) -> Figure:
    """Tokens per word against the vocabulary's size: the trained tokenizer at several sizes, and others as points.

    Args:
        ours: ``{vocabulary size: tokens per word}`` of one trainer at several sizes, drawn as a line.
        others: ``{name: (vocabulary size, tokens per word)}``, each a labelled point.
        figure: The figure to draw in (``plt.figure()`` in a script whose figures pyplot shows); ``None``: a new
            one, shown where it is displayed.

    Returns:
        The figure, the sizes on a log axis.
    """
    for name, values in (("ours", ours), ("others", others)):
        if not isinstance(values, Mapping) or not values:
            raise TypeError(f"{name} must be a non-empty mapping, got {values!r}")
    if not all(isinstance(size, int) and isinstance(value, (int, float)) for size, value in ours.items()):
        raise TypeError(f"ours must map vocabulary sizes (int) to tokens per word, got {ours!r}")
    if not all(isinstance(point, tuple) and len(point) == 2 for point in others.values()):
        raise TypeError(f"others must map names to (vocabulary size, tokens per word) pairs, got {others!r}")
    figure = _figure(figure, (7.0, 3.6))
    ax = figure.add_subplot()
    sizes = sorted(ours)
    ax.plot(sizes, [ours[size] for size in sizes], marker="o", color="tab:blue", label="trained here")
    for (name, (size, value)), colour in zip(others.items(), ("tab:red", "tab:green", "tab:purple"), strict=False):
        ax.plot([size], [value], marker="s", linestyle="none", color=colour, label=name)
        ax.annotate(f"{value:.2f}", (size, value), textcoords="offset points", xytext=(6, 4), fontsize="small")
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("vocabulary size (log scale)")
    ax.set_ylabel("tokens per word")
    ax.set_title("Tokens per word of the held-out text")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3, which="both")
    return figure


def plot_losses(
    history: TrainingHistory,
    baselines: Mapping[str, float] | None = None,
    window: int = 20,
    top: float | None = None,
    figure: Figure | None = None,
) -> Figure:
    """The training and validation losses against the steps, with the baselines beside them.

    Args:
        history: What :func:`~literate_transformer.pretraining.causal_lm.train` returned.
        baselines: ``{label: loss}``, each drawn as a dashed horizontal line, its value in the legend.
        window: The steps the training loss's running mean averages.
        top: The top of the loss axis (``None``: the highest loss drawn); a loss above it (an untrained model's
            first, say) is written in the corner instead.
        figure: The figure to draw in (``plt.figure()`` in a script whose figures pyplot shows); ``None``: a new
            one, shown where it is displayed.

    Returns:
        The figure.
    """
    history = _check_history(history, "history")
    baselines = _check_baselines(baselines)
    figure = _figure(figure, (8.0, 4.0))
    ax = figure.add_subplot()
    ax.plot(history.steps, history.train_loss, color="tab:blue", alpha=0.25, linewidth=0.8)
    ax.plot(
        history.steps,
        running_mean(history.train_loss, window),
        color="tab:blue",
        label=f"training loss (mean of {window} steps)",
    )
    if history.val_steps:
        ax.plot(history.val_steps, history.val_loss, color="tab:red", marker="o", label="validation loss")
    for (label, value), style in zip(baselines.items(), ("--", ":", "-."), strict=False):
        ax.axhline(value, color="0.35", linestyle=style, linewidth=1.2, label=f"{label} ({value:.2f})")
    if top is not None:
        ax.set_ylim(0, top)
        over = [(s, v) for s, v in zip(history.val_steps, history.val_loss, strict=True) if v > top]
        if over:
            step, value = over[0]
            ax.annotate(f"step {step}: {value:.1f} (off the axis)", (0.01, 0.98), xycoords="axes fraction",
                        va="top", fontsize="small", color="tab:red")  # fmt: skip
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per token)")
    ax.set_title("Training and validation loss, and what a loss is worth")
    ax.legend(loc="upper right", fontsize="small")
    ax.grid(alpha=0.3)
    return figure


def plot_optimizer(
    history: TrainingHistory, max_grad_norm: float | None = None, figure: Figure | None = None
) -> Figure:
    """What the optimizer did at each step: the learning rate, the gradient norm, the update's norm.

    Args:
        history: What :func:`~literate_transformer.pretraining.causal_lm.train` returned.
        max_grad_norm: The clipping threshold the run used, drawn beside the gradient norms (``None``: none).
        figure: The figure to draw in (``plt.figure()`` in a script whose figures pyplot shows); ``None``: a new
            one, shown where it is displayed.

    Returns:
        The figure: three panels side by side.
    """
    history = _check_history(history, "history")
    if max_grad_norm is not None and not isinstance(max_grad_norm, (int, float)):
        raise TypeError(f"max_grad_norm must be a number or None, got {max_grad_norm!r}")
    figure = _figure(figure, (11.0, 3.4))
    rate, gradient, update = figure.subplots(1, 3, sharex=True)
    rate.plot(history.steps, history.learning_rate, color="tab:green")
    rate.set_ylim(bottom=0)
    rate.set_title("learning rate")
    gradient.plot(history.steps, history.grad_norm, color="tab:purple", linewidth=0.9, label="before clipping")
    gradient.set_yscale("log")
    title = "gradient norm"
    if max_grad_norm is not None:
        clipped = sum(norm > max_grad_norm for norm in history.grad_norm)
        gradient.axhline(max_grad_norm, color="0.35", linestyle="--", label=f"clipped to {max_grad_norm:g}")
        gradient.legend(fontsize="small")
        title += f" ({clipped} of {len(history.steps)} steps clipped)"
    gradient.set_title(title)
    update.plot(history.steps, history.update_norm, color="tab:orange", linewidth=0.9)
    update.set_yscale("log")
    update.set_title(r"update norm, $\|\theta_{s+1} - \theta_s\|$")
    for ax in (rate, gradient, update):
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(5, integer=True))
    return figure


def plot_runs(runs: Mapping[str, TrainingHistory], window: int = 10, figure: Figure | None = None) -> Figure:
    """Short runs that differ in one setting: each one's training loss (running mean) on one log axis.

    Args:
        runs: ``{label: history}``; the legend gives each run's last validation loss where it has one.
        window: The steps each running mean averages.
        figure: The figure to draw in (``plt.figure()`` in a script whose figures pyplot shows); ``None``: a new
            one, shown where it is displayed.

    Returns:
        The figure.
    """
    if not isinstance(runs, Mapping) or not runs:
        raise TypeError(f"runs must be a non-empty mapping {{label: TrainingHistory}}, got {runs!r}")
    figure = _figure(figure, (8.0, 4.0))
    ax = figure.add_subplot()
    for label, history in runs.items():
        history = _check_history(history, f"runs[{label!r}]")
        final = f", validation {history.val_loss[-1]:.2f} at the end" if history.val_loss else ""
        ax.plot(history.steps, running_mean(history.train_loss, window), label=f"{label}{final}")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel(f"training loss, mean of {window} steps (log scale)")
    ax.set_title("One setting changed at a time")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3, which="both")
    return figure


def plot_lens_losses(
    losses: Mapping[str, Tensor],
    labels: Sequence[str],
    baselines: Mapping[str, float] | None = None,
    figure: Figure | None = None,
) -> Figure:
    """The logit lens as a loss: each reading of the residual stream scored on the next tokens, per model.

    Args:
        losses: ``{model: (N,) tensor}``, the loss of each of the ``N`` readings (the embeddings, then each
            layer's output, each sent through the final norm and the head).
        labels: The ``N`` readings' names, for the x axis.
        baselines: ``{label: loss}``, dashed horizontal lines.
        figure: The figure to draw in (``plt.figure()`` in a script whose figures pyplot shows); ``None``: a new
            one, shown where it is displayed.

    Returns:
        The figure.
    """
    if not isinstance(losses, Mapping) or not losses:
        raise TypeError(f"losses must be a non-empty mapping {{model: (N,) tensor}}, got {losses!r}")
    baselines = _check_baselines(baselines)
    count = None
    for name, values in losses.items():
        check_tensor(values, f"losses[{name!r}]", ndim=1, dtypes=("float",))
        count = count or values.shape[0]
        if values.shape[0] != count:
            raise ValueError(f"every model needs {count} readings, got {values.shape[0]} for {name!r}")
    if isinstance(labels, str) or len(labels) != count or not all(isinstance(label, str) for label in labels):
        raise ValueError(f"labels must be {count} strings, one per reading, got {labels!r}")
    figure = _figure(figure, (7.0, 3.6))
    ax = figure.add_subplot()
    for (name, values), colour in zip(losses.items(), ("tab:blue", "tab:red", "tab:green"), strict=False):
        ax.plot(range(count), values.detach().numpy(), marker="o", color=colour, label=name)
    for (label, value), style in zip(baselines.items(), ("--", ":", "-."), strict=False):
        ax.axhline(value, color="0.35", linestyle=style, linewidth=1.2, label=f"{label} ({value:.2f})")
    ax.set_xticks(range(count), list(labels))
    ax.set_yscale("log")
    ax.set_xlabel("residual stream read after")
    ax.set_ylabel("loss on the next tokens (nats, log scale)")
    ax.set_title("The logit lens: each layer's stream through the final norm and the head")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3, which="both")
    return figure
