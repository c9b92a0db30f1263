"""docs/_ext/lean_theme.py: the filter that takes Font Awesome's script out of the theme's pages."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import lean_theme  # noqa: E402

# The theme's block as pydata-sphinx-theme writes it (its webpack macros), digest and all.
HEAD = """  <link href="../_static/styles/theme.css?digest=90905a" rel="stylesheet" />
  <!-- So that users can add custom icons -->
  <script defer src="../_static/scripts/fontawesome.js?digest=90905a"></script>
  <link rel="preload" as="script" href="../_static/scripts/bootstrap.js?digest=90905a" />
  <script src="../_static/documentation_options.js?v=1"></script>
"""


def test_the_script_tag_goes_and_everything_else_stays():
    lean = lean_theme.without_script(HEAD, lean_theme.SCRIPT)
    assert "fontawesome.js" not in lean
    assert lean == HEAD.replace('  <script defer src="../_static/scripts/fontawesome.js?digest=90905a"></script>\n', "")
    # The preload of another script and a script of another name are kept.
    assert "bootstrap.js?digest=90905a" in lean and "documentation_options.js" in lean


def test_a_page_without_the_script_is_unchanged():
    page = '<script src="_static/scripts/bootstrap.js"></script>\n'
    assert lean_theme.without_script(page, lean_theme.SCRIPT) == page


def test_the_result_is_markup_the_template_prints_as_it_is():
    assert hasattr(lean_theme.without_script(HEAD, lean_theme.SCRIPT), "__html__")


@pytest.mark.parametrize(("path", "error"), [(None, TypeError), ("", ValueError)])
def test_a_bad_path_is_refused(path, error):
    with pytest.raises(error, match="path"):
        lean_theme.without_script(HEAD, path)
