r"""The reading order, written once: the chapters' table of contents and the API page, generated.

A book's chapters, the modules they build and the API reference must agree
on one order.  This extension writes no order of its own: ``conf.py`` reads
it from wherever the project keeps it (this site: its package's
``manifest`` module) into two settings, and two directives turn them into
pages.

Settings (``conf.py``)
----------------------
``reading_order_chapters``
    ``[(docname, title), ...]``: the chapters in reading order.
``reading_order_api``
    ``[(title, intro module or None, [module, ...]), ...]``: the sections
    of the API reference.  A section with an intro module (a sub-package)
    starts with that module's docstring and gives each of its modules a
    subsection; a section without one documents its single module directly.

Directives
----------
``.. reading-order-toctree::``
    A ``toctree`` of the chapters, with every option ``toctree`` takes
    (``:caption:``, ``:maxdepth:`` ...).  It *is* Sphinx's toctree directive,
    fed the entries ``title </docname>``: Sphinx checks that each page
    exists, and the sidebar, the previous/next links and the site tests see
    an ordinary table of contents.
``.. reading-order-api::``
    The API reference's sections, as ``automodule`` directives parsed in
    place (autodoc does the documenting).  A subsection's title is the part
    of the module docstring's first line before its colon
    (``"Masks: which keys ..."`` gives ``Masks``), or the module's name.
"""

from __future__ import annotations

import importlib
import re

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
    """A short title for ``module``: its docstring's first line up to the colon, or its name."""
    try:
        doc = importlib.import_module(module).__doc__ or ""
    except ImportError:
        return module.rsplit(".", 1)[-1]
    first = doc.strip().splitlines()[0] if doc.strip() else ""
    # A lead-in is plain words and a colon followed by a space (a role's ":mod:`x`" is not one).
    lead = _LEAD_IN.match(first)
    return lead.group(1).strip() if lead else module.rsplit(".", 1)[-1]


def _heading(title: str, adornment: str) -> list[str]:
    return [title, adornment * len(title), ""]


def api_lines(sections: list[tuple[str, str | None, list[str]]]) -> list[str]:
    """The reST of the API sections: headings and ``automodule`` directives, in the given order."""
    lines: list[str] = []
    for title, intro, modules in sections:
        lines += _heading(title, _PART)
        if intro:
            lines += [f".. automodule:: {intro}", "   :no-members:", ""]
            for module in modules:
                lines += _heading(module_title(module), _MODULE)
                lines += [f".. automodule:: {module}", ""]
        else:
            lines += [line for module in modules for line in (f".. automodule:: {module}", "")]
    return lines


class ReadingOrderApi(SphinxDirective):
    """``.. reading-order-api::``: the API reference's sections from ``reading_order_api``."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        source, _ = self.get_source_info()
        content = StringList(api_lines(self.config.reading_order_api), source=f"{source} (reading_order_api)")
        return nested_parse_to_nodes(self.state, content, allow_section_headings=True)


def setup(app: Sphinx) -> dict[str, object]:
    app.add_config_value("reading_order_chapters", [], "env", types=frozenset({list, tuple}))
    app.add_config_value("reading_order_api", [], "env", types=frozenset({list, tuple}))
    app.add_directive("reading-order-toctree", ReadingOrderToctree)
    app.add_directive("reading-order-api", ReadingOrderApi)
    # Editing this file changes the pages it generates: a new environment version makes Sphinx read them again.
    return extension_metadata(__file__)
