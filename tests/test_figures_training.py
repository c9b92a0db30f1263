"""Chapter 19's figures draw the run they are given: the curves plotted are the history's numbers, labelled.

Each figure runs once on a small hand-made
:class:`~literate_transformer.pretraining.causal_lm.TrainingHistory` (no model is trained): the data on its axes
is checked against the history, with its titles and legend; the running mean against the mean written out; bad
arguments are refused with the argument's name.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from literate_transformer.figures import training as figures
from literate_transformer.pretraining.causal_lm import TrainingHistory


@pytest.fixture
def history() -> TrainingHistory:
    """Six steps: a loss that falls, a rate that decays, gradients clipped at the first two steps."""
    return TrainingHistory(
        steps=[1, 2, 3, 4, 5, 6],
        train_loss=[9.0, 7.0, 5.0, 4.0, 3.5, 3.0],
        learning_rate=[1.0, 0.9, 0.7, 0.4, 0.2, 0.1],
        grad_norm=[5.0, 2.0, 0.8, 0.6, 0.5, 0.4],
        update_norm=[1.0, 0.9, 0.8, 0.5, 0.3, 0.1],
        val_steps=[0, 3, 6],
        val_loss=[20.0, 5.5, 3.4],
        tokens=600,
        seconds=1.0,
    )


def _lines_with(ax, data) -> list:
    return [line for line in ax.lines if np.array_equal(line.get_ydata(), np.asarray(data, dtype=float))]


def test_the_running_mean_is_the_mean_of_the_last_window_values():
    values = torch.randn(30, generator=torch.Generator().manual_seed(0)).tolist()
    expected = [sum(values[max(0, i - 6) : i + 1]) / len(values[max(0, i - 6) : i + 1]) for i in range(30)]
    assert figures.running_mean(values, 7) == pytest.approx(expected, rel=1e-12)
    assert figures.running_mean(values, 1) == pytest.approx(values)


def test_the_losses_are_the_history_with_the_baselines_as_horizontal_lines(history):
    figure = figures.plot_losses(history, {"bigram": 3.6, "unigram": 5.1}, window=2)
    (ax,) = figure.axes
    assert _lines_with(ax, history.train_loss)  # every step, faint
    assert _lines_with(ax, figures.running_mean(history.train_loss, 2))
    (validation,) = _lines_with(ax, history.val_loss)
    np.testing.assert_array_equal(validation.get_xdata(), history.val_steps)
    flat = sorted(line.get_ydata()[0] for line in ax.lines if len(set(line.get_ydata())) == 1)
    assert flat == [3.6, 5.1]
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend[1:] == ["validation loss", "bigram (3.60)", "unigram (5.10)"]


def test_a_loss_above_the_top_of_the_axis_is_written_in_the_corner(history):
    ax = figures.plot_losses(history, top=8.0).axes[0]
    assert ax.get_ylim() == (0.0, 8.0)
    assert [text.get_text() for text in ax.texts] == ["step 0: 20.0 (off the axis)"]
    assert not figures.plot_losses(history).axes[0].texts


def test_the_optimizer_panels_draw_the_rate_the_norms_and_the_threshold(history):
    rate, gradient, update = figures.plot_optimizer(history, max_grad_norm=1.0).axes
    assert _lines_with(rate, history.learning_rate) and _lines_with(update, history.update_norm)
    assert _lines_with(gradient, history.grad_norm) and _lines_with(gradient, [1.0, 1.0])
    assert gradient.get_title() == "gradient norm (2 of 6 steps clipped)"
    assert gradient.get_yscale() == update.get_yscale() == "log"
    assert figures.plot_optimizer(history).axes[1].get_title() == "gradient norm"


def test_runs_are_drawn_as_running_means_with_their_last_validation_loss(history):
    other = TrainingHistory(steps=[1, 2], train_loss=[8.0, 6.0])
    ax = figures.plot_runs({"as above": history, "changed": other}, window=3).axes[0]
    assert _lines_with(ax, figures.running_mean(history.train_loss, 3)) and _lines_with(ax, [8.0, 7.0])
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == ["as above, validation 3.40 at the end", "changed"]


def test_the_lens_losses_are_one_line_per_model_over_the_readings():
    losses = {"trained": torch.tensor([50.0, 5.0, 3.2]), "untrained": torch.tensor([90.0, 90.0, 89.0])}
    ax = figures.plot_lens_losses(losses, ["embeddings", "layer 0", "layer 1"], {"bigram": 3.5}).axes[0]
    for values in losses.values():
        (line,) = _lines_with(ax, values.numpy())
        np.testing.assert_array_equal(line.get_xdata(), [0, 1, 2])
    assert [tick.get_text() for tick in ax.get_xticklabels()] == ["embeddings", "layer 0", "layer 1"]
    assert ax.get_yscale() == "log"


def test_tokens_per_word_draws_ours_by_size_and_the_others_as_points():
    ax = figures.plot_tokens_per_word({2048: 2.1, 512: 3.5}, {"SmolLM2": (49152, 1.8)}).axes[0]
    (ours,) = _lines_with(ax, [3.5, 2.1])
    np.testing.assert_array_equal(ours.get_xdata(), [512, 2048])
    (point,) = _lines_with(ax, [1.8])
    np.testing.assert_array_equal(point.get_xdata(), [49152])
    assert ax.get_xscale() == "log"


def test_a_figure_given_is_the_one_drawn_in(history):
    given = plt.figure()
    try:
        assert figures.plot_optimizer(history, figure=given) is given and len(given.axes) == 3
    finally:
        plt.close(given)
    assert isinstance(figures.plot_losses(history), Figure)


def test_bad_arguments_are_refused_by_name(history):
    with pytest.raises(TypeError, match="history must be the TrainingHistory lt.train returned"):
        figures.plot_losses({"train_loss": [1.0]})
    with pytest.raises(ValueError, match="history holds no step"):
        figures.plot_optimizer(TrainingHistory())
    with pytest.raises(TypeError, match="baselines must be a mapping"):
        figures.plot_losses(history, [3.5])
    with pytest.raises(TypeError, match="runs must be a non-empty mapping"):
        figures.plot_runs({})
    with pytest.raises(ValueError, match="every model needs 2 readings, got 3 for 'b'"):
        figures.plot_lens_losses({"a": torch.ones(2), "b": torch.ones(3)}, ["x", "y"])
    with pytest.raises(ValueError, match="labels must be 2 strings"):
        figures.plot_lens_losses({"a": torch.ones(2)}, ["x"])
    with pytest.raises(TypeError, match="figure must be a matplotlib Figure"):
        figures.plot_losses(history, figure="new")
    with pytest.raises(ValueError, match="window must be a positive int, got 0"):
        figures.running_mean([1.0], 0)
    with pytest.raises(TypeError, match="others must map names to"):
        figures.plot_tokens_per_word({512: 3.0}, {"SmolLM2": 1.8})
