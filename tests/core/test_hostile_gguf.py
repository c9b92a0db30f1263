"""Hostile GGUF files: each refused by name, in a moment, before anything it claims is allocated.

A GGUF file is input from anywhere.  Each file here starts as a valid tiny
Llama written by ``gguf-py`` (llama.cpp's own writer, ``tests/gguf_files.py``)
and is then corrupted one way: a header's count, a key set twice, an
alignment, a tensor's dimensions or place, a size of the config, a float, the
tokenizer.  The reader and the loader must refuse it with a ``ValueError``
(``FileNotFoundError`` for nothing at all) that names the file and the key,
the tensor or the count at fault; the cases whose claims would cost
gigabytes run under :func:`limits.at_most`, so that an attempt to allocate
them fails the test, not the machine.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import tracemalloc

import numpy as np
import pytest
import transformers
from gguf_files import TINY_LLAMA, byte_level_vocabulary, write_llama_gguf
from limits import at_most, resident

from literate_transformer.core.gguf import MAX_NESTING, read_gguf
from literate_transformer.trained import load_decoder

gguf = pytest.importorskip("gguf", reason="gguf-py (llama.cpp's package, which writes the files) is not installed")

#: GGUF's type ids of the metadata values patched here (``gguf_type``).
UINT32, INT32, FLOAT32, ARRAY = 4, 5, 6, 9


@pytest.fixture(scope="module")
def tiny_llama(randomize):
    """A tiny random transformers Llama, which each file of this module writes."""
    tokens, _ = byte_level_vocabulary()
    return randomize(transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=len(tokens), **TINY_LLAMA)))


@pytest.fixture(scope="module")
def valid(tmp_path_factory, tiny_llama):
    """The valid file every corruption starts from (its token table in 8-bit blocks)."""
    return write_llama_gguf(tmp_path_factory.mktemp("hostile") / "valid.gguf", tiny_llama)


@pytest.fixture
def written(tmp_path, tiny_llama):
    """``written(extra)``: the tiny Llama written with ``extra(writer)`` called before its tensors."""

    def write(extra, name="extra.gguf"):
        return write_llama_gguf(tmp_path / name, tiny_llama, extra=extra)

    return write


def _key_bytes(name: str) -> bytes:
    """A name as GGUF writes it: its length (8 bytes), then its UTF-8."""
    return struct.pack("<Q", len(name.encode())) + name.encode()


def _value_at(data: bytes, key: str, kind: int) -> int:
    """Where metadata key ``key``'s value starts (after its name and its type, which must be ``kind``)."""
    marker = _key_bytes(key)
    assert data.count(marker) == 1, f"{key} must appear once in the file to be patched"
    at = data.index(marker) + len(marker)
    assert struct.unpack_from("<I", data, at)[0] == kind, f"{key} is not of type {kind}"
    return at + 4


def _tensor_at(data: bytes, name: str) -> int:
    """Where tensor ``name``'s entry continues after its name: its number of dimensions."""
    marker = _key_bytes(name)
    assert data.count(marker) == 1, f"tensor {name} must appear once in the file to be patched"
    return data.index(marker) + len(marker)


def _patched(source, tmp_path, edit, name="patched.gguf"):
    """A copy of ``source`` whose bytes ``edit(bytearray)`` changed (returning them, or ``None`` for in place)."""
    data = bytearray(source.read_bytes())
    data = edit(data) or data
    target = tmp_path / name
    target.write_bytes(bytes(data))
    return target


def _with_scalar(source, tmp_path, key, kind, code, value):
    """A copy of ``source`` whose metadata key ``key`` (of GGUF type ``kind``) holds ``value`` instead."""
    return _patched(
        source, tmp_path, lambda data: struct.pack_into("<" + code, data, _value_at(data, key, kind), value)
    )


def _renamed(source, tmp_path, old: str, new: str):
    """A copy of ``source`` with a name (a key's, a tensor's) of the same length written as another."""
    assert len(old) == len(new)
    return _patched(source, tmp_path, lambda data: data.replace(_key_bytes(old), _key_bytes(new)))


# ---------------------------------------------------------------------------
# The header: counts, keys, alignment
# ---------------------------------------------------------------------------
def test_the_valid_file_loads(valid):
    # Every corruption below is of a file that is read and loaded without complaint.
    tokenizer, model = load_decoder(valid)
    assert model.config.num_hidden_layers == TINY_LLAMA["num_hidden_layers"] and len(tokenizer) == 269


def test_a_metadata_key_set_twice_is_refused_naming_it(written, tmp_path):
    path = written(lambda writer: writer.add_float32("llama.rope.freq_bas3", 1.0))
    twice = _renamed(path, tmp_path, "llama.rope.freq_bas3", "llama.rope.freq_base")
    with pytest.raises(ValueError, match="metadata key 'llama.rope.freq_base' appears twice"):
        read_gguf(twice)


def test_a_tensor_named_twice_is_refused_naming_it(written, tmp_path):
    path = written(lambda writer: writer.add_tensor("output_norm.weighX", np.ones(64, np.float32)))
    twice = _renamed(path, tmp_path, "output_norm.weighX", "output_norm.weight")
    with pytest.raises(ValueError, match="tensor 'output_norm.weight' appears twice"):
        read_gguf(twice)


@pytest.mark.parametrize(
    ("add", "value"),
    [("add_int32", -8), ("add_uint32", 0), ("add_uint32", 24), ("add_string", "32")],
    ids=["negative", "zero", "not-a-power-of-two", "a-string"],
)
def test_an_alignment_that_is_not_a_positive_power_of_two_is_refused_naming_it(written, add, value):
    path = written(lambda writer: getattr(writer, add)("general.alignment", value))
    with pytest.raises(ValueError, match=f"general.alignment is {value!r} .* must be a positive power of two"):
        read_gguf(path)


def test_a_tensor_count_the_file_cannot_hold_is_refused_before_any_entry_is_read(valid, tmp_path):
    # The count of tensors is the 8 bytes after the magic and the version.
    path = _patched(valid, tmp_path, lambda data: struct.pack_into("<Q", data, 8, 2**60))
    with pytest.raises(ValueError, match="the number of tensors is 1,152,921,504,606,846,976, but the .* bytes left"):
        read_gguf(path)


def test_a_string_longer_than_the_file_is_refused_before_it_is_read(valid, tmp_path):
    def lengthen(data):
        marker = _key_bytes("general.name")
        at = data.index(marker) + len(marker) + 4
        struct.pack_into("<Q", data, at, 2**60)

    with pytest.raises(ValueError, match="the length of metadata key 'general.name' is 1,152,921,504,606,846,976"):
        read_gguf(_patched(valid, tmp_path, lengthen))


def test_arrays_nested_5000_deep_are_refused_naming_the_key(written, tmp_path):
    path = written(lambda writer: writer.add_array("test.nested", [[7]]))
    # [[7]]: an array of one array of one int32, replaced by 5,000 arrays one inside the other.
    shallow = struct.pack("<IQIQi", ARRAY, 1, INT32, 1, 7)
    deep = struct.pack("<IQ", ARRAY, 1) * 4999 + struct.pack("<IQ", INT32, 0)

    def nest(data):
        at = _value_at(data, "test.nested", ARRAY)
        assert data[at : at + len(shallow)] == shallow
        return data[:at] + deep + data[at + len(shallow) :]

    with pytest.raises(ValueError, match=f"metadata key 'test.nested' nests arrays more than {MAX_NESTING} deep"):
        read_gguf(_patched(path, tmp_path, nest))


def test_an_array_of_numbers_is_as_compact_as_in_the_file(valid):
    # One int32 per token: 4 bytes each in memory too, not a Python int (28 bytes) and a list's pointer (8).
    types = read_gguf(valid).metadata["tokenizer.ggml.token_type"]
    assert isinstance(types, np.ndarray) and types.dtype == np.int32 and types.nbytes == 4 * 269


def test_reading_the_header_of_a_sparse_4_gb_file_costs_the_header(valid, tmp_path):
    sparse = tmp_path / "sparse.gguf"
    shutil.copyfile(valid, sparse)
    os.truncate(sparse, 4 * 2**30)
    before = resident()
    tracemalloc.start()
    try:
        file = read_gguf(sparse)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The mapping is alive (file holds it): what of it was touched is resident now.
    grown = resident() - before
    assert len(file.tensors) == 20 and peak < 2**20 and grown < 64 * 2**20, (peak, grown)


@pytest.mark.parametrize("kind", ["a folder", "a FIFO (a named pipe)", "a character device"])
def test_a_path_that_is_no_file_is_refused_for_what_it_is(tmp_path, kind):
    path = {"a folder": tmp_path, "a character device": "/dev/zero"}.get(kind, tmp_path / "pipe.gguf")
    if kind.startswith("a FIFO"):
        os.mkfifo(path)
    with pytest.raises(ValueError, match=re.escape(f"GGUF file {path} is {kind}, not a file")):
        read_gguf(path)


# ---------------------------------------------------------------------------
# The tensors: dimensions and places
# ---------------------------------------------------------------------------
def _with_dims(source, tmp_path, name, dims):
    def edit(data):
        at = _tensor_at(data, name) + 4
        struct.pack_into(f"<{len(dims)}Q", data, at, *dims)

    return _patched(source, tmp_path, edit)


def test_dimensions_whose_product_overflows_are_refused_naming_the_tensor(valid, tmp_path):
    path = _with_dims(valid, tmp_path, "token_embd.weight", [64 * 2**40, 2**40])
    with pytest.raises(ValueError, match="tensor 'token_embd.weight' has dimensions .* more than a 64-bit count"):
        read_gguf(path)


def test_a_zero_dimension_is_refused_naming_the_tensor(valid, tmp_path):
    path = _with_dims(valid, tmp_path, "blk.0.attn_q.weight", [64, 0])
    with pytest.raises(ValueError, match=r"tensor 'blk.0.attn_q.weight' has dimensions \[64, 0\] .* at least 1"):
        read_gguf(path)


def test_a_tensor_whose_dims_claim_16_gb_over_the_next_ones_is_refused_as_overlapping(valid, tmp_path):
    # 2**28 rows of 64 weights in 8-bit blocks: 18 GB, where the file has 64 kB.
    path = _with_dims(valid, tmp_path, "token_embd.weight", [64, 2**28])
    with at_most(), pytest.raises(ValueError, match="tensors 'token_embd.weight' and 'blk.0.attn_q.weight' overlap"):
        read_gguf(path)


def test_the_last_tensor_claiming_16_gb_is_refused_before_its_bytes_are_allocated(valid, tmp_path):
    file = read_gguf(_with_dims(valid, tmp_path, "output_norm.weight", [2**32]))
    with at_most(), pytest.raises(ValueError, match="ends inside tensor 'output_norm.weight'"):
        file.raw("output_norm.weight")


def test_two_tensors_at_one_offset_are_refused_as_overlapping(valid, tmp_path):
    file = read_gguf(valid)
    start = file.tensors["token_embd.weight"].offset  # the data's start: the first tensor's offset is 0
    offset = file.tensors["blk.0.attn_q.weight"].offset - start

    def move(data):
        at = _tensor_at(data, "blk.0.attn_k.weight") + 4 + 2 * 8 + 4
        struct.pack_into("<Q", data, at, offset)

    with pytest.raises(ValueError, match="tensors 'blk.0.attn_k.weight' and 'blk.0.attn_q.weight' overlap"):
        read_gguf(_patched(valid, tmp_path, move))


def test_a_nan_token_table_in_a_tied_file_is_refused_for_its_nan_values(valid, tmp_path):
    # The first block's scale (a float16) set to NaN: its 32 weights are NaN.
    offset = read_gguf(valid).tensors["token_embd.weight"].offset
    path = _patched(valid, tmp_path, lambda data: struct.pack_into("<e", data, offset, float("nan")))
    with pytest.raises(ValueError, match="tensor 'token_embd.weight' holds 32 NaN values"):
        load_decoder(path)


# ---------------------------------------------------------------------------
# The config: sizes the tensors back, heads that divide, finite floats
# ---------------------------------------------------------------------------
def test_a_block_count_of_a_billion_with_two_blocks_of_tensors_is_refused_by_name(valid, tmp_path):
    path = _with_scalar(valid, tmp_path, "llama.block_count", UINT32, "I", 10**9)
    with at_most(), pytest.raises(ValueError, match=r"llama.block_count is 1,000,000,000, but .* 2 blocks \(blk.0 to"):
        load_decoder(path)


def test_an_embedding_length_of_a_billion_is_refused_naming_the_token_table(valid, tmp_path):
    path = _with_scalar(valid, tmp_path, "llama.embedding_length", UINT32, "I", 10**9)
    with at_most(), pytest.raises(ValueError, match="llama.embedding_length is 1,000,000,000, but tensor 'token_embd"):
        load_decoder(path)


def test_a_head_count_of_zero_is_refused_naming_it(valid, tmp_path):
    path = _with_scalar(valid, tmp_path, "llama.attention.head_count", UINT32, "I", 0)
    with pytest.raises(ValueError, match="llama.attention.head_count is 0; it must be an integer of at least 1"):
        load_decoder(path)


def test_key_value_heads_that_do_not_divide_the_heads_are_refused_naming_both(valid, tmp_path):
    path = _with_scalar(valid, tmp_path, "llama.attention.head_count_kv", UINT32, "I", 3)
    with pytest.raises(ValueError, match=r"head_count \(4\) must be divisible by llama.attention.head_count_kv \(3\)"):
        load_decoder(path)


def test_query_rows_that_are_not_the_heads_rows_are_refused_naming_the_tensor(valid, tmp_path):
    # Heads of 12 features: 4 of them are 48 rows, and the query projection has 64.
    path = _with_scalar(valid, tmp_path, "llama.rope.dimension_count", UINT32, "I", 12)
    with pytest.raises(ValueError, match=r"'blk.0.attn_q.weight' has 64 rows, not .*head_count \(4\) heads of 12"):
        load_decoder(path)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("llama.rope.freq_base", float("nan")),
        ("llama.attention.layer_norm_rms_epsilon", float("nan")),
        ("llama.attention.layer_norm_rms_epsilon", float("inf")),
    ],
)
def test_a_float_that_is_not_finite_is_refused_naming_the_key(valid, tmp_path, key, value):
    path = _with_scalar(valid, tmp_path, key, FLOAT32, "f", value)
    with pytest.raises(ValueError, match=f"{key} is {value!r}; it must be a finite number greater than 0"):
        load_decoder(path)


def test_a_tokenizer_with_fewer_tokens_than_the_vocabulary_is_refused(written):
    tokens, types = byte_level_vocabulary()

    def fewer(writer):
        writer.add_token_list(tokens[:-3])
        writer.add_token_types(types[:-3])

    with pytest.raises(ValueError, match=r"the tokenizer has 266 tokens .* but the vocabulary 269 \(the rows of"):
        load_decoder(written(fewer))


def test_merges_that_are_not_strings_are_refused_naming_the_key(written):
    path = written(lambda writer: writer.add_array("tokenizer.ggml.merges", [1, 2]))
    with pytest.raises(ValueError, match="tokenizer.ggml.merges must be an array of strings"):
        load_decoder(path)


def test_a_merge_of_unknown_tokens_is_refused_naming_it(written):
    path = written(lambda writer: writer.add_token_merges(["Ġ t", "zz qq"]))
    with pytest.raises(ValueError, match=r"tokenizer.ggml.merges\[1\] is 'zz qq': a merge must be two tokens"):
        load_decoder(path)
