"""The classification head: one score per label, read from the [CLS] position."""

from __future__ import annotations

import pytest
import torch

from literate_transformer.book.classification import TransformerForSequenceClassification
from literate_transformer.core.outputs import ModelOutput

ATOL = 1e-5
B, T, E, V, C = 2, 5, 24, 50, 3
ATTENTION_MASK = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def test_classifier_logits_have_one_score_per_label(tiny_config):
    model = TransformerForSequenceClassification(tiny_config()).eval()
    assert model(torch.randint(1, V, (B, T)), ATTENTION_MASK).shape == (B, C)


def test_classifier_reads_position_zero(tiny_config, randomize):
    model = randomize(TransformerForSequenceClassification(tiny_config()))
    hidden = torch.randn(B, T, E)
    # Replace the encoder's output with known vectors: only position 0 may reach the logits.
    model.encoder.register_forward_hook(lambda module, args, output: ModelOutput(hidden))
    expected = model.classifier(hidden[:, 0])
    assert max_diff(model(torch.randint(1, V, (B, T))), expected) <= ATOL
    hidden[:, 1:] = torch.randn(B, T - 1, E)
    assert max_diff(model(torch.randint(1, V, (B, T))), expected) <= ATOL


def test_classifier_dropout_defaults_to_hidden_dropout_and_follows_classifier_dropout(tiny_config):
    assert TransformerForSequenceClassification(tiny_config(hidden_dropout_prob=0.2)).dropout.p == 0.2
    assert TransformerForSequenceClassification(tiny_config(classifier_dropout=0.4)).dropout.p == 0.4


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
def test_classifier_runs_on_the_inputs_device(device, tiny_config):
    model = TransformerForSequenceClassification(tiny_config()).eval()
    input_ids = torch.randint(1, V, (B, T))
    expected = model(input_ids, ATTENTION_MASK)
    logits = model.to(device)(input_ids.to(device), ATTENTION_MASK.to(device))
    assert logits.device.type == device
    assert max_diff(logits.cpu(), expected) <= 1e-4


def test_classifier_input_starts_with_cls_token(tokenizer, tiny_config):
    encoded = tokenizer(["time flies like an arrow", "fruit flies like a banana"], padding=True, return_tensors="pt")
    # Position 0 is [CLS] only when the tokenizer adds special tokens (its default).
    assert (encoded["input_ids"][:, 0] == tokenizer.cls_token_id).all()
    unspecial = tokenizer("time flies like an arrow", add_special_tokens=False, return_tensors="pt")
    assert unspecial["input_ids"][0, 0] != tokenizer.cls_token_id
    model = TransformerForSequenceClassification(tiny_config(vocab_size=tokenizer.vocab_size)).eval()
    logits = model(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    assert logits.shape == (2, C) and torch.isfinite(logits).all()
