"""Executed pages: the notebook download, the table of times, the pages read alone.

The handlers are called with stand-ins for Sphinx's application (they read
a few attributes only), so each behaviour is checked on its own.
"""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")
nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (the docs extras)")

import executed_pages  # noqa: E402


# ---------------------------------------------------------------------------
# The notebook download
# ---------------------------------------------------------------------------
def _notebook(outputs: bool) -> str:
    cell = nbformat.v4.new_code_cell("print(1)")
    if outputs:
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    return nbformat.writes(nbformat.v4.new_notebook(cells=[cell]))


def _page_app(tmp_path, metadata):
    outdir = tmp_path / "_build" / "html"
    outdir.mkdir(parents=True)
    return SimpleNamespace(
        builder=SimpleNamespace(format="html"),
        env=SimpleNamespace(metadata=metadata),
        outdir=str(outdir),
        config=SimpleNamespace(
            nb_execution_mode="off",
            nb_execution_cache_path="",
            executed_pages_site_url="",
            executed_pages_install={},
            myst_substitutions={},
        ),
    )


def test_an_executed_page_offers_its_notebook_with_outputs(tmp_path):
    app = _page_app(tmp_path, {"chapters/one": {"kernelspec": {"name": "python3"}}})
    executed = tmp_path / "_build" / "jupyter_execute" / "chapters" / "one.ipynb"
    executed.parent.mkdir(parents=True)
    executed.write_text(_notebook(outputs=True))
    context = {}
    executed_pages.offer_executed_notebook(app, "chapters/one", "page.html", context, None)
    assert context["ipynb_source"] == "chapters/one.ipynb"
    offered = nbformat.read(tmp_path / "_build" / "html" / "_sources" / "chapters" / "one.ipynb", as_version=4)
    assert offered.cells[0].outputs[0].text == "1\n"


def _executed_with_glue(tmp_path):
    """An executed page whose hidden cell glued a value (myst-nb keeps it in <page>.glue.json) that its text quotes."""
    executed = tmp_path / "_build" / "jupyter_execute" / "chapters" / "one.ipynb"
    executed.parent.mkdir(parents=True)
    cells = [
        nbformat.v4.new_markdown_cell("There are {glue:text}`heads` heads ({func}`~pkg.f`)."),
        nbformat.v4.new_code_cell("glue('heads', 12, display=False)", metadata={"tags": ["remove-cell"]}),
    ]
    executed.write_text(nbformat.writes(nbformat.v4.new_notebook(cells=cells)))
    glue = {"heads": {"output_type": "display_data", "data": {"text/plain": "12"}, "metadata": {}}}
    executed.with_name("one.glue.json").write_text(json.dumps(glue))
    return executed


def test_the_download_pastes_the_glued_values_and_starts_with_the_install_cell(tmp_path):
    app = _page_app(tmp_path, {"chapters/one": {"kernelspec": {"name": "python3"}}})
    app.config.executed_pages_install = {"package": "literate_transformer @ git+https://github.com/o/r", "no_deps": []}
    _executed_with_glue(tmp_path)
    executed_pages.offer_executed_notebook(app, "chapters/one", "page.html", {}, None)
    offered = nbformat.read(tmp_path / "_build" / "html" / "_sources" / "chapters" / "one.ipynb", as_version=4)
    assert [cell.cell_type for cell in offered.cells] == ["code", "markdown"]
    assert "git+https://github.com/o/r" in offered.cells[0].source
    assert offered.cells[1].source == "There are 12 heads (`f()`)."


def test_a_glued_name_the_download_cannot_find_is_a_warning(tmp_path, sphinx_warnings):
    app = _page_app(tmp_path, {"chapters/one": {"kernelspec": {"name": "python3"}}})
    _executed_with_glue(tmp_path).with_name("one.glue.json").unlink()
    executed_pages.offer_executed_notebook(app, "chapters/one", "page.html", {}, None)
    wanted = "chapters/one.ipynb download: no glued value named 'heads'"
    assert any(wanted in message for message in sphinx_warnings), sphinx_warnings


# ---------------------------------------------------------------------------
# The launch links
# ---------------------------------------------------------------------------
LAUNCH = {
    "repository_url": "https://github.com/owner/book.git",
    "branch": "notebooks",
    "colab_url": "https://colab.research.google.com/",
    "binderhub_url": "https://mybinder.org",
}


def test_the_launch_links_open_the_downloaded_notebook_on_the_branch_it_is_published_to():
    buttons = executed_pages.launch_links(LAUNCH, "chapters/02_attention")
    assert [(button["text"], button["url"]) for button in buttons] == [
        ("Colab", "https://colab.research.google.com/github/owner/book/blob/notebooks/chapters/02_attention.ipynb"),
        ("Binder", "https://mybinder.org/v2/gh/owner/book/notebooks?urlpath=lab/tree/chapters/02_attention.ipynb"),
    ]
    # The theme's own icons, served by the site.
    assert [button["icon"] for button in buttons] == ["_static/images/logo_colab.png", "_static/images/logo_binder.svg"]


def test_a_launch_link_to_a_repository_not_on_github_is_refused_naming_it():
    with pytest.raises(ValueError, match="repository_url must be a GitHub repository"):
        executed_pages.launch_links({**LAUNCH, "repository_url": "https://gitlab.com/o/r"}, "chapters/one")


def test_only_a_page_that_offers_its_notebook_gets_launch_links():
    app = SimpleNamespace(builder=SimpleNamespace(format="html"), config=SimpleNamespace(executed_pages_launch=LAUNCH))
    offered = {"ipynb_source": "chapters/one.ipynb", "header_buttons": []}
    other = {"header_buttons": []}
    executed_pages.offer_launch_links(app, "chapters/one", "page.html", offered, None)
    executed_pages.offer_launch_links(app, "api", "page.html", other, None)
    assert [group["label"] for group in offered["header_buttons"]] == ["launch-buttons"]
    assert [button["text"] for button in offered["header_buttons"][0]["buttons"]] == ["Colab", "Binder"]
    assert other["header_buttons"] == []


def test_a_page_that_is_not_a_notebook_offers_nothing(tmp_path):
    app = _page_app(tmp_path, {"api": {}})
    context = {}
    executed_pages.offer_executed_notebook(app, "api", "page.html", context, None)
    assert "ipynb_source" not in context


def test_a_missing_executed_notebook_is_a_warning(tmp_path, sphinx_warnings):
    app = _page_app(tmp_path, {"chapters/one": {"kernelspec": {"name": "python3"}}})
    context = {}
    executed_pages.offer_executed_notebook(app, "chapters/one", "page.html", context, None)
    assert "ipynb_source" not in context
    assert any("download is missing" in message for message in sphinx_warnings), sphinx_warnings


# ---------------------------------------------------------------------------
# The table of execution times
# ---------------------------------------------------------------------------
def test_execution_rows_say_how_each_page_ran(tmp_path):
    started = time.time()
    gallery = tmp_path / "auto_examples"
    gallery.mkdir()
    old = gallery / "plot_old.rst"
    old.write_text("**Total running time of the script:** (0 minutes 2.500 seconds)\n")
    os.utime(old, (started - 100, started - 100))
    (gallery / "plot_new.rst").write_text("**Total running time of the script:** (1 minutes 0.250 seconds)\n")
    (gallery / "index.rst").write_text("no time here\n")
    metadata = {
        "chapters/ran": {"exec_data": {"method": "cache", "mtime": started + 1, "runtime": 3.0, "succeeded": True}},
        "chapters/cached": {"exec_data": {"method": "cache", "mtime": started - 50, "runtime": 5.0}},
        "chapters/broken": {"exec_data": {"succeeded": False, "runtime": 1.0}},
        "chapters/gone": {"exec_data": {"runtime": 9.0}},
        "api": {},
    }
    app = SimpleNamespace(
        lt_build_started=started,
        env=SimpleNamespace(nb_metadata=metadata, found_docs={"chapters/ran", "chapters/cached", "chapters/broken"}),
        config=SimpleNamespace(sphinx_gallery_conf={"gallery_dirs": "auto_examples"}),
        srcdir=str(tmp_path),
    )
    rows = executed_pages.execution_rows(app)
    assert rows == [
        ("chapters/broken", "FAILED", 1.0),
        ("chapters/cached", "cached", 5.0),
        ("chapters/ran", "executed", 3.0),
        ("auto_examples/plot_new", "executed", pytest.approx(60.25)),
        ("auto_examples/plot_old", "cached", pytest.approx(2.5)),
    ]


# ---------------------------------------------------------------------------
# Each executed page read on its own
# ---------------------------------------------------------------------------
def _start_order(chunks, nproc):
    """The order in which Sphinx's ParallelTasks starts the chunks, observed: each records itself on starting."""
    import tempfile

    from sphinx.util.parallel import ParallelTasks

    with tempfile.TemporaryDirectory() as folder:
        log = os.path.join(folder, "started")

        def start(chunk):
            with open(log, "a") as handle:
                handle.write(",".join(chunk) + "\n")
            time.sleep(0.05)

        tasks = ParallelTasks(nproc)
        for chunk in chunks:
            tasks.add_task(start, chunk)
        tasks.join()
        with open(log) as handle:
            return [line.strip().split(",") for line in handle]


def test_the_pages_read_alone_start_first_lowest_rank_first_then_the_rest_in_sphinxs_chunks():
    from sphinx.util.parallel import make_chunks

    docnames = ["api", *(f"chapters/{i:02}" for i in range(1, 9)), *(f"source/m{i:02}" for i in range(40))]
    ranks = {f"chapters/{i:02}": float(rank) for i, rank in enumerate([2, 0, 2, 1, 2, 2, 2, 0], start=1)}
    chunks = executed_pages.balanced_chunks(docnames, 1, ranks.get)
    wanted = [["chapters/02"], ["chapters/08"], ["chapters/04"], ["chapters/01"], ["chapters/03"],
              ["chapters/05"], ["chapters/06"], ["chapters/07"]]  # fmt: skip
    light = [name for name in docnames if name not in ranks]
    # One process: the chunks start one after another, in the order wanted.
    assert _start_order(chunks, 1) == wanted + make_chunks(light, 1)
    assert sorted(name for chunk in chunks for name in chunk) == sorted(docnames)


def test_the_chunks_are_sphinxs_own_when_nothing_is_read_alone_and_again_after_the_read():
    import sphinx.builders
    from sphinx.util.parallel import make_chunks

    docnames = [f"d{i:02}" for i in range(50)]
    chunks = make_chunks(docnames, 2)
    assert executed_pages.balanced_chunks(docnames, 2, lambda name: None) == chunks[:2] + chunks[2:][::-1]
    app = SimpleNamespace(env=None, config=SimpleNamespace(executed_pages_read_alone=["d07", "d0*"]))
    executed_pages.read_executed_pages_alone(app)
    assert sphinx.builders.make_chunks is not make_chunks
    assert sphinx.builders.make_chunks(docnames, 2)[:2] == [["d07"], ["d00"]]
    executed_pages.restore_chunks(app, None)
    assert sphinx.builders.make_chunks is make_chunks


# ---------------------------------------------------------------------------
# A whole build: the download's links and the launch links, as the theme shows them
# ---------------------------------------------------------------------------
def test_a_built_pages_download_links_its_names_to_the_hosted_site_and_its_header_offers_launch_links(tiny_site):
    pytest.importorskip("myst_nb", reason="myst-nb is not installed (the docs extras)")
    pytest.importorskip("sphinx_book_theme", reason="sphinx-book-theme is not installed (the docs extras)")
    tiny_site.package(
        "tinypkg", {"__init__.py": '"""A package."""\n\n\ndef add(x):\n    """Add one."""\n    return x + 1\n'}
    )
    tiny_site.conf(
        ["myst_nb", "sphinx.ext.autodoc", "executed_pages"],
        html_theme="sphinx_book_theme",
        nb_execution_mode="off",
        executed_pages_site_url="https://example.org/book",
        executed_pages_launch=LAUNCH,
        exclude_patterns=["_build"],
    )
    tiny_site.write("docs/index.md", "# Home\n\n```{toctree}\nchapters/one\napi\n```\n\n(the-label)=\n## A section\n")
    tiny_site.write("docs/api.rst", "API\n===\n\n.. automodule:: tinypkg\n   :members:\n")
    tiny_site.write(
        "docs/chapters/one.md",
        """
        ---
        file_format: mystnb
        kernelspec:
          name: python3
          display_name: Python 3
        language_info:
          name: python
          pygments_lexer: ipython3
        ---

        # One

        {func}`~tinypkg.add`, {doc}`../api`, {ref}`the-label` and {class}`int`.

        ```{code-cell} ipython3
        1 + 1
        ```
        """,
    )
    app = tiny_site.build()
    assert "WARNING" not in app.warnings, app.warnings
    download = nbformat.read(tiny_site.build_dir / "html" / "_sources" / "chapters" / "one.ipynb", as_version=4)
    assert download.cells[0].source == (
        "# One\n\n[`add()`](https://example.org/book/api.html#tinypkg.add), "
        "[API](https://example.org/book/api.html), "
        "[A section](https://example.org/book/index.html#the-label) and `int`."
    )
    page = tiny_site.html("chapters/one")
    # The theme's header: the download, and the launch links (links only: nothing is loaded from them).
    assert 'href="../_sources/chapters/one.ipynb"' in page
    assert 'href="https://colab.research.google.com/github/owner/book/blob/notebooks/chapters/one.ipynb"' in page
    assert 'href="https://mybinder.org/v2/gh/owner/book/notebooks?urlpath=lab/tree/chapters/one.ipynb"' in page
    assert 'src="https://' not in page
