"""The extensions' environment version follows their source text, and nothing else."""

from __future__ import annotations

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extensions are not tested")

import extension_metadata  # noqa: E402


def test_the_environment_version_follows_the_files_text(tmp_path):
    files = [tmp_path / name for name in ("a.py", "b.py")]
    for path in files:
        path.write_text("x = 1\n")
    first = extension_metadata.environment_version(*files)
    assert extension_metadata.environment_version(*files) == first
    files[1].write_text("x = 2\n")
    assert extension_metadata.environment_version(*files) != first
