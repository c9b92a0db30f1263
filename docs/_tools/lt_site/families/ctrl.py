"""CTRL on the site: its running example and its proof (the badge)."""

from __future__ import annotations

from transformers import CTRLConfig

from literate_transformer.models.ctrl import CTRLLMHeadModel

from ..base import BOOK_EXAMPLE_SIZES, Proof
from .decoder_branch import SIZES, decoder_example, logits_difference

#: The book example's sizes, CTRL's feed-forward width named dff.
CTRL_SIZES = dict(SIZES, dff=BOOK_EXAMPLE_SIZES["intermediate_size"])

EXAMPLES = (
    decoder_example(
        "ctrl", "a small random CTRL", lambda: CTRLLMHeadModel(CTRLConfig(**CTRL_SIZES, eos_token_id=2)), {}
    ),
)

PROOFS = (
    Proof(
        "models.ctrl.CTRLLMHeadModel",
        "transformers CTRLLMHeadModel",
        "tests/models/test_ctrl.py::test_logits_equal_hfs_at_the_real_positions_of_a_right_padded_batch",
        lambda: logits_difference("CTRLConfig", "CTRLLMHeadModel", CTRL_SIZES),
        example="ctrl",
    ),
)
