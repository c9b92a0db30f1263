"""A notebook's attention views draw offline: the package's and bertviz's own, exported with nbconvert.

A small notebook calls ``lt.visualize.head_view`` and bertviz's own
``head_view`` on the offline MiniLM checkpoint.  It is executed in a fresh
kernel (nbclient), then rendered with ``jupyter nbconvert --to html`` and
opened in headless Chromium from a folder served on 127.0.0.1, with every
request to another host refused, as on a machine with no network.  The
exported page's own scripts (nbconvert's template asks a CDN for require.js
and MathJax) are pointed at files in that folder, twice:

* an empty ``require.js``: the page has no module loader, as in JupyterLab,
  Notebook 7, Colab, or an exported page opened offline;
* RequireJS 2.3.6 (``fixtures/require.js``): the page has a real loader, as
  the classic Notebook has, or an exported page opened online.

Each time both views must draw their tokens (every label, in order) and
attention lines, no script may raise, and no request may leave 127.0.0.1.
The executed notebook's outputs, the views included, must name no CDN.

Needs the system's Chromium, Playwright and nbconvert (``nox -s browser``);
fails, not skips, without them.  No built site is needed.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.browser

HERE = Path(__file__).resolve().parent
#: How long a view may take to draw once the page has loaded.
DRAW_TIMEOUT_MS = 20_000
#: How long a cell may run (loading the checkpoint on a shared machine).
CELL_TIMEOUT_S = 300

CELLS = [
    """\
import torch

import literate_transformer as lt
from literate_transformer import visualize

tokenizer = lt.load_tokenizer()
model = lt.load_hf_model()
inputs = tokenizer("time flies like an arrow", return_tensors="pt")
with torch.no_grad():
    attentions = model(**inputs, output_attentions=True).attentions
tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])""",
    "visualize.head_view(attentions, tokens)",
    """\
from bertviz import head_view

head_view(attentions, tokens)""",
]
# bertviz gives each view a root <div id="bertviz-<32 hex digits>">, and writes its data after "const params = ".
_VIEW_ROOT = re.compile(r"""<div id=["']?(bertviz-[0-9a-f]{32})""")
_PARAMS = "const params = "
# Addresses of other hosts a page or an output would load from.
_LOADS_FROM_ANOTHER_HOST = re.compile(r"""(?:src=|(?:d3|jquery)\s*:\s*)["']https?://|cdnjs""")
# What a view drew: its visible token labels and its attention lines with a non-zero opacity.
_DRAWN = """(root) => {
  const view = document.getElementById(root);
  const shown = (element) => element.getClientRects().length > 0 && getComputedStyle(element).visibility !== "hidden";
  return {
    tokens: Array.from(view.querySelectorAll("svg text")).filter(shown).map((t) => t.textContent.trim()),
    lines: Array.from(view.querySelectorAll("svg line"))
      .filter((line) => shown(line) && parseFloat(line.getAttribute("stroke-opacity")) > 0).length,
  };
}"""


@pytest.fixture(scope="module")
def executed_notebook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The notebook, executed in a fresh kernel in an empty folder, offline, on one thread."""
    try:
        import nbformat
        from nbclient import NotebookClient
    except ImportError:
        pytest.fail("nbformat and nbclient are not installed: pip install -c constraints.txt -e '.[docs,browser]'")
    folder = tmp_path_factory.mktemp("notebook")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    environment.update(
        OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HUB_DISABLE_PROGRESS_BARS="1"
    )
    client = NotebookClient(
        notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    )
    client.execute(env=environment)
    path = folder / "views.ipynb"
    nbformat.write(notebook, path)
    return path


def _export(notebook: Path, folder: Path, require_js: Path | None) -> Path:
    """``jupyter nbconvert --to html`` into ``folder``, the page's require.js and MathJax served from there."""
    jupyter = Path(sys.executable).parent / "jupyter"
    if not jupyter.is_file():
        pytest.fail(f"no jupyter command beside {sys.executable}: pip install -c constraints.txt -e '.[browser]'")
    folder.mkdir()
    (folder / "mathjax.js").write_text("")
    if require_js is None:
        (folder / "require.js").write_text("")
    else:
        shutil.copy(require_js, folder / "require.js")
    command = [str(jupyter), "nbconvert", "--to", "html", str(notebook), "--output-dir", str(folder),
               "--HTMLExporter.require_js_url=require.js", "--HTMLExporter.mathjax_url=mathjax.js"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, f"nbconvert failed:\n{result.stderr[-3000:]}"
    return folder / "views.html"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


@pytest.fixture
def serve() -> Iterator[object]:
    """``serve(folder)``: the folder on 127.0.0.1 (until the test ends); returns its address."""
    servers = []

    def start(folder: Path) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _expected_views(html: str) -> dict[str, list[str]]:
    """Each view's root id and the token labels its head view draws (left column, then right)."""
    views = {}
    decoder = json.JSONDecoder()
    for match in re.finditer(re.escape(_PARAMS) + r"(?=\{)", html):
        params, _ = decoder.raw_decode(html, match.end())
        part = params["attention"][int(params["default_filter"])]
        views[params["root_div_id"]] = part["left_text"] + part["right_text"]
    return views


def test_the_executed_notebooks_outputs_name_no_cdn(executed_notebook: Path) -> None:
    import nbformat

    notebook = nbformat.read(executed_notebook, as_version=4)
    outputs = "\n".join(
        value if isinstance(value, str) else "".join(value)
        for cell in notebook.cells
        for output in cell.outputs
        for value in output.get("data", {}).values()
    )
    assert len(_VIEW_ROOT.findall(outputs)) == 2, "expected two views: the package's and bertviz's own"
    assert not _LOADS_FROM_ANOTHER_HOST.search(outputs), _LOADS_FROM_ANOTHER_HOST.search(outputs)


@pytest.mark.parametrize("loader", ["no module loader", "require.js"])
def test_an_exported_notebooks_views_draw_with_no_network(
    loader: str, executed_notebook: Path, tmp_path: Path, serve: object, browser: object
) -> None:
    page_path = _export(
        executed_notebook, tmp_path / "export", HERE / "fixtures" / "require.js" if loader == "require.js" else None
    )
    html = page_path.read_text(encoding="utf-8")
    expected = _expected_views(html)
    assert len(expected) == 2 and set(expected) == set(_VIEW_ROOT.findall(html)), "two views, each with its data"
    address = serve(page_path.parent)
    local = urlsplit(address).netloc
    requests, foreign, errors = [], [], []
    context = browser.new_context(viewport={"width": 1200, "height": 900}, service_workers="block")
    page = context.new_page()
    page.on("request", lambda request: requests.append(request.url))
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
    page.on("console", lambda message: message.type == "error" and errors.append(f"console: {message.text}"))

    def route(route: object) -> None:
        parts = urlsplit(route.request.url)
        if parts.scheme in ("data", "blob", "about") or parts.netloc == local:
            route.continue_()
        else:
            foreign.append(route.request.url)
            route.abort()

    page.route("**/*", route)
    problems = []
    try:
        page.goto(address + page_path.name, wait_until="load")
        for root, tokens in expected.items():
            try:
                page.wait_for_selector(f"#{root} svg text", state="attached", timeout=DRAW_TIMEOUT_MS)
            except Exception:  # Playwright's TimeoutError: the view never drew
                problems.append(f"view {root} drew no tokens")
                continue
            drawn = page.evaluate(_DRAWN, root)
            if drawn["tokens"] != tokens:
                problems.append(f"view {root} shows {drawn['tokens']}, expected {tokens}")
            if drawn["lines"] == 0:
                problems.append(f"view {root} drew no attention line")
    finally:
        context.close()
    assert requests, "the browser recorded no request"
    assert not foreign, f"requests left 127.0.0.1: {foreign}"
    assert not problems + errors, "\n".join(problems + errors)
