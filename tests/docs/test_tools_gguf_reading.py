"""The site's proofs read the trained decoder's file through ``transformers`` with each parse done once.

``lt_site.families.trained.each_parse_once`` hands ``transformers`` the same
``gguf`` reader and the same table of tensor names each time it asks for
them again; here, on a small file written as llama.cpp writes it, that
reading is compared with ``transformers``' own, tensor by tensor and id by id.
"""

from __future__ import annotations

from unittest import mock

import pytest
import torch
import transformers
from gguf_files import TINY_LLAMA, byte_level_vocabulary, write_llama_gguf
from lt_site.families import trained

TEXTS = ["the cat on the mat", "<|im_start|>the cat<|im_end|>", "héllo 🤗", "  two  spaces"]


def test_a_reading_with_each_parse_once_is_transformers_own(tmp_path):
    gguf = pytest.importorskip("gguf", reason="gguf-py (llama.cpp's package, which writes the small file) is missing")
    tokens, _ = byte_level_vocabulary()
    torch.manual_seed(0)
    reference = transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=len(tokens), **TINY_LLAMA))
    write_llama_gguf(tmp_path / "tiny.gguf", reference, {})
    parses, name_maps = [], []
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map

    def read():
        try:
            model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file="tiny.gguf")
            tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path, gguf_file="tiny.gguf")
        except (ValueError, NotImplementedError, KeyError, ImportError) as error:
            pytest.skip(f"transformers {transformers.__version__} cannot read this GGUF file: {error}")
        return model.state_dict(), [tokenizer(text)["input_ids"] for text in TEXTS]

    def counted(calls, function):
        return lambda *args, **kwargs: calls.append(args) or function(*args, **kwargs)

    with (
        mock.patch.object(gguf, "GGUFReader", counted(parses, reader)),
        mock.patch.object(gguf, "get_tensor_name_map", counted(name_maps, name_map)),
    ):
        own_state, own_ids = read()
        own_counts = (len(parses), len(name_maps))
        parses.clear(), name_maps.clear()
        with trained.each_parse_once():
            state, ids = read()
        assert (len(parses), len(name_maps)) == (1, 1), f"transformers' own reading: {own_counts}"
    # What it saves: transformers parses the file for the config, the weights and the tokenizer.
    assert own_counts[0] > 1 and own_counts[1] >= 1, own_counts
    assert gguf.GGUFReader is reader and gguf.get_tensor_name_map is name_map  # put back on leaving
    assert sorted(state) == sorted(own_state)
    assert all(torch.equal(state[name], own_state[name]) for name in state)
    assert ids == own_ids
