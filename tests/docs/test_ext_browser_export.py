"""docs/_ext/browser_export.py: its pure helpers, and the errors it reports under each extension's name."""

from __future__ import annotations

import gzip
import os
import re

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")

import browser_export  # noqa: E402 (docs/_ext is put on the path by tests/docs/conftest.py)
from sphinx.errors import ExtensionError  # noqa: E402


def test_gzip_once_is_deterministic_and_skips_a_done_key(tmp_path) -> None:
    source = tmp_path / "model.onnx"
    source.write_bytes(os.urandom(1000) * 3)
    first = browser_export.gzip_once(source, tmp_path / "a.gz", "digest-1")
    again = browser_export.gzip_once(source, tmp_path / "b.gz", "digest-1")
    assert first.read_bytes() == again.read_bytes()
    assert gzip.decompress(first.read_bytes()) == source.read_bytes()
    modified = first.stat().st_mtime_ns
    browser_export.gzip_once(source, first, "digest-1")
    assert first.stat().st_mtime_ns == modified
    source.write_bytes(b"new")
    browser_export.gzip_once(source, first, "digest-2")
    assert gzip.decompress(first.read_bytes()) == b"new"
    with pytest.raises(FileNotFoundError, match="missing"):
        browser_export.gzip_once(tmp_path / "missing", tmp_path / "c.gz", "k")


def test_copy_if_changed_copies_once(tmp_path) -> None:
    source = tmp_path / "a.bin"
    source.write_bytes(b"abc")
    assert browser_export.copy_if_changed(source, tmp_path / "out" / "a.bin")
    assert not browser_export.copy_if_changed(source, tmp_path / "out" / "a.bin")
    assert (tmp_path / "out" / "a.bin").read_bytes() == b"abc"


def test_megabytes_has_one_decimal() -> None:
    assert browser_export.megabytes(36_811_519) == "36.8 MB"
    assert browser_export.megabytes(0) == "0.0 MB"


@pytest.mark.parametrize(
    ("extension", "page", "exporter", "message"),
    [
        ("try_prompt", "try_prompt", "no_function", "try_prompt_exporter must be 'module:function', got 'no_function'"),
        ("try_it", "try", "broken_exporter:export", "try_it: the browser export failed: no weights"),
        ("try_prompt", "try_prompt", "broken_exporter:export", "try_prompt: the decoder's browser export failed"),
    ],
)
@pytest.mark.parametrize("own_process", [False, True], ids=["in_the_build", "in_own_process"])
def test_errors_are_reported_in_each_extensions_words(tiny_site, extension, page, exporter, message, own_process):
    tiny_site.package("broken_exporter", {"__init__.py": "def export(folder):\n    raise OSError('no weights')\n"})
    options = {f"{extension}_exporter": exporter, f"{extension}_in_own_process": own_process}
    tiny_site.conf([extension], **options)
    tiny_site.write("docs/index.rst", f"Home\n====\n\n.. toctree::\n\n   {page}\n")
    tiny_site.write(f"docs/{page}.rst", "Try\n===\n")
    with pytest.raises(ExtensionError, match=re.escape(message)):
        tiny_site.build()


def test_nothing_is_exported_when_the_page_is_not_built(tiny_site) -> None:
    # The exporter's name is not even read: a site without the page builds with the default left empty.
    tiny_site.conf(["try_it"])
    tiny_site.write("docs/index.rst", "Home\n====\n")
    app = tiny_site.build()
    assert "WARNING" not in app.warnings, app.warnings
    assert not (tiny_site.build_dir / "try_it").exists()
    assert not (tiny_site.build_dir / "html" / "_static" / "try" / "model").exists()
