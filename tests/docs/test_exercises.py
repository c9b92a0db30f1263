"""Every numbered chapter teaches the same way: an opening, a summary, exercises with executed solutions.

The chapters are the ones of the reading order
(:data:`literate_transformer.manifest.CHAPTERS`), read with myst-nb's own
reader, so these tests see the cells and tags the site build sees.

* **Exercises.**  Each chapter ends its teaching with a ``## Exercises``
  section of 2 to 4 exercises, ``**Exercise 1 ...**`` to ``**Exercise n ...**``,
  each followed by exactly one solution: a code cell tagged
  ``exercise-solution`` and ``hide-cell``.  myst-nb executes it with the rest
  of the page (so a solution that raises fails the build) and shows it folded
  until the reader opens it.  A solution cell outside the section, or without
  ``hide-cell``, fails too.
* **Built pages** (``-m site``, after ``nox -s docs``): in the executed
  notebook of each chapter every solution cell has outputs and none of them
  is an error.
* **Orientation and width.**  Each chapter opens with an "In this chapter"
  admonition (what it teaches, what it assumes) and has a ``## Summary``
  section whose last paragraph links forward (the last chapter excepted);
  no line of a code cell is longer than 100 characters, so that code and its
  shape comments fit the page without a horizontal scroll.

The unit checks parse the Markdown only (well under a second); the solutions
themselves run in the site build, which executes every cell.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from literate_transformer import manifest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("LT_SITE_HTML", ROOT / "docs" / "_build" / "html"))
CHAPTERS = [ROOT / "docs" / f"{chapter.docname}.md" for chapter in manifest.CHAPTERS]
SOLUTION_TAG, HIDE_TAG = "exercise-solution", "hide-cell"
MIN_EXERCISES, MAX_EXERCISES = 2, 4
MAX_CODE_WIDTH = 100
EXERCISE = re.compile(r"^\*\*Exercise (\d+)\b", re.MULTILINE)


def read_notebook(path: Path):
    """The chapter as myst-nb reads it: a notebook of Markdown and code cells."""
    read = pytest.importorskip("myst_nb.core.read", reason="myst-nb (the docs extras) is not installed")
    return read.read_myst_markdown_notebook(path.read_text(encoding="utf-8"))


def source(cell) -> str:
    return "".join(cell.source) if isinstance(cell.source, list) else cell.source


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def sections(notebook) -> list[tuple[str, list]]:
    """The notebook's cells grouped by level-2 heading (the part before the first heading is titled "")."""
    grouped: list[tuple[str, list]] = [("", [])]
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            parts = re.split(r"^## +(.+)$", source(cell), flags=re.MULTILINE)
            # parts: text before the first heading, then (title, text) pairs.
            if parts[0].strip():
                grouped[-1][1].append(("markdown", parts[0]))
            for title, text in zip(parts[1::2], parts[2::2], strict=True):
                grouped.append((title.strip(), [("markdown", text)]))
        else:
            grouped[-1][1].append(("code", cell))
    return grouped


@pytest.fixture(scope="module", params=CHAPTERS, ids=[path.stem for path in CHAPTERS])
def chapter(request):
    path = request.param
    assert path.is_file(), f"{path.relative_to(ROOT)} is in the reading order but does not exist"
    return path, read_notebook(path)


def test_the_reading_order_has_chapters():
    assert CHAPTERS


def test_each_chapter_has_an_exercises_section_with_two_to_four_exercises(chapter):
    path, notebook = chapter
    titles = [title for title, _ in sections(notebook)]
    assert "Exercises" in titles, f"{path.name}: no '## Exercises' section"
    _, items = next(section for section in sections(notebook) if section[0] == "Exercises")
    numbers = [int(n) for kind, item in items if kind == "markdown" for n in EXERCISE.findall(item)]
    assert MIN_EXERCISES <= len(numbers) <= MAX_EXERCISES, (
        f"{path.name}: {len(numbers)} exercises, expected {MIN_EXERCISES} to {MAX_EXERCISES}"
    )
    assert numbers == list(range(1, len(numbers) + 1)), f"{path.name}: exercises numbered {numbers}"


def test_each_exercise_is_followed_by_exactly_one_hidden_solution_cell(chapter):
    path, notebook = chapter
    _, items = next((s for s in sections(notebook) if s[0] == "Exercises"), ("", []))
    solutions_per_exercise: list[int] = []
    for kind, item in items:
        if kind == "markdown":
            solutions_per_exercise += [0] * len(EXERCISE.findall(item))
        elif SOLUTION_TAG in tags(item):
            assert solutions_per_exercise, f"{path.name}: a solution cell before the first exercise"
            solutions_per_exercise[-1] += 1
            assert HIDE_TAG in tags(item), f"{path.name}: a solution is not tagged {HIDE_TAG!r} (it would show)"
            assert source(item).strip(), f"{path.name}: an empty solution cell"
        else:
            pytest.fail(f"{path.name}: a code cell in the exercises that is not a solution: {source(item)[:80]!r}")
    assert solutions_per_exercise and all(count == 1 for count in solutions_per_exercise), (
        f"{path.name}: solutions per exercise {solutions_per_exercise}, expected exactly one each"
    )


def test_solution_cells_sit_only_in_the_exercises_section(chapter):
    path, notebook = chapter
    for title, items in sections(notebook):
        if title == "Exercises":
            continue
        for kind, item in items:
            assert kind == "markdown" or SOLUTION_TAG not in tags(item), (
                f"{path.name}: a solution cell in section {title!r}, outside '## Exercises'"
            )


def test_each_chapter_opens_with_what_it_teaches_and_what_it_assumes(chapter):
    path, notebook = chapter
    opening = "\n".join(item for kind, item in sections(notebook)[0][1] if kind == "markdown")
    assert "In this chapter" in opening, f"{path.name}: no 'In this chapter' opening before the first section"
    assert "You will learn" in opening and "It assumes" in opening, (
        f"{path.name}: the opening must say what the chapter teaches and what it assumes"
    )


def test_each_chapter_has_a_summary_that_links_forward(chapter):
    path, notebook = chapter
    summary = next((items for title, items in sections(notebook) if title == "Summary"), None)
    assert summary is not None, f"{path.name}: no '## Summary' section"
    if path != CHAPTERS[-1]:
        text = "\n".join(item for kind, item in summary if kind == "markdown")
        assert "{doc}`" in text, f"{path.name}: the summary links to no chapter"


def test_code_lines_fit_the_page(chapter):
    path, notebook = chapter
    long_lines = [
        line
        for cell in notebook.cells
        if cell.cell_type == "code"
        for line in source(cell).splitlines()
        if len(line) > MAX_CODE_WIDTH
    ]
    assert not long_lines, f"{path.name}: code lines over {MAX_CODE_WIDTH} characters:\n" + "\n".join(long_lines)


@pytest.mark.site
@pytest.mark.parametrize("path", CHAPTERS, ids=[path.stem for path in CHAPTERS])
def test_every_solution_ran_without_error_in_the_built_site(path):
    notebook_path = SITE / "_sources" / "chapters" / f"{path.stem}.ipynb"
    if not notebook_path.is_file():
        pytest.fail(f"no executed notebook {notebook_path}: build the site first (nox -s docs)", pytrace=False)
    notebook = json.loads(notebook_path.read_text(encoding="utf-8"))
    solutions = [cell for cell in notebook["cells"] if SOLUTION_TAG in cell.get("metadata", {}).get("tags", [])]
    assert solutions, f"{notebook_path.name}: no solution cells in the executed notebook"
    for cell in solutions:
        code = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        outputs = cell.get("outputs", [])
        assert outputs, f"{notebook_path.name}: a solution shows no output (was it executed?): {code[:80]!r}"
        assert not any(output.get("output_type") == "error" for output in outputs), (
            f"{notebook_path.name}: a solution raised: {code[:80]!r}"
        )


def test_a_chapter_that_cites_the_source_notebooks_links_to_where_they_are_named(chapter):
    path, notebook = chapter
    text = "\n".join(source(cell) for cell in notebook.cells if cell.cell_type == "markdown")
    cites = re.search(r"source notebooks?|notebooks this material grew from", text)
    if cites and path.name != CHAPTERS[-1].name:
        assert "<source-notebooks>`" in text, f"{path.name} cites the source notebooks without linking to them"


def test_the_errata_say_whose_they_are_and_name_the_source_notebooks():
    title = manifest.CHAPTERS[-1].title
    assert "other" in title.lower(), title
    text = CHAPTERS[-1].read_text()
    assert "(source-notebooks)=" in text and all(f"| 00{n} |" in text for n in range(5))


def test_llamas_layer_is_set_beside_gpt_2s_pre_ln_block():
    # GPT-2 made the norms come first, not Llama: its block is the one to compare Llama's with.
    text = (ROOT / "docs" / "chapters" / "14_decoder_branch.md").read_text()
    assert "beside(gpt2.GPT2Block, llama.LlamaDecoderLayer)" in text
    assert "beside(openai_gpt.OpenAIGPTBlock, llama.LlamaDecoderLayer)" not in text
