"""Chapter 17's figures draw the file they are given: its parts to scale, its first bytes, a block's packing.

The file is a tiny Llama written by llama.cpp's own Python package (``gguf-py``, :mod:`gguf_files`), so that the
byte map is checked against a file the package did not write.
"""

from __future__ import annotations

import pytest
import torch
import transformers
from matplotlib.patches import ConnectionPatch, Rectangle

from literate_transformer.core.gguf import dequantize, quantize, read_gguf
from literate_transformer.figures import trained as figures

pytest.importorskip("gguf", reason="gguf-py (llama.cpp's package) writes the test's file")

from gguf_files import TINY_LLAMA, byte_level_vocabulary, write_llama_gguf  # noqa: E402


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=len(byte_level_vocabulary()[0]), **TINY_LLAMA)
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    return read_gguf(write_llama_gguf(path, transformers.LlamaForCausalLM(config)))


def _bars(ax):
    return [patch for patch in ax.patches if isinstance(patch, Rectangle)]


def test_the_byte_map_draws_the_whole_file_to_scale_each_tensor_at_its_place(tiny_file):
    figure = figures.plot_gguf_layout(tiny_file)
    whole, before, first = figure.axes
    size = tiny_file.layout["tensor data"][1]
    bars = _bars(whole)
    # Every byte of the file is drawn once, side by side: the four parts before the data, then the tensors and
    # the padding that aligns each one's start.
    assert sum(bar.get_width() for bar in bars) == pytest.approx(size / 1e6, abs=1e-9)
    edges = sorted((bar.get_x(), bar.get_x() + bar.get_width()) for bar in bars if bar.get_width() > 0)
    assert edges[0][0] == 0 and all(a[1] == pytest.approx(b[0]) for a, b in zip(edges, edges[1:], strict=False))
    assert whole.get_xlim() == pytest.approx((0, size / 1e6))
    tensors = [bar for bar in bars[4:] if bar.get_facecolor() != bars[3].get_facecolor()]
    assert len(tensors) == len(tiny_file.tensors)
    assert sorted(bar.get_x() for bar in tensors) == pytest.approx(
        sorted(info.offset / 1e6 for info in tiny_file.tensors.values())
    )
    # The part before the data, to its own scale, in kilobytes.
    data_start = tiny_file.layout["tensor data"][0]
    assert sum(bar.get_width() for bar in _bars(before)) == pytest.approx(data_start / 1e3)
    labels = {text.get_text() for text in whole.get_legend().get_texts()}
    assert "header (24 bytes)" in labels and "tensors in Q4_1" in labels and "tensors in Q8_0" in labels


def test_the_first_bytes_are_the_header_read_as_the_reader_reads_it(tiny_file):
    figure = figures.plot_gguf_layout(tiny_file, first_bytes=40)
    first = figure.axes[2]
    texts = [text.get_text() for text in first.texts]
    assert "magic 'GGUF'" in texts and "version 3" in texts
    assert f"{len(tiny_file.tensors):,} tensors" in texts
    assert f"{len(tiny_file.metadata):,} metadata entries" in texts
    # One cell per byte: its character where the byte is text, else its value in hexadecimal.
    cells = texts[-40:]
    assert cells[:4] == list("GGUF") and cells[4] == "03" and cells[5:8] == ["00", "00", "00"]
    first_key = next(iter(tiny_file.metadata))
    assert f"first key: {len(first_key)} bytes long" in texts and cells[32:40] == list(first_key[:8])


def test_nibble_levels_are_the_levels_the_reader_decodes():
    weights = torch.linspace(-1.0, 2.0, 32)[torch.randperm(32, generator=torch.Generator().manual_seed(0))]
    raw = quantize(weights, "Q4_0")  # 2 bytes of scale, then 16 packed
    scale = raw[:2].view(torch.float16).float()
    levels = (dequantize(raw, "Q4_0", (32,)) / scale + 8).round().to(torch.uint8)
    assert torch.equal(figures.nibble_levels(raw[2:]), levels)
    # Byte j: level j low, level j + 16 high.
    assert torch.equal(raw[2:] & 0x0F, levels[:16]) and torch.equal(raw[2:] >> 4, levels[16:])


def test_the_packing_joins_level_j_to_the_low_half_and_level_j_plus_16_to_the_high_half_of_byte_j():
    packed = torch.arange(16, dtype=torch.uint8) * 17  # byte j = 0xjj: both halves hold j
    figure = figures.plot_nibble_packing(packed)
    (ax,) = figure.axes
    lines = [artist for artist in ax.get_children() if isinstance(artist, ConnectionPatch)]
    assert len(lines) == 32
    for index, line in enumerate(lines):
        start, end = line.xy1, line.xy2
        byte, high = index % 16, index >= 16
        # From level `index` down to byte `byte`'s high half (left cell) or low half (right cell).
        assert start[0] == index + 0.5 and end[0] == 2 * byte + (0.5 if high else 1.5)
    levels = [text.get_text() for text in ax.texts[:64:2]]
    assert levels == [str(j % 16) for j in range(32)]


def test_bad_arguments_are_refused_by_name(tiny_file):
    with pytest.raises(TypeError, match="file must be a GGUFFile"):
        figures.plot_gguf_layout("model.gguf")
    with pytest.raises(ValueError, match=r"first_bytes must be an int in \[24, 64\]"):
        figures.plot_gguf_layout(tiny_file, first_bytes=8)
    with pytest.raises(TypeError, match="packed must be a tensor of torch.uint8"):
        figures.nibble_levels(torch.zeros(16, dtype=torch.int64))
    with pytest.raises(ValueError, match="packed"):
        figures.nibble_levels(torch.zeros(20, dtype=torch.uint8))
