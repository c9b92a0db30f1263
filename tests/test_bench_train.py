"""The training benchmark: both models take the same steps from the same weights, and its verdict reads the worst shape."""

from __future__ import annotations

import bench_train as bench
import pytest


def test_both_models_train_the_same_from_the_same_weights_and_the_ratio_is_ours_over_theirs():
    config = bench.llama_config(layers=1, width=32, heads=2, vocab_size=40, positions=16)
    models = bench.build_models(config, "cpu")
    assert models["ours"].training and models["transformers"].training
    shape = bench.time_shape(models, batch_size=2, length=8, device="cpu", warmup=1, repeats=2)
    # The first step is taken from one set of weights on one batch: one loss (float32, as every family's).
    assert shape["first_loss_difference"] <= 1e-5 and shape["last_loss_difference"] <= 1e-4
    # Three steps of one batch: the loss went down on both sides.
    assert shape["last_loss"]["ours"] < shape["first_loss"]["ours"]
    ours, theirs = shape["paths"]["ours"], shape["paths"]["transformers"]
    assert ours["vs_transformers"] == pytest.approx(ours["tokens_per_s"] / theirs["tokens_per_s"])
    assert ours["tokens_per_s"] == pytest.approx(2 * 8 / ours["median_s"])


def _shape(ratio: float) -> dict:
    return {"paths": {"ours": {"vs_transformers": ratio}, "transformers": {"vs_transformers": 1.0}}}


def test_the_target_reads_the_worst_shape():
    (target,) = bench.evaluate_targets([_shape(1.08), _shape(0.97)])
    assert target["measured"] == pytest.approx(0.97) and not target["met"]
    (target,) = bench.evaluate_targets([_shape(1.08), _shape(1.01)])
    assert target["met"]


def test_the_feed_forward_is_eight_thirds_of_the_width_in_multiples_of_64():
    assert bench.llama_config(4, 256, 4, 4096, 128).intermediate_size == 704
    assert bench.llama_config(4, 576, 9, 4096, 128).intermediate_size == 1536
