"""RoBERTa and XLM-RoBERTa on the site: their running examples and their proofs (the badges)."""

from __future__ import annotations

from transformers import RobertaConfig, XLMRobertaConfig

from literate_transformer.models.roberta import RobertaModel
from literate_transformer.models.xlm_roberta import XLMRobertaModel

from ..base import Proof, RunningExample
from ._encoder_branch import BERT_SIZES, ENCODER_DIMS, example, proof

#: The book example's sizes, one token type and the padding id of RoBERTa's checkpoints (positions start after it).
SIZES = dict(BERT_SIZES, type_vocab_size=1, max_position_embeddings=BERT_SIZES["max_position_embeddings"] + 2)
TEST = "tests/models/test_roberta.py::test_hidden_states_pooler_and_attentions_equal_hf_on_a_padded_batch"

EXAMPLES = (
    RunningExample(
        "roberta",
        "a small random RoBERTa with the book example's sizes: 2 sequences of 7 tokens, the second padded by 2 "
        "with pad_token_id 1 (its positions are counted from the ids)",
        ENCODER_DIMS,
        example(lambda: RobertaModel(RobertaConfig(**SIZES, pad_token_id=1)), pad_token_id=1),
    ),
    # The same model under XLM-R's name: its page read top to bottom is RoBERTa's code, as XLM-R runs it.
    RunningExample(
        "xlm_roberta",
        "a small random XLM-RoBERTa (RoBERTa's model) with the book example's sizes: 2 sequences of 7 tokens, "
        "the second padded by 2 with pad_token_id 1",
        ENCODER_DIMS,
        example(lambda: XLMRobertaModel(XLMRobertaConfig(**SIZES, pad_token_id=1)), pad_token_id=1),
    ),
)

#: XLM-RoBERTa is RoBERTa's model under another name (its checkpoints differ in their vocabulary): both are
#: proved on the one example, each against the transformers class of its name.
PROOFS = tuple(
    Proof(
        f"models.{module}.{model}",
        f"transformers {model}",
        TEST,
        proof(config, model, SIZES, pad_token_id=1),
        example="roberta",
    )
    for module, model, config in (
        ("roberta", "RobertaModel", "RobertaConfig"),
        ("xlm_roberta", "XLMRobertaModel", "XLMRobertaConfig"),
    )
)
