"""docs/_ext/try_prompt.py: its facts, and the extension in a tiny Sphinx build with a stand-in exporter."""

from __future__ import annotations

import gzip
import json
import random

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")

import try_prompt  # noqa: E402 (docs/_ext is put on the path by tests/docs/conftest.py)

METADATA = {
    "format": "literate-transformer-decoder-export/2",
    "file": {"name": "tiny.gguf", "sha256": "b179c9523d0e" + "0" * 52, "bytes": 98_362_432,
             "tensor_formats": {"Q4_1": 210, "F32": 61, "Q8_0": 1}},
    "config": {"parameters": 134_515_008, "num_hidden_layers": 30, "num_attention_heads": 9,
               "num_key_value_heads": 3, "hidden_size": 576, "vocab_size": 49152},
    "model": {"opset": 21, "bytes": 286_396},
    "blocks": {"bytes": 96_436_224},
    "weights": {"bytes": 537_919_488},
    "check": {"prompts": 2, "new_tokens": [8, 16], "greedy_ids_equal": True, "max_abs_probability": 2.1e-06,
              "max_abs_logit": 8.4e-05, "max_abs_attention": 3.9e-06},
}  # fmt: skip


def test_the_facts_say_what_was_exported_and_measured() -> None:
    text = " ".join(try_prompt.facts_text(METADATA, gzip_bytes=89_026_117))
    for expected in (
        "134,515,008 parameters",
        "30 layers",
        "9 query heads sharing 3 key/value heads",
        "210 Q4_1",
        "1 Q8_0",
        "96.4 MB of blocks and 0.3 MB of graph against the file's 98.4 MB, 89.0 MB to download",
        "into 537.9 MB of float32 numbers once, in a worker",
        "SHA-256 b179c9523d0e",
        "greedy ids equal for 8, 16 new tokens",
        "2.1e-06",
        "8.4e-05",
        "3.9e-06",
    ):
        assert expected in text, expected
    assert "to download" not in " ".join(try_prompt.facts_text(METADATA))
    with pytest.raises(ValueError, match="check"):
        try_prompt.facts_text({key: value for key, value in METADATA.items() if key != "check"})


def test_the_extension_serves_the_export_on_its_page_only(tiny_site) -> None:
    # A stand-in exporter: writes the two files an export has, and says whether it was cached.
    tiny_site.package(
        "fake_decoder_exporter",
        {
            "__init__.py": f"""
import json
import random
from pathlib import Path
from types import SimpleNamespace

def export(folder):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cached = (folder / "decoder.json").exists()
    (folder / "decoder.onnx").write_bytes(b"onnx" * 100)
    # Bytes that do not compress, enough to count in the size stated.
    (folder / "decoder.blocks").write_bytes(random.Random(0).randbytes(150_000))
    (folder / "decoder.json").write_text(json.dumps({METADATA!r}))
    return SimpleNamespace(onnx_path=folder / "decoder.onnx", metadata_path=folder / "decoder.json",
                           blocks_path=folder / "decoder.blocks", metadata={METADATA!r}, digest="d" * 64,
                           cached=cached)
""",
        },
    )
    tiny_site.conf(["try_prompt"], try_prompt_exporter="fake_decoder_exporter:export")
    tiny_site.write("docs/index.rst", "Home\n====\n\n.. toctree::\n\n   try_prompt\n")
    tiny_site.write("docs/try_prompt.rst", "Try\n===\n\n.. try-prompt-facts::\n")
    app = tiny_site.build()
    assert "WARNING" not in app.warnings and "ERROR" not in app.warnings, app.warnings
    page = tiny_site.html("try_prompt")
    assert "134,515,008 parameters" in page and "greedy ids equal" in page
    # The size stated is the compressed graph's and blocks', compressed at build time.
    packed = tiny_site.build_dir / "html" / "_static" / "try" / "prompt" / "decoder.onnx.gz"
    assert gzip.decompress(packed.read_bytes()) == b"onnx" * 100
    blocks = packed.with_name("decoder.blocks.gz")
    assert gzip.decompress(blocks.read_bytes()) == random.Random(0).randbytes(150_000)
    assert f"{(packed.stat().st_size + blocks.stat().st_size) / 1e6:.1f} MB to download" in page
    for script in ("bpe.js", "sampling.js", "prompt.js"):
        assert f'src="_static/try/{script}' in page
    assert "defer" in page and "_static/try/prompt.css" in page
    assert "prompt.js" not in tiny_site.html("index")
    metadata = tiny_site.build_dir / "html" / "_static" / "try" / "prompt" / "decoder.json.gz"
    assert json.loads(gzip.decompress(metadata.read_bytes()))["format"] == METADATA["format"]
