"""Megatron's split: column- and row-parallel pieces sum to the whole layer.

Each piece is checked in one process (its partial products summed by hand,
as the all-reduce sums them); the split layers also run in a process group
of one.  Chapter 16 runs them in two processes joined by torch.distributed
(gloo) and asserts the equality in its build.
"""

from __future__ import annotations

import os
import tempfile

import pytest
import torch
import torch.distributed as dist

from literate_transformer.fast.parallel import (
    ColumnParallelLinear,
    RowParallelLinear,
    shard_attention,
    shard_feed_forward,
    split_bert_layer,
)
from literate_transformer.models.bert import BertModel

ATOL = 1e-5


def test_column_pieces_side_by_side_are_the_whole_output():
    linear = torch.nn.Linear(6, 8)
    x = torch.randn(3, 6)
    pieces = [ColumnParallelLinear(linear, slice(rank * 4, (rank + 1) * 4))(x) for rank in range(2)]
    torch.testing.assert_close(torch.cat(pieces, dim=-1), linear(x), atol=ATOL, rtol=0)


def test_row_pieces_partial_sums_plus_the_bias_once_are_the_whole_output():
    linear = torch.nn.Linear(8, 5)
    y = torch.randn(3, 8)
    pieces = [RowParallelLinear(linear, slice(rank * 4, (rank + 1) * 4)) for rank in range(2)]
    total = sum(piece.partial(y[:, rank * 4 : (rank + 1) * 4]) for rank, piece in enumerate(pieces))
    torch.testing.assert_close(total + pieces[0].bias, linear(y), atol=ATOL, rtol=0)


def test_a_layer_split_in_a_group_of_one_equals_the_layer(tiny_config):
    layer = BertModel(tiny_config()).eval().encoder.layer[0]
    hidden = torch.randn(2, 5, layer.attention.self.all_head_size)
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group("gloo", init_method=f"file://{os.path.join(folder, 'store')}", rank=0, world_size=1)
        try:
            attention_output, output = split_bert_layer(0, 1, layer, hidden)
        finally:
            dist.destroy_process_group()
    with torch.inference_mode():
        expected = layer(hidden).hidden_states
    torch.testing.assert_close(output, expected, atol=ATOL, rtol=0)


def test_a_split_that_does_not_divide_the_heads_or_units_is_refused(tiny_config):
    layer = BertModel(tiny_config()).encoder.layer[0]
    heads = layer.attention.self.num_attention_heads
    with pytest.raises(ValueError, match="world_size must be a positive int dividing the number of heads"):
        shard_attention(layer.attention, 0, heads + 1)
    with pytest.raises(ValueError, match="dividing the intermediate size"):
        shard_feed_forward(layer, 0, layer.intermediate.dense.out_features + 1)
