"""The reading-order directives, on a tiny project: the chapters' toctree and the API sections.

The order comes only from the settings (which the site's ``conf.py`` reads
from the package's manifest); the directives must follow it exactly.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")

import reading_order  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:The mapping interface for autodoc options")

PACKAGE = {
    "__init__.py": '"""Tiny: a package."""\n',
    "core/__init__.py": '"""The core: what everything is built from."""\n',
    "core/masks.py": '"""Masks: which keys a query may see."""\n\n\ndef causal():\n    """The causal mask."""\n',
    "core/config.py": '"""Configuration: the numbers."""\n',
    "tools.py": '"""Tools: odds and ends."""\n',
}

CHAPTERS = [("chapters/b", "1. Bee"), ("chapters/a", "2. Ay"), ("chapters/c", "3. Sea")]
API = [
    ("tinyorder.core", "tinyorder.core", ["tinyorder.core.masks", "tinyorder.core.config"]),
    ("tinyorder.tools", None, ["tinyorder.tools"]),
]


@pytest.fixture
def site(tiny_site):
    tiny_site.package("tinyorder", PACKAGE)
    tiny_site.conf(
        ["sphinx.ext.autodoc", "reading_order"],
        autodoc_default_options={"members": True},
        reading_order_chapters=CHAPTERS,
        reading_order_api=API,
    )
    tiny_site.write(
        "docs/index.rst",
        """
        Tiny
        ====

        .. reading-order-toctree::
           :caption: Chapters
           :maxdepth: 1

        .. toctree::

           api
        """,
    )
    for docname, _ in CHAPTERS:
        title = f"Page {docname}"
        tiny_site.write(f"docs/{docname}.rst", f"{title}\n{'=' * len(title)}\n\nText.\n")
    tiny_site.write("docs/api.rst", "API\n===\n\n.. reading-order-api::\n")
    return tiny_site


def test_the_chapters_toctree_lists_the_chapters_in_the_given_order_with_their_titles(site):
    app = site.build()
    assert app.warnings == ""
    assert app.env.toctree_includes["index"] == ["chapters/b", "chapters/a", "chapters/c", "api"]
    index = site.html("index")
    links = re.findall(r'href="(chapters/\w+)\.html">([^<]+)<', index)
    assert links[:3] == [("chapters/b", "1. Bee"), ("chapters/a", "2. Ay"), ("chapters/c", "3. Sea")]
    assert "Chapters" in index  # the caption option is Sphinx's own
    # Sphinx's next/previous links follow the same order.
    assert re.search(r'<link rel="next" title="[^"]*" href="a\.html"', site.html("chapters/b"))


def test_a_chapter_without_a_page_is_a_warning(site):
    site.write(
        "docs/conf.py",
        (site.src / "conf.py").read_text().replace("('chapters/c', '3. Sea')", "('chapters/d', '3. Dee')"),
    )
    app = site.build()
    assert "nonexisting document 'chapters/d'" in app.warnings


def test_the_api_has_a_page_per_part_and_per_module_in_the_given_order(site):
    app = site.build()
    assert app.warnings == ""
    assert app.env.toctree_includes["api"] == ["api/tinyorder.core", "api/tinyorder.tools"]
    assert app.env.toctree_includes["api/tinyorder.core"] == ["api/tinyorder.core.masks", "api/tinyorder.core.config"]
    index = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", site.html("api")))
    # The index: each part, in order, with its docstring's first line, its modules under it.
    positions = [
        index.index(text)
        for text in ("The core: what everything is built from.", "Masks ", "Configuration ", "Tools: odds and ends.")
    ]
    assert positions == sorted(positions)
    core = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", site.html("api/tinyorder.core")))
    assert core.index("The core: what everything is built from.") < core.index("Masks: which keys a query may see.")
    assert 'id="module-tinyorder.core"' in site.html("api/tinyorder.core")
    masks = site.html("api/tinyorder.core.masks")
    assert 'id="module-tinyorder.core.masks"' in masks and 'id="tinyorder.core.masks.causal"' in masks
    assert "Configuration: the numbers." not in masks  # one module a page
    assert 'id="module-tinyorder.tools"' in site.html("api/tinyorder.tools")  # a one-module part is its page


def test_a_part_that_is_gone_loses_its_page(site):
    site.build()
    stale = site.src / "api" / "tinyorder.old.rst"
    stale.write_text("Old\n===\n")
    site.build()
    assert not stale.exists()
    assert (site.src / "api" / "tinyorder.core.rst").is_file()
    assert (site.src / "api" / "tinyorder.core.masks.rst").is_file()


def test_an_unknown_part_is_an_error(site):
    site.write("docs/extra.rst", "Extra\n=====\n\n.. reading-order-api:: tinyorder.nothing\n")
    app = site.build()
    assert "no part or module named 'tinyorder.nothing'" in app.warnings


def test_the_names_link_to_their_entries(site):
    site.write(
        "docs/conf.py",
        (site.src / "conf.py").read_text() + "\nreading_order_names = [('t.causal', 'tinyorder.core.masks.causal')]\n",
    )
    site.write("docs/names.rst", "Names\n=====\n\n.. reading-order-names::\n")
    app = site.build()
    names = site.html("names")
    assert "t.causal" in names and 'href="api/tinyorder.core.masks.html#tinyorder.core.masks.causal"' in names
    assert "reference target not found" not in app.warnings


def test_api_lines_give_a_part_its_intro_and_a_module_its_entry():
    sections = [("pkg.core", "pkg.core", ["pkg.core.a"]), ("pkg.tools", None, ["pkg.tools"])]
    part = "\n".join(reading_order.api_lines(sections, "pkg.core"))
    assert ".. automodule:: pkg.core\n   :no-members:" in part and "   a <pkg.core.a>" in part
    assert ".. automodule:: pkg.core.a\n" in "\n".join(reading_order.api_lines(sections, "pkg.core.a"))
    tools = "\n".join(reading_order.api_lines(sections, "pkg.tools"))
    assert "pkg.tools\n=========" in tools and ".. automodule:: pkg.tools" in tools
    with pytest.raises(ValueError, match="no part or module named 'pkg.other'"):
        reading_order.api_lines(sections, "pkg.other")


def test_a_modules_title_is_its_docstrings_lead_in(monkeypatch, tmp_path):
    (tmp_path / "titled_mod.py").write_text('"""Masks: which keys."""\n')
    (tmp_path / "plain_mod.py").write_text('"""No lead-in here."""\n')
    (tmp_path / "role_mod.py").write_text('"""See :mod:`x`: a role, not a lead-in."""\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    assert reading_order.module_title("titled_mod") == "Masks"
    assert reading_order.module_title("plain_mod") == "plain_mod"
    assert reading_order.module_title("role_mod") == "role_mod"
