"""The benchmark: its FLOP formula equals PyTorch's count, and its target verdicts read the right shapes."""

from __future__ import annotations

import bench_bert as bench
import pytest
import torch
from shapes import TINY_SIZES
from torch.utils.flop_counter import FlopCounterMode

from literate_transformer import TransformerConfig
from literate_transformer.models.bert import BertModel


@pytest.mark.parametrize(("batch_size", "seq_len"), [(1, 5), (3, 7)])
def test_flop_formula_equals_pytorchs_count_of_the_eager_forward(batch_size, seq_len):
    config = TransformerConfig(**TINY_SIZES)
    model = BertModel(config).eval()
    input_ids = torch.randint(0, config.vocab_size, (batch_size, seq_len))
    with FlopCounterMode(display=False) as counter, torch.inference_mode():
        model(input_ids)
    assert bench.bert_forward_flops(config, batch_size, seq_len) == counter.get_total_flops()


def _shape(batch_size, seq_len, ours_fast, hf_sdpa, ours_eager, hf_eager, flops):
    times = {"ours fast": ours_fast, "HF sdpa": hf_sdpa, "ours eager": ours_eager, "HF eager": hf_eager}
    return {
        "batch_size": batch_size,
        "seq_len": seq_len,
        "models": {name: {"median_s": t, "flops_per_s": flops / t} for name, t in times.items()},
    }


def test_targets_use_the_worst_shape_and_the_reference_shape():
    shapes = [
        _shape(1, 16, ours_fast=0.90, hf_sdpa=1.0, ours_eager=1.0, hf_eager=1.0, flops=1.0),
        _shape(8, 128, ours_fast=0.99, hf_sdpa=1.0, ours_eager=1.04, hf_eager=1.0, flops=90.0),
    ]
    fast, manual, fraction = bench.evaluate_targets(shapes, matmul_flops_per_s=100.0)
    assert fast["name"].startswith("ours fast time")
    assert fast["measured"] == pytest.approx(0.99) and not fast["met"]
    assert manual["measured"] == pytest.approx(1.04) and manual["met"]
    assert fraction["measured"] == pytest.approx(90.0 / 0.99 / 100.0) and fraction["met"]


def test_the_corpus_target_compares_lt_encode_with_sentence_transformers():
    shapes = [_shape(8, 128, ours_fast=0.9, hf_sdpa=1.0, ours_eager=1.0, hf_eager=1.0, flops=90.0)]
    corpus = {"runs": {"sentence-transformers": {"median_s": 10.0}, "lt.encode": {"median_s": 8.5}}}
    encode = bench.evaluate_targets(shapes, 100.0, corpus)[-1]
    assert encode["name"].startswith("lt.encode time")
    assert encode["measured"] == pytest.approx(0.85) and encode["met"]


def test_padding_counts_each_batch_at_its_longest():
    assert bench._padding([5, 1, 2, 2, 3], batch_size=2) == 2 * 5 + 2 * 2 + 1 * 3
