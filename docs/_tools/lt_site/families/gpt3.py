"""GPT-3 on the site: its running example (beam search) and its proof: GPT-2's logits with a band as wide as the context."""

from __future__ import annotations

import torch

from literate_transformer.models.gpt3 import GPT3Config, GPT3LMHeadModel

from ..base import BOOK_EXAMPLE_SIZES, Proof, book_example, hf_and_ours, max_diff
from .decoder_branch import SIZES, decoder_example

GPT3_SIZES = dict(SIZES, n_inner=BOOK_EXAMPLE_SIZES["intermediate_size"])

EXAMPLES = (
    decoder_example(
        "gpt3",
        "a small random GPT-3 (a dense layer, then a band of 3)",
        lambda: GPT3LMHeadModel(GPT3Config(**GPT3_SIZES, window_size=3, eos_token_id=2)),
        {},
        num_beams=2,
    ),
)


@torch.no_grad()
def _gpt3_as_gpt2() -> float:
    hf, _ = hf_and_ours("GPT2Config", "GPT2LMHeadModel", GPT3_SIZES)
    gpt3 = GPT3LMHeadModel(GPT3Config(**GPT3_SIZES, window_size=GPT3_SIZES["max_position_embeddings"])).eval()
    gpt3.load_state_dict(hf.state_dict())
    ids = book_example()["source_ids"]
    mask = torch.ones_like(ids)
    mask[1, -2:] = 0
    return max_diff(gpt3(ids, attention_mask=mask).logits, hf(input_ids=ids, attention_mask=mask).logits, mask.bool())


PROOFS = (
    Proof(
        "models.gpt3.GPT3LMHeadModel",
        "transformers GPT2LMHeadModel (band as wide as the context)",
        "tests/models/test_gpt3.py::test_a_band_as_wide_as_the_context_makes_gpt3_equal_hfs_gpt2",
        _gpt3_as_gpt2,
        example="gpt3",
    ),
)
