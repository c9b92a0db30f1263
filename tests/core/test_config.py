"""TransformerConfig mirrors BertConfig and refuses impossible architectures."""

from __future__ import annotations

import dataclasses

import pytest
from shapes import BERT
from transformers import BertConfig

from literate_transformer.core.config import TransformerConfig, as_config


def test_field_names_are_bert_config_attributes():
    hf = BertConfig()
    ours = TransformerConfig()
    for field in dataclasses.fields(TransformerConfig):
        if field.name in ("extra", "attn_implementation", "num_labels"):
            continue
        assert hasattr(hf, field.name), field.name
        assert getattr(hf, field.name) == getattr(ours, field.name), field.name


def test_hidden_size_not_divisible_by_heads_names_both_numbers():
    with pytest.raises(ValueError, match=r"hidden_size \(100\).*num_attention_heads \(12\)"):
        TransformerConfig(hidden_size=100, num_attention_heads=12)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("vocab_size", 0, ValueError),
        ("num_hidden_layers", -1, ValueError),
        ("hidden_size", 7.0, TypeError),
        ("num_attention_heads", True, TypeError),
        ("hidden_dropout_prob", 1.0, ValueError),
        ("attention_probs_dropout_prob", -0.1, ValueError),
        ("layer_norm_eps", 0.0, ValueError),
        ("hidden_act", "sigmoid", ValueError),
        ("attn_implementation", "flash", ValueError),
        ("pad_token_id", 30522, ValueError),
    ],
)
def test_invalid_field_is_refused_by_name(field, value, error):
    with pytest.raises(error, match=field):
        TransformerConfig(**{field: value})


def test_replace_validates_again():
    config = TransformerConfig(hidden_size=64, num_attention_heads=4)
    with pytest.raises(ValueError, match="divisible"):
        config.replace(num_attention_heads=5)


def test_from_hf_round_trip_keeps_every_field():
    fields = BERT("3_heads_relu", pad_token_id=1)
    hf = BertConfig(**fields)
    ours = TransformerConfig.from_hf(hf)
    back = ours.to_hf()
    for field, value in fields.items():
        # Every field differs from its default in this row, so a field that is not carried over shows.
        assert value != getattr(TransformerConfig(), field)
        assert getattr(ours, field) == value and getattr(back, field) == value, field
    assert ours.head_size == fields["hidden_size"] // fields["num_attention_heads"]


def test_from_hf_reads_the_attention_implementation():
    hf = BertConfig(hidden_size=32, num_attention_heads=2)
    hf._attn_implementation = "sdpa"
    assert TransformerConfig.from_hf(hf).attn_implementation == "sdpa"


def test_from_pretrained_reads_the_default_checkpoint():
    config = TransformerConfig.from_pretrained()
    assert (config.num_hidden_layers, config.num_attention_heads, config.hidden_size) == (6, 12, 384)
    assert config.intermediate_size == 1536 and config.vocab_size == 30522


def test_as_config_accepts_both_and_refuses_others():
    ours = TransformerConfig(hidden_size=32, num_attention_heads=2)
    assert as_config(ours) is ours
    assert as_config(BertConfig(hidden_size=32, num_attention_heads=2)).head_size == 16
    with pytest.raises(TypeError, match="config must be"):
        as_config({"hidden_size": 32})


def test_another_familys_config_is_sent_to_its_family():
    from transformers import GPT2Config

    # The core knows BERT's field names only: a GPT-2 config is read by GPT-2's own file.
    with pytest.raises(TypeError, match=r"GPT2Config, whose fields are not BERT's.*literate_transformer\.models\.gpt2"):
        as_config(GPT2Config())
