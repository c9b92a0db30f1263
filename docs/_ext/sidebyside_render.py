r"""Side-by-side blocks as docutils nodes: the renderer.

:func:`sidebyside_parse.split_module` cuts a module into blocks; this module
turns each block into one row of two columns:

* the **prose column**: comments rendered by :func:`comment_nodes` (they are
  not reStructuredText, see there) and docstrings rendered by a callable the
  caller passes in (in a Sphinx build, napoleon and the reST parser; in a
  test, anything);
* the **code column**: :func:`code_node`, the one place where code becomes a
  node, a :class:`code_lines` block that keeps the source line number of
  every line it shows (``node["source_lines"]``).  In HTML,
  :func:`line_spans` wraps each highlighted line in
  ``<span class="lt-line" data-line="N">``: the page can wrap a long line
  under its own start (nothing is cut off), and whatever is attached to a
  line later, such as the shape it produced at run time, has one place to go.

Links to the API reference are :class:`optional_api_link` nodes: a link when
the API reference documents the target, plain text otherwise (the Sphinx
glue resolves them once every page has been read).

Only docutils is imported here, so the renderer is tested without a Sphinx
build.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from docutils import nodes
from sidebyside_parse import Block, Prose, role_text

__all__ = [
    "LEXER",
    "optional_api_link",
    "optional_link",
    "comment_nodes",
    "code_lines",
    "code_node",
    "line_spans",
    "block_node",
    "listing_section",
    "intro_nodes",
    "flatten_sections",
    "anchor",
    "block_id",
    "block_at",
]

#: The lexer name of the code column.  The same Pygments lexer as ``python``
#: (the glue registers it), under a name that sphinx-codeautolink does not
#: try to parse: the blocks are fragments (a method body without its class)
#: that are not valid Python on their own.
LEXER = "literate-python"

#: Inline markup recognised in comments: $math$, :role:`target`, ``code`` / `code`, and *emphasis*.
_INLINE = re.compile(
    r"\$(?P<math>[^$\n]+?)\$"
    r"|:(?P<rolename>[\w:.-]+):`(?P<role>[^`]+)`"
    r"|``(?P<code2>[^`]+)``|`(?P<code1>[^`]+)`"
    # *word* or *a few words*, but not the products in "a * b * c" or "x*y*z".
    r"|(?<![\w*])\*(?P<em>[^\s*](?:[^*\n]*[^\s*])?)\*(?![\w*])"
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")


class optional_api_link(nodes.General, nodes.Inline, nodes.Element):  # noqa: N801 (docutils node naming)
    """A link to an API entry that becomes its plain content when the API reference lacks the entry.

    ``node["target"]`` is the dotted name, ``node["kind"]`` is ``"mod"`` for
    a module and ``"obj"`` for anything else.
    """


def optional_link(target: str, kind: str, content: nodes.Node) -> optional_api_link:
    """Wrap ``content`` in an :class:`optional_api_link` to ``target``."""
    node = optional_api_link()
    node["target"] = target
    node["kind"] = kind
    node += content
    return node


def anchor(module: str) -> str:
    """The HTML id prefix of a module's blocks (``pkg.core.masks`` -> ``pkg-core-masks``)."""
    return module.replace(".", "-")


def block_id(block: Block, module: str) -> str:
    """The HTML id of a block's row on its module's page (``pkg-core-masks-L42``, its first code line)."""
    first = block.first_code_line() or (block.prose[0].first_line if block.prose else 0)
    return f"{anchor(module)}-L{first}"


def block_at(blocks: Sequence[Block], line: int) -> Block | None:
    """The block whose code column shows source line ``line`` (``None`` for a line no block shows as code)."""
    return next((block for block in blocks if any(number == line for number, _ in block.code_lines())), None)


def comment_nodes(text: str) -> list[nodes.Node]:
    """Render comment text as paragraphs, without reST parsing.

    Comments are not written as reStructuredText (a lone ``*`` in ``a * b``
    would be an error), so only a few kinds of markup are recognised:
    ``$...$`` and ``:math:`...``` (math, rendered by MathJax), backticks
    (code), any other ``:role:`name``` (shown as code, as Sphinx shows the
    reference) and ``*word*`` (emphasis; a ``*`` next to a space or a name
    is a product and stays).  An empty comment line separates paragraphs; a
    line starting like a list item (``- ``, ``1)``) starts a new paragraph.
    """
    paragraphs: list[list[str]] = [[]]
    for line in text.split("\n"):
        if not line.strip():
            paragraphs.append([])
        elif _LIST_ITEM.match(line) and paragraphs[-1]:
            paragraphs.append([line.strip()])
        else:
            paragraphs[-1].append(line.strip())
    result: list[nodes.Node] = []
    for paragraph in paragraphs:
        if not paragraph:
            continue
        joined = " ".join(paragraph)
        node = nodes.paragraph(joined)
        position = 0
        for match in _INLINE.finditer(joined):
            if match.start() > position:
                node += nodes.Text(joined[position : match.start()])
            if match.group("math") is not None or match.group("rolename") == "math":
                latex = match.group("math") or match.group("role")
                node += nodes.math(latex, latex)
            elif match.group("role") is not None:
                shown = role_text(match.group("role"))
                node += nodes.literal(shown, shown)
            elif match.group("em") is not None:
                node += nodes.emphasis(match.group("em"), match.group("em"))
            else:
                code = match.group("code2") or match.group("code1")
                node += nodes.literal(code, code)
            position = match.end()
        if position < len(joined):
            node += nodes.Text(joined[position:])
        result.append(node)
    return result


class code_lines(nodes.literal_block):  # noqa: N801 (docutils node naming)
    """A highlighted code block that knows the source line of each of its lines.

    ``node["source_lines"]`` lists them, one per line of the block.  Builders
    without a visitor of their own render it as the literal block it is.
    """


def code_node(lines: Sequence[tuple[int, str]], language: str = LEXER) -> code_lines:
    """The code column's node for ``(line number, text)`` lines: one highlighted block."""
    code = "\n".join(text for _, text in lines)
    node = code_lines(code, code, language=language, classes=["lt-sbs-listing"])
    node["source_lines"] = [number for number, _ in lines]
    return node


_TAG = re.compile(r"<[^>]+>")


def _indent(line_html: str) -> int:
    """The number of leading spaces of a highlighted line (its tags removed)."""
    text = _TAG.sub("", line_html)
    return len(text) - len(text.lstrip(" "))


_PRE = re.compile(r"(<pre[^>]*>)(<span></span>)?(.*?)(</pre>)", re.DOTALL)


def line_spans(highlighted: str, numbers: Sequence[int], annotations: Mapping[int, str] | None = None) -> str:
    """Wrap each line of Pygments' HTML in ``<span class="lt-line" data-line="N">``.

    Pygments closes its token spans at every line end, so each line of its
    ``<pre>`` is well-formed HTML on its own.  The newlines stay between the
    spans, so the text (and a copy of it) reads as before.  Each span carries
    its line's indentation as ``--indent`` (in ``ch``), so that a stylesheet
    can wrap a long line under its own start instead of cutting it off.
    ``annotations`` maps a source line number to HTML placed at the end of
    that line's span (another extension's, e.g. the shape the line computed
    at run time).  When the block's lines and ``numbers`` do not match up,
    the HTML is returned unchanged.
    """
    match = _PRE.search(highlighted)
    if match is None:
        return highlighted
    lines = match.group(3).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != len(numbers):
        return highlighted
    annotations = annotations or {}
    body = "".join(
        f'<span class="lt-line" data-line="{n}" style="--indent: {_indent(line)}ch">{line}{annotations.get(n, "")}</span>\n'
        for n, line in zip(numbers, lines, strict=True)
    )
    return highlighted[: match.start(3)] + body + highlighted[match.end(3) :]


DocstringRenderer = Callable[[Prose], Sequence[nodes.Node]]


def block_node(block: Block, module: str, render_docstring: DocstringRenderer) -> nodes.container:
    """One row of the page: the block's prose on the left, its code on the right.

    Args:
        block: The block, from :func:`sidebyside_parse.split_module`.
        module: The module's dotted name (for ids and API links).
        render_docstring: Turns a docstring :class:`Prose` into nodes.

    Returns:
        A ``container.lt-sbs-block`` with the id ``<module>-L<first line>``, so
        a line of the source can be linked to.
    """
    row = nodes.container(classes=["lt-sbs-block"], ids=[block_id(block, module)])
    prose_column = nodes.container(classes=["lt-sbs-prose"])
    for prose in block.prose:
        if prose.kind == "comment":
            prose_column.extend(comment_nodes(prose.text))
            continue
        holder = nodes.container(classes=["lt-sbs-docstring"])
        if prose.name and prose.what in ("class", "function", "method"):
            label = nodes.paragraph(classes=["lt-sbs-name"])
            label += nodes.emphasis(prose.what, prose.what)
            label += nodes.Text(" ")
            label += optional_link(f"{module}.{prose.name}", "obj", nodes.literal(prose.name, prose.name))
            holder += label
        holder.extend(render_docstring(prose))
        prose_column += holder
    row += prose_column
    code_column = nodes.container(classes=["lt-sbs-code"])
    lines = block.code_lines()
    if lines:
        code_column += code_node(lines)
    row += code_column
    return row


def listing_section(blocks: Sequence[Block], module: str, render_docstring: DocstringRenderer) -> nodes.section:
    """The section "The code, line by line" holding every block's row, in order."""
    listing = nodes.container(classes=["lt-sbs"])
    for block in blocks:
        listing += block_node(block, module, render_docstring)
    title = "The code, line by line"
    section = nodes.section(ids=[f"{anchor(module)}-code"], names=[title.lower()])
    section += nodes.title(title, title)
    section += listing
    return section


def intro_nodes(children: Sequence[nodes.Node]) -> list[nodes.Node]:
    """The module docstring's nodes, with the text between its sections in reading-width boxes.

    The docstring's own sections stay sections (they appear in the page's
    table of contents); every run of other nodes goes in a
    ``container.lt-sbs-intro``.
    """
    result: list[nodes.Node] = []
    box = nodes.container(classes=["lt-sbs-intro"])
    for child in children:
        if isinstance(child, nodes.section):
            if len(box):
                result.append(box)
                box = nodes.container(classes=["lt-sbs-intro"])
            result.append(child)
        else:
            box += child
    if len(box):
        result.append(box)
    return result


def flatten_sections(container: nodes.Element) -> None:
    """Turn section titles inside a column into rubrics (a column cannot hold sections)."""
    for section in list(container.findall(nodes.section, include_self=False)):
        title = section.next_node(nodes.title)
        replacement = [nodes.rubric(title.astext(), title.astext())] if title else []
        replacement += [child for child in section.children if child is not title]
        section.replace_self(replacement)
