"""ALBERT on the site: its running example and its proof (the badge)."""

from __future__ import annotations

from transformers import AlbertConfig

from literate_transformer.models.albert import AlbertModel

from ..base import Proof, RunningExample
from ._encoder_branch import BERT_SIZES, ENCODER_DIMS, example, proof

#: The book example's sizes with a narrower embedding (W = 10), one group of weights shared by both layers.
SIZES = dict(BERT_SIZES, embedding_size=ENCODER_DIMS["W"], num_hidden_groups=1)

EXAMPLES = (
    RunningExample(
        "albert",
        "a small random ALBERT with the book example's sizes and 10-wide embeddings, one layer's weights used "
        "twice: 2 sequences of 7 tokens, the second padded by 2",
        ENCODER_DIMS,
        example(lambda: AlbertModel(AlbertConfig(**SIZES))),
    ),
)

PROOFS = (
    Proof(
        "models.albert.AlbertModel",
        "transformers AlbertModel",
        "tests/models/test_albert.py::test_last_hidden_state_pooler_and_attentions_equal_hf_on_a_padded_batch",
        proof("AlbertConfig", "AlbertModel", SIZES),
        example="albert",
    ),
)
