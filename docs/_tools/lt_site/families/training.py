"""Training on the site: the running example of the package's training loops.

Not a model family: :mod:`literate_transformer.pretraining.causal_lm` pretrains a causal language model and
:mod:`literate_transformer.fine_tuning` fine-tunes an encoder with a classification head.  Their example runs
each loop for two steps on the book example's sizes, so that the annotated source shows the shapes their lines
computed; what the loops learn is the chapters' business (19 and 20).
"""

from __future__ import annotations

import torch
import transformers

from literate_transformer import fine_tuning
from literate_transformer.models.bert import BertModel
from literate_transformer.models.llama import LlamaForCausalLM
from literate_transformer.pretraining.causal_lm import train

from ..base import BOOK_DIMS, RunningExample

__all__ = ["EXAMPLES", "PROOFS"]

#: Its sizes: the book example's, two rows a batch, five tokens a row, three labels.
DIMS = {**BOOK_DIMS, "B": 2, "T": 5, "C": 3}


def _two_steps_of_each_loop() -> None:
    sizes = dict(hidden_size=24, num_attention_heads=4, num_hidden_layers=2, intermediate_size=40, vocab_size=50)
    torch.manual_seed(0)
    # Pretraining: a small Llama on a stream of random token ids, batches of B windows of T tokens.
    llama = LlamaForCausalLM(transformers.LlamaConfig(**sizes, num_key_value_heads=2))
    train(llama, torch.randint(50, (200,)), steps=2, batch_size=DIMS["B"], sequence_length=DIMS["T"])
    # Fine-tuning: a small random BERT with a head of C labels, four examples and two held out.
    encoder = BertModel(transformers.BertConfig(**sizes, max_position_embeddings=16))
    model = fine_tuning.SentenceClassifier(encoder, num_labels=DIMS["C"])
    ids = torch.randint(3, 50, (6, DIMS["T"]))
    inputs = {"input_ids": ids[:4], "attention_mask": torch.ones(4, DIMS["T"], dtype=torch.long)}
    held_out = {"input_ids": ids[4:], "attention_mask": torch.ones(2, DIMS["T"], dtype=torch.long)}
    fine_tuning.fine_tune(
        model, inputs, [0, 1, 2, 0], steps=2, learning_rate=1e-3, batch_size=DIMS["B"], held_out=(held_out, [1, 2])
    )


EXAMPLES = (
    RunningExample(
        "training",
        "two steps of each training loop on the book example's sizes: a small random Llama pretrained on random "
        "token ids (2 windows of 5 tokens a batch), and a small random BERT with a head of 3 labels fine-tuned on "
        "4 examples of 5 tokens, 2 held out",
        DIMS,
        _two_steps_of_each_loop,
    ),
)

PROOFS = ()
