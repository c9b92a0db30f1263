"""CTRL on the site: its running example and its proof (the badge)."""

from __future__ import annotations

from transformers import CTRLConfig

from literate_transformer.models.ctrl import CTRLLMHeadModel

from ..base import BOOK_EXAMPLE_SIZES
from .decoder_branch import SIZES, decoder_example, logits_proof

#: The book example's sizes, CTRL's feed-forward width named dff.
CTRL_SIZES = dict(SIZES, dff=BOOK_EXAMPLE_SIZES["intermediate_size"])

EXAMPLES = (
    decoder_example(
        "ctrl", "a small random CTRL", lambda: CTRLLMHeadModel(CTRLConfig(**CTRL_SIZES, eos_token_id=2)), {}
    ),
)

PROOFS = (logits_proof("ctrl", "CTRLLMHeadModel", "CTRLConfig", CTRL_SIZES),)
