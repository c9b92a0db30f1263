"""GPT-3 on the site: its running example (beam search) and its proof: GPT-2's logits with a band as wide as the context."""

from __future__ import annotations

import torch

from literate_transformer.core.records import record
from literate_transformer.models.gpt3 import GPT3Config, GPT3LMHeadModel

from ..base import Proof, book_example, hf_and_ours, max_diff
from .decoder_branch import decoder_example

#: GPT-3's record: the book example's sizes, GPT-2's names, a band of 3 in its local layers.
GPT3 = record("gpt3")
#: Its sizes without the band (GPT-2's config takes none).
GPT3_SIZES = {name: value for name, value in GPT3.sizes.items() if name != "window_size"}

EXAMPLES = (
    decoder_example(
        "gpt3",
        GPT3.example,
        lambda: GPT3LMHeadModel(GPT3Config(**GPT3.sizes, **GPT3.ids)),
        dict(GPT3.dims),
        **GPT3.generate,
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
