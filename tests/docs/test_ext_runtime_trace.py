"""Runtime values beside the code: the cache, the HTML of a line, and a tiny site whose lines get their shapes.

The tiny site documents a one-module package with :mod:`sidebyside`; its
trace provider returns made-up records, so these tests check the extension,
not the package's examples (the site tests check those on the real pages).
"""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")

import runtime_trace  # noqa: E402

RECORD = {
    "names": ["scores"],
    "values": [
        {
            "shape": [1, 12, 7, 7],
            "dtype": "float32",
            "values": [0.5, -1.25],
            "stats": {"mean": 0.1, "std": 1.0, "min": -3.0, "max": 4.5},
            "heatmap": [[0.0, 1.0], [2.0, 3.0]],
            "heatmap_of": "first matrix; 2 of 7 rows, 2 of 7 columns",
        }
    ],
    "line": 3,
    "end_line": 4,
    "calls": 6,
    "example": "bert",
}


def test_a_line_shows_its_shape_and_hides_its_preview():
    html = runtime_trace.annotation_html(RECORD, {})
    assert '<span class="lt-rt-shape">(1, 12, 7, 7)</span>' in html
    assert 'tabindex="0"' in html and 'role="button"' in html  # keyboard-reachable
    assert '<span class="lt-rt-preview" hidden>' in html
    assert "first of 6 calls" in html and "mean 0.1" in html and "first values: 0.5, -1.25" in html
    assert json.loads(re.search(r'data-heatmap="([^"]+)"', html).group(1).replace("&quot;", '"')) == [[0, 1], [2, 3]]
    assert "\n" not in html  # it sits inside a <pre>


def test_names_that_held_no_tensor_show_nothing():
    record = {**RECORD, "names": ["weights", "scores"], "values": [None, RECORD["values"][0]]}
    assert runtime_trace.annotation_html(record, {}).count('class="lt-rt"') == 1


def test_a_statement_is_annotated_on_its_last_line():
    assert list(runtime_trace.annotations_for({"3": RECORD}, {})) == [4]


def test_one_dimensional_shapes_read_as_python_writes_them():
    assert runtime_trace.shape_text([7]) == "(7,)" and runtime_trace.shape_text([2, 3]) == "(2, 3)"


def test_a_provider_is_named_module_colon_function():
    assert runtime_trace.load_provider("json:dumps") is json.dumps
    with pytest.raises(ValueError, match="module:function"):
        runtime_trace.load_provider("json.dumps")


PROVIDER = """
def trace(root, cache=None):
    record = {
        "names": ["doubled"], "line": 5, "end_line": 5, "calls": 1, "example": "tiny",
        "values": [{"shape": [2, 3], "dtype": "float32", "values": [1.0], "stats": {"mean": 1.0},
                    "heatmap": None, "heatmap_of": None}],
    }
    return {"examples": {"tiny": {"description": "two rows of three", "dims": {"B": 2}}},
            "lines": {"alpha.py": {"5": record}}}
"""


def _annotated_site(tiny_site, provider_name: str, provider: str) -> None:
    """A site with the side-by-side page of ``tinypkg.alpha`` (a shape-commented line 5), traced by ``provider``."""
    tiny_site.package(
        "tinypkg",
        {
            "__init__.py": '"""Tiny."""\n',
            "alpha.py": '"""Alpha."""\n\n\ndef double(x):\n    doubled = x * 2  # (B, 3)\n    return doubled\n',
        },
    )
    tiny_site.write(f"{provider_name}.py", provider)
    root = tiny_site.root / "tinypkg"
    tiny_site.write(
        "docs/conf.py",
        f"""
        import sys
        sys.path.insert(0, {str(tiny_site.root)!r})
        extensions = ["sphinx.ext.autodoc", "sidebyside", "runtime_trace"]
        sidebyside_modules = ["tinypkg", "tinypkg.alpha"]
        sidebyside_root = {str(tiny_site.root)!r}
        runtime_trace_provider = "{provider_name}:trace"
        runtime_trace_root = {str(root)!r}
        runtime_trace_sources = [{str(root)!r}]
        runtime_trace_cache = {str(tiny_site.root / "cache" / "trace.json")!r}
        """,
    )
    tiny_site.write("docs/index.rst", "Index\n=====\n\n.. toctree::\n\n   source/index\n")


def test_an_annotated_page_shows_the_shapes_and_where_they_come_from(tiny_site):
    _annotated_site(tiny_site, "traceprovider", PROVIDER)
    tiny_site.build()
    html = tiny_site.html("source/tinypkg.alpha")
    line = re.search(r'<span class="lt-line" data-line="5".*?</span>\n', html, re.S).group(0)
    assert "# (B, 3)" in line and '<span class="lt-rt-shape">(2, 3)</span>' in line
    assert 'data-dims="{&quot;B&quot;: 2}"' in html and "two rows of three" in html
    assert "runtime-trace.js" in html


# A provider that keeps its one example's trace with the record of what it reached, and counts its runs.
COUNTING_PROVIDER = """
from pathlib import Path

from lt_site.deps import ItemCache

RUNS = Path(__file__).with_name("runs.txt")


def example():
    from tinypkg.alpha import double

    double(3)
    RUNS.write_text(str(int(RUNS.read_text()) + 1 if RUNS.exists() else 1))
    return {"description": "d", "dims": {}, "lines": {}, "path": None, "hooks": {}}


def trace(root, cache=None):
    traces = ItemCache(*cache).compute({"tiny": example})
    return {"examples": {"tiny": {"description": "d", "dims": {}}}, "lines": {}, "paths": {}, "hooks": {}, **{}}
"""


def test_the_examples_run_again_only_when_a_file_they_reached_changed(tiny_site):
    tiny_site.package(
        "tinypkg",
        {"__init__.py": "", "alpha.py": "def double(x):\n    return 2 * x\n", "beta.py": "X = 1\n"},
    )
    tiny_site.write("countingprovider.py", COUNTING_PROVIDER)
    root = tiny_site.root / "tinypkg"
    tiny_site.write(
        "docs/conf.py",
        f"""
        import sys
        sys.path.insert(0, {str(tiny_site.root)!r})
        extensions = ["runtime_trace"]
        runtime_trace_provider = "countingprovider:trace"
        runtime_trace_root = {str(root)!r}
        runtime_trace_sources = [{str(root)!r}]
        runtime_trace_checkout = {str(tiny_site.root)!r}
        runtime_trace_cache = {str(tiny_site.root / "cache" / "trace.json")!r}
        """,
    )
    tiny_site.write("docs/index.rst", "Index\n=====\n")
    runs = tiny_site.root / "runs.txt"
    tiny_site.build()
    tiny_site.build()
    assert runs.read_text() == "1"  # nothing changed: the stored trace
    (root / "beta.py").write_text("X = 2\n")
    tiny_site.build()
    assert runs.read_text() == "1"  # a file the example never reached
    (root / "alpha.py").write_text("def double(x):\n    return x + x\n")
    tiny_site.build()
    assert runs.read_text() == "2"


def test_a_line_that_called_a_module_shows_the_lens_cache_name_of_its_result():
    html = runtime_trace.hook_html({"name": "model.layers.{i}", "example": "llama <tiny>"})
    assert html.startswith('<span class="lt-hook" ') and html.endswith('>cache["model.layers.{i}"]</span>')
    assert "llama &lt;tiny&gt;" in html and "<tiny>" not in html


# A provider whose trace is a file's: the test changes what the examples reached between builds.
FILE_PROVIDER = """
import json
from pathlib import Path


def trace(root, cache=None):
    lines = json.loads(Path(__file__).with_name("lines.json").read_text())
    return {"examples": {"tiny": {"description": "two rows of three", "dims": {"B": 2}}}, "lines": lines}
"""


def test_a_page_no_example_reached_is_annotated_once_one_does(tiny_site):
    lines = tiny_site.root / "lines.json"
    lines.write_text("{}")
    _annotated_site(tiny_site, "fileprovider", FILE_PROVIDER)
    tiny_site.build()
    assert "lt-rt-shape" not in tiny_site.html("source/tinypkg.alpha")
    record = {
        "names": ["doubled"], "line": 5, "end_line": 5, "calls": 1, "example": "tiny",
        "values": [{"shape": [2, 3], "dtype": "float32", "values": [1.0], "stats": {"mean": 1.0},
                    "heatmap": None, "heatmap_of": None}],
    }  # fmt: skip
    lines.write_text(json.dumps({"alpha.py": {"5": record}}))
    tiny_site.build()
    assert '<span class="lt-rt-shape">(2, 3)</span>' in tiny_site.html("source/tinypkg.alpha")
