"""Shape scenario of fine-tuning: a classifier on a small BERT, forward from tokens and from sentence vectors, and
two steps of the loop with a held-out set, in batches of B examples."""

from __future__ import annotations

import torch

from literate_transformer.fine_tuning import SentenceClassifier, fine_tune
from literate_transformer.models.bert import BertModel

from . import DIMS, T, tiny_config, token_ids


def scenario_fine_tuning():
    classifier = SentenceClassifier(BertModel(tiny_config()), num_labels=DIMS["C"])
    inputs = {"input_ids": token_ids(), "attention_mask": torch.ones(DIMS["B"], T, dtype=torch.long)}
    classifier(sentence_vectors=classifier.encode(**inputs))
    labels = list(range(DIMS["B"]))
    fine_tune(classifier, inputs, labels, steps=2, batch_size=DIMS["B"], learning_rate=1e-3, held_out=(inputs, labels))
