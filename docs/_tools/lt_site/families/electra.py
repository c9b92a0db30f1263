"""ELECTRA on the site: its running example and its proofs (the badges)."""

from __future__ import annotations

import torch
from transformers import ElectraConfig

from literate_transformer.core.records import record
from literate_transformer.models.electra import ElectraForPreTraining

from ..base import Proof, RunningExample, hf_and_ours, max_diff
from ._encoder_branch import ENCODER_DIMS, example, padded_batch, proof

#: The book example's sizes with a narrower embedding (W = 10) projected to the hidden width (its record's).
SIZES = dict(record("electra").sizes)


@torch.no_grad()
def _discriminator() -> float:
    hf, ours = hf_and_ours("ElectraConfig", "ElectraForPreTraining", SIZES)
    ids, mask = padded_batch()
    real = mask.bool()
    return max_diff(ours(ids, mask).logits, hf(input_ids=ids, attention_mask=mask).logits, real)


EXAMPLES = (
    RunningExample(
        "electra",
        "a small random ELECTRA discriminator with the book example's sizes and 10-wide embeddings: "
        "2 sequences of 7 tokens, the second padded by 2",
        ENCODER_DIMS,
        example(lambda: ElectraForPreTraining(ElectraConfig(**SIZES)), labels=torch.zeros(2, 7, dtype=torch.long)),
    ),
)

PROOFS = (
    Proof(
        "models.electra.ElectraModel",
        "transformers ElectraModel",
        "tests/models/test_electra.py::test_the_encoder_equals_hf_on_a_padded_batch",
        proof("ElectraConfig", "ElectraModel", SIZES),
        example="electra",
    ),
    Proof(
        "models.electra.ElectraForPreTraining",
        "transformers ElectraForPreTraining",
        "tests/models/test_electra.py::test_replaced_token_detection_logits_and_loss_equal_hf",
        _discriminator,
        example="electra",
    ),
)
