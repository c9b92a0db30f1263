"""CTRL on the site: its running example and its proof (the badge)."""

from __future__ import annotations

from transformers import CTRLConfig

from literate_transformer.models.ctrl import CTRLLMHeadModel

from ..base import BOOK_EXAMPLE_SIZES
from .decoder_branch import SIZES, decoder_family

#: The book example's sizes, CTRL's feed-forward width named dff.
CTRL_SIZES = dict(SIZES, dff=BOOK_EXAMPLE_SIZES["intermediate_size"])

EXAMPLES, PROOFS = decoder_family(CTRLLMHeadModel, CTRLConfig, CTRL_SIZES, "a small random CTRL")
