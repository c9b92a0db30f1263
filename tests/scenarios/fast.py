"""Shape scenarios of chapter 16: the fast BERT on packed tokens, the online softmax, the split layers."""

from __future__ import annotations

import os
import tempfile

import torch
import torch.distributed as dist

from literate_transformer.fast.bert import FastBertModel, PackedBatch, Workspace
from literate_transformer.fast.flash import flash_attention
from literate_transformer.fast.parallel import split_bert_layer
from literate_transformer.models.bert import BertModel

from . import DIMS, S, T, hidden, tiny_config, token_ids, with_dims


def scenario_fast_bert_packed():
    # Two sentences of 5 and 4 real tokens: U = 9 packed tokens, padded to T = 5 for attention.
    fast = FastBertModel.from_bert(BertModel(tiny_config()).eval())
    fast(token_ids(5), lengths=[5, 4])


@with_dims(U=DIMS["B"] * T)
def scenario_fast_bert_unpadded():
    # Every sentence T tokens long: the packed layout is the padded one, nothing to scatter.
    FastBertModel.from_bert(BertModel(tiny_config()).eval())(token_ids())


def scenario_fast_bert_layer_with_a_workspace():
    # The addmm steps that write over one workspace (where oneDNN's fused steps do not run), U = 9.
    layer = FastBertModel.from_bert(BertModel(tiny_config()).eval()).layer[0]
    batch = PackedBatch([5, 4])
    packed = torch.randn(batch.num_tokens, DIMS["E"])
    layer(packed, batch.index, batch.key_mask, (batch.batch_size, batch.max_length), Workspace.for_layer(packed, layer))


def scenario_flash_attention():
    query = torch.randn(DIMS["B"], DIMS["H"], T, DIMS["D"])
    key, value = torch.randn(2, DIMS["B"], DIMS["H"], S, DIMS["D"]).unbind(0)
    flash_attention(query, key, value, torch.rand(DIMS["B"], 1, T, S) > 0.3, block_size=2)


def scenario_tensor_parallel_layer():
    # One process is a group too: the split layers run with a world of one.
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group("gloo", init_method=f"file://{os.path.join(folder, 'store')}", rank=0, world_size=1)
        try:
            split_bert_layer(0, 1, BertModel(tiny_config()).encoder.layer[0], hidden())
        finally:
            dist.destroy_process_group()
