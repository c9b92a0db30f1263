"""Chapter 20's figure draws the runs it is given: each run's losses and held-out accuracies are the lines of its
column, each baseline a dashed line across the accuracy panels; bad arguments are refused by name.

No model is loaded: the histories are written here.
"""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from literate_transformer.figures.fine_tuning import plot_fine_tuning
from literate_transformer.fine_tuning import FineTuningHistory


def _history(losses, evaluated, accuracies) -> FineTuningHistory:
    return FineTuningHistory(
        steps=list(range(1, len(losses) + 1)),
        train_loss=losses,
        eval_steps=evaluated,
        held_out_accuracy=accuracies,
    )


RUNS = {
    "head alone": _history([1.3, 1.1, 0.9, 0.8], [0, 2, 4], [0.25, 0.5, 0.6]),
    "whole model": _history([0.8, 0.7], [0, 2], [0.6, 0.7]),
}


def test_each_run_is_a_column_of_its_losses_above_its_held_out_accuracies():
    figure = plot_fine_tuning(RUNS)
    assert isinstance(figure, Figure) and len(figure.axes) == 4
    top_left, top_right, bottom_left, bottom_right = figure.axes
    np.testing.assert_allclose(top_left.lines[0].get_xydata(), [[1, 1.3], [2, 1.1], [3, 0.9], [4, 0.8]])
    np.testing.assert_allclose(bottom_right.lines[0].get_xydata(), [[0, 0.6], [2, 0.7]])
    np.testing.assert_allclose(bottom_left.lines[0].get_ydata(), [0.25, 0.5, 0.6])
    assert [top_left.get_title(), top_right.get_title()] == ["head alone", "whole model"]
    assert bottom_left.get_xlabel() == "step" and bottom_left.get_ylabel() == "held-out accuracy"


def test_each_baseline_is_a_dashed_line_at_its_accuracy_in_every_accuracy_panel_and_the_legend():
    figure = plot_fine_tuning(RUNS, baselines={"bag of words": 0.71, "frozen vectors": 0.68})
    for axis in figure.axes[2:]:
        dashed = {line.get_label(): line.get_ydata()[0] for line in axis.lines if line.get_linestyle() == "--"}
        assert dashed == {"bag of words": 0.71, "frozen vectors": 0.68}
    legend = [text.get_text() for text in figure.axes[-1].get_legend().get_texts()]
    assert legend == ["held-out accuracy", "bag of words", "frozen vectors"]


def test_no_run_is_refused():
    with pytest.raises(ValueError, match="runs must be a non-empty dict"):
        plot_fine_tuning({})


def test_a_run_without_a_held_out_evaluation_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"runs\['bare'\] has no held-out evaluation"):
        plot_fine_tuning({"bare": _history([1.0, 0.5], [], [])})


def test_a_run_that_is_not_a_history_is_refused_naming_it():
    with pytest.raises(TypeError, match=r"runs\['losses'\] must be a FineTuningHistory"):
        plot_fine_tuning({"losses": [1.0, 0.5]})


def test_an_accuracy_outside_zero_to_one_is_refused_naming_the_baseline():
    with pytest.raises(ValueError, match=r"baselines\['bag of words'\] must be an accuracy in \[0, 1\], got 71"):
        plot_fine_tuning(RUNS, baselines={"bag of words": 71})


def test_a_figure_given_is_drawn_into_and_one_with_axes_is_refused():
    given = Figure()
    assert plot_fine_tuning(RUNS, figure=given) is given and len(given.axes) == 4
    with pytest.raises(ValueError, match="figure must be an empty matplotlib Figure"):
        plot_fine_tuning(RUNS, figure=given)
