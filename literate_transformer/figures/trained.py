r"""Chapter 17's figures: a GGUF file's bytes, to scale, and how a 4-bit block packs two weights in a byte.

Each figure is drawn from the file the chapter reads, with :mod:`~literate_transformer.core.gguf`:

* :func:`plot_gguf_layout`: the file as a bar of bytes, to scale: the header, the metadata, the tensor infos,
  the padding and the tensors' data (each tensor a segment, coloured by its format); below it, the part before
  the data, to its own scale; and below that the file's first bytes one by one, as the reader reads them;
* :func:`plot_nibble_packing`: one block of 4-bit weights, the 32 levels in their order above its 16 packed
  bytes, each level joined to the half byte it sits in: byte :math:`j` holds weight :math:`j` in its low four
  bits and weight :math:`j + 16` in its high four.
"""

from __future__ import annotations

import struct

import torch
from matplotlib.figure import Figure
from matplotlib.patches import ConnectionPatch, Patch, Rectangle
from torch import Tensor

from ..core.gguf import BLOCK_SIZE, GGUFFile
from ..core.validation import check_tensor

__all__ = ["PART_COLOURS", "FORMAT_COLOURS", "plot_gguf_layout", "nibble_levels", "plot_nibble_packing"]

#: The colour of each part of a file, as :attr:`~literate_transformer.core.gguf.GGUFFile.layout` names them.
PART_COLOURS: dict[str, str] = {
    "header": "tab:red",
    "metadata": "tab:purple",
    "tensor infos": "tab:brown",
    "padding": "0.6",
    "tensor data": "tab:blue",
}
#: The colour of each tensor format in the data.
FORMAT_COLOURS: dict[str, str] = {
    "Q4_1": "tab:blue",
    "Q4_0": "tab:cyan",
    "Q8_0": "tab:orange",
    "F32": "tab:green",
    "F16": "tab:olive",
}


def _size(count: int) -> str:
    """A byte count in the unit that reads best: bytes, kB or MB."""
    if count < 10_000:
        return f"{count:,} bytes"
    if count < 10_000_000:
        return f"{count / 1e3:,.1f} kB"
    return f"{count / 1e6:,.1f} MB"


def plot_gguf_layout(file: GGUFFile, first_bytes: int = 40) -> Figure:
    """A GGUF file's bytes, to scale: its five parts, the tensors in the data, and its first bytes one by one.

    Top, the whole file, one bar from its first byte to its last: the header, the metadata, the tensor infos,
    the padding up to ``general.alignment`` and the tensors' data, each tensor a segment coloured by its format
    and any padding between tensors grey (:attr:`~literate_transformer.core.gguf.GGUFFile.layout` and each
    :class:`~literate_transformer.core.gguf.TensorInfo`).  Middle, the part before the data, to its own scale:
    the parts too small to see above.  Bottom, the file's first ``first_bytes`` bytes one by one, grouped as the
    reader reads them: the bytes ``GGUF``, the version, the number of tensors and of metadata entries (the
    header), then the first entry's key, its length first.

    Args:
        file: What :func:`~literate_transformer.core.gguf.read_gguf` returned.
        first_bytes: How many of the first bytes to draw one by one, at least the header's 24 and at most 64.

    Returns:
        The figure: three panels.

    Raises:
        TypeError: for a ``file`` that is not a :class:`~literate_transformer.core.gguf.GGUFFile` with a layout.
        ValueError: for ``first_bytes`` outside ``[24, 64]``.
    """
    if not isinstance(file, GGUFFile) or not file.layout:
        raise TypeError(f"file must be a GGUFFile from read_gguf (with its layout), got {type(file).__name__}")
    if isinstance(first_bytes, bool) or not isinstance(first_bytes, int) or not 24 <= first_bytes <= 64:
        raise ValueError(f"first_bytes must be an int in [24, 64] (the header is 24 bytes), got {first_bytes!r}")
    layout = file.layout
    size = layout["tensor data"][1]
    data_start = layout["tensor data"][0]

    figure = Figure(figsize=(11.0, 5.6), layout="constrained")
    whole, before, first = figure.subplots(3, 1, height_ratios=(1.0, 1.0, 1.3))

    # 1) The whole file, in megabytes: the parts, then each tensor in the data by its format.
    for name, (start, stop) in layout.items():
        if name != "tensor data":
            whole.barh(0, (stop - start) / 1e6, left=start / 1e6, color=PART_COLOURS[name], height=0.6)
    kinds, cursor = {}, data_start
    for info in [*sorted(file.tensors.values(), key=lambda info: info.offset), None]:
        # The padding that aligns each tensor's start (and the file's end), then the tensor.
        start = size if info is None else info.offset
        if start > cursor:
            whole.barh(0, (start - cursor) / 1e6, left=cursor / 1e6, color=PART_COLOURS["padding"], height=0.6)
        if info is None:
            break
        colour = FORMAT_COLOURS.get(info.kind, "0.3")
        kinds[info.kind] = colour
        whole.barh(0, info.nbytes / 1e6, left=info.offset / 1e6, color=colour, height=0.6, linewidth=0)
        cursor = info.offset + info.nbytes
    whole.set_xlim(0, size / 1e6)
    whole.set_yticks([])
    whole.set_xlabel("megabytes from the start of the file")
    whole.set_title(f"{file.path.name}: {size:,} bytes, to scale", fontsize=9)
    sizes = {name: _size(stop - start) for name, (start, stop) in layout.items()}
    handles = [Patch(color=PART_COLOURS[name], label=f"{name} ({sizes[name]})") for name in layout]
    handles[-1] = Patch(facecolor="white", edgecolor="0.3", label=f"tensor data ({sizes['tensor data']}):")
    handles += [Patch(color=colour, label=f"tensors in {kind}") for kind, colour in kinds.items()]
    whole.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.55), ncols=4, fontsize=8)

    # 2) Everything before the data, in kilobytes.
    for name, (start, stop) in layout.items():
        if name == "tensor data":
            continue
        before.barh(0, (stop - start) / 1e3, left=start / 1e3, color=PART_COLOURS[name], height=0.6)
        if stop - start > data_start / 40:
            before.text(
                (start + stop) / 2e3,
                0,
                f"{name}\n{_size(stop - start)}",
                ha="center",
                va="center",
                color="white",
                fontsize=8,
            )
    before.set_xlim(0, data_start / 1e3)
    before.set_yticks([])
    before.set_xlabel("kilobytes from the start of the file")
    small = ", ".join(
        f"{name}: {stop - start} bytes" for name, (start, stop) in layout.items() if name in ("header", "padding")
    )
    before.set_title(
        f"before the data, to its own scale ({small}; the data starts at byte {data_start:,}, "
        f"a multiple of {file.metadata.get('general.alignment', 32)})",
        fontsize=9,
    )

    # 3) The first bytes, as the reader reads them.
    raw = bytes(file.data[:first_bytes])
    key_length = struct.unpack_from("<Q", raw, 24)[0] if first_bytes >= 32 else 0
    groups = [
        (0, 4, f"magic {raw[:4].decode('ascii', 'replace')!r}", "header"),
        (4, 8, f"version {struct.unpack_from('<I', raw, 4)[0]}", "header"),
        (8, 16, f"{struct.unpack_from('<Q', raw, 8)[0]:,} tensors", "header"),
        (16, 24, f"{struct.unpack_from('<Q', raw, 16)[0]:,} metadata entries", "header"),
    ]
    if first_bytes >= 32:
        groups.append((24, 32, f"first key: {key_length} bytes long", "metadata"))
    if first_bytes > 32:
        key = raw[32:first_bytes].decode("ascii", "replace")
        groups.append((32, first_bytes, f"the key {key!r}...", "metadata"))
    for start, stop, label, part in groups:
        first.add_patch(
            Rectangle(
                (start, 0), stop - start, 1, facecolor=PART_COLOURS[part], alpha=0.25, edgecolor=PART_COLOURS[part]
            )
        )
        first.text((start + stop) / 2, 1.25, label, ha="center", va="bottom", fontsize=7.5, rotation=0)
    for index, byte in enumerate(raw):
        first.add_patch(Rectangle((index, 0), 1, 1, fill=False, edgecolor="0.5", linewidth=0.5))
        shown = chr(byte) if 32 <= byte < 127 and index not in range(4, 24) else f"{byte:02x}"
        first.text(index + 0.5, 0.5, shown, ha="center", va="center", fontsize=6.5, family="monospace")
    first.set_xlim(0, first_bytes)
    first.set_ylim(-0.2, 2.2)
    first.set_yticks([])
    first.set_xticks(range(0, first_bytes + 1, 4))
    first.set_xlabel("byte of the file (little-endian numbers in hexadecimal, text as its characters)")
    first.set_title(f"its first {first_bytes} bytes, one by one", fontsize=9)
    for side in ("top", "right", "left"):
        first.spines[side].set_visible(False)
    figure.suptitle("A GGUF file, byte by byte: header, metadata, tensor infos, padding, tensor data")
    return figure


def nibble_levels(packed: Tensor) -> Tensor:
    """The 32 levels of a 4-bit block from its 16 packed bytes: byte ``j`` holds level ``j`` (low four bits) and
    level ``j + 16`` (high four bits).

    Args:
        packed: ``(16,)`` ``torch.uint8``, the packed part of one Q4_0 or Q4_1 block.

    Returns:
        ``(32,)`` ``torch.uint8``, the levels in the weights' order.
    """
    packed = check_tensor(packed, "packed", shape=(BLOCK_SIZE // 2,))
    if packed.dtype != torch.uint8:
        raise TypeError(f"packed must be a tensor of torch.uint8 (the block's bytes), got {packed.dtype}")
    return (packed[None] >> packed.new_tensor([[0], [4]])).bitwise_and(0x0F).flatten()


def plot_nibble_packing(packed: Tensor) -> Figure:
    """One block's 32 levels of 4 bits above its 16 packed bytes, each level joined to the half byte that holds it.

    Top, the levels :math:`q_0 \\dots q_{31}` in the order of the weights (the first half blue, the second
    orange); bottom, the 16 bytes (in hexadecimal below each), each drawn as its high four bits and its low
    four bits.
    Byte :math:`j` holds :math:`q_j` in its low half and :math:`q_{j+16}` in its high half, so a line runs from
    each level down to its half byte: the first half of the block fills the low halves in order, the second half
    the high halves.

    Args:
        packed: ``(16,)`` ``torch.uint8``, the packed part of one Q4_0 or Q4_1 block (after its scale, and its
            minimum for Q4_1).

    Returns:
        The figure.
    """
    levels = nibble_levels(packed).tolist()
    half = BLOCK_SIZE // 2
    colours = ("tab:blue", "tab:orange")
    figure = Figure(figsize=(12.0, 3.6), layout="constrained")
    ax = figure.add_subplot()
    # The levels: cell j at x = j, in the weights' order.
    for index, level in enumerate(levels):
        colour = colours[index >= half]
        ax.add_patch(Rectangle((index, 2.0), 1, 0.8, facecolor=colour, alpha=0.25, edgecolor=colour))
        ax.text(index + 0.5, 2.4, f"{level}", ha="center", va="center", fontsize=8)
        ax.text(index + 0.5, 2.95, f"$q_{{{index}}}$", ha="center", va="bottom", fontsize=7)
    # The bytes: byte j two cells wide at x = 2 j, its high half on the left (bits 7..4), its low half on the right.
    for byte_index, byte in enumerate(packed.tolist()):
        left = 2 * byte_index
        for offset, value, colour in ((0, byte >> 4, colours[1]), (1, byte & 0x0F, colours[0])):
            ax.add_patch(Rectangle((left + offset, 0.0), 1, 0.8, facecolor=colour, alpha=0.25, edgecolor=colour))
            ax.text(left + offset + 0.5, 0.4, f"{value:x}", ha="center", va="center", fontsize=8, family="monospace")
        ax.add_patch(Rectangle((left, 0.0), 2, 0.8, fill=False, edgecolor="black", linewidth=1.0))
        ax.text(left + 1, -0.15, f"byte {byte_index}\n0x{byte:02x}", ha="center", va="top", fontsize=6.5)
    # Each level to its half byte: q_j to the low half of byte j, q_{j+16} to the high half of byte j.
    for index in range(BLOCK_SIZE):
        byte_index, high = index % half, index >= half
        target = (2 * byte_index + (0.5 if high else 1.5), 0.8)
        ax.add_artist(
            ConnectionPatch((index + 0.5, 2.0), target, "data", "data", color=colours[high], linewidth=0.7, alpha=0.8)
        )
    ax.set_xlim(-0.2, BLOCK_SIZE + 0.2)
    ax.set_ylim(-0.9, 3.4)
    ax.axis("off")
    ax.set_title(
        "A 4-bit block: 32 levels (top, in the weights' order) in 16 bytes (bottom, high half | low half):\n"
        "byte j holds level j in its low four bits and level j + 16 in its high four",
        fontsize=10,
    )
    return figure
