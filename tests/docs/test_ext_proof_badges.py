"""Proof badges: their text, the proofs page, a build that fails over tolerance, and badges where they belong."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")

import proof_badges  # noqa: E402

MEASUREMENT = {
    "subject": "alpha.Head",
    "reference": "torch.nn.Head",
    "test": "tests/test_alpha.py::test_head",
    "max_abs_diff": 2.4e-07,
    "tolerance": 1e-05,
    "example": "tiny",
    "dtype": "float32",
}


def test_a_badge_says_what_it_equals_and_by_how_much():
    assert proof_badges.badge_text(MEASUREMENT) == "= torch.nn.Head · max |Δ| 2.4e-07 (fp32)"


def test_only_measurements_over_their_tolerance_fail():
    over = {**MEASUREMENT, "max_abs_diff": 3e-05}
    assert proof_badges.failures([MEASUREMENT]) == []
    assert proof_badges.failures([MEASUREMENT, over]) == ["alpha.Head = torch.nn.Head: max |Δ| 3e-05 > tolerance 1e-05"]
    assert proof_badges.failures([{**MEASUREMENT, "max_abs_diff": float("nan")}])  # NaN is not within tolerance


def test_the_proofs_page_includes_each_test_by_its_function():
    text = proof_badges.page_text([MEASUREMENT], "tinypkg", "..")
    assert ".. _proof-0-alpha-head:" in text
    assert ".. literalinclude:: ../tests/test_alpha.py\n   :pyobject: test_head" in text
    assert ":dedent:" not in text


def test_the_proofs_page_opens_with_a_table_of_every_proof_linking_to_its_section():
    other = {**MEASUREMENT, "subject": "alpha.Tail", "max_abs_diff": 3.5e-06, "test": "tests/test_alpha.py::test_tail"}
    text = proof_badges.page_text([MEASUREMENT, other], "tinypkg", "..")
    table = text[text.index(".. list-table::") : text.index(".. _proof-0-alpha-head:")]
    rows = table.split("   * - ")[2:]
    assert [row.split("\n")[0] for row in rows] == [
        ":ref:`alpha.Head <proof-0-alpha-head>`",
        ":ref:`alpha.Tail <proof-1-alpha-tail>`",
    ]
    assert "     - 3.5e-06\n     - 1e-05\n     - ``test_alpha.py::test_tail``" in rows[1]


def test_a_test_method_is_included_flush_left():
    method = {**MEASUREMENT, "test": "tests/shared.py::FamilyTests.test_head"}
    text = proof_badges.page_text([method], "tinypkg", "..")
    assert "   :pyobject: FamilyTests.test_head\n   :language: python\n   :dedent:\n" in text


# A provider as the package's proofs module is one: a function returning each proof's measuring function.
PROVIDER = """
from lt_site.measurement import Measurement

DIFFERENCE = {difference!r}


def head():
    return Measurement("alpha.Head", "torch.nn.Head", "tests/test_alpha.py::test_head", DIFFERENCE, 1e-5, "tiny")


def items():
    return {{"alpha.Head = torch.nn.Head": head}}
"""


def _site(tiny_site, difference, in_own_process=True):
    tiny_site.package(
        "tinypkg",
        {"__init__.py": '"""Tiny."""\n', "alpha.py": '"""Alpha."""\n\n\nclass Head:\n    """One head."""\n'},
    )
    tiny_site.write(
        f"proofprovider_{str(difference).replace('.', '_').replace('-', '_')}.py",
        PROVIDER.format(difference=difference),
    )
    tiny_site.write("tests/test_alpha.py", "def test_head():\n    assert True\n")
    root = tiny_site.root / "tinypkg"
    provider = f"proofprovider_{str(difference).replace('.', '_').replace('-', '_')}:items"
    tiny_site.write(
        "docs/conf.py",
        f"""
        import sys
        sys.path.insert(0, {str(tiny_site.root)!r})
        extensions = ["sphinx.ext.autodoc", "sidebyside", "proof_badges"]
        nitpicky = True
        sidebyside_modules = ["tinypkg", "tinypkg.alpha"]
        sidebyside_root = {str(tiny_site.root)!r}
        proof_badges_provider = {provider!r}
        proof_badges_sources = [{str(root)!r}]
        proof_badges_cache = {str(tiny_site.root / "cache" / "proofs.json")!r}
        proof_badges_package = "tinypkg"
        proof_badges_tests_root = {str(tiny_site.root)!r}
        proof_badges_chapters = {{"chapter": ["alpha"]}}
        proof_badges_in_own_process = {in_own_process!r}
        """,
    )
    tiny_site.write(
        "docs/chapter.rst",
        """
        Chapter
        =======

        It builds alpha.

        .. admonition:: In this chapter

           What it teaches.

        The lesson starts here.

        A section
        ---------

        More.
        """,
    )
    tiny_site.write("docs/index.rst", "Index\n=====\n\n.. toctree::\n\n   chapter\n   source/index\n   proofs\n")


def test_badges_stand_on_the_module_page_beside_the_class_and_in_its_chapter(tiny_site):
    # Measured in the build's process (the other test measures in a process of its own, as the site does).
    _site(tiny_site, 2.4e-07, in_own_process=False)
    app = tiny_site.build()
    assert "WARNING" not in app.warnings, app.warnings
    badge = "= torch.nn.Head · max |Δ| 2.4e-07 (fp32)"
    module_page = tiny_site.html("source/tinypkg.alpha")
    assert module_page.count(badge) == 2  # the box at the top, and beside "class Head"
    assert "proofs.html#proof-0-alpha-head" in module_page
    chapter = tiny_site.html("chapter")
    assert chapter.count(badge) == 1
    # After the chapter's opening: the title and the opening come first.
    box = chapter.index('class="lt-proofs lt-proofs-chapter')
    assert chapter.index("What it teaches.") < box < chapter.index("The lesson starts here.")
    proofs = re.sub(r"<[^>]+>", "", tiny_site.html("proofs"))  # the text, highlighting removed
    assert "def test_head():\n    assert True" in proofs and "2.4e-07" in proofs


def test_a_measurement_over_its_tolerance_fails_the_build(tiny_site):
    _site(tiny_site, 5e-04)
    from sphinx.errors import ExtensionError

    with pytest.raises(ExtensionError, match=r"max \|Δ\| 0.0005 > tolerance 1e-05"):
        tiny_site.build()


def _doctree(text: str):
    from docutils.core import publish_doctree

    return publish_doctree(text, settings_overrides={"report_level": 5, "doctitle_xform": False})


def test_a_chapter_opening_is_its_in_this_chapter_admonition():
    tree = _doctree(
        "Title\n=====\n\nFirst words.\n\n.. note:: Aside.\n\n"
        ".. admonition:: In this chapter\n\n   Teaches.\n\nLesson.\n"
    )
    opening = proof_badges.chapter_opening(tree)
    assert opening.astext().startswith("In this chapter")


def test_without_the_admonition_the_opening_is_the_first_paragraph():
    tree = _doctree(
        "Title\n=====\n\nFirst words.\n\nSecond.\n\nSub\n---\n\n.. admonition:: In this chapter\n\n   No.\n"
    )
    assert proof_badges.chapter_opening(tree).astext() == "First words."
    assert proof_badges.chapter_opening(_doctree("no section at all\n")) is None
