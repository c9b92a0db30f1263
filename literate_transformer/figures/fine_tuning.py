r"""Chapter 20's figure: what fine-tuning runs did, step by step, beside the baselines they must beat.

:func:`plot_fine_tuning` draws one column per run of
:func:`~literate_transformer.fine_tuning.fine_tune` (the head alone, the whole
model, ...): its training loss at every step above, its held-out accuracy at
every evaluation below, and each baseline's held-out accuracy as a dashed
line across the accuracy panels.  The runs need not have the same number of
steps (the head alone takes hundreds of cheap ones, the whole model a few
dozen dear ones): each column has its own step axis, and the panels of a row
share theirs, so a run's level reads against the baselines' directly.  It
draws what it is given and runs no model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure

__all__ = ["plot_fine_tuning"]


def _series(run: object, name: str, field: str) -> list[float]:
    """A run's list of numbers ``field``, or a ``TypeError`` naming the run."""
    values = getattr(run, field, None)
    if not isinstance(values, Sequence) or not all(
        isinstance(value, (int, float)) and not isinstance(value, bool) for value in values
    ):
        raise TypeError(f"runs[{name!r}] must be a FineTuningHistory (a list of numbers {field}), got {run!r}")
    return list(values)


def plot_fine_tuning(
    runs: Mapping[str, object], baselines: Mapping[str, float] | None = None, figure: Figure | None = None
) -> Figure:
    """Each run's training loss and held-out accuracy against its steps, with the baselines' accuracies.

    Args:
        runs: ``{title: history}``, each a :class:`~literate_transformer.fine_tuning.FineTuningHistory` with a
            held-out set (its ``steps``, ``train_loss``, ``eval_steps`` and ``held_out_accuracy``), in the order
            of the columns.
        baselines: ``{name: accuracy}`` of other methods on the same held-out set, each drawn as a dashed line.
        figure: An empty figure to draw into (``plt.figure(...)``, where pyplot collects the figures: a script, a
            gallery); by default a new :class:`~matplotlib.figure.Figure`, sized for the columns.

    Returns:
        The figure: two rows (loss, accuracy), one column per run.

    Raises:
        TypeError: for runs that are not histories, or a baseline that is not a number.
        ValueError: for no run, a run without a held-out evaluation or whose lists do not match, an accuracy
            outside [0, 1], or a figure that already holds axes.
    """
    if not isinstance(runs, Mapping) or not runs:
        raise ValueError("runs must be a non-empty dict {title: FineTuningHistory}")
    baselines = dict(baselines or {})
    for name, accuracy in baselines.items():
        if isinstance(accuracy, bool) or not isinstance(accuracy, (int, float)):
            raise TypeError(f"baselines[{name!r}] must be an accuracy (a number), got {accuracy!r}")
        if not 0 <= accuracy <= 1:
            raise ValueError(f"baselines[{name!r}] must be an accuracy in [0, 1], got {accuracy}")
    columns = []
    for name, run in runs.items():
        steps, losses = _series(run, name, "steps"), _series(run, name, "train_loss")
        evaluated, accuracies = _series(run, name, "eval_steps"), _series(run, name, "held_out_accuracy")
        if len(steps) != len(losses) or len(evaluated) != len(accuracies):
            raise ValueError(
                f"runs[{name!r}]: its steps and losses, or its evaluations and accuracies, differ in length"
            )
        if not accuracies:
            raise ValueError(f"runs[{name!r}] has no held-out evaluation to draw (fine_tune without held_out)")
        if not all(0 <= accuracy <= 1 for accuracy in accuracies):
            raise ValueError(f"runs[{name!r}]: a held-out accuracy lies outside [0, 1]")
        columns.append((name, steps, losses, evaluated, accuracies))

    if figure is None:
        figure = Figure(figsize=(4.2 * len(columns) + 1.6, 5.6), layout="constrained")
    elif not isinstance(figure, Figure) or figure.axes:
        raise ValueError(f"figure must be an empty matplotlib Figure to draw into, got {figure!r}")
    axes = figure.subplots(2, len(columns), squeeze=False, sharex="col", sharey="row")
    for column, (name, steps, losses, evaluated, accuracies) in enumerate(columns):
        loss_axis, accuracy_axis = axes[0, column], axes[1, column]
        loss_axis.plot(steps, losses, color="C0", linewidth=1)
        loss_axis.set_title(name)
        accuracy_axis.plot(evaluated, accuracies, color="C1", marker="o", label="held-out accuracy")
        for index, (baseline, accuracy) in enumerate(baselines.items()):
            accuracy_axis.axhline(accuracy, color=f"C{index + 2}", linestyle="--", linewidth=1, label=baseline)
        accuracy_axis.set_xlabel("step")
    axes[0, 0].set_ylabel("training loss (cross-entropy)")
    axes[1, 0].set_ylabel("held-out accuracy")
    axes[1, -1].legend(loc="lower right", fontsize="small")
    return figure
