"""The encoder: pre-LN (the book) and post-LN (BERT) layers equal PyTorch's; the stack; the classifier.

Sizes: B=2, T=5, H=4, D=6, E=24, F=40, two layers.  fp32, max abs difference 1e-5.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from transformers.models.bert.modeling_bert import BertLayer

from literate_transformer.book.encoder import (
    EncoderOutput,
    TransformerEncoder,
    TransformerEncoderLayer,
    TransformerForSequenceClassification,
)
from literate_transformer.core.config import TransformerConfig
from literate_transformer.core.masks import padding_mask, to_additive

ATOL = 1e-5
B, T, H, D, E, F, V, C, L = 2, 5, 4, 6, 24, 40, 50, 3, 2
ATTENTION_MASK = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
REAL = ATTENTION_MASK.bool()


def make_config(**changes) -> TransformerConfig:
    fields = dict(
        vocab_size=V,
        hidden_size=E,
        num_attention_heads=H,
        intermediate_size=F,
        num_hidden_layers=L,
        max_position_embeddings=16,
        num_labels=C,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        layer_norm_eps=1e-6,
    )
    fields.update(changes)
    return TransformerConfig(**fields)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def randomize(module: nn.Module) -> nn.Module:
    """Random weights everywhere, layer norms included (their defaults 1 and 0 would hide a swap)."""
    with torch.no_grad():
        for param in module.parameters():
            param.normal_(0.0, 0.3)
    return module.eval()


def copy_into_torch_layer(ours: TransformerEncoderLayer, reference: nn.TransformerEncoderLayer) -> None:
    """Our names -> torch's: per-head q/k/v stacked into in_proj, linear_1/2 -> linear1/2, layer_norm_1/2 -> norm1/2."""
    attention = ours.attention
    with torch.no_grad():
        weights = [torch.cat([getattr(head, name).weight for head in attention.heads]) for name in "qkv"]
        biases = [torch.cat([getattr(head, name).bias for head in attention.heads]) for name in "qkv"]
        reference.self_attn.in_proj_weight.copy_(torch.cat(weights))
        reference.self_attn.in_proj_bias.copy_(torch.cat(biases))
        reference.self_attn.out_proj.load_state_dict(attention.output_linear.state_dict())
        reference.linear1.load_state_dict(ours.feed_forward.linear_1.state_dict())
        reference.linear2.load_state_dict(ours.feed_forward.linear_2.state_dict())
        reference.norm1.load_state_dict(ours.layer_norm_1.state_dict())
        reference.norm2.load_state_dict(ours.layer_norm_2.state_dict())


def torch_layer(config: TransformerConfig, norm_first: bool) -> nn.TransformerEncoderLayer:
    return nn.TransformerEncoderLayer(
        config.hidden_size,
        config.num_attention_heads,
        config.intermediate_size,
        dropout=0.0,
        activation="gelu",
        batch_first=True,
        norm_first=norm_first,
        layer_norm_eps=config.layer_norm_eps,
    )


NORMS = pytest.mark.parametrize("norm_first", [True, False], ids=["pre_ln", "post_ln"])


@NORMS
def test_encoder_layer_equals_torch_encoder_layer(norm_first):
    config = make_config()
    ours = randomize(TransformerEncoderLayer(config, norm_first=norm_first))
    reference = torch_layer(config, norm_first).eval()
    copy_into_torch_layer(ours, reference)
    hidden = torch.randn(B, T, E)
    assert max_diff(ours(hidden), reference(hidden)) <= ATOL


@NORMS
def test_encoder_layer_equals_torch_encoder_layer_with_padding_mask(norm_first):
    config = make_config()
    ours = randomize(TransformerEncoderLayer(config, norm_first=norm_first))
    reference = torch_layer(config, norm_first).eval()
    copy_into_torch_layer(ours, reference)
    hidden = torch.randn(B, T, E)
    expected = reference(hidden, src_key_padding_mask=~REAL)  # torch: True = ignore
    output = ours(hidden, mask=padding_mask(ATTENTION_MASK))
    assert max_diff(output[REAL], expected[REAL]) <= ATOL


def test_pre_ln_and_post_ln_layers_differ():
    config = make_config()
    pre = randomize(TransformerEncoderLayer(config, norm_first=True))
    post = TransformerEncoderLayer(config, norm_first=False).eval()
    post.load_state_dict(pre.state_dict())
    hidden = torch.randn(B, T, E)
    assert max_diff(pre(hidden), post(hidden)) > 1e-2


def test_post_ln_layer_equals_hf_bert_layer():
    # BERT is post-LN: our layer with norm_first=False computes HuggingFace's BertLayer.
    config = make_config()
    ours = randomize(TransformerEncoderLayer(config, norm_first=False))
    reference = BertLayer(config.to_hf()).eval()
    attention = ours.attention
    state = {
        "attention.output.dense.weight": attention.output_linear.weight,
        "attention.output.dense.bias": attention.output_linear.bias,
        "attention.output.LayerNorm.weight": ours.layer_norm_1.weight,
        "attention.output.LayerNorm.bias": ours.layer_norm_1.bias,
        "intermediate.dense.weight": ours.feed_forward.linear_1.weight,
        "intermediate.dense.bias": ours.feed_forward.linear_1.bias,
        "output.dense.weight": ours.feed_forward.linear_2.weight,
        "output.dense.bias": ours.feed_forward.linear_2.bias,
        "output.LayerNorm.weight": ours.layer_norm_2.weight,
        "output.LayerNorm.bias": ours.layer_norm_2.bias,
    }
    for hf_name, our_name in (("query", "q"), ("key", "k"), ("value", "v")):
        for leaf in ("weight", "bias"):
            state[f"attention.self.{hf_name}.{leaf}"] = torch.cat(
                [getattr(getattr(head, our_name), leaf) for head in attention.heads]
            )
    reference.load_state_dict(state, strict=True)
    hidden = torch.randn(B, T, E)
    mask = padding_mask(ATTENTION_MASK)
    expected = reference(hidden, attention_mask=to_additive(mask))
    assert max_diff(ours(hidden, mask=mask)[REAL], expected[REAL]) <= ATOL


@NORMS
def test_encoder_stack_equals_torch_transformer_encoder(norm_first):
    config = make_config()
    ours = randomize(TransformerEncoder(config, norm_first=norm_first))
    reference = nn.TransformerEncoder(torch_layer(config, norm_first), num_layers=L, enable_nested_tensor=False).eval()
    for our_layer, torch_layer_ in zip(ours.layers, reference.layers, strict=True):
        copy_into_torch_layer(our_layer, torch_layer_)
    input_ids = torch.randint(1, V, (B, T))
    embedded = ours.embeddings(input_ids)
    expected = reference(embedded, src_key_padding_mask=~REAL)
    output = ours(input_ids, ATTENTION_MASK)
    assert output.shape == (B, T, E)
    assert max_diff(output[REAL], expected[REAL]) <= ATOL


def test_encoder_has_num_hidden_layers_layers():
    assert len(TransformerEncoder(make_config(num_hidden_layers=3)).layers) == 3


def test_padding_does_not_change_the_real_tokens():
    encoder = randomize(TransformerEncoder(make_config()))
    input_ids = torch.randint(1, V, (1, 3))
    alone = encoder(input_ids)
    padded = torch.cat([input_ids, torch.zeros(1, 2, dtype=torch.long)], dim=1)
    output = encoder(padded, torch.tensor([[1, 1, 1, 0, 0]]))
    assert max_diff(output[:, :3], alone) <= ATOL


def test_encoder_returns_every_layers_weights_with_padding_masked():
    encoder = randomize(TransformerEncoder(make_config()))
    result = encoder(torch.randint(1, V, (B, T)), ATTENTION_MASK, return_weights=True)
    assert isinstance(result, EncoderOutput)
    assert len(result.attentions) == L
    assert all(weights.shape == (B, H, T, T) for weights in result.attentions)
    assert all(weights[1, :, :, 3:].abs().max().item() == 0.0 for weights in result.attentions)


def test_layer_dropout_uses_config_probability():
    layer = TransformerEncoderLayer(make_config(hidden_dropout_prob=0.25))
    assert layer.dropout.p == 0.25 and layer.feed_forward.dropout.p == 0.25


def test_norm_first_must_be_a_bool():
    with pytest.raises(TypeError, match=r"norm_first must be a bool"):
        TransformerEncoderLayer(make_config(), norm_first="pre")


def test_encoder_layer_refuses_hidden_state_of_wrong_width():
    with pytest.raises(ValueError, match=r"hidden_state must have shape \(\*, \*, 24\)"):
        TransformerEncoderLayer(make_config())(torch.randn(B, T, D))


def test_encoder_refuses_attention_mask_of_wrong_shape():
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(2, 5\)"):
        TransformerEncoder(make_config())(torch.randint(1, V, (B, T)), torch.ones(B, T + 1))


def test_encoder_refuses_attention_mask_with_values_other_than_zero_and_one():
    with pytest.raises(ValueError, match=r"attention_mask must hold only 0 and 1"):
        TransformerEncoder(make_config())(torch.randint(1, V, (B, T)), torch.full((B, T), 2))


def test_encoder_refuses_float_input_ids():
    with pytest.raises(TypeError, match=r"input_ids must have a int dtype"):
        TransformerEncoder(make_config())(torch.rand(B, T))


def test_encoder_refuses_token_type_ids_out_of_range():
    with pytest.raises(ValueError, match=r"token_type_ids must be in \[0, type_vocab_size=2\)"):
        TransformerEncoder(make_config())(torch.randint(1, V, (B, T)), token_type_ids=torch.full((B, T), 5))


# ---------------------------------------------------------------------------
# Classification head
# ---------------------------------------------------------------------------


def test_classifier_logits_have_one_score_per_label():
    model = TransformerForSequenceClassification(make_config()).eval()
    assert model(torch.randint(1, V, (B, T)), ATTENTION_MASK).shape == (B, C)


def test_classifier_reads_position_zero():
    model = randomize(TransformerForSequenceClassification(make_config()))
    hidden = torch.randn(B, T, E)
    # Replace the encoder's output with known vectors: only position 0 may reach the logits.
    model.encoder.register_forward_hook(lambda module, args, output: hidden)
    expected = model.classifier(hidden[:, 0])
    assert max_diff(model(torch.randint(1, V, (B, T))), expected) <= ATOL
    hidden[:, 1:] = torch.randn(B, T - 1, E)
    assert max_diff(model(torch.randint(1, V, (B, T))), expected) <= ATOL


def test_classifier_dropout_defaults_to_hidden_dropout_and_follows_classifier_dropout():
    assert TransformerForSequenceClassification(make_config(hidden_dropout_prob=0.2)).dropout.p == 0.2
    assert TransformerForSequenceClassification(make_config(classifier_dropout=0.4)).dropout.p == 0.4


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
def test_classifier_runs_on_the_inputs_device(device):
    model = TransformerForSequenceClassification(make_config()).eval()
    input_ids = torch.randint(1, V, (B, T))
    expected = model(input_ids, ATTENTION_MASK)
    logits = model.to(device)(input_ids.to(device), ATTENTION_MASK.to(device))
    assert logits.device.type == device
    assert max_diff(logits.cpu(), expected) <= 1e-4


def test_classifier_input_starts_with_cls_token(tokenizer):
    encoded = tokenizer(["time flies like an arrow", "fruit flies like a banana"], padding=True, return_tensors="pt")
    # Position 0 is [CLS] only when the tokenizer adds special tokens (its default).
    assert (encoded["input_ids"][:, 0] == tokenizer.cls_token_id).all()
    unspecial = tokenizer("time flies like an arrow", add_special_tokens=False, return_tensors="pt")
    assert unspecial["input_ids"][0, 0] != tokenizer.cls_token_id
    model = TransformerForSequenceClassification(make_config(vocab_size=tokenizer.vocab_size)).eval()
    logits = model(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    assert logits.shape == (2, C) and torch.isfinite(logits).all()
