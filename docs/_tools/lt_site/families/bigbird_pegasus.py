"""BigBird-Pegasus on the site: its running example (the annotated source's values) and its proof (the badge)."""

from __future__ import annotations

import torch
from transformers import BigBirdPegasusConfig

from literate_transformer.core.records import record
from literate_transformer.models.bigbird_pegasus import BigBirdPegasusForConditionalGeneration

from ..base import BOOK_DIMS, Proof, RunningExample, hf_and_ours, max_diff

#: Its record: blocks of Z = 5 tokens, r = 2 random blocks: a middle block reads G = 5 + 2 = 7 blocks;
#: block-sparse from (5 + 2 * 2) * 5 + 1 = 46 tokens on (a source of 48 is padded to N = 10 blocks, M = 8 of
#: them in the middle).
BIGBIRD = record("bigbird_pegasus")
SIZES = dict(BIGBIRD.sizes)
SOURCE_LENGTH = BIGBIRD.training["length"]


def _bigbird_on_two_long_sources() -> None:
    torch.manual_seed(0)
    bigbird = BigBirdPegasusForConditionalGeneration(BigBirdPegasusConfig(**SIZES)).eval()
    source = torch.randint(3, SIZES["vocab_size"], (2, SOURCE_LENGTH))
    source_mask = torch.ones(2, SOURCE_LENGTH, dtype=torch.long)
    source_mask[1, -6:] = 0
    target = torch.randint(3, SIZES["vocab_size"], (2, 5))
    bigbird(source, source_mask, target, output_attentions=True)
    bigbird.generate(source, source_mask, max_new_tokens=3)


EXAMPLES = (
    RunningExample(
        "bigbird_pegasus",
        f"a small random BigBird-Pegasus with the book example's sizes, blocks of 5 tokens and 2 random blocks: "
        f"2 sources of {SOURCE_LENGTH} tokens (the second padded by 6) read block-sparse, targets of 5, "
        "then greedy decoding",
        dict(BOOK_DIMS, N=10, M=8, G=7, Z=5),
        _bigbird_on_two_long_sources,
    ),
)


@torch.no_grad()
def _bigbird_pegasus() -> float:
    special = dict(BIGBIRD.ids)
    hf, ours = hf_and_ours("BigBirdPegasusConfig", "BigBirdPegasusForConditionalGeneration", SIZES, **special)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(3, SIZES["vocab_size"], (2, SOURCE_LENGTH), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, -6:] = 0
    ids = ids.masked_fill(mask == 0, 0)
    target = ids[:, :5]
    assert ours.encoder.uses_block_sparse(SOURCE_LENGTH)
    logits = ours(ids, mask, target).logits
    return max_diff(logits, hf(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits)


PROOFS = (
    Proof(
        "models.bigbird_pegasus.BigBirdPegasusForConditionalGeneration",
        "transformers BigBirdPegasusForConditionalGeneration (block_sparse)",
        "tests/models/test_bigbird_pegasus.py::test_block_sparse_logits_and_encoder_output_equal_hf_in_evaluation",
        _bigbird_pegasus,
        example="bigbird_pegasus",
    ),
)
