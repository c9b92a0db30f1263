"""What a cached result was computed from, recorded while it was computed.

Every cache of the site (the executed pages, the proofs, the runtime values
beside the annotated source, the browser exports) keeps, beside its result,
a :class:`Record` of what the computation *reached*: the files of the
checkout it ran or read, each with a digest of its bytes, and the installed
distributions it imported, each with its version.  The result is reused
while every one of those files and versions is what it was; editing a file
that a computation never reached leaves its result alone.  Nothing here is
a hand-written list of dependencies: the records are taken from the runs
themselves, two ways.

* **A page runs in a kernel of its own**, a fresh process: the modules that
  process imported (``sys.modules`` when the page is done) are exactly the
  package's modules the page reached, and an audit hook (:pep:`578`) sees
  every file it opened, the package's data files (the families' records) and
  the committed benchmark results among them, and every folder it listed
  (a folder counts by the names in it: a new family's file is a change for
  a page that listed the families).  :func:`kernel_prologue` and
  :func:`kernel_epilogue` are the two cells that record it, run before and
  after the page's own (and never shown).  They cost nothing while the page
  runs: no tracer slows the cells they watch.
* **Work that shares a process** (each proof, each running example, each
  export) is recorded by :class:`Reached`, a :func:`sys.settrace` hook
  that sees every Python function that starts (and no line: it returns no
  local tracer): the files of those functions, and for a method, the files
  of its object's class and the classes it inherits from.  That last part
  matters for a family that only declares data, Mistral on Llama's code:
  no function of ``mistral.py`` runs when a Mistral model computes, but its
  class does.

A Python file counts when its code runs (in a page's kernel: when its
module is imported), not when it is merely read as text: the registry reads
every family's file to learn which class each registers, and that must not
make every page depend on every family.

What a record does not see: a module-level constant read without running
any function of its file (in a shared process), files read by another
process the computation started, and anything outside the watched folders
and the installed distributions (the interpreter's version is in every
key, through ``salt``).

>>> import tempfile, pathlib
>>> with tempfile.TemporaryDirectory() as folder:
...     root = pathlib.Path(folder)
...     _ = (root / "a.py").write_text("x = 1\\n")
...     record = Record.of([root / "a.py"], root)
...     fresh = record.is_current(root)
...     _ = (root / "a.py").write_text("x = 2\\n")
...     (fresh, record.is_current(root), record.changed(root))
(True, False, ['a.py'])
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import json
import os
import sys
import sysconfig
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Record",
    "Reached",
    "paused",
    "ItemCache",
    "file_digest",
    "distribution_of",
    "kernel_prologue",
    "kernel_epilogue",
    "read_epilogue",
    "read_cpu_seconds",
]

#: The digest of a file that is not there (so that deleting a file a result read is a change).
MISSING = "missing"


def file_digest(path: str | Path) -> str:
    """16 hex digits of SHA-256 over a file's bytes, or over a folder's names (:data:`MISSING` when neither).

    A folder's digest is that of the names in it (bytecode caches and hidden names aside): a computation that
    listed a folder (to find the families in it, say) depends on which files are there, not on their bytes.
    """
    path = Path(path)
    try:
        if path.is_dir():
            names = sorted(name for name in os.listdir(path) if name != "__pycache__" and not name.startswith("."))
            return hashlib.sha256("\0".join(names).encode()).hexdigest()[:16]
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except (FileNotFoundError, NotADirectoryError):
        return MISSING


@functools.lru_cache(maxsize=1)
def _site_packages() -> tuple[str, ...]:
    """The folders installed distributions live in (this interpreter's purelib and platlib), as named and resolved."""
    paths = {sysconfig.get_paths()[name] for name in ("purelib", "platlib")}
    return tuple(
        sorted({folder + os.sep for path in paths for folder in (os.path.abspath(path), os.path.realpath(path))})
    )


@functools.cache
def _top_levels() -> dict[str, list[str]]:
    """Each top-level module of the installed distributions, and the distributions that hold it (read once)."""
    return importlib.metadata.packages_distributions()


def _distribution_of_top(top: str) -> str | None:
    names = _top_levels().get(top) if top else None
    return sorted(names)[0] if names else None


def distribution_of(path: str | Path) -> str | None:
    """The installed distribution a module's file belongs to (``torch`` for ``.../site-packages/torch/nn/x.py``).

    ``None`` for a file outside the installed distributions (the standard library, the checkout).
    """
    text = os.path.abspath(path)
    for folder in _site_packages():
        if text.startswith(folder):
            top = text[len(folder) :].split(os.sep, 1)[0]
            return _distribution_of_top(top.removesuffix(".py").split(".")[0])
    return None


def installed_imports() -> set[str]:
    """The files of the modules this process imported from the installed distributions (none of the checkout).

    A process forked from one that imported its libraries first (the build's exports, ``forked_kernels.py``)
    ran those imports before any record of its own started.  A record that adds these files names every
    distribution the process holds, as a fresh process's record of its own imports would, or more.
    """
    files = (getattr(module, "__file__", None) for module in list(sys.modules.values()))
    return {file for file in files if isinstance(file, str) and distribution_of(file) is not None}


@functools.cache
def _version(distribution: str) -> str:
    """The installed version (read once a process: a build does not install anything while it runs)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return MISSING


@dataclass
class Record:
    """The files and distributions a result was computed from, and their digests at the time.

    Attributes:
        files: Each file, relative to the root the record was taken against (POSIX), and its digest.
        distributions: Each installed distribution, and its version.
        salt: Anything else the result depends on (the interpreter's and the device's description).
    """

    files: dict[str, str] = field(default_factory=dict)
    distributions: dict[str, str] = field(default_factory=dict)
    salt: str = ""

    @classmethod
    def of(
        cls, paths: Iterable[str | Path], root: str | Path, roots: Iterable[str | Path] = (), salt: str = ""
    ) -> Record:
        """The record of ``paths`` as they are now.

        Args:
            paths: What the computation reached: files anywhere (module files, opened files).
            root: The checkout; a file under one of ``roots`` (default: ``root`` itself) is kept with its
                digest, relative to ``root``.
            roots: The folders whose files count (the package, the site's tooling, the data the pages read).
            salt: See :attr:`salt`.
        """
        # Each folder as named and as resolved, so that no path needs resolving (thousands are reached).
        root = os.path.abspath(root)
        roots = [os.path.abspath(folder) for folder in (roots or [root])]
        watched = {form + os.sep: folder for folder in roots for form in (folder, os.path.realpath(folder))}
        checkouts = {form + os.sep: root for form in (root, os.path.realpath(root))}
        files, distributions = {}, set()
        for path in set(map(os.path.abspath, paths)):
            if "__pycache__" in path:
                continue
            if any((path + os.sep).startswith(folder) for folder in watched):
                checkout = next((form for form in checkouts if path.startswith(form)), None)
                if checkout is None:
                    continue  # a watched folder outside the checkout: no relative name
                name = path[len(checkout) :].replace(os.sep, "/")
                if os.path.isfile(path):
                    files[name] = file_digest(path)
                elif os.path.isdir(path):
                    files[name + "/"] = file_digest(path)
                continue
            distributions.add(distribution_of(path))
        versions = {name: _version(name) for name in sorted(distributions - {None})}
        return cls(dict(sorted(files.items())), versions, salt)

    def merged(self, other: Record) -> Record:
        """The record of both computations."""
        return Record(
            dict(sorted({**self.files, **other.files}.items())),
            dict(sorted({**self.distributions, **other.distributions}.items())),
            self.salt,
        )

    def key(self) -> str:
        """16 hex digits naming everything in the record."""
        return hashlib.sha256(json.dumps(self.as_dict(), sort_keys=True).encode()).hexdigest()[:16]

    def changed(self, root: str | Path, salt: str | None = None) -> list[str]:
        """What differs now from the record: files (relative paths), ``name==version`` and ``salt``."""
        root = Path(root)
        changes = [name for name, digest in self.files.items() if file_digest(root / name) != digest]
        changes += [
            f"{name}=={_version(name)}" for name, version in self.distributions.items() if _version(name) != version
        ]
        if salt is not None and salt != self.salt:
            changes.append("salt")
        return changes

    def is_current(self, root: str | Path, salt: str | None = None) -> bool:
        """Whether every file and distribution of the record (and the salt, if given) is what it was."""
        return not self.changed(root, salt)

    def as_dict(self) -> dict[str, Any]:
        return {"files": self.files, "distributions": self.distributions, "salt": self.salt}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Record:
        return cls(dict(data.get("files", {})), dict(data.get("distributions", {})), str(data.get("salt", "")))


# ---------------------------------------------------------------------------
# In a shared process: the functions that ran
# ---------------------------------------------------------------------------
#: The recorders open now (an audit hook cannot be removed, so one hook serves them all).
_OPEN: list[Reached] = []
_AUDITING = False


#: Files read as text that do not count as reached: Python's source and bytecode count when they run.
_SOURCE = (".py", ".pyc")


#: The audit events of a folder's listing (``Path.glob`` and the import system list folders too).
_LISTING = ("os.listdir", "os.scandir")


def _audit(event: str, args: tuple) -> None:
    if not _OPEN or event not in ("open", *_LISTING) or not args:
        return
    target = args[0] if args[0] is not None or event == "open" else "."
    if not isinstance(target, (str, os.PathLike)):
        return
    path = os.path.abspath(os.fspath(target))
    if event == "open" and path.endswith(_SOURCE):
        return
    for recorder in _OPEN:
        recorder.opened.add(path)


class Reached:
    """Records the files whose code runs, and the files opened, while it is open (a context manager).

    Every Python function that starts is seen (:func:`sys.settrace`, ``call``
    events only: no line is traced, so the cost is one small call per
    function call); a method's object (``self`` or ``cls``) adds the files of
    its class and of every class it inherits from.  A tracer that was set
    before (a coverage run, a debugger) keeps receiving its events.

    >>> import json
    >>> with Reached() as reached:
    ...     _ = json.dumps([1])
    >>> any(path.endswith("json/encoder.py") for path in reached.files)
    True

    Args:
        roots: Where the methods whose object's class counts are (the package, the site's tooling): a
            method elsewhere (PyTorch's, say) is only its own file, which keeps the hook cheap.  Code that
            was generated (a dataclass's ``__init__``, named ``<string>``) always counts.  Empty: everywhere.
    """

    def __init__(self, roots: Iterable[str | Path] = ()) -> None:
        self.files: set[str] = set()
        self.opened: set[str] = set()
        self._roots = tuple(str(Path(folder).resolve()) + os.sep for folder in roots)
        self._codes: dict[Any, bool] = {}
        self._classes: set[type] = set()

    def __enter__(self) -> Reached:
        global _AUDITING
        if not _AUDITING:
            sys.addaudithook(_audit)
            _AUDITING = True
        _OPEN.append(self)
        self._previous = sys.gettrace()
        sys.settrace(self._on_call)
        return self

    def __exit__(self, *exc_info: object) -> None:
        sys.settrace(self._previous)
        _OPEN.remove(self)

    @property
    def paths(self) -> set[str]:
        """Every file reached: run or opened (and every folder listed)."""
        return self.files | self.opened

    def _on_call(self, frame, event, arg):
        code = frame.f_code
        method = self._codes.get(code)
        if method is None:
            self.files.add(code.co_filename)
            own = not self._roots or code.co_filename.startswith(("<", *self._roots))
            method = self._codes[code] = own and code.co_argcount > 0 and code.co_varnames[0] in ("self", "cls")
        if method:
            owner = frame.f_locals.get(code.co_varnames[0])
            kind = owner if isinstance(owner, type) else type(owner)
            if kind not in self._classes:
                self._classes.add(kind)
                for base in kind.__mro__:
                    module = sys.modules.get(base.__module__)
                    if getattr(module, "__file__", None):
                        self.files.add(module.__file__)
        # A tracer set before this one (coverage, a debugger) still sees every call.
        return self._previous(frame, event, arg) if self._previous is not None else None


@contextlib.contextmanager
def paused(*modules: Any) -> Iterator[None]:
    """Stop seeing calls for a while: the third-party code run inside counts by ``modules`` alone.

    A reference computation in another library (``transformers`` reading a
    whole GGUF file: half a million small calls) costs about twice as much
    with a call hook as without.  What it reached is that library, whose
    version is all a record keeps of it: the files of ``modules`` count as
    reached by every open recorder, and the files opened inside are still
    seen (the audit hook is not paused).

    Raises:
        TypeError: when one of ``modules`` is not a module loaded from a file.
    """
    for module in modules:
        if not isinstance(getattr(module, "__file__", None), str):
            raise TypeError(f"modules must be modules loaded from a file, got {module!r}")
    for recorder in _OPEN:
        recorder.files.update(module.__file__ for module in modules)
    previous = sys.gettrace()
    sys.settrace(None)
    try:
        yield
    finally:
        sys.settrace(previous)


class ItemCache:
    """Results of many items computed in one process, each reused while its own record is current.

    Two JSON files: ``path`` holds the results, in order (what pages read; it
    is rewritten only when a result changes, so that editing a file whose
    results come out the same makes Sphinx read no page again), and
    ``<path>.records.json`` the record of each item's computation and of the
    whole (what the last run reached, the code that lists the items
    included).  While the whole is current, the results are read without
    running anything (:meth:`all_current`); otherwise :meth:`compute` reruns
    only the items whose own record changed.

    Args:
        path: The results' JSON file.
        root: The checkout the records' paths are relative to.
        roots: The folders whose files count (see :meth:`Record.of`).
        salt: The versions and the device the results were computed with.
    """

    def __init__(self, path: str | Path, root: str | Path, roots: Iterable[str | Path], salt: str = "") -> None:
        self.path = Path(path)
        self.records_path = self.path.with_name(self.path.name + ".records.json")
        self.root = Path(root)
        self.roots = [Path(folder) for folder in roots]
        self.salt = salt
        self.stored = _read_json(self.path)
        self.records = _read_json(self.records_path)

    def whole(self) -> Record | None:
        """The record of the last run, or ``None``."""
        return Record.from_dict(self.records["record"]) if "record" in self.records else None

    def all_current(self) -> bool:
        """Whether the last run's results can all be reused (nothing it reached, and no version, changed)."""
        whole = self.whole()
        names = self.stored.get("order")
        # The records are stored with sorted keys: the same items, whatever their order.
        return (
            whole is not None
            and names is not None
            and sorted(names) == sorted(self.records.get("items", {}))
            and whole.is_current(self.root, self.salt)
        )

    def results(self) -> dict[str, Any]:
        """The stored results, by item, in order."""
        results = self.stored.get("results", {})
        return {name: results[name] for name in self.stored.get("order", [])}

    def costliest(self, count: int = 5) -> list[tuple[str, float]]:
        """The items whose last computation took the most CPU seconds, most first."""
        seconds = [(name, value) for name, value in self.records.get("seconds", {}).items() if value is not None]
        return sorted(seconds, key=lambda item: -item[1])[:count]

    def stale(self) -> list[str]:
        """The items whose record changed since they were computed."""
        return [
            name
            for name, record in self.records.get("items", {}).items()
            if not Record.from_dict(record).is_current(self.root, self.salt)
        ]

    def compute(self, items: Mapping[str, Callable[[], Any]], listing: Iterable[str | Path] = ()) -> dict[str, Any]:
        """Every item's result: stored where its record is current, else computed now (and recorded).

        Args:
            items: Each item's name and the function that computes its result (JSON-serialisable).
            listing: Files that define the items (their module), part of the whole's record.

        Returns:
            The results, in the order of ``items``; the files are rewritten with exactly these items.
        """
        results, records = self.stored.get("results", {}), self.records.get("items", {})
        seconds = self.records.get("seconds", {})
        kept, kept_records, kept_seconds = {}, {}, {}
        whole = Record.of(listing, self.root, self.roots, self.salt)
        for name, compute in items.items():
            record = Record.from_dict(records[name]) if name in records and name in results else None
            if record is not None and record.is_current(self.root, self.salt):
                data = results[name]
            else:
                started = time.process_time()
                with Reached(self.roots) as reached:
                    data = compute()
                seconds[name] = time.process_time() - started
                # Through JSON and back: a result reused later reads exactly as one computed now.
                data = json.loads(json.dumps(data))
                record = Record.of(reached.paths, self.root, self.roots, self.salt)
            kept[name], kept_records[name], kept_seconds[name] = data, record.as_dict(), seconds.get(name)
            whole = whole.merged(record)
        self.stored = {"order": list(kept), "results": kept}
        # The CPU seconds of each item's last computation, for the build's profile (not part of any record).
        self.records = {"record": whole.as_dict(), "items": kept_records, "seconds": kept_seconds}
        _write_json(self.path, self.stored)
        _write_json(self.records_path, self.records)
        return dict(kept)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def _write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON, only if it changed (a file Sphinx watches keeps its time otherwise)."""
    text = json.dumps(data, sort_keys=True)
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


# ---------------------------------------------------------------------------
# In a kernel of its own: what the page imported and opened
# ---------------------------------------------------------------------------
#: What the epilogue prints before its JSON, so that :func:`read_epilogue` finds it; and before the CPU time.
_MARK = "lt-site-reached:"
_CPU_MARK = "lt-site-cpu-seconds:"


def kernel_prologue() -> str:
    """The code of the cell run before a page's own: it starts noting every file the kernel opens."""
    return (
        "def _lt_site_audit(event, args, _opened=set(), _abspath=__import__('os').path.abspath,\n"
        "                   _fspath=__import__('os').fspath, _pathlike=__import__('os').PathLike):\n"
        f"    if event in ('open', *{_LISTING!r}) and args:\n"
        "        target = '.' if args[0] is None and event != 'open' else args[0]\n"
        "        if isinstance(target, (str, _pathlike)):\n"
        "            path = _abspath(_fspath(target))\n"
        f"            if event != 'open' or not path.endswith({_SOURCE!r}):\n"
        "                _opened.add(path)\n"
        "    return _opened\n"
        "__import__('sys').addaudithook(_lt_site_audit)\n"
    )


def kernel_epilogue() -> str:
    """The code of the cell run after a page's own: it prints the files of every imported module and every
    opened file, as JSON after a mark, then the kernel's CPU seconds (user and system) after a second mark."""
    return (
        "import json as _json, resource as _resource, sys as _sys\n"
        "print(" + repr(_MARK) + " + _json.dumps(sorted(\n"
        "    {getattr(m, '__file__', None) or '' for m in list(_sys.modules.values())} - {''}\n"
        "    | _lt_site_audit('', ())\n"
        ")))\n"
        "_usage = _resource.getrusage(_resource.RUSAGE_SELF)\n"
        "print(" + repr(_CPU_MARK) + " + repr(_usage.ru_utime + _usage.ru_stime))\n"
    )


def read_epilogue(outputs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The files the epilogue cell printed (its outputs, as nbformat gives them)."""
    for line in _printed(outputs):
        if line.startswith(_MARK):
            return list(json.loads(line[len(_MARK) :]))
    raise ValueError("the epilogue cell printed no record of what the page reached")


def read_cpu_seconds(outputs: Iterable[Mapping[str, Any]]) -> float | None:
    """The kernel's CPU seconds the epilogue cell printed (``None`` if it printed none)."""
    for line in _printed(outputs):
        if line.startswith(_CPU_MARK):
            return float(line[len(_CPU_MARK) :])
    return None


def _printed(outputs: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    for output in outputs:
        text = output.get("text", "")
        yield from ("".join(text) if isinstance(text, list) else text).splitlines()
