"""The families' records: every family has one, each reads as its fields say, and a bad one is refused by name."""

from __future__ import annotations

import pytest

from literate_transformer.core import records as records_module
from literate_transformer.core.records import BRANCHES, ROOT, config_sizes, parse_record, record, records

PAPER = """
[paper]
name = Tiny
branch = decoder
year = 2024
month = 4
title = A tiny model
first_author = Someone
parents = llama
"""


def test_a_record_reads_its_sections_as_text_and_literals():
    found = parse_record(
        "tiny",
        PAPER
        + "[transformers]\nmodels = TinyModel TinyForCausalLM\nsince = 4.51\n"
        + '[sizes]\nhidden_size = 24\nattention_types = [["global", "local"], 1]\nact = "relu"\n'
        + "[example]\ngenerate = {'num_beams': 2}\n[static_cache]\n",
    )
    assert found.models == ("TinyModel", "TinyForCausalLM") and found.parents == ("llama",)
    assert found.sizes == {"hidden_size": 24, "attention_types": [["global", "local"], 1], "act": "relu"}
    assert found.generate == {"num_beams": 2} and found.static_cache == {}
    assert found.cite == "Someone et al. 2024" and found.module == "models.tiny"
    assert found.in_transformers("4.51.0") and not found.in_transformers("4.50.3")
    assert found.in_transformers("5.0.0.dev0") and not found.in_transformers("4.42.0rc1")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (PAPER.replace("title = A tiny model\n", ""), r"models/tiny.ini needs \[paper\] title"),
        (PAPER.replace("branch = decoder", "branch = decoders"), r"\[paper\] branch must be one of"),
        (PAPER.replace("month = 4", "month = April"), r"\[paper\] month must be a whole number, got 'April'"),
        (PAPER + "[sizes]\nhidden_size = twenty\n", r"models/tiny.ini \[sizes\] hidden_size must be a Python literal"),
        ("name = Tiny\n", r"models/tiny.ini is not a record"),
    ],
)
def test_a_bad_record_is_refused_naming_the_file_and_the_field(text, message):
    with pytest.raises(ValueError, match=message):
        parse_record("tiny", text)


def test_every_record_is_complete_and_its_parents_are_records():
    found = records()
    assert ROOT in found and len(found) > 20
    for key, family in found.items():
        assert family.branch in BRANCHES and 1 <= family.month <= 12, key
        assert set(family.parents) <= set(found), key
        if key == ROOT:
            continue
        # Every family is placed in a chapter, runs an example, and names the classes it registers (GPT-3 has
        # none in transformers, and registers none).
        assert family.chapter is not None and family.order is not None, key
        assert family.example_model and family.lens_layer and family.sizes, key
        assert bool(family.models) == (family.since is not None) == (family.hf_module is not None), key
    orders = [(family.chapter, family.order) for family in found.values() if family.chapter is not None]
    assert len(orders) == len(set(orders)), "two families share a place in a chapter"


def test_an_unknown_family_is_refused_naming_the_records():
    with pytest.raises(KeyError, match="no record 'llama2' .*the records: .*llama"):
        record("llama2")


def test_config_sizes_name_the_legend_as_each_family_config_does():
    dims = {"V": 50, "E": 24, "H": 4, "L": 2, "F": 40, "D": 6}
    assert config_sizes(None, dims) == {"vocab_size": 50, "hidden_size": 24, "num_attention_heads": 4,
                                        "num_hidden_layers": 2}  # fmt: skip
    assert config_sizes("t5", dims, decoder_start_token_id=0)["d_kv"] == 6
    assert config_sizes("llama", dims) == config_sizes(None, dims)
    assert records_module.STANDARD_NAMES["E"] == "hidden_size"
