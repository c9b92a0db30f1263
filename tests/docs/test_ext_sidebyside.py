"""The side-by-side Sphinx glue, on a tiny project: generated pages, links, rebuilds.

A two-module package, one chapter page and an API page that documents one
of the two modules; the extension's settings name the modules, their
order and their chapters, as the site's ``conf.py`` does from the
package's manifest.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")

import sidebyside  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:The mapping interface for autodoc options")

PACKAGE = {
    "__init__.py": '''
        """Tiny: a package to read."""
    ''',
    "alpha.py": '''
        """Alpha: the first module.

        Its article.
        """


        class Head:
            """One head.

            Args:
                size: Its size.
            """

            def __init__(self, size):
                # Scale by $1 / \\sqrt{D}$, as :func:`~tinypkg.beta.helper` does.
                self.scale = size**-0.5  # ()
    ''',
    "beta.py": '''
        """Beta: the helper."""


        def helper():
            """Help."""
            return 1
    ''',
}


def conf(root, modules=("tinypkg", "tinypkg.alpha", "tinypkg.beta")) -> str:
    return f"""
        extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax", "sidebyside"]
        nitpicky = True
        sidebyside_modules = {list(modules)!r}
        sidebyside_root = {str(root)!r}
        sidebyside_chapters = {{
            "tinypkg.alpha": ("chapters/one", "chapter 1, Alpha"),
            "tinypkg.beta": (None, "Every chapter leans on this module"),
        }}
    """


@pytest.fixture
def site(tiny_site):
    tiny_site.package("tinypkg", PACKAGE)
    tiny_site.write("docs/conf.py", conf(tiny_site.root))
    tiny_site.write(
        "docs/index.rst",
        """
        Tiny
        ====

        .. toctree::

           chapters/one
           api
           source/index
        """,
    )
    tiny_site.write("docs/chapters/one.rst", "Alpha\n=====\n\nThe chapter.\n")
    tiny_site.write("docs/api.rst", "API\n===\n\n.. automodule:: tinypkg.alpha\n   :members:\n")
    return tiny_site


def test_one_page_per_module_and_an_index_in_the_given_order(site):
    app = site.build()
    assert app.warnings == ""
    pages = site.src / "source"
    assert sorted(path.name for path in pages.glob("*.rst")) == [
        "index.rst",
        "tinypkg.alpha.rst",
        "tinypkg.beta.rst",
        "tinypkg.rst",
    ]
    index = (pages / "index.rst").read_text()
    order = [index.index(f":doc:`{name}`") for name in ("tinypkg", "tinypkg.alpha", "tinypkg.beta")]
    assert order == sorted(order)
    assert "Alpha: the first module." in index
    assert "Built in :doc:`chapter 1, Alpha </chapters/one>`." in index


def test_the_page_shows_prose_beside_code_with_comment_math_as_math(site):
    site.build()
    page = site.html("source/tinypkg.alpha")
    assert 'class="lt-sbs-block' in page and 'class="lt-sbs-code' in page
    assert r"\(1 / \sqrt{D}\)" in page  # MathJax inline math, not the raw "$...$"
    assert "$1 /" not in page
    text = re.sub(r"<[^>]+>", "", page)
    assert "self.scale = size**-0.5  # ()" in text  # the code, with its trailing shape comment
    # Napoleon's "Args:" rendered as the API reference renders it.
    assert "Parameters" in page and "size" in page


def test_each_code_line_is_a_span_that_names_its_source_line(site):
    site.build()
    page = site.html("source/tinypkg.alpha")
    source = (site.root / "tinypkg" / "alpha.py").read_text().splitlines()
    number = next(index for index, line in enumerate(source, start=1) if "self.scale" in line)
    span = re.search(rf'<span class="lt-line" data-line="{number}" style="--indent: 8ch">(.*?)</span>\n', page)
    assert span and "self" in span.group(1)


def test_other_builders_render_the_code_as_a_plain_literal_block(site):
    app = site.build("text")
    assert app.warnings == ""
    text = (site.build_dir / "text" / "source" / "tinypkg.alpha.txt").read_text()
    assert "self.scale = size**-0.5  # ()" in text


def test_the_page_links_to_the_chapter_that_builds_the_module(site):
    site.build()
    alpha = site.html("source/tinypkg.alpha")
    assert re.search(r'Built in <a class="reference internal" href="\.\./chapters/one\.html">', alpha)
    beta = site.html("source/tinypkg.beta")
    assert "Every chapter leans on this module." in beta
    assert "chapters/one.html" not in beta.split('class="lt-sbs-api"')[1].split("</p>")[0]


def test_api_links_exist_only_where_the_api_reference_documents_the_target(site):
    site.build()
    alpha = site.html("source/tinypkg.alpha")
    assert 'href="../api.html#module-tinypkg.alpha"' in alpha
    assert 'href="../api.html#tinypkg.alpha.Head"' in alpha
    beta = site.html("source/tinypkg.beta")
    # beta is not in the API reference: its name is plain code, not a dead link, and nothing warns.
    assert "api.html" not in beta


def test_the_api_entry_links_to_the_annotated_page_and_the_chapter(site):
    site.build()
    api = site.html("api")
    assert 'href="source/tinypkg.alpha.html"' in api
    assert 'href="chapters/one.html"' in api


def test_an_unchanged_rebuild_rewrites_no_page_and_reads_nothing(site):
    site.build()
    stubs = {path: path.stat().st_mtime_ns for path in (site.src / "source").glob("*.rst")}
    again = site.build()
    assert {path: path.stat().st_mtime_ns for path in (site.src / "source").glob("*.rst")} == stubs
    assert "0 added, 0 changed, 0 removed" in again.status.getvalue()


def test_editing_a_module_rebuilds_its_page_only(site):
    site.build()
    alpha = site.root / "tinypkg" / "alpha.py"
    alpha.write_text(alpha.read_text().replace("One head.", "One attention head."))
    again = site.build()
    status = re.sub(r"\x1b\[[0-9;]*m", "", again.status.getvalue())  # without colours
    assert re.search(r"0 added, [1-9]\d* changed, 0 removed", status)
    assert "One attention head." in site.html("source/tinypkg.alpha")
    reread = re.findall(r"reading sources\.\.\. \[[^\]]*\] (\S+)", status)
    assert "source/tinypkg.alpha" in reread and "source/tinypkg.beta" not in reread


def test_a_module_dropped_from_the_settings_loses_its_page(site):
    site.build()
    site.write("docs/conf.py", conf(site.root, modules=("tinypkg", "tinypkg.alpha")))
    app = site.build()
    assert not (site.src / "source" / "tinypkg.beta.rst").exists()
    assert "tinypkg.beta" not in (site.src / "source" / "index.rst").read_text()
    assert app.warnings == ""


def test_a_listed_module_without_a_file_is_a_warning(site):
    site.write("docs/conf.py", conf(site.root, modules=("tinypkg", "tinypkg.gamma")))
    app = site.build()
    assert "no source file" in app.warnings and "tinypkg.gamma" in app.warnings


def test_module_paths_are_files_or_package_inits(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    assert sidebyside.module_path(tmp_path, "pkg") == tmp_path / "pkg" / "__init__.py"
    assert sidebyside.module_path(tmp_path, "pkg.sub") == tmp_path / "pkg" / "sub" / "__init__.py"
    assert sidebyside.module_path(tmp_path, "pkg.sub.mod") == tmp_path / "pkg" / "sub" / "mod.py"
