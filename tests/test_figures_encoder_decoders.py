"""Chapter 15's figures draw what the package computes: its masks, its buckets, its corruptions."""

from __future__ import annotations

import matplotlib
import pytest
import torch

from literate_transformer.core.masks import build_attention_mask
from literate_transformer.figures.encoder_decoders import (
    plot_denoising_objectives,
    plot_information_flow,
    plot_relative_position_buckets,
)
from literate_transformer.parts.positions import relative_position_bucket
from literate_transformer.pretraining.denoising import span_corruption, text_infilling

matplotlib.use("Agg")


def test_the_information_flow_draws_the_three_masks_the_package_builds():
    source, target = "the cat sat <pad>".split(), "<s> le chat".split()
    figure = plot_information_flow(source, target, source_mask=[1, 1, 1, 0])
    encoder, decoder, cross = figure.axes
    padding = torch.tensor([[1, 1, 1, 0]])
    expected = {
        encoder: build_attention_mask(padding, query_length=4)[0, 0].expand(4, 4),
        decoder: build_attention_mask(None, query_length=3, causal=True),
        cross: build_attention_mask(padding, query_length=3)[0, 0].expand(3, 4),
    }
    for ax, mask in expected.items():
        assert torch.equal(torch.as_tensor(ax.images[0].get_array()).bool(), mask)
    assert [label.get_text() for label in cross.get_xticklabels()] == source
    assert [label.get_text() for label in cross.get_yticklabels()] == target
    assert cross.get_xlabel() == "source token (key)" and decoder.get_ylabel() == "target token (query)"
    assert "6 of 9 pairs" in decoder.get_title() and "9 of 12 pairs" in cross.get_title()
    # Without padding every source key is read.
    unpadded = plot_information_flow(source[:3], target)
    assert unpadded.axes[2].images[0].get_array().all()


def test_the_information_flow_names_a_wrong_argument():
    with pytest.raises(TypeError, match="source_tokens"):
        plot_information_flow("the cat", ["<s>"])
    with pytest.raises(ValueError, match="source_mask"):
        plot_information_flow(["a", "b"], ["<s>"], source_mask=[1])
    with pytest.raises(ValueError, match="source_mask"):
        plot_information_flow(["a", "b"], ["<s>"], source_mask=[0, 0])


def test_the_buckets_are_the_bucket_functions_and_each_distance_is_counted_once():
    figure = plot_relative_position_buckets(num_buckets=8, max_distance=16, span=20)
    left, right = figure.axes
    encoder, decoder = left.get_lines()[:2]
    positions = torch.arange(-20, 21)
    assert encoder.get_ydata().tolist() == relative_position_bucket(positions, True, 8, 16).tolist()
    assert decoder.get_xdata().tolist() == list(range(-20, 1))
    assert decoder.get_ydata().tolist() == relative_position_bucket(positions[:21], False, 8, 16).tolist()
    encoder_bars, decoder_bars = right.containers
    assert len(encoder_bars) == 4 and len(decoder_bars) == 8  # half the buckets on each side, or all of them
    assert sum(bar.get_height() for bar in encoder_bars) == sum(bar.get_height() for bar in decoder_bars) == 16
    assert left.get_xlabel() == "key position - query position (j - i)" and left.get_ylabel() == "bucket"


def test_the_buckets_name_a_wrong_argument():
    with pytest.raises(ValueError, match="num_buckets"):
        plot_relative_position_buckets(num_buckets=7)
    with pytest.raises(ValueError, match="max_distance"):
        plot_relative_position_buckets(num_buckets=32, max_distance=16)
    with pytest.raises(TypeError, match="span"):
        plot_relative_position_buckets(span=2.5)


def _row(ax, row: int) -> list[str]:
    """The tokens written in one row of a panel, left to right."""
    cells = [text for text in ax.texts if text.get_position()[1] == row]
    return [text.get_text() for text in sorted(cells, key=lambda text: text.get_position()[0])]


def test_the_denoising_rows_are_what_the_pretraining_functions_return_under_the_seed():
    words = "a b c d e f g h i j".split()
    figure = plot_denoising_objectives(words, seed=5, t5={"noise_density": 0.3, "mean_noise_span_length": 1.5})
    bart, t5 = figure.axes[:2]
    ids = torch.arange(10, 20)  # the words' ids in the figure: 10, 11, ... in order of appearance
    t5_inputs, t5_targets = span_corruption(
        ids, 119, 0.3, 1.5, num_sentinels=100, generator=torch.Generator().manual_seed(5)
    )
    bart_inputs, _ = text_infilling(ids, 3, generator=torch.Generator().manual_seed(5))
    letters = dict(zip(range(10, 20), words, strict=True)) | {119: "<X>", 118: "<Y>", 117: "<Z>", 3: "<mask>"}
    assert _row(bart, 0) == _row(bart, 2) == _row(t5, 0) == words  # BART's decoder writes the whole text
    assert _row(bart, 1) == [letters[token] for token in bart_inputs.tolist()]
    assert _row(t5, 1) == [letters[token] for token in t5_inputs.tolist()]
    assert _row(t5, 2) == [letters[token] for token in t5_targets.tolist()]
    assert f"{len(t5_targets)} tokens" in t5.get_title() and "10 tokens of 10" in bart.get_title()
    assert [label.get_text() for label in t5.get_yticklabels()] == ["text", "encoder reads", "decoder writes"]


def test_the_denoising_figure_names_a_wrong_argument():
    with pytest.raises(TypeError, match="words"):
        plot_denoising_objectives("a b c")
    with pytest.raises(ValueError, match="words"):
        plot_denoising_objectives(["a"])
    with pytest.raises(TypeError, match="seed"):
        plot_denoising_objectives(["a", "b"], seed=1.0)


def test_the_denoising_figure_refuses_a_bad_mapping_of_rates():
    with pytest.raises(TypeError, match="t5 must be a mapping"):
        plot_denoising_objectives(["a", "b"], t5=[("noise_density", 0.3)])
    with pytest.raises(ValueError, match="bart may set only mask_ratio, poisson_lambda; got 'noise_density'"):
        plot_denoising_objectives(["a", "b"], bart={"noise_density": 0.3})
    with pytest.raises(ValueError, match="t5 may set only .* got 'num_sentinels'"):
        plot_denoising_objectives(["a", "b"], t5={"num_sentinels": 3})
    with pytest.raises(TypeError, match=r"bart\['mask_ratio'\] must be a number"):
        plot_denoising_objectives(["a", "b"], bart={"mask_ratio": "0.3"})
    with pytest.raises(ValueError, match="noise_density must be in"):
        plot_denoising_objectives(["a", "b"], t5={"noise_density": 1.5})


def test_the_denoising_figure_uses_the_functions_defaults_unless_told_otherwise():
    words = [chr(ord("a") + index) for index in range(20)]
    ids = torch.arange(10, 30)
    names = dict(zip(range(10, 30), words, strict=True)) | {129: "<X>", 128: "<Y>", 127: "<Z>", 3: "<mask>"}
    bart, t5 = plot_denoising_objectives(words, seed=2, bart={"mask_ratio": 0.5, "poisson_lambda": 1.0}).axes[:2]
    t5_inputs, _ = span_corruption(ids, 129, generator=torch.Generator().manual_seed(2))
    bart_inputs, _ = text_infilling(ids, 3, 0.5, 1.0, generator=torch.Generator().manual_seed(2))
    assert _row(t5, 1) == [names[token] for token in t5_inputs.tolist()]
    assert _row(bart, 1) == [names[token] for token in bart_inputs.tolist()]
