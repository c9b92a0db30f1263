r"""Cutting a Python module into side-by-side blocks: the parser.

A module written to be read has three kinds of text: its docstring (the
article), the comments above its lines (the commentary) and its code.  This
module cuts the source into

* the module docstring, and
* *blocks*: a block starts at a run of full-line comments, or at a class or
  function that has a docstring; its *prose* is those comments (``#``
  stripped) and the docstrings of the classes, functions and attributes
  defined in it, and its *code* is every other line, trailing comments
  included, in order.

Two kinds of full-line comment stay with the code: instructions to tools
(``# noqa``, ``# type: ignore``, ``# fmt: off`` ...) and the ``#!`` line.
A docstring is any string statement that stands alone on its lines: the
first statement of a module, class or function, and a string right after an
assignment (an *attribute docstring*, which autodoc reads too).  A
decorated definition's block starts at its first decorator.

It is a pure function of the source text: no Sphinx, no docutils, so it is
tested on strings and reused by anything that needs the same cut (the site's
side-by-side pages render its blocks, see ``sidebyside_render``).

>>> module = split_module("'''Doc.'''\n\n# Add one.\nx = 1  # (B, T)\n")
>>> module.docstring, [(p.kind, p.text) for p in module.blocks[0].prose], module.blocks[0].code_text()
('Doc.', [('comment', 'Add one.')], 'x = 1  # (B, T)')
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import tokenize
from dataclasses import dataclass, field

__all__ = ["Prose", "Block", "ModuleSource", "TOOL_COMMENT", "split_module", "docstring_summary", "role_text"]

#: Full-line comments that are instructions to tools, not commentary: they stay in the code.
TOOL_COMMENT = re.compile(r"^#\s*(noqa|type:|fmt:|pragma|pylint:|ruff:|isort:|-\*-)|^#!")


@dataclass
class Prose:
    """A piece of commentary: a run of comment lines, or a docstring.

    Attributes:
        kind: ``"comment"`` or ``"docstring"``.
        text: For comments, the lines with ``#`` (and one space) stripped;
            for docstrings, the cleaned docstring (:func:`inspect.cleandoc`).
        first_line: The line (1-based) where it starts in the source.
        name: For docstrings, the dotted name of the documented object
            within the module (``"MultiHeadAttention.forward"``), if any.
        what: For docstrings, the object's kind as autodoc names it:
            ``"module"``, ``"class"``, ``"function"``, ``"method"`` or ``"attribute"``.
        owner_class: The class the documented object sits in, if any.
    """

    kind: str
    text: str
    first_line: int
    name: str | None = None
    what: str = "attribute"
    owner_class: str | None = None


@dataclass
class Block:
    """Commentary (the left column) and the code it explains (the right column)."""

    prose: list[Prose] = field(default_factory=list)
    #: ``(line number, text)`` of each code line, in order.
    code: list[tuple[int, str]] = field(default_factory=list)

    def has_code(self) -> bool:
        """Whether any code line is not blank."""
        return any(text.strip() for _, text in self.code)

    def code_lines(self) -> list[tuple[int, str]]:
        """The code lines without the blank lines at either end."""
        lines = list(self.code)
        while lines and not lines[0][1].strip():
            lines.pop(0)
        while lines and not lines[-1][1].strip():
            lines.pop()
        return lines

    def code_text(self) -> str:
        """The code as one string, without blank lines at either end."""
        return "\n".join(text for _, text in self.code_lines())

    def first_code_line(self) -> int | None:
        """The line number of the first non-blank code line, if any."""
        return next((number for number, text in self.code if text.strip()), None)


@dataclass
class ModuleSource:
    """A module cut for the side-by-side page.

    Attributes:
        docstring: The module's cleaned docstring (``""`` if it has none).
        docstring_lines: First and last line of the docstring in the source.
        blocks: The blocks, in source order.
    """

    docstring: str
    docstring_lines: tuple[int, int] | None
    blocks: list[Block]


@dataclass
class _Docstring:
    start: int
    end: int
    text: str
    header_start: int  # first line of the statement it documents (decorators included)
    name: str | None
    what: str
    owner_class: str | None


def _collect_docstrings(tree: ast.Module, lines: list[str]) -> dict[int, _Docstring]:
    """Every string statement that stands alone on its lines, keyed by its first line."""
    found: dict[int, _Docstring] = {}

    def standalone(node: ast.expr) -> bool:
        first, last = lines[node.lineno - 1], lines[node.end_lineno - 1]
        return first[: node.col_offset].strip() == "" and last[node.end_col_offset :].strip() == ""

    def visit(body: list[ast.stmt], owner: ast.AST | None, prefix: str, owner_class: str | None) -> None:
        previous: ast.stmt | None = None
        for index, statement in enumerate(body):
            if (
                isinstance(statement, ast.Expr)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
                and standalone(statement.value)
            ):
                if index == 0 and owner is not None:
                    decorators = getattr(owner, "decorator_list", [])
                    header_start = min([owner.lineno] + [d.lineno for d in decorators])
                    name = prefix.rstrip(".")
                    if isinstance(owner, ast.ClassDef):
                        what, in_class = "class", name
                    else:
                        what, in_class = ("method" if owner_class else "function"), owner_class
                elif index == 0:
                    header_start, name, what, in_class = statement.lineno, None, "module", None
                else:
                    header_start = previous.lineno if previous is not None else statement.lineno
                    target = None
                    if isinstance(previous, ast.Assign) and len(previous.targets) == 1:
                        target = previous.targets[0]
                    elif isinstance(previous, ast.AnnAssign):
                        target = previous.target
                    name = prefix + target.id if isinstance(target, ast.Name) else None
                    what, in_class = "attribute", owner_class
                found[statement.lineno] = _Docstring(
                    statement.lineno,
                    statement.end_lineno,
                    inspect.cleandoc(statement.value.value),
                    header_start,
                    name,
                    what,
                    in_class,
                )
            if isinstance(statement, ast.ClassDef):
                visit(statement.body, statement, f"{prefix}{statement.name}.", f"{prefix}{statement.name}")
            elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(statement.body, statement, f"{prefix}{statement.name}.", owner_class)
            previous = statement

    visit(tree.body, None, "", None)
    return found


def _comment_lines(source: str) -> dict[int, str]:
    """Line number -> comment text, for lines that hold nothing but a comment (tool comments excepted)."""
    comments = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        row, column = token.start
        if token.line[:column].strip():
            continue  # a trailing comment: it stays with its code
        if TOOL_COMMENT.match(token.string):
            continue
        text = token.string[1:]
        if text.startswith(":"):  # Sphinx's "#:" attribute comments
            text = text[1:]
        comments[row] = text[1:] if text.startswith(" ") else text
    return comments


def split_module(source: str) -> ModuleSource:
    """Cut a module's source into its docstring and side-by-side blocks.

    Raises:
        SyntaxError: when ``source`` is not valid Python.
    """
    lines = source.splitlines()
    tree = ast.parse(source)
    docstrings = _collect_docstrings(tree, lines)
    comments = _comment_lines(source)

    module_doc = docstrings.pop(tree.body[0].lineno, None) if tree.body else None
    if module_doc is not None and module_doc.what != "module":
        docstrings[module_doc.start] = module_doc
        module_doc = None

    blocks = [Block()]
    number = 1
    while number <= len(lines):
        text = lines[number - 1]
        current = blocks[-1]
        if module_doc is not None and module_doc.start <= number <= module_doc.end:
            number += 1
            continue
        if number in comments:
            if current.has_code():
                current = Block()
                blocks.append(current)
            comment = comments[number]
            previous = current.prose[-1] if current.prose else None
            if (
                previous is not None
                and previous.kind == "comment"
                and previous.first_line + previous.text.count("\n") + 1 == number
            ):
                previous.text += "\n" + comment
            else:
                current.prose.append(Prose("comment", comment, number))
            number += 1
            continue
        if number in docstrings:
            doc = docstrings[number]
            first_code = current.first_code_line()
            if first_code is not None and first_code < doc.header_start:
                # The block already holds earlier code: the documented statement starts a new block.
                moved = [(n, t) for n, t in current.code if n >= doc.header_start]
                current.code = [(n, t) for n, t in current.code if n < doc.header_start]
                current = Block(code=moved)
                blocks.append(current)
            current.prose.append(Prose("docstring", doc.text, doc.start, doc.name, doc.what, doc.owner_class))
            number = doc.end + 1
            continue
        if text.strip() or current.code:
            current.code.append((number, text))
        number += 1

    blocks = [block for block in blocks if block.prose or block.has_code()]
    return ModuleSource(
        module_doc.text if module_doc else "",
        (module_doc.start, module_doc.end) if module_doc else None,
        blocks,
    )


_ROLE = re.compile(r":[\w:.-]+:`([^`]+)`")


def role_text(content: str) -> str:
    """What Sphinx shows for a role's content: an explicit title, ``~a.b.c`` as ``c``, else the target."""
    explicit = re.match(r"^(.*?)\s*<[^<>]*>$", content, flags=re.DOTALL)
    if explicit and explicit.group(1):
        return explicit.group(1)
    content = content.lstrip("!")
    return content[1:].split(".")[-1] if content.startswith("~") else content


def docstring_summary(source: str) -> str:
    """The first line of a module's docstring as plain reST: no final period, roles shown as code.

    A role shows what Sphinx would show (``:class:`~a.b.Model``` shows
    ``Model``, an explicit title its title), as code, because the summary is
    used where the role's target may not resolve.  A module without a
    docstring (or that does not parse) gives ``""``.

    >>> docstring_summary("'''Masks: :func:`~pkg.masks.causal_mask` and friends.'''")
    'Masks: ``causal_mask`` and friends'
    """
    try:
        doc = ast.get_docstring(ast.parse(source))
    except SyntaxError:
        return ""
    if not doc or not doc.strip():
        return ""
    first = doc.strip().splitlines()[0].rstrip(".")
    return _ROLE.sub(lambda match: f"``{role_text(match.group(1))}``", first)
