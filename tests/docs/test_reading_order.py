"""One reading order: the manifest lists every module once, and the site's settings are read from it.

:mod:`literate_transformer.manifest` is the only place that says which
chapter builds which module and in what order.  These checks are fast (no
site is built): a module added to the package but not to the manifest, a
chapter page that does not exist, a module outside every part of the
layout, or a ``conf.py`` that stops following the manifest fails here.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

import pytest

from literate_transformer import manifest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / manifest.PACKAGE


def relative_name(path: Path) -> str:
    """``core/masks.py`` -> ``core.masks``; ``core/__init__.py`` -> ``core``; the package's ``__init__`` -> ``""``."""
    parts = path.relative_to(PACKAGE_DIR).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_module_of_the_package_is_in_the_reading_order():
    unlisted = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        name = relative_name(path)
        if path.name == "__init__.py":
            continue  # the package and its sub-packages: their docstrings introduce their parts
        if name not in manifest.MODULES:
            unlisted.append(path.relative_to(ROOT).as_posix())
    assert not unlisted, (
        "these modules are not in the reading order; add each to the chapter that builds it "
        f"(or to SUPPORT) in {manifest.PACKAGE}/manifest.py: {', '.join(unlisted)}"
    )


def test_every_listed_module_exists_and_is_listed_once():
    missing = [module for module in manifest.MODULES if not (PACKAGE_DIR / f"{module.replace('.', '/')}.py").is_file()]
    assert not missing, f"the manifest lists modules that have no file: {missing}"
    repeated = sorted({module for module in manifest.MODULES if manifest.MODULES.count(module) > 1})
    assert not repeated, f"listed twice: {repeated}"


def test_the_chapters_are_numbered_in_order_and_each_has_its_page():
    assert [chapter.number for chapter in manifest.CHAPTERS] == list(range(1, len(manifest.CHAPTERS) + 1))
    missing = [
        chapter.docname for chapter in manifest.CHAPTERS if not (ROOT / "docs" / f"{chapter.docname}.md").is_file()
    ]
    assert not missing, f"chapters without a page in docs/: {missing}"


def test_every_chapter_page_is_in_the_reading_order():
    pages = {f"chapters/{path.stem}" for path in (ROOT / "docs" / "chapters").glob("*.md")}
    assert pages == {chapter.docname for chapter in manifest.CHAPTERS}


def test_every_module_sits_in_exactly_one_part_of_the_layout():
    parts = [part for part, _ in manifest.LAYOUT]
    for module in manifest.MODULES:
        owners = [part for part in parts if module == part or module.startswith(part + ".")]
        assert len(owners) == 1, f"{module} is in the parts {owners} of manifest.LAYOUT (exactly one expected)"


def test_every_sub_package_is_a_part_of_the_layout():
    sub_packages = {relative_name(path) for path in PACKAGE_DIR.glob("*/__init__.py")}
    assert sub_packages <= {part for part, _ in manifest.LAYOUT}


@pytest.fixture(scope="module")
def conf():
    """The site's ``conf.py`` settings (it only sets values; the process is restored afterwards)."""
    saved_path, saved_environ = list(sys.path), dict(os.environ)
    try:
        return runpy.run_path(str(ROOT / "docs" / "conf.py"))
    finally:
        sys.path[:] = saved_path
        os.environ.clear()
        os.environ.update(saved_environ)


def dotted(module: str) -> str:
    return f"{manifest.PACKAGE}.{module}"


def test_the_sites_chapters_toctree_is_the_manifests_order(conf):
    assert [docname for docname, _ in conf["reading_order_chapters"]] == [c.docname for c in manifest.CHAPTERS]


def test_the_annotated_source_pages_follow_the_manifest(conf):
    assert conf["sidebyside_modules"] == [manifest.PACKAGE] + [dotted(module) for module in manifest.MODULES]
    for module in manifest.MODULES:
        chapter = manifest.chapter_of(module)
        docname, _ = conf["sidebyside_chapters"][dotted(module)]
        assert docname == chapter.docname


def test_the_api_page_documents_every_module_once_in_reading_order(conf):
    documented = [module for _, _, modules in conf["reading_order_api"] for module in modules]
    assert sorted(documented) == sorted(dotted(module) for module in manifest.MODULES)
    position = {dotted(module): index for index, module in enumerate(manifest.MODULES)}
    for title, _, modules in conf["reading_order_api"]:
        assert [position[module] for module in modules] == sorted(position[module] for module in modules), title
    intros = {intro for _, intro, _ in conf["reading_order_api"] if intro}
    assert intros == {dotted(relative_name(path)) for path in PACKAGE_DIR.glob("*/__init__.py")}


def test_conf_py_only_sets_values():
    # What writes files (inventories, pages, the execution cache) is an extension, run by Sphinx's events.
    text = (ROOT / "docs" / "conf.py").read_text(encoding="utf-8")
    for call in ("write_text(", "write_bytes(", "rmtree(", "unlink(", "mkdir(", "open("):
        assert call not in text, f"conf.py calls {call}"
