"""docs/_ext/try_it.py: its facts, and the extension in a tiny Sphinx build with a stand-in exporter."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import try_it  # noqa: E402

METADATA = {
    "format": "literate-transformer-browser-export/1",
    "checkpoint": {"argument": None, "sha256": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"},
    "config": {"num_hidden_layers": 6, "num_attention_heads": 12, "hidden_size": 384, "vocab_size": 30522},
    "model": {"opset": 21, "bytes": 36_811_519, "gzip_bytes": 35_128_198},
    "weights": {
        "shrunk_tensors": 38,
        "scheme": "int8 codes + int4 corrections",
        "block_size": 16,
        "bits_per_weight": 13.0,
        "float32_bytes": 90_311_738,
    },
    "check": {"texts": 10, "max_abs_attention": 0.0037, "max_abs_last_hidden_state": 0.0038},
}


def test_facts_say_what_was_done_and_what_it_cost() -> None:
    text = " ".join(try_it.facts_text(METADATA))
    for expected in (
        "38 weight matrices",
        "13 bits per weight",
        "36.8 MB",
        "90.3 MB",
        "35.1 MB",
        "3.7e-03",
        "3.8e-03",
        "10 texts",
        "SHA-256 53aa51172d14",
    ):
        assert expected in text
    with pytest.raises(ValueError, match="check"):
        try_it.facts_text({key: value for key, value in METADATA.items() if key != "check"})


@pytest.mark.parametrize("own_process", [False, True], ids=["in_the_build", "in_own_process"])
def test_the_extension_serves_the_export_on_its_page_only(tmp_path, own_process) -> None:
    # A stand-in exporter: writes the two files an export has, and says whether it was cached.
    (tmp_path / "fake_exporter.py").write_text(
        textwrap.dedent(f"""
        import json
        from pathlib import Path
        from types import SimpleNamespace

        def export(folder):
            folder = Path(folder)
            folder.mkdir(parents=True, exist_ok=True)
            cached = (folder / "model.json").exists()
            (folder / "model.onnx").write_bytes(b"onnx" * 100)
            (folder / "model.json").write_text(json.dumps({METADATA!r}))
            return SimpleNamespace(onnx_path=folder / "model.onnx", metadata_path=folder / "model.json",
                                   metadata={METADATA!r}, digest="d" * 64, cached=cached)
    """)
    )
    source = tmp_path / "src"
    source.mkdir()
    (source / "conf.py").write_text(
        f"import sys\nsys.path[:0] = [{str(ROOT / 'docs' / '_ext')!r}, {str(tmp_path)!r}]\n"
        f"extensions = ['try_it']\ntry_it_exporter = 'fake_exporter:export'\ntry_it_in_own_process = {own_process}\n"
    )
    (source / "index.rst").write_text("Home\n====\n\n.. toctree::\n\n   try\n")
    (source / "try.rst").write_text("Try\n===\n\n.. try-it-facts::\n")
    out = tmp_path / "html"
    run = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-b", "html", str(source), str(out)], check=True, capture_output=True
    )
    assert ("in a process of its own" in run.stdout.decode()) == own_process
    page = (out / "try.html").read_text(encoding="utf-8")
    assert "13 bits per weight" in page and "3.7e-03" in page
    assert 'src="_static/try/try.js' in page and "defer" in page
    assert "try/try.js" not in (out / "index.html").read_text(encoding="utf-8")
    assert gzip.decompress((out / "_static" / "try" / "model" / "model.onnx.gz").read_bytes()) == b"onnx" * 100
    assert json.loads(gzip.decompress((out / "_static" / "try" / "model" / "model.json.gz").read_bytes()))
    # The page draws its own head view: no bertviz, d3 or jQuery is loaded on it.
    assert not any(name in page for name in ("head_view.js", "d3.min.js", "jquery.min.js"))
    # A rebuild finds the export made: it checks it in the build's own process, and finds it cached.
    again = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-b", "html", str(source), str(out)], check=True, capture_output=True
    )
    assert "in a process of its own" not in again.stdout.decode() and "try_it: cached" in again.stdout.decode()
