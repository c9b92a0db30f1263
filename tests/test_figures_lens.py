"""Chapter 18's figures draw the tensors they are given: the numbers plotted are those tensors, labelled.

Each figure runs once on tiny tensors (no model is loaded): the data on its axes is checked against the
tensors passed, with its titles, tick labels and legend; bad arguments are refused with the argument's name.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from literate_transformer.figures import lens as figures


def test_the_logit_lens_draws_rank_plus_one_on_a_log_axis_and_the_probability():
    ranks = torch.tensor([900, 40, 3, 0])
    probabilities = torch.tensor([0.0, 0.01, 0.2, 0.7])
    labels = ["embeddings", "layer 0", "layer 1", "layer 2"]
    figure = figures.plot_logit_lens(ranks, probabilities, " Paris", labels)
    assert isinstance(figure, Figure)
    left, right = figure.axes
    np.testing.assert_array_equal(left.lines[0].get_ydata(), [901, 41, 4, 1])  # 1 = the top guess
    np.testing.assert_allclose(right.lines[0].get_ydata(), probabilities.numpy())
    assert left.get_yscale() == "log" and left.yaxis_inverted()
    assert [tick.get_text() for tick in left.get_xticklabels()] == labels
    assert left.get_title() == "rank of ' Paris'" and right.get_ylim() == (0, 1)


def test_the_logit_lens_labels_every_few_layers_of_a_deep_model():
    labels = ["embeddings"] + [f"layer {i}" for i in range(30)]
    figure = figures.plot_logit_lens(torch.zeros(31, dtype=torch.long), torch.ones(31), "x", labels)
    shown = [tick.get_text() for tick in figure.axes[0].get_xticklabels()]
    assert shown[0] == "embeddings" and shown[-1] == "layer 29" and 8 <= len(shown) <= 13


def test_the_loss_of_the_two_copies_is_drawn_with_its_means():
    first, second = torch.tensor([12.0, 14.0, 13.0]), torch.tensor([3.0, 1.0, 2.0])
    figure = figures.plot_loss_by_copy(first, second, baseline=("uniform", 10.5))
    (ax,) = figure.axes
    curves = [line for line in ax.lines if len(line.get_xdata()) == 3]
    np.testing.assert_array_equal(curves[0].get_xdata(), [2, 3, 4])
    np.testing.assert_array_equal(curves[0].get_ydata(), first.numpy())
    np.testing.assert_array_equal(curves[1].get_ydata(), second.numpy())
    means = sorted(line.get_ydata()[0] for line in ax.lines if len(set(line.get_ydata())) == 1)
    assert means == [2.0, 10.5, 13.0]  # each copy's mean and the baseline
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == ["first copy (mean 13.00)", "second copy (mean 2.00)", "uniform (10.50)"]


def test_the_layer_head_map_is_the_tensor_with_its_largest_framed():
    scores = torch.tensor([[0.1, 0.2, 0.0], [0.05, 0.3, 0.9]])
    figure = figures.plot_layer_head_scores(scores, "Induction", "score")
    ax = figure.axes[0]
    np.testing.assert_array_equal(ax.images[0].get_array(), scores.numpy())
    (frame,) = [patch for patch in ax.patches if isinstance(patch, Rectangle)]
    assert frame.get_xy() == (2 - 0.5, 1 - 0.5)  # head 2 of layer 1
    assert ax.texts[0].get_text() == "0.9" and "layer 1, head 2" in ax.get_title()
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("head", "layer") and figure.axes[1].get_ylabel() == "score"


def test_patching_draws_one_panel_per_activation_on_one_centred_scale():
    torch.manual_seed(0)
    restored = {"residual stream": torch.rand(4, 3), "MLP output": torch.rand(4, 3) - 0.5}
    figure = figures.plot_patching(restored, ["The", " cat", " sat"])
    panels = [ax for ax in figure.axes if ax.images]
    assert [ax.get_title() for ax in panels] == list(restored)
    for ax, values in zip(panels, restored.values(), strict=True):
        np.testing.assert_array_equal(ax.images[0].get_array(), values.numpy())
        assert ax.images[0].get_clim() == (-1.0, 1.0)
    assert [tick.get_text() for tick in panels[0].get_xticklabels()] == ["The", " cat", " sat"]
    assert panels[0].get_ylabel() == "layer patched"


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(TypeError, match="ranks must have an int dtype"):
        figures.plot_logit_lens(torch.ones(2), torch.ones(2), "x", ["a", "b"])
    with pytest.raises(ValueError, match="probabilities must have shape"):
        figures.plot_logit_lens(torch.zeros(2, dtype=torch.long), torch.ones(3), "x", ["a", "b"])
    with pytest.raises(ValueError, match="labels must hold 2 strings"):
        figures.plot_logit_lens(torch.zeros(2, dtype=torch.long), torch.ones(2), "x", ["a"])
    with pytest.raises(ValueError, match="ranks must be 0 or more"):
        figures.plot_logit_lens(torch.tensor([-1, 0]), torch.ones(2), "x", ["a", "b"])
    with pytest.raises(TypeError, match="baseline must be a"):
        figures.plot_loss_by_copy(torch.ones(2), torch.ones(2), baseline=10.8)
    with pytest.raises(ValueError, match="second must have shape"):
        figures.plot_loss_by_copy(torch.ones(2), torch.ones(3))
    with pytest.raises(ValueError, match="scores must be 2-D"):
        figures.plot_layer_head_scores(torch.ones(3), "t", "c")
    with pytest.raises(TypeError, match="restored must be a non-empty mapping"):
        figures.plot_patching({}, [])
    with pytest.raises(ValueError, match="every panel must have shape"):
        figures.plot_patching({"a": torch.ones(2, 3), "b": torch.ones(3, 3)}, ["x", "y", "z"])
    with pytest.raises(TypeError, match="tokens must be a sequence of strings"):
        figures.plot_patching({"a": torch.ones(2, 3)}, "xyz")


def test_head_attention_draws_each_heads_weights_and_frames_the_keys_expected():
    stripe = torch.eye(4).roll(-1, dims=0)  # query i reads key i + 1 (row 3 reads key 0)
    diagonal = torch.eye(4)
    expected = torch.tensor([1, 2, 3, -1])  # no key expected for the last query
    figure = figures.plot_head_attention(
        {"induction": stripe, "itself": diagonal}, ["a", "b", "c", "d"], expected={"induction": expected}
    )
    panels = [ax for ax in figure.axes if ax.images]
    assert [ax.get_title() for ax in panels] == ["induction", "itself"]
    for ax, weights in zip(panels, (stripe, diagonal), strict=True):
        np.testing.assert_array_equal(ax.images[0].get_array(), weights.numpy())
        assert ax.images[0].get_clim() == (0.0, 1.0)  # one scale for every head
    frames = [patch.get_xy() for patch in panels[0].patches if isinstance(patch, Rectangle)]
    assert frames == [(0.5, -0.5), (1.5, 0.5), (2.5, 1.5)]  # (key - 0.5, query - 0.5) for each expected key
    assert not panels[1].patches
    assert [tick.get_text() for tick in panels[0].get_xticklabels()] == ["a", "b", "c", "d"]
    assert [tick.get_text() for tick in panels[0].get_yticklabels()] == ["a", "b", "c", "d"]


def test_window_restoration_draws_a_line_per_position_against_the_windows_first_layer():
    restored = torch.tensor([[0.8, 0.3, 0.0], [0.6, 0.2, 0.1], [0.1, 0.1, 0.7]])
    figure = figures.plot_window_restoration(restored, ["iffel", " Tower", " of"], [1, 2, 3], window=5)
    (ax,) = figure.axes
    curves = [line for line in ax.lines if len(line.get_xdata()) == 3]
    assert len(curves) == 3
    for line, column in zip(curves, restored.T, strict=True):
        np.testing.assert_array_equal(line.get_xdata(), [1, 2, 3])
        np.testing.assert_array_equal(line.get_ydata(), column.numpy())
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["'iffel'", "' Tower'", "' of'"]
    assert "5 layers" in ax.get_xlabel() and "5 consecutive layers" in ax.get_title()


def test_the_new_figures_refuse_bad_arguments_by_name():
    with pytest.raises(ValueError, match=r"patterns\['a'\] must hold attention weights"):
        figures.plot_head_attention({"a": torch.full((2, 2), 2.0)})
    with pytest.raises(ValueError, match="every panel must have shape"):
        figures.plot_head_attention({"a": torch.eye(2), "b": torch.eye(3)})
    with pytest.raises(ValueError, match=r"expected\['a'\] must hold key positions"):
        figures.plot_head_attention({"a": torch.eye(2)}, expected={"a": torch.tensor([0, 5])})
    with pytest.raises(ValueError, match="expected must map some of the panel titles"):
        figures.plot_head_attention({"a": torch.eye(2)}, expected={"b": torch.tensor([0, 1])})
    with pytest.raises(ValueError, match="first_layers must hold 2 layer numbers"):
        figures.plot_window_restoration(torch.ones(2, 1), ["x"], [1], window=3)
    with pytest.raises(ValueError, match="window must be a positive int"):
        figures.plot_window_restoration(torch.ones(2, 1), ["x"], [1, 2], window=0)
    with pytest.raises(ValueError, match="tokens must hold 1 strings"):
        figures.plot_window_restoration(torch.ones(2, 1), ["x", "y"], [1, 2], window=3)
