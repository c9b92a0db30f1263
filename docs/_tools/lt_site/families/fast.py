"""Chapter 16 on the site: the running examples of the fast modules and their proofs (the badges).

Not a model family: the fast path of BERT, FlashAttention's online softmax
and the tensor-parallel layers, each run on the book example's sizes so that
the annotated source shows what every line computed.
"""

from __future__ import annotations

import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F

from literate_transformer.core.config import TransformerConfig
from literate_transformer.core.masks import build_attention_mask
from literate_transformer.fast.bert import FastBertModel, PackedBatch, Workspace
from literate_transformer.fast.flash import flash_attention
from literate_transformer.fast.parallel import split_bert_layer
from literate_transformer.models.bert import BertModel

from ..base import BOOK_DIMS, BOOK_EXAMPLE_SIZES, Proof, RunningExample, max_diff

#: Two sentences of 5 and 3 real tokens: U = 8 packed tokens, padded to T = 5 for attention.
LENGTHS = (5, 3)


def _bert() -> BertModel:
    torch.manual_seed(0)
    config = TransformerConfig(**BOOK_EXAMPLE_SIZES, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertModel(config).eval()


def _inputs(bert: BertModel) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(3, bert.config.vocab_size, (len(LENGTHS), max(LENGTHS)), generator=generator)
    mask = (torch.arange(max(LENGTHS))[None, :] < torch.tensor(LENGTHS)[:, None]).long()
    return input_ids, mask


def _attention_inputs() -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    sizes = BOOK_DIMS
    query = torch.randn(sizes["B"], sizes["H"], sizes["T"], sizes["D"], generator=generator)
    key, value = torch.randn(2, sizes["B"], sizes["H"], sizes["S"], sizes["D"], generator=generator).unbind(0)
    padding = torch.ones(sizes["B"], sizes["S"], dtype=torch.long)
    padding[1, -2:] = 0
    mask = build_attention_mask(padding, query_length=sizes["T"])
    return query, key, value, mask


def _fast_on_two_sentences() -> None:
    bert = _bert()
    input_ids, _ = _inputs(bert)
    fast = FastBertModel.from_bert(bert)
    fast(input_ids, lengths=list(LENGTHS))
    # The first layer again with its addmm steps over a workspace (what runs where oneDNN does not).
    layer, batch = fast.layer[0], PackedBatch(LENGTHS)
    packed = torch.randn(batch.num_tokens, bert.config.hidden_size, generator=torch.Generator().manual_seed(1))
    layer(packed, batch.index, batch.key_mask, (batch.batch_size, batch.max_length), Workspace.for_layer(packed, layer))
    # Tiles of 3 keys over the book example's 7, the second sequence's last 2 keys masked.
    flash_attention(*_attention_inputs(), block_size=3)
    # The split layers, in a process group of one (chapter 16 runs two processes).
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group("gloo", init_method=f"file://{os.path.join(folder, 'store')}", rank=0, world_size=1)
        try:
            split_bert_layer(0, 1, bert.encoder.layer[0], torch.randn(2, 5, bert.config.hidden_size))
        finally:
            dist.destroy_process_group()


EXAMPLES = (
    RunningExample(
        "fast",
        "a small random BERT with the book example's sizes: 2 sentences of 5 and 3 real tokens (U = 8), its "
        "first layer again over a workspace, FlashAttention's tiles of 3 over 7 keys, and a layer split in a "
        "process group of one",
        dict(BOOK_DIMS, U=sum(LENGTHS)),
        _fast_on_two_sentences,
    ),
)


@torch.no_grad()
def _fast_bert() -> float:
    bert = _bert()
    input_ids, mask = _inputs(bert)
    ours = FastBertModel.from_bert(bert)(input_ids, lengths=list(LENGTHS))
    return max_diff(ours, bert(input_ids, attention_mask=mask).last_hidden_state, mask.bool())


@torch.no_grad()
def _flash() -> float:
    query, key, value, mask = _attention_inputs()
    return max_diff(
        flash_attention(query, key, value, mask, block_size=3),
        F.scaled_dot_product_attention(query, key, value, attn_mask=mask),
    )


PROOFS = (
    Proof(
        "fast.bert.FastBertModel",
        "literate_transformer BertModel",
        "tests/fast/test_fast_bert.py::test_fast_bert_equals_the_checkpoints_bert_on_the_real_tokens",
        _fast_bert,
        example="fast",
    ),
    Proof(
        "fast.flash.flash_attention",
        "torch scaled_dot_product_attention",
        "tests/fast/test_flash.py::test_a_padding_mask_and_a_causal_mask_are_applied_as_pytorch_applies_them",
        _flash,
        example="fast",
    ),
)
