"""The build's process ends when its work is done: the gallery's pool stops early, the exit frees nothing."""

from __future__ import annotations

import atexit
import gc
import multiprocessing.connection
import time

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")
joblib = pytest.importorskip("joblib", reason="joblib is not installed (the docs extras); the pool is not tested")
import build_exit  # noqa: E402
from joblib.externals.loky import reusable_executor  # noqa: E402


def _square(x: int) -> int:
    return x * x


def test_the_gallerys_loky_pool_is_shut_down_before_the_pages_are_read():
    # The pool sphinx-gallery's parallel run leaves behind: joblib's loky backend, two workers.
    assert joblib.Parallel(n_jobs=2, backend="loky")(joblib.delayed(_square)(x) for x in range(4)) == [0, 1, 4, 9]
    pool = reusable_executor._executor
    assert pool is not None and not pool._flags.shutdown
    workers = list(pool._processes.values())
    assert workers and all(worker.is_alive() for worker in workers)

    build_exit.stop_gallery_pool(app=None, env=None, docnames=[])

    assert pool._flags.shutdown
    # A worker has exited once its sentinel is ready.  Not is_alive(): loky's own thread joins its workers too,
    # and a process the other thread reaped first keeps no exit status, so is_alive() can still say True.
    deadline = time.monotonic() + 30
    running = [worker.sentinel for worker in workers]
    while running and time.monotonic() < deadline:
        ended = multiprocessing.connection.wait(running, timeout=deadline - time.monotonic())
        running = [sentinel for sentinel in running if sentinel not in ended]
    assert not running, f"{len(running)} of the pool's {len(workers)} workers still run"
    # With no pool up (a build whose gallery did not run), the handler does nothing.
    build_exit.stop_gallery_pool(app=None, env=None, docnames=[])


def test_where_loky_keeps_no_pool_the_log_says_so_and_nothing_stops(monkeypatch):
    messages = []
    monkeypatch.delattr(reusable_executor, "_executor")
    monkeypatch.setattr(build_exit.logger, "info", lambda message, *args: messages.append(message % args))
    build_exit.stop_gallery_pool(app=None, env=None, docnames=[])
    assert messages == ["build_exit: joblib's loky keeps no _executor; its pool is left to stop at exit"]


def test_the_freeze_is_registered_with_atexit_once_however_many_builds_set_the_extension_up(monkeypatch):
    registered, connected = [], []
    monkeypatch.setattr(atexit, "register", registered.append)
    monkeypatch.setattr(build_exit, "_REGISTERED", False)

    class App:
        def connect(self, event, handler):
            connected.append((event, handler))

    for _ in range(3):
        metadata = build_exit.setup(App())
    assert registered == [gc.freeze]
    assert connected == [("env-before-read-docs", build_exit.stop_gallery_pool)] * 3
    assert metadata["parallel_read_safe"] and metadata["parallel_write_safe"]
