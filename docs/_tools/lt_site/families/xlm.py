"""XLM on the site: its running example and its proof (the badge)."""

from __future__ import annotations

import torch
from transformers import XLMConfig

from literate_transformer.models.xlm import XLMModel

from ..base import BOOK_DIMS, BOOK_EXAMPLE_SIZES, Proof, RunningExample, config_sizes
from ._encoder_branch import ENCODER_DIMS, example, padded_batch, proof

#: The book example's sizes under XLM's names (emb_dim, n_heads, n_layers), with two languages (XLM's
#: feed-forward width is 4E).
SIZES = config_sizes("xlm", BOOK_DIMS, max_position_embeddings=BOOK_EXAMPLE_SIZES["max_position_embeddings"], n_langs=2)
#: The first sequence in language 0, the second in language 1.
LANGS = torch.tensor([[0] * 7, [1] * 7])


def _xlm_on_two_sequences() -> None:
    example(lambda: XLMModel(XLMConfig(**SIZES)), langs=LANGS)()
    # Without a mask: XLM counts the padding ids to find each row's length.
    torch.manual_seed(0)
    ids, _ = padded_batch(pad_token_id=XLMConfig(**SIZES).pad_index)
    XLMModel(XLMConfig(**SIZES)).eval()(ids, langs=LANGS)


EXAMPLES = (
    RunningExample(
        "xlm",
        "a small random XLM with the book example's sizes and two languages: 2 sequences of 7 tokens in "
        "languages 0 and 1, the second padded by 2 (with a mask, then without one)",
        dict(ENCODER_DIMS, F=4 * ENCODER_DIMS["E"]),
        _xlm_on_two_sequences,
    ),
)

PROOFS = (
    Proof(
        "models.xlm.XLMModel",
        "transformers XLMModel",
        "tests/models/test_xlm.py::test_hidden_states_and_attentions_equal_hf_with_languages_on_a_padded_batch",
        proof("XLMConfig", "XLMModel", SIZES, pad_token_id=2, langs=LANGS),
        example="xlm",
    ),
)
