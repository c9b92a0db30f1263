"""The downloaded notebook: a chapter's MyST turned into the Markdown Jupyter renders, one construct at a time.

``notebook_download`` is a pure function of the executed notebook and of
what it is told about the site; these tests feed it strings and small
notebooks.  No Sphinx, no docutils.
"""

from __future__ import annotations

import base64
import subprocess
import sys
import textwrap

import pytest

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (the docs extras)")

import notebook_download  # noqa: E402
from notebook_download import Context, SiteIndex, convert_markdown  # noqa: E402

SITE = SiteIndex(
    "https://example.org/book/",
    pages={
        "chapters/02_attention": ("chapters/02_attention.html", "Attention, one head"),
        "index": ("index.html", "literate_transformer"),
    },
    labels={"run-it-yourself": ("index.html#run-it-yourself", "Run it yourself")},
    objects={
        "pkg.lora.add": "api/pkg.lora.html#pkg.lora.add",
        "pkg.lora": "api/pkg.lora.html#module-pkg.lora",
        "pkg.Model.forward": "api/pkg.html#pkg.Model.forward",
    },
    terms={"token": "glossary.html#term-token"},
    inventory={"torch.nn.Linear": "https://pytorch.org/docs/stable/generated/torch.nn.Linear.html"},
)
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n-a-tiny-picture").decode("ascii")
GLUE = {
    "ratio": {"text/plain": "0.123456"},
    "name": {"text/plain": "'the mask'"},
    "heads": {"text/plain": "12"},
    "mask-on": {"text/plain": "<Figure size 640x480 with 1 Axes>", "image/png": PNG},
}


def convert(text: str, **context) -> str:
    markdown, _ = convert_markdown(textwrap.dedent(text).strip("\n"), Context(**{"site": SITE, **context}))
    return markdown


def convert_with(text: str, **context) -> tuple[str, dict, Context]:
    context = Context(**{"site": SITE, **context})
    markdown, attachments = convert_markdown(textwrap.dedent(text).strip("\n"), context)
    return markdown, attachments, context


# ---------------------------------------------------------------------------
# Glued values and figures
# ---------------------------------------------------------------------------
def test_a_glued_value_is_its_text_formatted_as_the_role_asks():
    text = "{glue:text}`ratio:.2f`, {glue:text}`heads` heads, {glue:text}`name` and {glue:text}`ratio:.1%`."
    assert convert(text, glue=GLUE) == "0.12, 12 heads, the mask and 12.3%."


def test_the_glued_values_are_read_from_the_outputs_and_from_myst_nbs_glue_file():
    cell = nbformat.v4.new_code_cell("glue('a', 1, display=False)")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"application/papermill.record/text/plain": "1"},
            metadata={"scrapbook": {"name": "a", "mime_prefix": "application/papermill.record/"}},
        )
    ]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    glue_file = {"b": {"output_type": "display_data", "data": {"text/plain": "2"}, "metadata": {}}}
    assert notebook_download.glued_values(notebook, glue_file) == {"a": {"text/plain": "1"}, "b": {"text/plain": "2"}}


def test_a_glued_figure_is_an_image_attached_to_the_cell_where_the_page_shows_it():
    markdown, attachments, _ = convert_with(
        """
        Before.
        ```{glue:figure} mask-on
        :alt: The mask [on].
        :figwidth: 80%

        What the mask does.
        ```
        After.
        """,
        glue=GLUE,
    )
    assert markdown == ("Before.\n![The mask \\[on\\].](attachment:mask-on.png)\n\n*What the mask does.*\n\nAfter.")
    assert attachments == {"mask-on.png": {"image/png": PNG}}


def test_a_glued_name_that_does_not_exist_is_a_problem_naming_it():
    markdown, _, context = convert_with("It took {glue:text}`time-eager` ms.", glue=GLUE)
    assert "{glue" not in markdown
    assert context.problems == ["no glued value named 'time-eager'"]


# ---------------------------------------------------------------------------
# Roles
# ---------------------------------------------------------------------------
def test_a_python_role_is_code_linked_to_the_page_that_documents_it():
    assert (
        convert("{func}`pkg.lora.add`") == "[`pkg.lora.add()`](https://example.org/book/api/pkg.lora.html#pkg.lora.add)"
    )
    assert convert("{mod}`~pkg.lora`") == "[`lora`](https://example.org/book/api/pkg.lora.html#module-pkg.lora)"
    assert (
        convert("{meth}`~pkg.Model.forward`")
        == "[`forward()`](https://example.org/book/api/pkg.html#pkg.Model.forward)"
    )
    assert (
        convert("{func}`add it <pkg.lora.add>`")
        == "[`add it`](https://example.org/book/api/pkg.lora.html#pkg.lora.add)"
    )


def test_a_name_another_site_documents_links_there_and_an_unknown_name_is_code():
    assert (
        convert("{class}`torch.nn.Linear`")
        == "[`torch.nn.Linear`](https://pytorch.org/docs/stable/generated/torch.nn.Linear.html)"
    )
    assert convert("{class}`~pkg.Unknown`") == "`Unknown`"
    assert convert("{func}`!pkg.lora.add`") == "`pkg.lora.add()`"


def test_without_a_site_every_name_is_code_and_every_reference_its_text():
    text = "{func}`~pkg.lora.add`, {doc}`the next one <02_attention>`, {ref}`run-it-yourself`"
    assert convert(text, site=None) == "`add()`, the next one, run-it-yourself"


def test_a_doc_role_links_the_page_read_relative_to_this_one_with_its_title():
    assert convert("{doc}`02_attention`", docname="chapters/01_tokens") == (
        "[Attention, one head](https://example.org/book/chapters/02_attention.html)"
    )
    assert convert("{doc}`the front page <../index>`", docname="chapters/01_tokens") == (
        "[the front page](https://example.org/book/index.html)"
    )
    assert (
        convert("{doc}`/index`", docname="chapters/01_tokens")
        == "[literate_transformer](https://example.org/book/index.html)"
    )


def test_a_ref_role_links_the_section_with_its_title_or_the_text_given():
    assert convert("{ref}`run-it-yourself`") == "[Run it yourself](https://example.org/book/index.html#run-it-yourself)"
    assert convert("{ref}`how <Run-It-Yourself>`") == "[how](https://example.org/book/index.html#run-it-yourself)"


def test_a_reference_the_site_does_not_know_is_a_problem():
    markdown, _, context = convert_with("{doc}`99_missing` and {ref}`nowhere`", docname="chapters/01")
    assert markdown == "99_missing and nowhere"
    assert context.problems == ["no page 'chapters/99_missing' for a {doc} link", "no label 'nowhere' for a {ref} link"]


def test_a_math_role_is_dollar_math_and_dollar_math_stays():
    assert convert(r"{math}`\sqrt{D}` and $QK^\top$ and $$a = b$$") == r"$\sqrt{D}$ and $QK^\top$ and $$a = b$$"


def test_code_roles_and_unknown_roles_are_code_and_a_term_links_the_glossary():
    assert convert("{kbd}`Ctrl` {file}`a.py` {term}`token`") == (
        "`Ctrl` `a.py` [token](https://example.org/book/glossary.html#term-token)"
    )
    assert convert("{newrole}`text`") == "`text`"


def test_code_in_backticks_and_fenced_code_keep_what_looks_like_a_role():
    text = """
    Write `` {func}`x` `` in a page.

    ```python
    print("{func}`x` {{ repository }}")
    ```
    """
    assert convert(text, substitutions={"repository": "R"}) == textwrap.dedent(text).strip("\n")


# ---------------------------------------------------------------------------
# Directives
# ---------------------------------------------------------------------------
def test_an_admonition_is_a_quoted_block_with_its_title_in_bold():
    text = """
    :::{admonition} In this chapter
    :class: tip
    **You will learn** to read {func}`~pkg.lora.add`.

    Second paragraph.
    :::
    """
    assert convert(text, site=None) == (
        "> **In this chapter**\n>\n> **You will learn** to read `add()`.\n>\n> Second paragraph."
    )


def test_a_note_or_a_seealso_takes_its_own_title_and_its_argument_is_text():
    assert convert("```{seealso} The other chapter.\n```") == "> **See also**\n>\n> The other chapter."
    assert convert(":::{note}\nMind the mask.\n:::") == "> **Note**\n>\n> Mind the mask."


def test_tabs_become_sections_one_after_another_one_level_below_the_heading_they_follow():
    text = """
    ## What if the mask were left out?

    ::::{tab-set}
    :::{tab-item} Mask on
    ```{glue:figure} mask-on
    ```
    Largest weight {glue:text}`ratio:.3f`.
    :::
    :::{tab-item} Mask off
    All keys.
    :::
    ::::

    Next.
    """
    markdown, attachments, _ = convert_with(text, glue=GLUE)
    assert markdown == (
        "## What if the mask were left out?\n\n"
        "### Mask on\n\n![mask-on](attachment:mask-on.png)\n\nLargest weight 0.123.\n\n"
        "### Mask off\n\nAll keys.\n\n"
        "Next."
    )
    assert list(attachments) == ["mask-on.png"]


def test_a_literalinclude_is_the_code_of_the_object_it_names(tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "module.py").write_text(
        "import torch\n\n\n@torch.no_grad()\ndef loop(x):\n    # Add one.\n    return x + 1\n\n\nclass A:\n"
        "    def f(self):\n        return 2\n"
    )
    pages = tmp_path / "pages"
    pages.mkdir()
    text = "The loop:\n\n```{literalinclude} ../code/module.py\n:pyobject: loop\n```\n\nDone."
    assert convert(text, source_folder=pages) == (
        "The loop:\n\n```python\n@torch.no_grad()\ndef loop(x):\n    # Add one.\n    return x + 1\n```\n\nDone."
    )
    method = "```{literalinclude} ../code/module.py\n:pyobject: A.f\n:dedent:\n```"
    assert convert(method, source_folder=pages) == "```python\ndef f(self):\n    return 2\n```"
    lines = "```{literalinclude} ../code/module.py\n:lines: 1,5-6\n:language: text\n```"
    assert convert(lines, source_folder=pages) == "```text\nimport torch\ndef loop(x):\n    # Add one.\n```"


def test_a_literalinclude_cuts_at_the_lines_its_quoted_options_name(tmp_path):
    (tmp_path / "module.py").write_text(
        'def f():\n    # 3. Count\n    counts = {"a": 1}\n    return counts\n    # after\n'
    )
    # MyST reads option values as YAML: a quoted value keeps its spaces, and its escaped quotes are quotes.
    at = r"""```{literalinclude} module.py
:start-at: "    # 3. Count"
:end-at: "{\"a\": 1}"
:dedent: 4
```"""
    assert convert(at, source_folder=tmp_path) == '```python\n# 3. Count\ncounts = {"a": 1}\n```'
    after = "```{literalinclude} module.py\n:start-after: '# 3. Count'\n:end-before: '# after'\n:dedent:\n```"
    assert convert(after, source_folder=tmp_path) == '```python\ncounts = {"a": 1}\nreturn counts\n```'


def test_a_literalinclude_of_a_missing_file_or_object_is_a_problem(tmp_path):
    (tmp_path / "module.py").write_text("x = 1\n")
    _, _, context = convert_with("```{literalinclude} gone.py\n```", source_folder=tmp_path)
    _, _, other = convert_with("```{literalinclude} module.py\n:pyobject: nothing\n```", source_folder=tmp_path)
    assert context.problems[0].startswith("{literalinclude} gone.py: no such file")
    assert other.problems == ["{literalinclude} module.py: no object 'nothing'"]


def test_a_cards_link_links_its_title():
    text = ":::{grid-item-card} Build BERT\n:link: chapters/02_attention\n:link-type: doc\n\nChapters 1-11.\n:::"
    assert convert(text) == (
        "> **[Build BERT](https://example.org/book/chapters/02_attention.html)**\n>\n> Chapters 1-11."
    )


def test_a_table_of_contents_shows_nothing_and_an_unknown_directive_its_content():
    assert convert("A.\n\n```{toctree}\n:maxdepth: 1\nchapters/01\n```\n\nB.") == "A.\n\nB."
    assert convert(":::{grid}\n:gutter: 2\nInside.\n:::") == "Inside."


# ---------------------------------------------------------------------------
# Substitutions, targets, comments
# ---------------------------------------------------------------------------
def test_substitutions_are_replaced_and_an_unknown_one_is_a_problem():
    markdown, _, context = convert_with("Clone {{ repository }}; {{ nothing }}.", substitutions={"repository": "R"})
    assert markdown == "Clone R; {{ nothing }}."
    assert context.problems == ["no substitution named 'nothing'"]


def test_targets_and_comments_are_left_out():
    assert convert("(run-it)=\n## Run it\n% a note to the authors\nText.") == "## Run it\nText."


# ---------------------------------------------------------------------------
# The notebook
# ---------------------------------------------------------------------------
def _executed_notebook():
    cells = [
        nbformat.v4.new_markdown_cell("# Title\n\n{glue:text}`heads` heads."),
        nbformat.v4.new_code_cell("print(1)", metadata={"tags": ["hide-input"]}),
        nbformat.v4.new_code_cell("glue('heads', 12)", metadata={"tags": ["remove-cell"]}),
    ]
    cells[1].outputs = [nbformat.v4.new_output("display_data", data={"image/png": PNG, "text/plain": "fig"})]
    return nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "P"}})


def test_the_download_leaves_out_the_sites_cells_and_starts_with_the_install_cell():
    executed = _executed_notebook()
    before = nbformat.writes(executed)
    download = notebook_download.convert_notebook(executed, Context(glue=GLUE), install="print('install')")
    assert [cell.source for cell in download.cells] == ["print('install')", "# Title\n\n12 heads.", "print(1)"]
    assert download.cells[0].metadata["tags"] == [notebook_download.INSTALL_CELL_TAG]
    assert download.cells[2].outputs == executed.cells[1].outputs
    nbformat.validate(download)
    assert nbformat.writes(executed) == before, "the executed notebook was changed"


def test_the_downloads_cell_ids_are_the_same_in_every_build():
    # nbformat draws each new cell's id at random: every read of a page gives the executed notebook new ones.
    first, second = _executed_notebook(), _executed_notebook()
    second.cells.insert(2, nbformat.v4.new_code_cell("print(1)"))  # the same source again, in another cell
    first.cells.insert(2, nbformat.v4.new_code_cell("print(1)"))
    assert [cell.id for cell in first.cells] != [cell.id for cell in second.cells]
    downloads = [
        notebook_download.convert_notebook(executed, Context(glue=GLUE), install="print('install')")
        for executed in (first, second)
    ]
    ids = [[cell.id for cell in download.cells] for download in downloads]
    assert ids[0] == ids[1]
    assert ids[0][0] == notebook_download.INSTALL_CELL_TAG and len(set(ids[0])) == len(ids[0]) == 4
    nbformat.validate(downloads[0])


def _stream(text):
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def test_a_stream_myst_nb_merged_into_its_first_output_is_shown_once():
    # myst-nb's notebook: the first output holds every piece, the later ones are still there.
    merged = [_stream("a\nb\n"), nbformat.v4.new_output("execute_result", data={"text/plain": "1"}), _stream("b\n")]
    assert notebook_download.merge_streams(merged) == merged[:2]
    # Pieces never merged are all kept.
    apart = [_stream("a\n"), _stream("b\n")]
    assert notebook_download.merge_streams(apart) == apart


def test_the_download_shows_each_stream_once_where_the_site_merged_them():
    cell = nbformat.v4.new_code_cell("print('a'); print('b')")
    cell.outputs = [_stream("a\nb\n"), _stream("b\n")]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    assert len(notebook_download.convert_notebook(notebook, Context(streams_merged=True)).cells[0].outputs) == 1
    assert len(notebook_download.convert_notebook(notebook, Context()).cells[0].outputs) == 2


def test_the_images_of_a_notebook_are_its_image_outputs_and_attached_images():
    download = notebook_download.convert_notebook(_executed_notebook(), Context(glue=GLUE))
    assert notebook_download.count_images(download) == 1
    download.cells[0].source += "\n![a](attachment:mask-on.png)"
    assert notebook_download.count_images(download) == 2


def test_the_install_cell_installs_only_where_the_package_does_not_import():
    from IPython.core.inputtransformer2 import TransformerManager

    source = notebook_download.install_cell(
        "literate_transformer @ git+https://github.com/o/r", ["wheel-a", "wheel-b"], torch_index="https://i/cpu"
    )
    python = TransformerManager().transform_cell(source)
    compile(python, "install", "exec")
    namespace = {"get_ipython": lambda: pytest.fail("installed although the package imports")}
    exec(python.replace('find_spec("literate_transformer")', 'find_spec("notebook_download")'), namespace)
    calls = []
    shell = type("Shell", (), {"run_line_magic": lambda self, magic, line: calls.append((magic, line))})()
    exec(python.replace('find_spec("literate_transformer")', 'find_spec("no_such_module_here")'),
         {"get_ipython": lambda: shell})  # fmt: skip
    assert [magic for magic, _ in calls] == ["pip", "pip"]
    assert '"literate_transformer @ git+https://github.com/o/r"' in calls[0][1]
    assert calls[1][1] == "install --no-deps wheel-a wheel-b"


def test_an_install_cell_without_a_package_is_refused_naming_it():
    with pytest.raises(ValueError, match="package must be a requirement"):
        notebook_download.install_cell("", ["a"])
    with pytest.raises(ValueError, match="no_deps must be a list"):
        notebook_download.install_cell("p", "a b")


def test_a_site_address_that_is_not_http_is_refused_naming_it():
    with pytest.raises(ValueError, match="SiteIndex url must be an http"):
        SiteIndex("docs/_build/html")


def test_the_conversion_imports_neither_sphinx_nor_docutils():
    code = "import sys, notebook_download; print(sorted(m for m in sys.modules if m.split('.')[0] in ('sphinx', 'docutils')))"
    folder = notebook_download.__file__.rsplit("/", 1)[0]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=folder)
    assert result.stdout.strip() == "[]"


def test_the_modules_examples_run():
    import doctest

    assert doctest.testmod(notebook_download).failed == 0


def test_nbconvert_draws_a_glued_figure_attached_to_its_cell():
    nbconvert = pytest.importorskip("nbconvert", reason="nbconvert is not installed (the browser extras)")
    executed = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("```{glue:figure} mask-on\n```")])
    download = notebook_download.convert_notebook(executed, Context(glue=GLUE))
    html, _ = nbconvert.HTMLExporter().from_notebook_node(download)
    assert f'src="data:image/png;base64,{PNG}"' in html
