"""The site's one digest of the package source: what every cache of the site is keyed on."""

from __future__ import annotations

import shutil

import pytest
from lt_site.digest import source_digest


def test_the_digest_changes_with_the_sources(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    before = source_digest([tmp_path])
    (tmp_path / "a.py").write_text("x = 2\n")
    assert source_digest([tmp_path]) != before


def test_the_digest_changes_with_the_data_the_code_reads_and_not_with_bytecode(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "table.csv").write_text("key,year\nbert,2018\n")
    before = source_digest([tmp_path])
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0compiled")
    assert source_digest([tmp_path]) == before
    (tmp_path / "table.csv").write_text("key,year\nbert,2019\n")
    assert source_digest([tmp_path]) != before


def test_the_digest_does_not_depend_on_where_the_checkout_sits(tmp_path):
    package = tmp_path / "here" / "package"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("x = 1\n")
    (package / "sub" / "b.py").write_text("y = 2\n")
    moved = shutil.copytree(package, tmp_path / "elsewhere" / "deeper" / "package")
    assert source_digest([package]) == source_digest([moved])


def test_a_renamed_file_or_another_salt_is_another_digest(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    before = source_digest([tmp_path])
    assert source_digest([tmp_path], salt="torch 2.13") != before
    (tmp_path / "a.py").rename(tmp_path / "b.py")
    assert source_digest([tmp_path]) != before


def test_a_missing_folder_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        source_digest([tmp_path / "missing"])
