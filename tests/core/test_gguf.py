"""The GGUF reader: blocks decoded and encoded as gguf-py does, bit for bit; the container read; bad files refused.

``gguf-py`` is llama.cpp's own Python package (``transformers`` dequantizes
GGUF files with it); its quantizers are bit-exact with ``ggml``'s C reference.
Files are written with its ``GGUFWriter``, so that the package's reader meets
llama.cpp's format, not its own idea of it.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from literate_transformer.core.gguf import (
    BLOCK_SIZE,
    FORMATS,
    GGML_TYPES,
    bits_per_weight,
    dequantize,
    quantize,
    read_gguf,
)

gguf = pytest.importorskip("gguf", reason="gguf-py (llama.cpp's package, the reference) is not installed")

BLOCK_FORMATS = ("Q8_0", "Q4_1", "Q4_0")


def _weights() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return {
        "normal": torch.randn(12, 96, generator=generator),
        "tiny": torch.randn(4, 32, generator=generator) * 1e-4,
        "zeros": torch.zeros(2, 32),
        # A block whose largest magnitude is negative (Q4_0 keeps its sign), and halves to round.
        "signs": torch.tensor([[-3.0] + [0.5, -0.25, 1.5, 2.5] * 7 + [0.0, 1.0, -1.0]]),
        "constant": torch.full((1, 64), 0.7),
    }


@pytest.mark.parametrize("kind", BLOCK_FORMATS)
@pytest.mark.parametrize("name", list(_weights()))
def test_quantize_writes_gguf_pys_bytes_and_dequantize_reads_them_as_it_does(kind, name):
    weights = _weights()[name]
    reference = gguf.quants.quantize(weights.numpy(), getattr(gguf.GGMLQuantizationType, kind))
    ours = quantize(weights, kind)
    np.testing.assert_array_equal(ours.numpy(), reference.reshape(-1))
    decoded = gguf.quants.dequantize(reference, getattr(gguf.GGMLQuantizationType, kind))
    torch.testing.assert_close(dequantize(ours, kind, weights.shape), torch.from_numpy(decoded), rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["F32", "F16"])
def test_unquantized_formats_round_trip(kind):
    weights = _weights()["normal"]
    back = dequantize(quantize(weights, kind), kind, weights.shape)
    torch.testing.assert_close(back, weights if kind == "F32" else weights.half().float(), rtol=0, atol=0)


def test_a_block_takes_the_bytes_its_table_says():
    for kind, block in FORMATS.items():
        weights = torch.randn(2, BLOCK_SIZE)
        assert quantize(weights, kind).numel() == 2 * BLOCK_SIZE // block.block_weights * block.block_bytes
    assert [bits_per_weight(kind) for kind in ("F32", "F16", "Q8_0", "Q4_1", "Q4_0")] == [32, 16, 8.5, 5, 4.5]


def test_the_coarser_the_format_the_larger_the_error():
    weights = _weights()["normal"]
    errors = [
        (dequantize(quantize(weights, kind), kind, weights.shape) - weights).abs().max() for kind in BLOCK_FORMATS
    ]
    assert errors[0] < errors[1] < errors[2]


def test_q4_0_puts_the_largest_magnitude_on_minus_8d_and_reaches_seven_eighths_of_it_on_the_other_side():
    # Largest magnitude +2.0: d = 2 / -8 is negative, so the weight lands on level 0 (-8 d = 2.0) and the most
    # negative level, 7 d, is -1.75: a weight of -2.0 on the other side is stored as -1.75.
    block = torch.cat([torch.tensor([2.0, -2.0]), torch.linspace(-1.0, 1.0, 30)])
    raw = quantize(block, "Q4_0")
    scale = raw[:2].view(torch.float16).float()
    decoded = dequantize(raw, "Q4_0", block.shape)
    assert scale.item() == -0.25 and decoded[0].item() == 2.0 and decoded[1].item() == -1.75
    levels = scale * (torch.arange(16) - 8)
    assert set(decoded.tolist()) <= set(levels.tolist()) and levels.max() == 2.0 and levels.min() == -1.75


def test_bad_formats_and_sizes_are_refused():
    with pytest.raises(ValueError, match="'Q5_0' .* not one this reader decodes"):
        dequantize(torch.zeros(22, dtype=torch.uint8), "Q5_0", (32,))
    with pytest.raises(ValueError, match="20 bytes are not a Q4_1 tensor of shape \\(2, 32\\)"):
        dequantize(torch.zeros(20, dtype=torch.uint8), "Q4_1", (2, 32))
    with pytest.raises(ValueError, match="multiple of 32"):
        quantize(torch.zeros(3, 40), "Q8_0")
    assert GGML_TYPES[3] == "Q4_1" and GGML_TYPES[8] == "Q8_0"


# ---------------------------------------------------------------------------
# The container
# ---------------------------------------------------------------------------
def _write(path, tensors: dict[str, tuple[np.ndarray, str]], architecture: str = "llama", **metadata) -> None:
    writer = gguf.GGUFWriter(str(path), architecture)
    for key, value in metadata.items():
        writer.add_string(key, value) if isinstance(value, str) else writer.add_uint32(key, value)
    writer.add_array("test.floats", [0.5, 1.5])
    for name, (data, kind) in tensors.items():
        if kind == "F32":
            writer.add_tensor(name, data)
        else:
            qtype = getattr(gguf.GGMLQuantizationType, kind)
            writer.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture
def small_file(tmp_path):
    generator = np.random.default_rng(0)
    tensors = {
        "a.weight": (generator.standard_normal((3, 64)).astype(np.float32), "Q4_1"),
        "b.weight": (generator.standard_normal((5,)).astype(np.float32), "F32"),
        "c.weight": (generator.standard_normal((2, 32)).astype(np.float32), "Q8_0"),
    }
    path = tmp_path / "small.gguf"
    _write(path, tensors, **{"test.count": 7, "test.name": "small"})
    return path, tensors


def test_the_header_gives_the_metadata_and_each_tensors_place_and_shape(small_file):
    path, tensors = small_file
    file = read_gguf(path)
    reference = gguf.GGUFReader(path)
    assert file.version == 3 and file.architecture == "llama"
    assert file.metadata["test.count"] == 7 and file.metadata["test.name"] == "small"
    # An array of numbers stays as compact as in the file: a NumPy array of its type.
    floats = file.metadata["test.floats"]
    assert isinstance(floats, np.ndarray) and floats.dtype == np.float32 and floats.tolist() == [0.5, 1.5]
    assert list(file.tensors) == [tensor.name for tensor in reference.tensors]
    for tensor in reference.tensors:
        info = file.tensors[tensor.name]
        assert info.shape == tensors[tensor.name][0].shape
        assert info.kind == tensor.tensor_type.name
        assert info.offset == tensor.data_offset and info.nbytes == tensor.n_bytes


def test_the_layout_cuts_the_file_into_its_five_parts_in_order(small_file):
    path, _ = small_file
    file = read_gguf(path)
    parts = list(file.layout.items())
    assert [name for name, _ in parts] == ["header", "metadata", "tensor infos", "padding", "tensor data"]
    # The parts tile the file: each starts where the one before ends, from byte 0 to the last.
    assert parts[0][1][0] == 0 and parts[-1][1][1] == path.stat().st_size
    assert all(before[1][1] == after[1][0] for before, after in itertools.pairwise(parts))
    # The header: "GGUF", the version, the two counts (4 + 4 + 8 + 8 bytes); the data where gguf-py finds it.
    assert file.layout["header"] == (0, 24)
    data_start = file.layout["tensor data"][0]
    assert data_start == gguf.GGUFReader(path).data_offset and data_start % 32 == 0
    assert file.layout["padding"][1] - file.layout["padding"][0] < 32
    assert all(
        data_start <= info.offset and info.offset + info.nbytes <= path.stat().st_size for info in file.tensors.values()
    )


def test_each_tensor_reads_as_gguf_py_dequantizes_it(small_file):
    path, _ = small_file
    file = read_gguf(path)
    for tensor in gguf.GGUFReader(path).tensors:
        expected = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(file.tensors[tensor.name].shape)
        torch.testing.assert_close(file.tensor(tensor.name), torch.from_numpy(np.array(expected)), rtol=0, atol=0)


def test_files_that_are_not_gguf_or_end_early_are_refused(tmp_path, small_file):
    with pytest.raises(FileNotFoundError, match="missing.gguf does not exist"):
        read_gguf(tmp_path / "missing.gguf")
    other = tmp_path / "other.gguf"
    other.write_bytes(b"PK\x03\x04 a zip file")
    with pytest.raises(ValueError, match="is not a GGUF file: it starts with b'PK"):
        read_gguf(other)
    path, _ = small_file
    data = path.read_bytes()
    header_cut = tmp_path / "header_cut.gguf"
    header_cut.write_bytes(data[:100])
    with pytest.raises(ValueError, match="ends in the middle of its header"):
        read_gguf(header_cut)
    # One byte short of the last tensor's end.
    last = read_gguf(path).tensors["c.weight"]
    data_cut = tmp_path / "data_cut.gguf"
    data_cut.write_bytes(data[: last.offset + last.nbytes - 1])
    file = read_gguf(data_cut)
    with pytest.raises(ValueError, match="ends inside tensor 'c.weight'"):
        file.check_readable()
    with pytest.raises(ValueError, match="ends inside tensor 'c.weight'"):
        file.tensor("c.weight")


def test_a_tensor_type_the_reader_does_not_decode_is_named_with_its_tensor(tmp_path):
    path = tmp_path / "q5.gguf"
    _write(path, {"blk.0.attn_q.weight": (np.ones((2, 32), np.float32), "Q5_0")})
    file = read_gguf(path)
    with pytest.raises(ValueError, match="tensor type 'Q5_0' \\(tensor 'blk.0.attn_q.weight'\\)"):
        file.check_readable()
