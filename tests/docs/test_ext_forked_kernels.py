"""Kernels forked from a warm zygote: warm, yet started as ``python -m ipykernel_launcher`` starts one."""

import json
import operator
import os
import shutil
import threading
import time
from concurrent.futures import Executor, Future, ProcessPoolExecutor

import pytest

pytest.importorskip("nbclient", reason="nbclient is not installed (the docs extras); the kernels are not tested")

import forked_kernels  # noqa: E402
import nbformat  # noqa: E402
from forked_kernels import Zygote, can_fork, kernel_manager_class  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

# What the kernel reports of itself: whether the preloaded module was there before the cell, and how it was started.
PROBE = """\
import gc, json, os, resource, sys
warm = "wave" in sys.modules
import wave
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"warm": warm, "pid": os.getpid(), "own_group": os.getpgid(0) == os.getpid(), "cwd": os.getcwd(),
                  "argv0": os.path.basename(sys.argv[0]), "path": sys.path, "parent": os.environ.get("JPY_PARENT_PID"),
                  "marker": os.environ.get("LT_FORK_TEST"), "collector": gc.isenabled(), "frozen": gc.get_freeze_count(),
                  "callbacks": [callback.__name__ for callback in gc.callbacks]}))
"""


def _run(tmp_path, **client_options):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROBE)])
    notebook.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    client = NotebookClient(
        notebook, timeout=60, shutdown_kernel="immediate", resources={"metadata": {"path": str(tmp_path)}},
        **client_options,
    )  # fmt: skip
    client.execute()
    return json.loads(notebook.cells[0].outputs[0]["text"])


@pytest.fixture(scope="module")
def zygote():
    # wave: a module no kernel imports on its own (the fresh control below checks it), cheap to preload.
    started = Zygote(("wave",))
    yield started
    started.stop()
    assert not os.path.exists(started.path)


def test_a_forked_kernel_starts_warm_and_as_a_fresh_one_starts(zygote, tmp_path, monkeypatch):
    monkeypatch.setenv("LT_FORK_TEST", "seen")
    logged = []
    forked = _run(tmp_path, kernel_manager_class=kernel_manager_class(zygote, logged.append))
    fresh = _run(tmp_path)
    assert logged == []
    assert forked["warm"] and not fresh["warm"]
    # Started alike: its own session, the page's folder and the caller's environment, the launcher's argv and path.
    for key in ("own_group", "cwd", "argv0", "path", "parent", "marker"):
        assert forked[key] == fresh[key], key
    assert forked["own_group"] and forked["cwd"] == str(tmp_path) and forked["marker"] == "seen"
    assert forked["argv0"] == "ipykernel_launcher.py" and forked["parent"] == str(os.getpid())
    # What the zygote imported is frozen out of the cycle collector's walks; the collector runs, as in a fresh one.
    assert forked["collector"] and fresh["collector"]
    assert forked["frozen"] > 0 and fresh["frozen"] == 0
    # A kernel lives for one page: what survives each full pass is frozen too.
    assert forked["callbacks"] == ["_freeze_after_a_full_pass"] and fresh["callbacks"] == []
    # Shut down at once: the kernel is gone.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(forked["pid"], 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the forked kernel {forked['pid']} outlived its shutdown")


def test_only_ipythons_own_kernel_is_forked_and_a_zygote_that_cannot_fork_falls_back(tmp_path):
    assert can_fork(["python", "-m", "ipykernel_launcher", "-f", "c.json", "--HistoryManager.hist_file=:memory:"])
    assert not can_fork(["python", "-m", "other_kernel", "-f", "c.json"])
    assert not can_fork(["python", "-m", "ipykernel_launcher"])
    gone = Zygote.__new__(Zygote)  # a zygote whose socket is not there
    gone.path = str(tmp_path / "gone.sock")
    logged = []
    assert not _run(tmp_path, kernel_manager_class=kernel_manager_class(gone, logged.append))["warm"]
    assert len(logged) == 1 and logged[0].startswith("a fresh kernel: the zygote could not fork one")


def test_the_builds_own_processes_are_forked_from_one_that_imported_the_preload(tmp_path, monkeypatch):
    assert forked_kernels.worker_context([]).get_start_method() == "spawn"  # nothing to preload: a fresh interpreter
    # A module that says, when imported, which process imported it.
    (tmp_path / "lt_preload_probe.py").write_text('import os\nos.environ["LT_PRELOADED_IN"] = str(os.getpid())\n')
    # The forkserver finds its modules as a new interpreter would, with the environment's path.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]))
    context = forked_kernels.worker_context(["lt_preload_probe"])
    assert context.get_start_method() == "forkserver"
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        imported_in = pool.submit(os.getenv, "LT_PRELOADED_IN").result()
        worker = pool.submit(os.getpid).result()
    # Imported once, before the fork, by another process than this one and the worker.
    assert imported_in is not None and int(imported_in) not in (os.getpid(), worker)
    assert "LT_PRELOADED_IN" not in os.environ
    # The gallery's pool (joblib's loky) forks its workers from the same process.
    from joblib import Parallel, delayed
    from joblib.externals.loky import get_reusable_executor
    from joblib.externals.loky.backend import context as loky_context

    monkeypatch.setattr(loky_context, "_DEFAULT_START_METHOD", None)
    forked_kernels.fork_loky_workers(["lt_preload_probe"])
    try:
        seen = Parallel(n_jobs=2, backend="loky")(delayed(os.getenv)("LT_PRELOADED_IN") for _ in range(4))
    finally:
        get_reusable_executor().shutdown(wait=True, kill_workers=True)
    assert seen == [imported_in] * 4


def test_a_process_is_submitted_from_a_thread_and_its_result_or_error_comes_back():
    release = threading.Event()

    class Waiting(Executor):
        """An executor whose submit waits, as a forkserver still importing its modules makes it wait."""

        def submit(self, function, *args):
            release.wait(10)
            done = Future()
            try:
                done.set_result(function(*args))
            except Exception as error:  # noqa: BLE001 - handed back as the future's
                done.set_exception(error)
            return done

    future = forked_kernels.submit_in_background(Waiting(), operator.add, 2, 3)
    failing = forked_kernels.submit_in_background(Waiting(), operator.truediv, 1, 0)
    assert not future.done() and not failing.done()  # the caller goes on while the submit waits
    release.set()
    assert future.result(timeout=10) == 5
    with pytest.raises(ZeroDivisionError):
        failing.result(timeout=10)


def test_the_examples_that_will_run_are_those_sphinx_gallery_finds_stale(tmp_path):
    from sphinx_gallery.gen_rst import md5sum_is_current
    from sphinx_gallery.utils import get_md5sum

    source, gallery = tmp_path / "gallery", tmp_path / "auto_examples"
    source.mkdir(), gallery.mkdir()
    for name in ("plot_kept.py", "plot_edited.py", "plot_new.py"):
        (source / name).write_text(f"print({name!r})\n")
    for name in ("plot_kept.py", "plot_edited.py"):  # run before: their MD5 stored beside their copy
        (gallery / f"{name}.md5").write_text(get_md5sum(source / name, mode="t"))
    (source / "plot_edited.py").write_text("print('edited')\n")
    stale = forked_kernels.stale_examples(source, gallery)
    assert stale == ["plot_edited.py", "plot_new.py"]
    # sphinx-gallery's own check, on the copy it makes of each script, says the same.
    for script in source.glob("*.py"):
        shutil.copy(script, gallery / script.name)
        assert md5sum_is_current(gallery / script.name, mode="t") == (script.name not in stale)
