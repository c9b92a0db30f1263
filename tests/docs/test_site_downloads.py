"""A downloaded chapter runs where only the package is installed, and reads as its page does.

Each chapter's ``.ipynb`` download (``_sources/chapters/<page>.ipynb`` of the
built site, which leaves out the site's own cells) is executed from top to
bottom in a kernel of its own: in an empty folder, with no ``PYTHONPATH``, so
that nothing of ``docs/`` (the site's machinery in ``docs/_tools``) can be
imported, as on a reader's machine that installed the package.  Each kernel
runs on one CPU thread, forked, as the build's are, from one process (one per
test worker) that imported PyTorch and ``transformers`` in that same
environment (``docs/_ext/forked_kernels.py``).  One chapter,
the quickest that prints numbers, is run once more, and every number it prints
is compared with the number its page shows.

Each download is also read as Jupyter shows it: no MyST is left in its
Markdown (no glued placeholder, no role, no directive fence, no target, no
substitution), its outputs print the numbers its page shows, it has an image
for every figure its page shows, and it starts with the cell that installs
the package where it is missing.  Every chapter's page links it for Colab and
Binder.

Reads the built site (``nox -s docs`` first); fails, not skips, without it.
"""

from __future__ import annotations

import html
import math
import os
import re
from pathlib import Path

import notebook_download
import pytest
from forked_kernels import Zygote, kernel_manager_class

from literate_transformer import manifest

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("LT_SITE_HTML", ROOT / "docs" / "_build" / "html"))
#: The longest a chapter may take to run, per cell (the build allows the same).
CELL_TIMEOUT_S = 300


def _reader_environment() -> dict[str, str]:
    """A reader's: this one without ``PYTHONPATH``, one thread, figures drawn off screen."""
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    environment.update(OMP_NUM_THREADS="1", MPLBACKEND="agg")
    return environment


@pytest.fixture(scope="module")
def kernels():
    """The kernels' zygote, started in a reader's environment."""
    zygote = Zygote(env=_reader_environment())
    yield kernel_manager_class(zygote, print)
    zygote.stop()


def _execute(notebook_path: Path, folder: Path, kernels: type):
    """Execute one downloaded notebook in ``folder``, in a kernel that cannot import ``docs/``; the notebook."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(notebook_path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(folder)}},
        kernel_manager_class=kernels,
        shutdown_kernel="immediate",
    )
    client.execute(env=_reader_environment())
    return notebook


def _run(notebook_path: Path, folder: Path, kernels: type) -> str | None:
    """Execute one downloaded notebook in ``folder``; ``None`` if every cell ran, else what failed."""
    from nbclient.exceptions import CellExecutionError

    try:
        _execute(notebook_path, folder, kernels)
    except CellExecutionError as error:
        return f"{notebook_path.name}: {str(error).strip().splitlines()[-1]}\n{str(error)[:1500]}"
    return None


# The last chapters first: they run longest, and the test runner hands out the rest around them.
@pytest.mark.parametrize("chapter", manifest.CHAPTERS[::-1], ids=lambda chapter: chapter.docname)
def test_a_downloaded_chapter_runs_with_only_the_package_installed(chapter, tmp_path, kernels):
    download = SITE / "_sources" / f"{chapter.docname}.ipynb"
    assert download.is_file(), f"no built site's download {download} (nox -s docs first)"
    # The site's machinery is not needed: the download does not import it.
    assert "lt_site" not in download.read_text(encoding="utf-8"), f"{download.name} still imports the site's machinery"
    failure = _run(download, tmp_path, kernels)
    assert failure is None, failure


def test_the_at_a_glance_page_runs_the_calls_a_reader_makes():
    import html
    import re

    page = html.unescape(re.sub(r"<[^>]+>", "", (SITE / "at_a_glance.html").read_text(encoding="utf-8")))
    for call in ("lt.load_tokenizer()", "lt.BertModel.from_pretrained()", "lt.encode(", "lt.FastBertModel",
                 "lt.from_hf(", "lt.load_decoder()", "generate(", "head_view(", "dir(lt)"):  # fmt: skip
        assert call in page, f"no {call} on the page"
    # Executed: its outputs are on the page.
    assert "sentence vectors: (2, 384)" in page and "The capital of France is" in page


def test_no_page_shows_a_figure_as_its_text():
    # A matplotlib figure shown without the inline backend becomes the line "<Figure size ... with N Axes>".
    pages = sorted(SITE.glob("*.html")) + sorted((SITE / "chapters").glob("*.html"))
    assert pages, f"no built site at {SITE}"
    shown_as_text = [page.name for page in pages if "&lt;Figure size" in page.read_text(encoding="utf-8")]
    assert not shown_as_text, f"figures shown as text, not drawn: {shown_as_text}"


# ---------------------------------------------------------------------------
# The numbers a downloaded chapter prints are the page's
# ---------------------------------------------------------------------------
#: The quickest chapter to run that prints numbers (its vocabulary, ids, shapes, similarities).
NUMBERS_CHAPTER = "chapters/01_tokens_and_embeddings"
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# What the page shows a cell print: its standard output and the text of its value (not its code, not stderr).
_PAGE_OUTPUT = re.compile(
    r'<div class="output (?:stream|text_plain)[^"]*">\s*<div class="highlight[^"]*"><pre>(?P<text>.*?)</pre>', re.DOTALL
)


def _printed(notebook) -> str:
    """What the notebook's cells print: standard output and the text of values that show no image or HTML."""
    texts = []
    for cell in notebook.cells:
        if cell.cell_type != "code" or notebook_download.INSTALL_CELL_TAG in cell.metadata.get("tags", []):
            continue
        for output in cell.outputs:
            if output.output_type == "stream" and output.name == "stdout":
                texts.append(output.text)
            elif output.output_type in ("execute_result", "display_data"):
                data = output.get("data", {})
                if "text/plain" in data and not any(key.startswith(("image/", "text/html")) for key in data):
                    texts.append(data["text/plain"])
    return _ANSI.sub("", "\n".join(texts))


def _same_number(ours: str, theirs: str) -> bool:
    """Two printed numbers are the same: equal text, or floats one unit apart in their last printed digit."""
    if ours == theirs:
        return True
    if not any(mark in ours + theirs for mark in ".eE"):
        return False  # integers (ids, sizes, counts) are equal or not
    mantissa = re.split(r"[eE]", ours)[0]
    exponent = int(re.split(r"[eE]", ours)[1]) if re.search(r"[eE]", ours) else 0
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return math.isclose(float(ours), float(theirs), rel_tol=0, abs_tol=1.01 * 10.0 ** (exponent - decimals))


def _page_printed(page: Path) -> str:
    text = "\n".join(match["text"] for match in _PAGE_OUTPUT.finditer(page.read_text(encoding="utf-8")))
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def test_a_downloaded_chapter_prints_the_numbers_its_page_shows(tmp_path, kernels):
    download = SITE / "_sources" / f"{NUMBERS_CHAPTER}.ipynb"
    assert download.is_file(), f"no built site's download {download} (nox -s docs first)"
    page_numbers = _NUMBER.findall(_page_printed(SITE / f"{NUMBERS_CHAPTER}.html"))
    ran = _execute(download, tmp_path, kernels)
    numbers = _NUMBER.findall(_printed(ran))
    assert len(page_numbers) > 50, f"the page shows only {len(page_numbers)} numbers; is it the chapter meant?"
    assert len(numbers) == len(page_numbers), (
        f"the download printed {len(numbers)} numbers, the page shows {len(page_numbers)}:\n{_printed(ran)}"
    )
    differ = [(index, ours, theirs) for index, (ours, theirs) in enumerate(zip(numbers, page_numbers, strict=True))
              if not _same_number(ours, theirs)]  # fmt: skip
    assert not differ, f"printed numbers that differ from the page's (index, download, page): {differ[:10]}"


# ---------------------------------------------------------------------------
# A download reads as Jupyter shows it
# ---------------------------------------------------------------------------
_FENCED_CODE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^`{\n]*\n.*?^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)
_LEFT_OVER = {
    "a glued placeholder": re.compile(r"\{glue"),
    "a role": re.compile(r"\{[A-Za-z][\w:.+-]*\}`"),
    "a directive fence": re.compile(r"^[ \t]*(?:`{3,}|:{3,}|~{3,})\{", re.MULTILINE),
    "a MyST target": re.compile(r"^[ \t]*\([^()\s]+\)=[ \t]*$", re.MULTILINE),
    "a substitution": re.compile(r"\{\{[^}]*\}\}"),
}
# The figures a page shows: images Sphinx copied into _images/ (cell outputs and glued figures).
_PAGE_FIGURE = re.compile(r"""<img\b[^>]*\bsrc=["'][^"']*_images/""")


def test_every_download_reads_as_its_page_no_myst_left_and_every_figure_drawn():
    import nbformat

    problems = []
    for chapter in manifest.CHAPTERS:
        download = SITE / "_sources" / f"{chapter.docname}.ipynb"
        page = SITE / f"{chapter.docname}.html"
        if not download.is_file() or not page.is_file():
            problems.append(f"{chapter.docname}: no built page or download (nox -s docs first)")
            continue
        notebook = nbformat.read(download, as_version=4)
        for number, cell in enumerate(notebook.cells):
            if cell.cell_type != "markdown":
                continue
            # Code in fences may show MyST on purpose; the text around it may not.
            text = _FENCED_CODE.sub("", cell.source)
            for what, pattern in _LEFT_OVER.items():
                for found in pattern.finditer(text):
                    problems.append(f"{chapter.docname}, cell {number}: {what} is left: {text[found.start() :][:60]!r}")
            for name in re.findall(r"\]\(attachment:([^)]+)\)", cell.source):
                if name not in cell.get("attachments", {}):
                    problems.append(f"{chapter.docname}, cell {number}: the image {name} is not attached")
        # What its cells print is what the page shows them print (each stream once, as the page merges it).
        if _NUMBER.findall(_printed(notebook)) != _NUMBER.findall(_page_printed(page)):
            problems.append(f"{chapter.docname}: the numbers its outputs print are not the page's")
        figures = len(_PAGE_FIGURE.findall(page.read_text(encoding="utf-8")))
        images = notebook_download.count_images(notebook)
        if images != figures:
            problems.append(f"{chapter.docname}: the page shows {figures} figures, the download {images} images")
        first = notebook.cells[0]
        if (
            notebook_download.INSTALL_CELL_TAG not in first.metadata.get("tags", [])
            or "%pip install" not in first.source
        ):
            problems.append(f"{chapter.docname}: the download does not start with the install cell")
    assert not problems, "\n".join(problems)


def test_every_chapter_offers_launch_links_to_its_download():
    # Links only: that no page loads anything from another host is the browser tests' check (test_views.py).
    problems = []
    for chapter in manifest.CHAPTERS:
        page = SITE / f"{chapter.docname}.html"
        if not page.is_file():
            problems.append(f"{chapter.docname}: no built page (nox -s docs first)")
            continue
        text = page.read_text(encoding="utf-8")
        for service, pattern in (
            ("Colab", rf'href="https://colab\.research\.google\.com/github/[^"/]+/[^"/]+/blob/[^"/]+/{chapter.docname}\.ipynb"'),
            ("Binder", rf'href="https://mybinder\.org/v2/gh/[^"/]+/[^"/]+/[^"?]+\?urlpath=lab/tree/{chapter.docname}\.ipynb"'),
        ):  # fmt: skip
            if not re.search(pattern, text):
                problems.append(f"{chapter.docname}: no {service} link to its download")
    assert not problems, "\n".join(problems)
