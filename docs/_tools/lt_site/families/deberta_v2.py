"""DeBERTa v2/v3 on the site: its running example and its proof (the badge)."""

from __future__ import annotations

from transformers import DebertaV2Config

from literate_transformer.core.records import record
from literate_transformer.models.deberta_v2 import DebertaV2Model

from ..base import Proof, RunningExample
from ._encoder_branch import ENCODER_DIMS, example, proof

#: The book example's sizes with DeBERTa-v3's options (its record's): both position terms, log buckets (A = 8
#: rows: 4 a side, fewer than the 7 tokens, so that the far distances share buckets), shared position keys, no
#: absolute positions.
SIZES = dict(record("deberta_v2").sizes)


def _deberta_on_two_sequences() -> None:
    # With the position projections shared with the tokens' (v3), and with their own (v2's default).
    for share_att_key in (True, False):
        config = DebertaV2Config(**dict(SIZES, share_att_key=share_att_key))
        example(lambda config=config: DebertaV2Model(config))()


EXAMPLES = (
    RunningExample(
        "deberta_v2",
        "a small random DeBERTa-v3-style model with the book example's sizes: 2 sequences of 7 tokens, "
        "the second padded by 2; with the position keys shared, then with their own projections",
        ENCODER_DIMS,
        _deberta_on_two_sequences,
    ),
)

PROOFS = (
    Proof(
        "models.deberta_v2.DebertaV2Model",
        "transformers DebertaV2Model",
        "tests/models/test_deberta_v2.py::test_hidden_states_and_attentions_equal_hf_on_a_padded_batch",
        proof("DebertaV2Config", "DebertaV2Model", SIZES),
        example="deberta_v2",
    ),
)
