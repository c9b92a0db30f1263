"""A family read top to bottom, on a tiny project: a page per family assembled from the calls its example made.

The tiny package has a parent model and a child family that changes one
method of it.  Its trace provider runs the child on a small input with the
site's own recorder (:func:`lt_site.trace.trace_examples`), so the page is
built from calls that really happened, as on the site; the settings name the
family and its example as the site's ``conf.py`` does.
"""

from __future__ import annotations

import html
import json
import re

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")

import top_to_bottom  # noqa: E402
from lt_site.deps import Record, file_digest  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:The mapping interface for autodoc options")

PACKAGE = {
    "__init__.py": '''
        """Tinyfam: a family and its parent."""
    ''',
    "parent.py": '''
        """Parent: the model a family changes."""

        import torch


        def attend(query, key):
            """Scores, then weights."""
            scores = query @ key.transpose(-1, -2)  # (T, T)
            return scores.softmax(-1)


        class Parent(torch.nn.Module):
            """The parent model."""

            def __init__(self):
                super().__init__()
                self.scale = 2.0

            def forward(self, x):
                hidden = self.embed(x)  # (T, E)
                return self.layer(hidden)

            def embed(self, x):
                return x * self.scale

            def layer(self, hidden):
                weights = attend(hidden, hidden)  # (T, T)
                return weights @ hidden
    ''',
    "child.py": '''
        """Child, a family: the parent with its embedding shifted by one."""

        from .parent import Parent


        class Child(Parent):
            """The child model."""

            def embed(self, x):
                # The parent's embedding, then one more.
                doubled = super().embed(x)  # (T, E)
                return doubled + 1
    ''',
}

PROVIDER = """
from types import SimpleNamespace

import torch
from lt_site.deps import ItemCache
from lt_site.trace import merge_traces, trace_example


def run():
    from tinyfam.child import Child

    model = Child()
    model(torch.ones(3, 2))
    model(torch.ones(4, 2))  # a second forward pass: not on the page


def trace(root, cache):
    example = SimpleNamespace(name="child", description="three rows of two", dims={"T": 3, "E": 2}, run=run)
    return merge_traces(ItemCache(*cache).compute({"child": lambda: trace_example(example, root)}))
"""

#: The functions the child's forward pass runs, in the order of their first call.
ORDER = [
    ("Parent.forward", "parent.py"),
    ("Child.embed", "child.py"),
    ("Parent.embed", "parent.py"),
    ("Parent.layer", "parent.py"),
    ("attend", "parent.py"),
]


def conf(root, families=(("tinyfam.child", "child"),)) -> str:
    package = root / "tinyfam"
    return f"""
        import sys
        sys.path.insert(0, {str(root)!r})
        extensions = ["sphinx.ext.autodoc", "sidebyside", "runtime_trace", "top_to_bottom"]
        nitpicky = True
        sidebyside_modules = ["tinyfam", "tinyfam.parent", "tinyfam.child"]
        sidebyside_root = {str(root)!r}
        runtime_trace_provider = "familyprovider:trace"
        runtime_trace_root = {str(package)!r}
        runtime_trace_sources = [{str(package)!r}]
        runtime_trace_cache = {str(root / "cache" / "trace.json")!r}
        top_to_bottom_families = {list(families)!r}
    """


@pytest.fixture
def site(tiny_site):
    tiny_site.package("tinyfam", PACKAGE)
    tiny_site.write("familyprovider.py", PROVIDER)
    tiny_site.write("docs/conf.py", conf(tiny_site.root))
    tiny_site.write(
        "docs/index.rst",
        """
        Tiny
        ====

        .. toctree::

           source/index
           top_to_bottom/index
        """,
    )
    return tiny_site


def markers(page: str) -> list[tuple[str, str, int, int]]:
    """``(name, path, first line, last line)`` of each function the page shows, in order."""
    return [
        (html.unescape(name), path, int(first), int(last))
        for name, path, first, last in re.findall(
            r'<span class="lt-ttb-function" data-name="([^"]+)" data-path="([^"]+)" data-lines="(\d+)-(\d+)">', page
        )
    ]


def sections(page: str) -> list[str]:
    """The HTML of each function's section, in order."""
    return re.split(r'<section [^>]*\bid="step-', page)[1:]


def line_text(line_html: str) -> str:
    """A shown line's code: its tags and runtime values removed."""
    code = re.sub(r'<span class="lt-rt".*', "", line_html, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", code))


def test_the_page_shows_every_function_the_forward_pass_ran_once_in_call_order(site):
    app = site.build()
    assert app.warnings == ""
    page = site.html("top_to_bottom/tinyfam.child")
    shown = markers(page)
    # The constructor ran before the forward and the second forward after it: neither is on the page.
    assert [(name, path) for name, path, _, _ in shown] == ORDER
    assert "Child, top to bottom" in page


def test_each_function_is_shown_from_its_file_line_by_line(site):
    site.build()
    page = site.html("top_to_bottom/tinyfam.child")
    for (name, path, first, last), section in zip(markers(page), sections(page), strict=True):
        source = (site.root / "tinyfam" / path).read_text().splitlines()
        lines = re.findall(r'<span class="lt-line" data-line="(\d+)"[^>]*>(.*?)</span>\n', section, re.S)
        assert [int(number) for number, _ in lines] == list(range(first, last + 1)), name
        assert [line_text(text) for _, text in lines] == source[first - 1 : last], name
        assert f"tinyfam/{path}" in section and f"lines {first}–{last}" in section


def test_the_lines_show_what_the_example_computed(site):
    site.build()
    page = site.html("top_to_bottom/tinyfam.child")
    attend = sections(page)[-1]
    scores = re.search(r'<span class="lt-line"[^>]*>\s*<span[^>]*>\s*scores.*?</span>\n', attend, re.S)
    assert scores and '<span class="lt-rt-shape">(3, 3)</span>' in scores.group(0)
    # The first forward's values (T = 3), not the second's; and the example's sizes, for programs.
    assert "(4, 4)" not in page
    assert 'data-dims="{&quot;E&quot;: 2, &quot;T&quot;: 3}"' in page and "three rows of two" in page


def test_each_function_links_to_its_annotated_source_and_its_caller(site):
    site.build()
    page = site.html("top_to_bottom/tinyfam.child")
    parts = sections(page)
    for (name, path, first, _), section in zip(markers(page), parts, strict=True):
        module = "tinyfam." + path.removesuffix(".py")
        link = re.search(rf'href="\.\./source/{re.escape(module)}\.html#([^"]+)"', section)
        assert link, f"{name} does not link to its annotated source"
        target = site.html(f"source/{module}")
        assert f'id="{link.group(1)}"' in target
        # The block it links to shows the function's first line.
        block = target.split(f'id="{link.group(1)}"', 1)[1].split('class="lt-sbs-block', 1)[0]
        assert f'data-line="{first}"' in block
    # attend was called by Parent.layer: the caller links to its section on the page.
    layer_id = re.match(r'([^"]+)"', parts[3]).group(1)
    assert f'href="#step-{layer_id}"' in parts[4] and "called from" in parts[4]


def test_the_index_and_the_familys_annotated_source_link_to_the_page(site):
    site.build()
    index = site.html("top_to_bottom/index")
    assert 'href="tinyfam.child.html"' in index and "Child, a family" in index
    assert 'href="top_to_bottom/index.html"' in site.html("index")
    assert 'href="../top_to_bottom/tinyfam.child.html"' in site.html("source/tinyfam.child")
    assert "top_to_bottom" not in site.html("source/tinyfam.parent")  # not a family


def test_an_unchanged_rebuild_rewrites_no_page_and_reads_nothing(site):
    site.build()
    folder = site.src / "top_to_bottom"
    stubs = {path: path.stat().st_mtime_ns for path in folder.glob("*.rst")}
    assert set(path.name for path in stubs) == {"index.rst", "tinyfam.child.rst"}
    again = site.build()
    assert {path: path.stat().st_mtime_ns for path in folder.glob("*.rst")} == stubs
    assert "0 added, 0 changed, 0 removed" in again.status.getvalue()


def test_a_family_dropped_from_the_settings_loses_its_page(site):
    site.build()
    site.write("docs/conf.py", conf(site.root, families=()))
    site.write("docs/index.rst", "Tiny\n====\n\n.. toctree::\n\n   source/index\n")
    app = site.build()
    assert not (site.src / "top_to_bottom" / "tinyfam.child.rst").exists()
    assert app.warnings == ""


def test_an_example_without_a_forward_pass_gives_a_page_that_says_so(site):
    site.write("docs/conf.py", conf(site.root, families=(("tinyfam.child", "missing"),)))
    app = site.build()
    assert app.warnings == ""
    page = site.html("top_to_bottom/tinyfam.child")
    assert "The missing example recorded no forward pass" in page and not markers(page)


def test_a_familys_title_is_its_docstrings_first_words():
    assert top_to_bottom.family_title("pkg.models.qwen3", '"""Qwen3: Llama with norms."""') == "Qwen3"
    assert top_to_bottom.family_title("pkg.models.bert", '"""BERT, line by line: the model."""') == "BERT"
    assert top_to_bottom.family_title("pkg.models.plain", '"""No lead-in here."""') == "plain"


def test_a_closure_is_shown_within_its_function():
    calls = [
        {"path": "a.py", "name": "outer", "line": 10, "end_line": 20},
        {"path": "a.py", "name": "outer.<locals>.inner", "line": 12, "end_line": 14},
        {"path": "b.py", "name": "other", "line": 12, "end_line": 14},
    ]
    shown, where = top_to_bottom.shown_calls(calls)
    assert [call["name"] for call in shown] == ["outer", "other"]
    assert where[("a.py", "outer.<locals>.inner")] == 0 and where[("b.py", "other")] == 1


def test_a_function_the_file_no_longer_has_at_its_lines_is_a_warning(site):
    site.build()
    # The file changes after the trace ran (as when it is edited while the site builds): the trace is not redone.
    parent = site.root / "tinyfam" / "parent.py"
    parent.write_text(parent.read_text().replace("import torch\n", "import math\nimport torch\n"))
    # The records say the example reached the file as it is now, and the merged trace is theirs.
    records = site.root / "cache" / "trace.examples.json.records.json"
    data = json.loads(records.read_text())
    for record in (data["record"], *data["items"].values()):
        record["files"]["tinyfam/parent.py"] = file_digest(parent)
    records.write_text(json.dumps(data))
    (site.root / "cache" / "trace.json.key").write_text(Record.from_dict(data["record"]).key())
    app = site.build()
    assert "no longer define attend" in app.warnings
    assert "attend" not in [name for name, *_ in markers(site.html("top_to_bottom/tinyfam.child"))]


def test_defines_checks_the_def_under_the_decorators():
    lines = ["@checked", "def forward(self):", "    return 1", "def other():", "    pass"]
    assert top_to_bottom.defines(lines, 1, 3, "Model.forward")
    assert not top_to_bottom.defines(lines, 3, 5, "Model.forward")
    assert not top_to_bottom.defines(lines, 4, 9, "other")  # past the end of the file
    assert not top_to_bottom.defines(["", *lines], 1, 3, "Model.forward")  # moved down a line


def test_the_skipped_functions_and_what_only_they_called_are_left_out():
    calls = [
        {"path": "m/validation.py", "name": "checked"},
        {"path": "m/family.py", "name": "check_inputs", "caller": ["m/validation.py", 3], "caller_name": "checked"},
        {"path": "m/family.py", "name": "head_size", "caller": ["m/family.py", 9], "caller_name": "check_inputs"},
        {"path": "m/family.py", "name": "Model.forward"},  # the example's own call (the recorder looks past wrappers)
        {
            "path": "m/family.py",
            "name": "head_size_twice",
            "caller": ["m/family.py", 20],
            "caller_name": "Model.forward",
        },
    ]
    kept = top_to_bottom.without_skipped(calls, r"validation\.py:|(^|[.:])check_\w*$")
    assert [call["name"] for call in kept] == ["Model.forward", "head_size_twice"]
    assert top_to_bottom.without_skipped(calls, "") == calls
