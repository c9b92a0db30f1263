"""Executed pages: a page executes again only when what its run reached changed.

The records themselves (:mod:`lt_site.deps`) are tested on their own; the
build is tested on a tiny site of two pages over a tiny package, each page
importing one of its modules, executed by real kernels.
"""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")
pytest.importorskip("myst_nb", reason="myst-nb is not installed (the docs extras)")

import page_cache  # noqa: E402
from lt_site.deps import ItemCache, Reached, Record, kernel_epilogue, kernel_prologue, read_cpu_seconds, read_epilogue  # noqa: E402


# ---------------------------------------------------------------------------
# The records
# ---------------------------------------------------------------------------
def test_a_record_names_the_files_that_changed_and_the_ones_that_went(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.txt").write_text("data\n")
    record = Record.of([tmp_path / "a.py", tmp_path / "b.txt", "/somewhere/else.py"], tmp_path)
    assert sorted(record.files) == ["a.py", "b.txt"]
    assert record.is_current(tmp_path)
    (tmp_path / "b.txt").write_text("other data\n")
    assert record.changed(tmp_path) == ["b.txt"]
    (tmp_path / "a.py").unlink()
    assert record.changed(tmp_path) == ["a.py", "b.txt"]


def test_a_folder_that_was_listed_counts_by_the_names_in_it(tmp_path):
    (tmp_path / "families").mkdir()
    (tmp_path / "families" / "llama.py").write_text("x = 1\n")
    with Reached([tmp_path]) as reached:
        sorted((tmp_path / "families").glob("*.py"))
    record = Record.of(reached.paths, tmp_path)
    assert list(record.files) == ["families/"]
    (tmp_path / "families" / "llama.py").write_text("x = 2\n")
    assert record.is_current(tmp_path)  # the same names
    (tmp_path / "families" / "phi3.py").write_text("x = 3\n")
    assert record.changed(tmp_path) == ["families/"]


def test_the_kernels_cells_record_the_modules_it_imported_and_the_files_it_opened_or_listed(tmp_path):
    import subprocess
    import sys

    (tmp_path / "table.txt").write_text("t\n")
    # The page's own cells, between the two the build adds (in a process of its own, as a kernel is).
    page = f"import pathlib, json\npathlib.Path({str(tmp_path)!r}, 'table.txt').read_text()\n"
    page += f"list(pathlib.Path({str(tmp_path)!r}).iterdir())\n"
    run = subprocess.run(
        [sys.executable, "-c", kernel_prologue() + page + kernel_epilogue()], capture_output=True, text=True, check=True
    )
    printed = [{"output_type": "stream", "name": "stdout", "text": run.stdout}]
    reached = read_epilogue(printed)
    assert 0 < read_cpu_seconds(printed) < 60  # the kernel's own CPU time, for the build's table
    assert {str(tmp_path / "table.txt"), str(tmp_path)} <= set(reached)
    assert any(path.endswith("json/__init__.py") for path in reached)  # an imported module
    assert not any(path.endswith(".pyc") for path in reached)


def test_a_record_keeps_the_versions_of_the_distributions_it_reached(tmp_path):
    import pytest as reached_module

    record = Record.of([reached_module.__file__], tmp_path)
    assert record.files == {} and record.distributions == {"pytest": pytest.__version__}
    assert Record(distributions={"pytest": "0.0.1"}).changed(tmp_path) == [f"pytest=={pytest.__version__}"]
    assert Record(salt="torch 2").changed(tmp_path, salt="torch 3") == ["salt"]


def test_a_process_names_the_distributions_it_imported_before_any_record(tmp_path):
    from lt_site import deps

    imported = deps.installed_imports()
    # pytest's own modules, imported long before this test: installed files only, none of the checkout's or
    # the standard library's.
    assert pytest.__file__ in imported and deps.__file__ not in imported and json.__file__ not in imported
    assert Record.of(imported, tmp_path).distributions["pytest"] == pytest.__version__


def test_reached_sees_the_class_of_a_method_defined_elsewhere(tmp_path, monkeypatch):
    # A family that only declares data (Mistral on Llama's code): its file holds no function that runs.
    (tmp_path / "parent_mod.py").write_text("class Parent:\n    def run(self):\n        return 1\n")
    (tmp_path / "child_mod.py").write_text("from parent_mod import Parent\n\nclass Child(Parent):\n    size = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import child_mod

    with Reached([tmp_path]) as reached:
        child_mod.Child().run()
    assert {str(tmp_path / "parent_mod.py"), str(tmp_path / "child_mod.py")} <= reached.files
    with Reached([tmp_path]) as untouched:
        sum([1, 2])
    assert str(tmp_path / "child_mod.py") not in untouched.files


def test_an_item_cache_computes_again_only_the_items_whose_files_changed(tmp_path, monkeypatch):
    for name in ("one", "two"):
        (tmp_path / f"item_{name}.py").write_text(f"def value():\n    return {name!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import item_one
    import item_two

    calls = []

    def items():
        return {
            name: (lambda module=module, name=name: calls.append(name) or module.value())
            # Not in alphabetical order: a cache read back keeps the items' order, and still knows them all.
            for name, module in (("two", item_two), ("one", item_one))
        }

    cache = ItemCache(tmp_path / "cache.json", tmp_path, [tmp_path], salt="v1")
    assert cache.compute(items()) == {"two": "two", "one": "one"} and calls == ["two", "one"]
    assert sorted(name for name, seconds in cache.costliest() if seconds >= 0) == ["one", "two"]
    cache = ItemCache(tmp_path / "cache.json", tmp_path, [tmp_path], salt="v1")
    assert cache.all_current() and list(cache.results().items()) == [("two", "two"), ("one", "one")]
    (tmp_path / "item_two.py").write_text("def value():\n    return 'two'  # edited\n")
    cache = ItemCache(tmp_path / "cache.json", tmp_path, [tmp_path], salt="v1")
    assert not cache.all_current() and cache.stale() == ["two"]
    cache.compute(items())
    assert calls == ["two", "one", "two"]
    assert ItemCache(tmp_path / "cache.json", tmp_path, [tmp_path], salt="v2").stale() == ["one", "two"]


# ---------------------------------------------------------------------------
# The build
# ---------------------------------------------------------------------------
def _page(title: str, code: str) -> str:
    front = "---\nfile_format: mystnb\nkernelspec:\n  name: python3\n  display_name: Python 3\n---\n"
    return f"{front}\n# {title}\n\nSome prose.\n\n```{{code-cell}} ipython3\n{code}\n```\n"


def _executed(site, page):
    """When the page's stored outputs were computed."""
    return json.loads((site.root / "_pagecache" / f"{page}.json").read_text())["executed_at"]


def test_a_page_executes_again_only_when_a_file_its_run_reached_changed(tiny_site, monkeypatch):
    tiny_site.package(
        "tinycode",
        {"__init__.py": "", "a.py": "VALUE = 'a1'\n", "b.py": "VALUE = 'b1'\n", "table.txt": "t1\n"},
    )
    # The kernels are other processes: they find the package through PYTHONPATH.
    monkeypatch.setenv("PYTHONPATH", str(tiny_site.root))
    # Where the site's trace starts (builder-inited, priority 400), the zygote is already importing.
    tiny_site.write(
        "zygote_probe.py",
        """
        import page_cache

        SEEN = []


        def setup(app):
            app.connect("builder-inited", lambda app: SEEN.append(bool(page_cache.SETTINGS.get("zygote"))), 400)
        """,
    )
    tiny_site.write(
        "docs/conf.py",
        f"""
        extensions = ["myst_nb", "executed_pages", "page_cache", "zygote_probe"]
        nb_execution_mode = "cache"
        page_cache_root = "../_pagecache"
        page_cache_checkout = {str(tiny_site.root)!r}
        page_cache_sources = [{str(tiny_site.root / "tinycode")!r}]
        # The kernels fork from a zygote, as the book's do (a cheap module preloaded: the records must not care).
        page_cache_kernel_preload = ["numpy"]
        page_cache_zygote_at_start = True
        """,
    )
    tiny_site.write("docs/index.md", "# Tiny\n\n```{toctree}\nuses_a\nuses_b\n```\n")
    tiny_site.write("docs/uses_a.md", _page("A", "from tinycode.a import VALUE\nprint(VALUE)"))
    table = "import pathlib, tinycode\nprint(pathlib.Path(tinycode.__file__).with_name('table.txt').read_text())"
    tiny_site.write("docs/uses_b.md", _page("B", f"from tinycode.b import VALUE\nprint(VALUE)\n{table}"))

    # Who starts the kernels' zygote: in a clean build, the builder's start (configure), before any page is read.
    starts = []
    start_zygote = page_cache.start_zygote

    def noted(app):
        starts.append(sys._getframe(1).f_code.co_name)
        start_zygote(app)

    monkeypatch.setattr(page_cache, "start_zygote", noted)
    assert tiny_site.build().warnings == ""
    assert starts[0] == "configure", starts
    import zygote_probe

    assert zygote_probe.SEEN == [True]
    first = {page: _executed(tiny_site, page) for page in ("uses_a", "uses_b")}
    assert "a1" in tiny_site.html("uses_a") and "b1" in tiny_site.html("uses_b")
    # Each cell's seconds are kept: the build's log names the costliest, by page and first line.
    cells = page_cache.costliest_cells(tiny_site.root / "_pagecache", since=0)
    assert sorted((page, first) for _, page, first in cells) == [
        ("uses_a", "from tinycode.a import VALUE"),
        ("uses_b", "from tinycode.b import VALUE"),
    ]
    assert all(seconds > 0 for seconds, _, _ in cells)
    record = json.loads((tiny_site.root / "_pagecache" / "uses_b.json").read_text())["record"]["files"]
    # The modules it imported, the data file it opened, and the folder the import system listed to find them.
    assert sorted(record) == ["tinycode/", "tinycode/__init__.py", "tinycode/b.py", "tinycode/table.txt"]

    # Nothing changed: no page is even read again (a listed folder is no file Sphinx could find newer).
    doctrees = {path: path.stat().st_mtime_ns for path in tiny_site.build_dir.rglob("uses_*.doctree")}
    assert len(doctrees) == 2
    tiny_site.build()
    assert {path: path.stat().st_mtime_ns for path in doctrees} == doctrees

    # The module one page imported: that page executes again, the other keeps its outputs.
    (tiny_site.root / "tinycode" / "b.py").write_text("VALUE = 'b2'\n")
    starts.clear()
    assert tiny_site.build().warnings == ""
    assert starts and "configure" not in starts, starts  # started once a page is known to execute
    assert _executed(tiny_site, "uses_a") == first["uses_a"]
    assert _executed(tiny_site, "uses_b") > first["uses_b"]
    assert "a1" in tiny_site.html("uses_a") and "b2" in tiny_site.html("uses_b")

    # A data file the page opened counts like a module.
    second = _executed(tiny_site, "uses_b")
    (tiny_site.root / "tinycode" / "table.txt").write_text("t2\n")
    tiny_site.build()
    assert _executed(tiny_site, "uses_b") > second and "t2" in tiny_site.html("uses_b")
    assert _executed(tiny_site, "uses_a") == first["uses_a"]

    # Prose is not code: the page is read again, not executed; a file touched but unchanged costs nothing.
    third = _executed(tiny_site, "uses_b")
    tiny_site.write("docs/uses_a.md", _page("A", "from tinycode.a import VALUE\nprint(VALUE)").replace("Some", "More"))
    (tiny_site.root / "tinycode" / "b.py").write_text("VALUE = 'b2'\n")
    tiny_site.build()
    assert "More prose" in tiny_site.html("uses_a") and "a1" in tiny_site.html("uses_a")
    assert (_executed(tiny_site, "uses_a"), _executed(tiny_site, "uses_b")) == (first["uses_a"], third)

    # The download carries the outputs, whether the page executed in this build or not.
    import nbformat

    offered = nbformat.read(tiny_site.build_dir / "html" / "_sources" / "uses_a.ipynb", as_version=4)
    assert offered.cells[-1].outputs[0].text == "a1\n"


def test_a_page_that_executes_says_why_and_how_many_are_left(tmp_path, monkeypatch):
    stored = {"cells": "c1", "record": Record(files={"m.py": "0"}).as_dict()}
    (tmp_path / "m.py").write_text("x = 1\n")
    assert page_cache.why_stale({}, "c1", tmp_path, "") == "never executed"
    assert page_cache.why_stale(stored, "c2", tmp_path, "") == "its code cells changed"
    assert page_cache.why_stale(stored, "c1", tmp_path, "") == "m.py changed"
    stored["record"] = Record.of([tmp_path / "m.py"], tmp_path).as_dict()
    assert page_cache.why_stale(stored, "c1", tmp_path, "") is None
    monkeypatch.setattr(
        page_cache, "SETTINGS", {"planned": ["p1", "p2", "p3"], "root_cache": str(tmp_path), "started": 0}
    )
    # Numbered in the order the pages start, whichever reading process starts them: each number once.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        started = list(pool.map(page_cache._progress, ["p2", "p1"]))
    assert sorted(started) == ["1 of 3 to execute", "2 of 3 to execute"]
    assert page_cache._progress("p3") == "3 of 3 to execute"
    assert page_cache._progress("elsewhere") == "1 more to execute"


def test_a_cells_printing_flushed_in_pieces_is_stored_as_one_output():
    from page_cache import joined_streams

    def stream(name, text):
        return {"output_type": "stream", "name": name, "text": text}

    figure = {"output_type": "display_data", "data": {"text/plain": "<Figure>"}}
    pieces = [
        stream("stdout", "a"),
        stream("stdout", "\nb\n"),
        stream("stderr", "w\n"),
        figure,
        stream("stdout", "c\n"),
    ]
    assert joined_streams(pieces) == [
        stream("stdout", "a\nb\n"),
        stream("stderr", "w\n"),
        figure,
        stream("stdout", "c\n"),
    ]


def test_a_paused_hook_counts_the_modules_named_and_still_sees_the_files_opened(tmp_path, monkeypatch):
    from lt_site.deps import paused

    (tmp_path / "inner_mod.py").write_text("def run(path):\n    return open(path).read()\n")
    (tmp_path / "named_mod.py").write_text("x = 1\n")
    (tmp_path / "data.txt").write_text("d\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import inner_mod
    import named_mod

    with Reached([tmp_path]) as reached:
        with paused(named_mod):
            inner_mod.run(tmp_path / "data.txt")
    # The code run inside is not seen; the module named stands for it; the file opened is seen.
    assert str(tmp_path / "inner_mod.py") not in reached.files
    assert str(tmp_path / "named_mod.py") in reached.files
    assert str(tmp_path / "data.txt") in reached.opened
    # The control: the same call, not paused, is seen; and the hook is back after the pause.
    with Reached([tmp_path]) as control:
        with paused():
            pass
        inner_mod.run(tmp_path / "data.txt")
    assert str(tmp_path / "inner_mod.py") in control.files


def test_paused_refuses_what_is_not_a_module_from_a_file():
    from lt_site.deps import paused

    with pytest.raises(TypeError, match="modules must be modules loaded from a file"):
        with paused("transformers"):
            pass
