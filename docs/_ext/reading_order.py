r"""The reading order, written once: the chapters' table of contents and the API pages, generated.

A book's chapters, the modules they build and the API reference must agree
on one order.  This extension writes no order of its own: ``conf.py`` reads
it from wherever the project keeps it (this site: its package's
``manifest`` module) into its settings, and the directives turn them into
pages.

Settings (``conf.py``)
----------------------
``reading_order_chapters``
    ``[(docname, title), ...]``: the chapters in reading order.
``reading_order_api``
    ``[(title, intro module or None, [module, ...]), ...]``: the parts of
    the API reference.  A part with an intro module (a sub-package) gets a
    page that starts with that module's docstring and lists its modules,
    each on a page of its own; a part without one is the page of its single
    module.
``reading_order_api_folder``
    The folder (under the documentation's root) of the generated API pages,
    ``api`` by default: at ``builder-inited`` a page per part and per module
    is written there, only where its text changed (so that a rebuild with nothing
    changed reads nothing again), and stale pages are removed.
``reading_order_names``
    ``[(name, target), ...]``: the short names a reader calls
    (``lt.encode``) and the objects they are documented as.

Directives
----------
``.. reading-order-toctree::``
    A ``toctree`` of the chapters, with every option ``toctree`` takes
    (``:caption:``, ``:maxdepth:`` ...).  It *is* Sphinx's toctree directive,
    fed the entries ``title </docname>``: Sphinx checks that each page
    exists, and the sidebar, the previous/next links and the site tests see
    an ordinary table of contents.
``.. reading-order-api::``
    Without an argument: the list of the API's parts, each with the first
    line of its docstring and its modules, and the parts' toctree.  With a
    part's title or a module's name: that page's ``automodule`` directives,
    parsed in place (autodoc does the documenting).  A module is listed
    under the part of its docstring's first line before its colon
    (``"Masks: which keys ..."`` gives ``Masks``), or its name.
``.. reading-order-names::``
    The short names of ``reading_order_names``, each linked to its entry
    wherever the API pages document it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from extension_metadata import extension_metadata
from sphinx.application import Sphinx
from sphinx.directives.other import TocTree
from sphinx.util.docutils import SphinxDirective
from sphinx.util.parsing import nested_parse_to_nodes

# Characters that would end a toctree entry's title early.
_TITLE_UNSAFE = re.compile(r"[<>]")
# "Masks: which keys ..." -> "Masks".
_LEAD_IN = re.compile(r"^([^:`]{1,60}):\s")
# Title adornments for the generated sections: parsed in a fresh title context, so any two distinct ones do.
_PART, _MODULE = "=", "-"


class ReadingOrderToctree(TocTree):
    """``.. reading-order-toctree::``: Sphinx's toctree over ``reading_order_chapters``."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        entries = [
            f"{_TITLE_UNSAFE.sub('', title)} </{docname}>" if title else f"/{docname}"
            for docname, title in self.config.reading_order_chapters
        ]
        source, line = self.get_source_info()
        self.content = StringList(entries, source=f"{source} (reading_order_chapters)")
        return super().run()


def module_title(module: str) -> str:
    """A short title for ``module``: its docstring's first line up to the colon, or its name.

    The docstring is read from the module's source, not by importing it: a build that finds nothing changed
    should not import the package's families and ``transformers`` with them.
    """
    try:
        spec = importlib.util.find_spec(module)
        source = Path(spec.origin).read_text(encoding="utf-8") if spec is not None and spec.origin else None
    except (ImportError, OSError, ValueError):
        source = None
    if source is None:
        return module.rsplit(".", 1)[-1]
    doc = ast.get_docstring(ast.parse(source)) or ""
    first = doc.strip().splitlines()[0] if doc.strip() else ""
    # A lead-in is plain words and a colon followed by a space (a role's ":mod:`x`" is not one).
    lead = _LEAD_IN.match(first)
    return lead.group(1).strip() if lead else module.rsplit(".", 1)[-1]


def _heading(title: str, adornment: str) -> list[str]:
    return [title, adornment * len(title), ""]


def _module_pages(sections: list[tuple[str, str | None, list[str]]]) -> dict[str, tuple[str, str]]:
    """Every module with a page of its own, mapped to ``(its part's title, its section title)``."""
    return {module: (title, module_title(module)) for title, intro, modules in sections if intro for module in modules}


def api_lines(sections: list[tuple[str, str | None, list[str]]], name: str) -> list[str]:
    """The reST of the page ``name``: a part (its intro, its modules' list and toctree) or one module of a part."""
    for title, intro, modules in sections:
        if name == title:
            lines = _heading(title, _PART)
            if not intro:  # a part of one module is that module's page
                return [*lines, *(line for module in modules for line in (f".. automodule:: {module}", ""))]
            lines += [f".. automodule:: {intro}", "   :no-members:", ""]
            lines += [f"* :doc:`{module_title(module)} <{module}>`: {summary(module)}" for module in modules]
            lines += ["", ".. toctree::", "   :hidden:", "", *(f"   {module_title(m)} <{m}>" for m in modules)]
            return [*lines, ""]
        if intro and name in modules:
            return [*_heading(name, _PART), f".. automodule:: {name}", ""]
    raise ValueError(f"no part or module named {name!r} in reading_order_api")


def summary(module: str) -> str:
    """The first line of ``module``'s docstring (empty when it has none or does not import)."""
    try:
        doc = importlib.import_module(module).__doc__ or ""
    except ImportError:
        return ""
    return doc.strip().splitlines()[0].strip() if doc.strip() else ""


def index_lines(sections: list[tuple[str, str | None, list[str]]], folder: str) -> list[str]:
    """The reST of the API's index: each part (its docstring's summary, its modules) and the parts' toctree."""
    lines: list[str] = []
    for title, intro, modules in sections:
        line = summary(intro or modules[0])
        lines += [f"* :doc:`{title} <{folder}/{title}>`" + (f": {line}" if line else ""), ""]
        if intro:
            lines += [f"  * :doc:`{module_title(module)} <{folder}/{module}>`" for module in modules]
            lines += [""]
    lines += [".. toctree::", "   :hidden:", "   :maxdepth: 2", ""]
    lines += [f"   {title} <{folder}/{title}>" for title, _, _ in sections]
    return [*lines, ""]


def page_text(name: str) -> str:
    """One generated API page: a comment saying so, and the directive that documents the part or module."""
    return f".. This page is generated by the reading_order extension.\n\n.. reading-order-api:: {name}\n"


def write_api_pages(app: Sphinx) -> None:
    """``builder-inited``: a page per part and per module of a part (written only where changed), stale ones removed."""
    sections = app.config.reading_order_api
    if not sections:
        return
    folder = Path(app.srcdir) / app.config.reading_order_api_folder
    folder.mkdir(parents=True, exist_ok=True)
    wanted = set()
    for name in [title for title, _, _ in sections] + list(_module_pages(sections)):
        path = folder / f"{name}.rst"
        wanted.add(path.name)
        text = page_text(name)
        if not (path.is_file() and path.read_text(encoding="utf-8") == text):
            path.write_text(text, encoding="utf-8")
    for stale in folder.glob("*.rst"):
        if stale.name not in wanted:
            stale.unlink()


class ReadingOrderApi(SphinxDirective):
    """``.. reading-order-api:: [part]``: the index of the API's parts, or one part's documentation."""

    has_content = False
    optional_arguments = 1
    final_argument_whitespace = False

    def run(self) -> list[nodes.Node]:
        source, _ = self.get_source_info()
        sections = self.config.reading_order_api
        if not self.arguments:
            lines = index_lines(sections, self.config.reading_order_api_folder)
        else:
            try:
                lines = api_lines(sections, self.arguments[0])
            except ValueError as error:
                raise self.error(f"reading-order-api: {error}") from None
        content = StringList(lines, source=f"{source} (reading_order_api)")
        return nested_parse_to_nodes(self.state, content, allow_section_headings=True)


class ReadingOrderNames(SphinxDirective):
    """``.. reading-order-names::``: the names a reader calls, each linked to its documented object."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        source, _ = self.get_source_info()
        lines = [f"* ``{name}``: :py:obj:`{target}`" for name, target in self.config.reading_order_names]
        content = StringList(lines, source=f"{source} (reading_order_names)")
        return nested_parse_to_nodes(self.state, content)


def setup(app: Sphinx) -> dict[str, object]:
    app.add_config_value("reading_order_chapters", [], "env", types=frozenset({list, tuple}))
    app.add_config_value("reading_order_api", [], "env", types=frozenset({list, tuple}))
    app.add_config_value("reading_order_api_folder", "api", "env", types=frozenset({str}))
    app.add_config_value("reading_order_names", [], "env", types=frozenset({list, tuple}))
    app.add_directive("reading-order-toctree", ReadingOrderToctree)
    app.add_directive("reading-order-api", ReadingOrderApi)
    app.add_directive("reading-order-names", ReadingOrderNames)
    app.connect("builder-inited", write_api_pages)
    # Editing this file changes the pages it generates: a new environment version makes Sphinx read them again.
    return extension_metadata(__file__)
