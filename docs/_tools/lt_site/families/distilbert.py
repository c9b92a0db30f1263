"""DistilBERT on the site: its running example and its proof (the badge)."""

from __future__ import annotations

from transformers import DistilBertConfig

from literate_transformer.models.distilbert import DistilBertModel

from ..base import BOOK_DIMS, BOOK_EXAMPLE_SIZES, Proof, RunningExample, config_sizes
from ._encoder_branch import ENCODER_DIMS, example, proof

#: The book example's sizes under DistilBERT's names (dim, n_heads, n_layers, hidden_dim).
SIZES = config_sizes("distilbert", BOOK_DIMS, max_position_embeddings=BOOK_EXAMPLE_SIZES["max_position_embeddings"])

EXAMPLES = (
    RunningExample(
        "distilbert",
        "a small random DistilBERT with the book example's sizes: 2 sequences of 7 tokens, the second padded by 2",
        ENCODER_DIMS,
        example(lambda: DistilBertModel(DistilBertConfig(**SIZES))),
    ),
)

PROOFS = (
    Proof(
        "models.distilbert.DistilBertModel",
        "transformers DistilBertModel",
        "tests/models/test_distilbert.py::test_hidden_states_and_attentions_equal_hf_on_a_padded_batch",
        proof("DistilBertConfig", "DistilBertModel", SIZES),
        example="distilbert",
    ),
)
