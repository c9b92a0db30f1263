"""Shared setup for the tests of the site's own Sphinx extensions (``docs/_ext``).

The extensions are imported by name, as ``conf.py`` imports them, from
``docs/_ext``.  Test modules that need Sphinx skip themselves (with
``pytest.importorskip``) when the docs extras are not installed.  Tests that build a site use :func:`tiny_site`: a temporary
Sphinx project (a ``conf.py``, a few pages, optionally a small package to
document) built in-process with :class:`sphinx.testing.util.SphinxTestApp`,
a fraction of a second each.
"""

from __future__ import annotations

import functools
import logging
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXTENSIONS = ROOT / "docs" / "_ext"
if str(EXTENSIONS) not in sys.path:
    sys.path.insert(0, str(EXTENSIONS))


@functools.cache
def _compiled_templates():
    """Jinja's compiled templates, kept for the test process: each tiny build makes a fresh Jinja environment,
    which would compile the theme's templates again (about half of a one-page build's time).

    A :class:`jinja2.BytecodeCache` (made on first use: Sphinx and Jinja are the docs extras'), keyed by the
    template's name and file; Jinja compares the checksum of the template's source with the one stored and
    compiles again when they differ.
    """
    import jinja2

    class InMemory(jinja2.BytecodeCache):
        def __init__(self) -> None:
            self.compiled: dict[str, bytes] = {}

        def load_bytecode(self, bucket) -> None:
            if bucket.key in self.compiled:
                bucket.bytecode_from_string(self.compiled[bucket.key])

        def dump_bytecode(self, bucket) -> None:
            self.compiled[bucket.key] = bucket.bytecode_to_string()

    return InMemory()


class TinySite:
    """A temporary Sphinx project: write pages and a package, build, read the output."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.src = root / "docs"
        self.src.mkdir()
        self.build_dir = root / "_build"
        self._package_names: set[str] = set()

    def write(self, relative: str, text: str) -> Path:
        """Write a file under the project root (``docs/...`` for pages), dedented."""
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    def conf(self, extensions: list[str], **settings: object) -> Path:
        """Write ``docs/conf.py``: the extensions, ``nitpicky = True`` and each setting as a Python literal."""
        lines = [f"extensions = {extensions!r}", "nitpicky = True"]
        lines += [f"{name} = {value!r}" for name, value in settings.items()]
        return self.write("docs/conf.py", "\n".join(lines) + "\n")

    def package(self, name: str, files: dict[str, str]) -> None:
        """A package ``name`` under the project root, importable while the site builds."""
        self._package_names.add(name)
        for relative, text in files.items():
            self.write(f"{name}/{relative}", text)

    def build(self, buildername: str = "html", *, parallel: int = 0, **overrides):
        """Build (HTML by default; ``parallel`` processes as ``-j``); returns the (cleaned-up) app, with
        ``app.warnings`` holding the warning log."""
        from sphinx.testing.util import SphinxTestApp

        for name in list(sys.modules):
            if name.split(".")[0] in self._package_names:
                del sys.modules[name]
        sys.path.insert(0, str(self.root))
        app = SphinxTestApp(
            buildername, srcdir=self.src, builddir=self.build_dir, confoverrides=overrides, parallel=parallel
        )
        templates = getattr(getattr(app.builder, "templates", None), "environment", None)
        if templates is not None:
            templates.bytecode_cache = _compiled_templates()
        try:
            app.build()
        finally:
            app.cleanup()
            if str(self.root) in sys.path:
                sys.path.remove(str(self.root))
        app.warnings = app.warning.getvalue()
        return app

    def html(self, page: str) -> str:
        return (self.build_dir / "html" / f"{page}.html").read_text(encoding="utf-8")


@pytest.fixture
def tiny_site(tmp_path: Path) -> TinySite:
    pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")
    return TinySite(tmp_path)


@pytest.fixture
def sphinx_warnings():
    """The messages the extensions log at WARNING or above through Sphinx's logger while the test runs.

    pytest's own capture of logging is off (``-p no:logging`` in ``pyproject.toml``), so a test that checks a
    warning reads it here: a handler on the ``sphinx`` logger, the one every extension's logger sits under.
    """
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = Collect(logging.WARNING)
    logger = logging.getLogger("sphinx")
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
