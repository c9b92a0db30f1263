"""Chapter 12's table reads what it shows off the models it is given; the chapters' glue uses the pages' names."""

from __future__ import annotations

import pytest
import torch
import transformers
from lt_site import lesson

import literate_transformer as lt
from literate_transformer import family_tree

SMALL = {
    "vocab_size": 40,
    "n_embd": 16,
    "n_layer": 2,
    "n_head": 2,
    "n_positions": 12,
    "bos_token_id": 0,
    "eos_token_id": 0,
}
SMALL_BART = {
    "vocab_size": 40,
    "d_model": 16,
    "encoder_layers": 1,
    "decoder_layers": 1,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "encoder_ffn_dim": 32,
    "decoder_ffn_dim": 32,
    "max_position_embeddings": 12,
}


@pytest.fixture(scope="module")
def columns():
    config = lt.TransformerConfig(vocab_size=40, hidden_size=16, num_attention_heads=2, intermediate_size=32)
    with torch.device("meta"):
        models = {
            "encoder": lt.TransformerEncoder(config, norm_first=False),
            "GPT-2": lt.GPT2LMHeadModel(transformers.GPT2Config(**SMALL)),
            "BART": lt.BartForConditionalGeneration(transformers.BartConfig(**SMALL_BART, scale_embedding=True)),
        }
    return {name: family_tree.describe_model(name, model) for name, model in models.items()}


def test_each_column_reads_the_arrangement_and_the_stacks_off_the_model(columns):
    assert [column["layer norm"] for column in columns.values()] == ["post-LN", "pre-LN", "post-LN"]
    assert columns["GPT-2"]["self-attention"] == "causal"
    assert columns["BART"]["self-attention"] == "bidirectional / causal + cross-attention"
    assert columns["BART"]["stacks (layers)"] == "BartEncoder (1) + BartDecoder (1)"


def test_the_columns_tell_the_embeddings_and_the_head_apart(columns):
    assert columns["BART"]["positions"] == "learned, 14 rows, offset 2"
    assert columns["BART"]["token embeddings scaled"] == "×√E" != columns["GPT-2"]["token embeddings scaled"]
    assert (columns["encoder"]["segment embeddings"], columns["GPT-2"]["segment embeddings"]) == ("yes", "no")
    assert (
        columns["GPT-2"]["LM head tied to the tokens"] == "yes"
        and columns["encoder"]["LM head tied to the tokens"] == "—"
    )


def test_the_activation_names_the_form_of_gelu(columns):
    assert columns["encoder"]["activation"] == "GELU, exact: x·Φ(x) (gelu)"
    assert columns["GPT-2"]["activation"] == "GELU, tanh form (gelu_new)"


def test_each_figure_is_glued_under_the_name_the_page_asks_for(monkeypatch):
    pytest.importorskip("myst_nb", reason="myst-nb (the docs extras) is not installed; the glue is not tested")
    glued = []
    monkeypatch.setattr("myst_nb.glue", lambda key, value, display=True: glued.append((key, value, display)))
    lesson.glue_figures("padding", {"mask on": "a", "mask off": "b", "difference": "c"})
    assert glued == [
        ("padding-mask-on", "a", False),
        ("padding-mask-off", "b", False),
        ("padding-difference", "c", False),
    ]
