"""XLM on the site: its running example and its proof (the badge)."""

from __future__ import annotations

import torch
from transformers import XLMConfig

from literate_transformer.core.records import record
from literate_transformer.models.xlm import XLMModel

from ..base import Proof, RunningExample
from ._encoder_branch import ENCODER_DIMS, example, padded_batch, proof

#: XLM's record: the book example's sizes under XLM's names (emb_dim, n_heads, n_layers), with two languages
#: (XLM's feed-forward width is 4E).
XLM = record("xlm")
SIZES = dict(XLM.sizes)
#: Each sequence in its record's language: the first in language 0, the second in language 1.
LANGS = torch.tensor([[language] * 7 for language in XLM.training["languages"]])


def _xlm_on_two_sequences() -> None:
    example(lambda: XLMModel(XLMConfig(**SIZES)), langs=LANGS)()
    # Without a mask: XLM counts the padding ids to find each row's length.
    torch.manual_seed(0)
    ids, _ = padded_batch(pad_token_id=XLMConfig(**SIZES).pad_index)
    XLMModel(XLMConfig(**SIZES)).eval()(ids, langs=LANGS)


EXAMPLES = (
    RunningExample(
        "xlm",
        f"{XLM.example}: 2 sequences of 7 tokens in languages 0 and 1, the second padded by 2 (with a mask, "
        "then without one)",
        dict(ENCODER_DIMS, **XLM.dims),
        _xlm_on_two_sequences,
    ),
)

PROOFS = (
    Proof(
        "models.xlm.XLMModel",
        "transformers XLMModel",
        XLM.proof["test"],
        proof("XLMConfig", "XLMModel", SIZES, pad_token_id=XLM.ids["pad_index"], langs=LANGS),
        example="xlm",
    ),
)
