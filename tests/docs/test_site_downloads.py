"""A downloaded chapter runs where only the package is installed.

Each chapter's ``.ipynb`` download (``_sources/chapters/<page>.ipynb`` of the
built site, which leaves out the site's own cells) is executed from top to
bottom in a fresh kernel: in an empty folder, with no ``PYTHONPATH``, so that
nothing of ``docs/`` (the site's machinery in ``docs/_tools``) can be
imported, as on a reader's machine that installed the package.  Two kernels
run at a time, each on one CPU thread, as the build runs them.

Reads the built site (``nox -s docs`` first); fails, not skips, without it.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from literate_transformer import manifest

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("LT_SITE_HTML", ROOT / "docs" / "_build" / "html"))
#: The longest a chapter may take to run, per cell (the build allows the same).
CELL_TIMEOUT_S = 300


def _run(notebook_path: Path, folder: Path) -> str | None:
    """Execute one downloaded notebook in ``folder``; ``None`` if every cell ran, else what failed."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    notebook = nbformat.read(notebook_path, as_version=4)
    client = NotebookClient(
        notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    )
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    environment.update(OMP_NUM_THREADS="1", MPLBACKEND="agg")
    try:
        client.execute(env=environment)
    except CellExecutionError as error:
        return f"{notebook_path.name}: {str(error).strip().splitlines()[-1]}\n{str(error)[:1500]}"
    return None


def test_every_downloaded_chapter_runs_with_only_the_package_installed(tmp_path):
    downloads = [SITE / "_sources" / f"{chapter.docname}.ipynb" for chapter in manifest.CHAPTERS]
    missing = [path for path in downloads if not path.is_file()]
    assert not missing, f"no built site's downloads (nox -s docs first): {missing}"
    folders = [tmp_path / path.stem for path in downloads]
    for folder in folders:
        folder.mkdir()
    with ThreadPoolExecutor(max_workers=2) as pool:
        failures = [failure for failure in pool.map(_run, downloads, folders) if failure]
    assert not failures, "\n\n".join(failures)
    # The site's machinery is not needed: no download imports it.
    for path in downloads:
        assert "lt_site" not in path.read_text(encoding="utf-8"), f"{path.name} still imports the site's machinery"


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
