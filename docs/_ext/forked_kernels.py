"""Kernels forked from one warm process: a page's kernel starts with PyTorch and ``transformers`` already imported.

Every page that executes starts a kernel of its own, and its first cell
imports PyTorch, ``transformers`` and IPython's kernel before it computes
anything: several seconds of CPU per page, the same work for every page.
This module does that work once per build.  A *zygote*, a process started
when the build has pages to execute, imports those modules, then waits on a
Unix socket; for each kernel the build asks for, it forks, and the child
becomes the kernel (IPython's ``kernelapp``, with the connection file,
working folder and environment ``jupyter_client`` chose for it).  The page's
own imports then find the modules loaded.

What a page sees is the same as in a fresh kernel:

* the child starts from a process that imported modules and ran nothing
  else: no PyTorch operation, no thread (checked before the first fork: a
  zygote with a second thread refuses to fork, and the build falls back to
  fresh kernels);
* it runs in a session of its own (its process group is its pid), in the
  page's folder, with the kernel's environment, ``sys.path`` and
  ``sys.argv`` as ``python -m ipykernel_launcher`` leaves them;
* only third-party modules are preloaded, never the package or the site's
  tooling, so a page's record of what it reached (:mod:`lt_site.deps`)
  still names every module of the checkout it imported;
* the child's CPU time counts from the fork, so a page's CPU seconds are its
  own.

A kernel the zygote cannot start (another command than IPython's, or a
zygote that failed) starts the usual way, with a line in the log.

The zygote is this file run as a script: ``python forked_kernels.py SOCKET MODULE...``.

The build's other processes of their own, the proofs', the two browser
exports' and the gallery's workers, start warm the same way:
:func:`worker_context` forks them from one process that imported PyTorch and
``transformers`` once (``multiprocessing``'s *forkserver*), where each used
to start a fresh interpreter and import them itself (``conf.py``'s
``*_preload`` settings, and :func:`fork_loky_workers`).
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from long_lived import freeze_survivors

#: Imported once by the zygote: what every page's kernel imports before its first result.  Not IPython's
#: kernel: its settings read the environment when it is imported (``JPY_PARENT_PID``), and each kernel's differs.
PRELOAD = (
    "numpy",
    "torch",
    "transformers",
    "transformers.modeling_utils",
    "matplotlib",
)

#: The command ``jupyter_client`` runs for a Python kernel, before ``-f CONNECTION_FILE``.
IPYKERNEL = ("-m", "ipykernel_launcher")


# ---------------------------------------------------------------------------
# The zygote (this file, run as a script)
# ---------------------------------------------------------------------------
def _become_kernel(request: dict[str, Any]) -> None:
    """In the forked child: turn into the kernel ``request`` describes (never returns)."""
    try:
        gc.enable()
        freeze_survivors()  # a kernel lives for one page (long_lived.py)
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        # As ipykernel_launcher leaves them: no folder of the launcher's own first on the path.
        del sys.path[0]
        from importlib.util import find_spec

        from ipykernel import kernelapp

        sys.argv = [find_spec("ipykernel_launcher").origin, *request["arguments"]]

        kernelapp.launch_new_instance()
    except BaseException as error:  # noqa: BLE001 - the child must never return into the zygote's loop
        print(f"forked kernel: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        os._exit(1)
    os._exit(0)


def serve(path: str, preload: tuple[str, ...] = PRELOAD) -> None:
    """Listen on ``path`` first (a request waits in the queue while the modules load), import ``preload``,
    then fork one kernel per request, answering with its pid, until the build that started it is gone."""
    parent = os.getppid()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    # As Python's documentation of gc.freeze advises for a process that forks: no collection while the modules
    # load, what they made frozen before the first fork, the collector on again in each kernel.  A kernel's
    # collections then walk what its page made, not PyTorch's objects (long_lived.py).
    gc.disable()
    for name in preload:
        __import__(name)
    gc.freeze()
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    # Children are reaped by the system: the build kills them, the zygote never waits for them.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    server.settimeout(1.0)
    while os.getppid() == parent:
        try:
            connection, _ = server.accept()
        except TimeoutError:
            continue
        with connection:
            connection.settimeout(None)
            request = json.loads(_read_line(connection))
            if threads != 1:
                answer = {"error": f"the zygote runs {threads} threads: forking it is not safe"}
            else:
                pid = os.fork()
                if pid == 0:
                    server.close()
                    connection.close()
                    _become_kernel(request)
                answer = {"pid": pid}
            connection.sendall(json.dumps(answer).encode() + b"\n")


def _read_line(connection: socket.socket) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = connection.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.decode()


# ---------------------------------------------------------------------------
# The build's side
# ---------------------------------------------------------------------------
class Zygote:
    """The build's handle on a zygote: start it (importing ``preload``, in the environment ``env``, by default
    this process's), ask it for kernels, stop it."""

    def __init__(self, preload: tuple[str, ...] = PRELOAD, env: dict[str, str] | None = None) -> None:
        # A short path: a Unix socket's name holds about 100 bytes.
        self.folder = tempfile.mkdtemp(prefix="lt-kernels-")
        self.path = os.path.join(self.folder, "zygote.sock")
        self.process = subprocess.Popen(
            [sys.executable, __file__, self.path, *preload], stdin=subprocess.DEVNULL, env=env
        )
        deadline = time.monotonic() + 30
        while not os.path.exists(self.path):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the kernel zygote did not start (exit status {self.process.poll()})")
            time.sleep(0.02)

    def fork(self, command: list[str], cwd: str, env: dict[str, str]) -> int:
        """A kernel for ``command`` (``python -m ipykernel_launcher -f FILE``): its pid."""
        request = {"arguments": command[1 + len(IPYKERNEL) :], "cwd": cwd, "env": env}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(self.path)
            client.sendall(json.dumps(request).encode() + b"\n")
            answer = json.loads(_read_line(client))
        if "pid" not in answer:
            raise RuntimeError(answer.get("error", "the kernel zygote gave no pid"))
        return int(answer["pid"])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


def can_fork(command: list[str]) -> bool:
    """Whether ``command`` is the Python kernel the zygote becomes (``python -m ipykernel_launcher -f FILE ...``)."""
    return len(command) >= 5 and tuple(command[1:3]) == IPYKERNEL and command[3] == "-f"


class _Forked:
    """The part of :class:`subprocess.Popen` that ``jupyter_client``'s provisioner uses, for a forked kernel (the
    zygote's child, reaped by the system: it is alive while its pid answers a signal)."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self.returncode = -signal.SIGKILL
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def kernel_manager_class(zygote: Zygote, log: Any) -> type:
    """An ``AsyncKernelManager`` whose kernels the zygote forks (where :func:`can_fork`)."""
    from jupyter_client import AsyncKernelManager

    class ForkedKernelManager(AsyncKernelManager):
        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            provisioner = self.provisioner
            if not can_fork(kernel_cmd):
                log(f"a fresh kernel: the zygote runs IPython's kernel, not {kernel_cmd[:3]}")
                return await super()._async_launch_kernel(kernel_cmd, **kw)
            # As jupyter_client's launcher sets it (the kernel then prints no banner for a terminal).
            env = {**(kw.get("env") or os.environ), "JPY_PARENT_PID": str(os.getpid())}
            try:
                pid = zygote.fork(kernel_cmd, str(kw.get("cwd") or os.getcwd()), env)
            except (OSError, RuntimeError, ValueError) as error:
                log(f"a fresh kernel: the zygote could not fork one ({error})")
                return await super()._async_launch_kernel(kernel_cmd, **kw)
            # What LocalProvisioner.launch_kernel records, for a process the zygote started.
            provisioner.process = _Forked(pid)
            provisioner.pid = provisioner.pgid = pid
            provisioner.cwd = kw.get("cwd", os.getcwd())
            self._reconcile_connection_info(provisioner.connection_info)

    return ForkedKernelManager


# ---------------------------------------------------------------------------
# The build's other processes: the proofs', the exports', the gallery's
# ---------------------------------------------------------------------------
#: What the proofs', the exports' and the gallery's processes import before their work: the zygote's modules and
#: the proofs' and exporters' libraries (``conf.py`` sets it as the first two's ``*_preload``, and gives it to
#: :func:`fork_loky_workers` for the gallery's).  Only third-party modules, as for the zygote; not onnxruntime,
#: whose import starts a thread (a process with a second thread is not safe to fork).
WORKER_PRELOAD = (*PRELOAD, "peft", "gguf", "safetensors.torch", "onnx", "onnxscript", "sphinx_gallery.gen_rst")


def worker_context(preload: Sequence[str] = ()) -> multiprocessing.context.BaseContext:
    """Where a process of the build's own starts (a :class:`~concurrent.futures.ProcessPoolExecutor`'s context).

    A new interpreter, never a copy of the build's process (Sphinx's state is not the worker's business): with
    modules to ``preload``, a child of ``multiprocessing``'s forkserver, a process started once for the build
    that imported them.  It has the build's environment when it starts, and finds its modules as a new
    interpreter does (``PYTHONPATH``; Python 3.11's forkserver does not take the build's ``sys.path``); the
    child then takes the build's ``sys.path`` and working folder, as a spawned one does.  There is one
    forkserver per process: the first child started fixes what it imported.  Nothing to preload: ``spawn``.
    """
    if not preload:
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(preload))
    return context


def submit_in_background(executor: Executor, function: Callable[..., Any], *args: Any) -> Future:
    """``executor.submit(function, *args)`` from a thread of its own: a future of ``function``'s result.

    A forkserver's first child starts once the server has imported its modules (several seconds); submitting
    from a thread lets the build's own process go on meanwhile (the running examples' trace, say).
    """
    starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="start-worker")
    try:
        return starter.submit(lambda: executor.submit(function, *args).result())
    finally:
        starter.shutdown(wait=False)


def stale_examples(examples_dir: str | os.PathLike[str], gallery_dir: str | os.PathLike[str]) -> list[str]:
    """The gallery's scripts that sphinx-gallery will run in this build: those whose MD5, stored beside their
    copy in ``gallery_dir`` when they last ran, is missing or not their text's (as ``md5sum_is_current``)."""
    from sphinx_gallery.utils import get_md5sum

    stale = []
    for script in sorted(Path(examples_dir).glob("*.py")):
        stored = Path(gallery_dir, script.name + ".md5")
        if not stored.is_file() or stored.read_text() != get_md5sum(script, mode="t"):
            stale.append(script.name)
    return stale


def fork_loky_workers(preload: Sequence[str]) -> None:
    """From now on, joblib's loky (the pool that runs the gallery's examples) forks its workers from the
    forkserver of :func:`worker_context`, which imports ``preload``, instead of starting each afresh.

    The first process the forkserver starts fixes what it imported: the proofs', the exports' and the
    gallery's processes share it.  loky passes no environment of its own to a forked worker; the build's
    (``OMP_NUM_THREADS=1``, as ``nox -s docs`` sets it) is the forkserver's.
    """
    from joblib.externals.loky.backend.context import set_start_method

    worker_context(preload)
    set_start_method("forkserver", force=True)


if __name__ == "__main__":
    serve(sys.argv[1], tuple(sys.argv[2:]))
