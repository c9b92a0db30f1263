"""The pages are written by as many processes as ``-j`` asks for, and come out the same."""

from __future__ import annotations

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")
import sphinx.builders  # noqa: E402
import write_parallel  # noqa: E402
from sphinx.util.parallel import ParallelTasks, parallel_available  # noqa: E402


def test_the_builders_parallel_writing_gets_as_many_processes_as_j():
    asked = []

    class Builder:
        def _write_parallel(self, docnames, nproc):
            asked.append(nproc)

    class App:
        parallel = 2
        builder = Builder()

    write_parallel.write_on_every_core(App())
    App.builder._write_parallel(["index"], nproc=1)  # Sphinx asks for one writer fewer than -j
    assert asked == [2]


def test_without_a_parallel_writer_the_log_says_so_and_nothing_changes(monkeypatch):
    messages = []
    monkeypatch.setattr(write_parallel.logger, "info", messages.append)

    class App:
        parallel = 2
        builder = object()

    write_parallel.write_on_every_core(App())
    assert messages == [
        "write_parallel: the builder has no _write_parallel; its writers are left as Sphinx starts them"
    ]


@pytest.mark.skipif(not parallel_available, reason="Sphinx cannot fork processes here")
def test_a_parallel_build_writes_with_two_processes_and_the_same_pages(tiny_site, monkeypatch):
    writers = []

    class Recorded(ParallelTasks):
        def __init__(self, nproc):
            super().__init__(nproc)
            writers.append(nproc)

    monkeypatch.setattr(sphinx.builders, "ParallelTasks", Recorded)
    pages = [f"page{number}" for number in range(8)]  # Sphinx writes in parallel above five pages
    tiny_site.write("docs/index.rst", "Index\n=====\n\n.. toctree::\n\n" + "".join(f"   {p}\n" for p in pages))
    for number, page in enumerate(pages):
        tiny_site.write(f"docs/{page}.rst", f"Page {number}\n======\n\nSee :doc:`index` and :doc:`{pages[-1]}`.\n")
    written, writing = {}, {}
    for extensions in ([], ["write_parallel"]):
        tiny_site.conf(extensions)  # another configuration: every page is read and written again
        writers.clear()
        app = tiny_site.build(parallel=2)
        assert not app.warnings
        written[len(extensions)] = {page: tiny_site.html(page) for page in ["index", *pages]}
        writing[len(extensions)] = writers[-1]  # the writers' tasks come last, after the readers'
    assert writing == {0: 1, 1: 2}
    assert written[0] == written[1]
