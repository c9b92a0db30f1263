r"""Annotated source pages: commentary on the left, code on the right.

Every module of :mod:`literate_transformer` is written to be read: its
docstring is an article, the comment above each non-obvious line names the
math it computes.  This extension turns each module into a page laid out the
way labml's annotated implementations are:

* the module docstring (reStructuredText) is the page's introduction;
* the rest of the file is cut into *blocks*.  A block starts at a run of
  full-line comments; those comments (``#`` stripped, rendered as prose, with
  ``$...$`` as math and backticks as code) and the docstrings of the classes
  and functions defined in the block (reStructuredText, Google style through
  napoleon, exactly as the API reference renders them) go in the left
  column; the code (highlighted, full-line comments and docstrings removed,
  trailing comments kept) goes in the right column.

Nothing is copied into the documentation: at ``builder-inited`` one stub per
module is written into ``docs/source/`` (ignored by git, rewritten only when
its text changes) holding the ``literate-source`` directive, and the
directive reads the module's source while the page is built, registering the
file as a dependency so that editing a module rebuilds its page.

The pages and the API reference link to each other: the directive links each
module and each documented class or function to its API entry (when the API
reference documents it), and an ``autodoc-process-docstring`` hook adds a
"Read the annotated source" line to every ``automodule`` section.
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from pygments.lexers.python import PythonLexer
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

logger = logging.getLogger(__name__)

#: The package whose modules get a page, and the folder (under the docs source) of the pages.
PACKAGE = "literate_transformer"
PAGES_DIR = "source"
#: Modules in reading order (the package's own docstring gives it); any other module follows alphabetically.
READING_ORDER = [
    "__init__",
    "core.config",
    "checkpoints",
    "core.masks",
    "core.validation",
    "book.attention",
    "book.feed_forward",
    "book.embeddings",
    "book.encoder",
    "models.bert",
    "pretrained",
    "book.decoder",
    "book.generation",
    "book.training",
    "visualize",
]
#: The lexer name of the code column.  Same Pygments lexer as ``python``, but a name that
#: sphinx-codeautolink does not try to parse: the blocks are fragments (a method body
#: without its class) that are not valid Python on their own.
LEXER = "literate-python"
#: Full-line comments that are instructions to tools, not commentary: they stay in the code.
TOOL_COMMENT = re.compile(r"^#\s*(noqa|type:|fmt:|pragma|pylint:|ruff:|isort:|-\*-)|^#!")


# ---------------------------------------------------------------------------
# Splitting a module into blocks
# ---------------------------------------------------------------------------
@dataclass
class Prose:
    """A piece of commentary: a run of comment lines, or a docstring."""

    kind: str  # "comment" or "docstring"
    text: str  # comments: the lines with "#" stripped; docstrings: the cleaned docstring
    first_line: int
    #: For docstrings: the dotted name of the documented object within the module
    #: ("MultiHeadAttention.forward"), its kind for napoleon, and the class it sits in.
    name: str | None = None
    what: str = "attribute"
    owner_class: str | None = None


@dataclass
class Block:
    """Commentary (left column) and the code it explains (right column)."""

    prose: list[Prose] = field(default_factory=list)
    code: list[tuple[int, str]] = field(default_factory=list)  # (line number, text)

    def has_code(self) -> bool:
        return any(text.strip() for _, text in self.code)

    def code_text(self) -> str:
        lines = [text for _, text in self.code]
        while lines and not lines[0].strip():
            lines.pop(0)
        while lines and not lines[-1].strip():
            lines.pop()
        return "\n".join(lines)

    def first_code_line(self) -> int | None:
        return next((number for number, text in self.code if text.strip()), None)


@dataclass
class _Docstring:
    start: int
    end: int
    text: str
    header_start: int  # first line of the statement it documents (decorators included)
    name: str | None
    what: str
    owner_class: str | None


@dataclass
class ModuleSource:
    """A module split for the side-by-side page."""

    docstring: str
    docstring_lines: tuple[int, int] | None
    blocks: list[Block]


def _collect_docstrings(tree: ast.Module, lines: list[str]) -> dict[int, _Docstring]:
    """Every string statement that stands alone on its lines, keyed by its first line.

    That is the docstring of each class and function, and the attribute
    docstrings (a string right after an assignment) that autodoc also reads.
    """
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
                    if isinstance(owner, ast.ClassDef):
                        name, what, in_class = prefix.rstrip("."), "class", prefix.rstrip(".")
                    else:
                        name = prefix.rstrip(".")
                        what = "method" if owner_class else "function"
                        in_class = owner_class
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
                    _clean_docstring(statement.value.value),
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


def _clean_docstring(text: str) -> str:
    import inspect

    return inspect.cleandoc(text)


def _comment_lines(source: str) -> dict[int, str]:
    """Line number -> comment text, for lines that hold nothing but a comment."""
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
    """Cut a module's source into its docstring and side-by-side blocks."""
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


# ---------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------
#: Inline markup allowed in comments: $math$, ``code``/`code`, and :role:`target` (shown as code).
_INLINE = re.compile(r"\$(?P<math>[^$\n]+?)\$|:[\w:.-]+:`(?P<role>[^`]+)`|``(?P<code2>[^`]+)``|`(?P<code1>[^`]+)`")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")


def comment_nodes(text: str) -> list[nodes.Node]:
    """Render comment text as paragraphs, without reST parsing.

    Comments are not written as reStructuredText (a lone ``*`` in ``a * b``
    would be an error), so only three kinds of markup are recognised:
    ``$...$`` (math), backticks (code) and ``:role:`name``` (shown as code).
    An empty comment line separates paragraphs; a line starting like a list
    item (``- ``, ``1)``) starts a new line.
    """
    paragraphs: list[list[str]] = [[]]
    for line in text.split("\n"):
        if not line.strip():
            paragraphs.append([])
        elif _LIST_ITEM.match(line) and paragraphs[-1]:
            paragraphs.append([line.strip()])
        else:
            paragraphs[-1].append(line.strip())
    result = []
    for paragraph in paragraphs:
        if not paragraph:
            continue
        joined = " ".join(paragraph)
        node = nodes.paragraph(joined)
        position = 0
        for match in _INLINE.finditer(joined):
            if match.start() > position:
                node += nodes.Text(joined[position : match.start()])
            if match.group("math") is not None:
                latex = match.group("math")
                node += nodes.math(latex, latex)
            else:
                code = match.group("role") or match.group("code2") or match.group("code1")
                if match.group("role") is not None:
                    # As Sphinx shows a reference: an explicit title, or "~a.b.c" as "c".
                    if "<" in code:
                        code = code.split("<")[0].strip()
                    elif code.startswith("~"):
                        code = code[1:].split(".")[-1]
                node += nodes.literal(code, code)
            position = match.end()
        if position < len(joined):
            node += nodes.Text(joined[position:])
        result.append(node)
    return result


class optional_api_link(nodes.General, nodes.Inline, nodes.Element):  # noqa: N801 (docutils node naming)
    """A link to an API entry that becomes plain text when the API reference lacks the entry.

    Resolved at ``doctree-resolved``, when every page has been read and the
    Python domain knows what the API reference documents.
    """


def _docstring_rest(app: Sphinx, prose: Prose, module: str) -> list[str]:
    """A docstring as the reST lines autodoc would render: through napoleon, labels dropped."""
    lines = prose.text.splitlines()
    if "sphinx.ext.napoleon" in app.extensions and app.config.napoleon_google_docstring:
        from sphinx.ext.napoleon.docstring import GoogleDocstring

        full_name = f"{module}.{prose.name}" if prose.name else module
        lines = GoogleDocstring(
            lines, app.config, app, prose.what, full_name, None, SimpleNamespace(no_index=True, noindex=True)
        ).lines()
    # Labels and explicit targets already exist on the API page: a second copy would be a duplicate.
    return [line for line in lines if not re.match(r"^\s*(:label:|\.\. _[^:]+:\s*$)", line)]


class _PythonFields:
    """What Sphinx's :class:`~sphinx.util.docfields.DocFieldTransformer` needs from an object directive.

    Napoleon turns ``Args:`` into ``:param x:`` fields; only inside an object
    description does Sphinx render those as "Parameters" lists.  The columns
    are not object descriptions (the API reference has those), so the fields
    are transformed here with the Python domain's field types.
    """

    domain = "py"

    def __init__(self, directive: SphinxDirective) -> None:
        from sphinx.directives import ObjectDescription
        from sphinx.domains.python import PyObject

        self.env = directive.env
        self.state = directive.state
        self.doc_field_types = PyObject.doc_field_types
        self._doc_field_type_map: dict = {}
        self._map = ObjectDescription.get_field_type_map

    def get_field_type_map(self) -> dict:
        return self._map(self)


def _flatten_sections(container: nodes.Element) -> None:
    """Turn section titles inside a column into rubrics (a column cannot hold sections)."""
    for section in list(container.findall(nodes.section, include_self=False)):
        title = section.next_node(nodes.title)
        replacement = [nodes.rubric(title.astext(), title.astext())] if title else []
        replacement += [child for child in section.children if child is not title]
        section.replace_self(replacement)


class LiterateSourceDirective(SphinxDirective):
    """``.. literate-source:: package.module``: the side-by-side page of one module."""

    required_arguments = 1
    has_content = False
    option_spec = {"path": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        module = self.arguments[0]
        path = Path(self.options.get("path") or _module_path(self.env.srcdir, module))
        if not path.is_file():
            raise self.error(f"literate-source: no source file {path} for module {module!r}")
        self.env.note_dependency(str(path))
        source = path.read_text(encoding="utf-8")
        try:
            parsed = split_module(source)
        except SyntaxError as error:
            raise self.error(f"literate-source: cannot parse {path}: {error}") from error

        result: list[nodes.Node] = []
        result.append(self._api_line(module))
        if parsed.docstring:
            intro = nodes.section()
            nested_parse_with_titles(
                self.state,
                StringList(
                    _docstring_rest(self.env.app, Prose("docstring", parsed.docstring, 1, None, "module"), module),
                    str(path),
                ),
                intro,
            )
            intro_box = nodes.container(classes=["lt-sbs-intro"])
            # Sections of the module docstring (its own headings) stay sections, so they appear in the page's
            # table of contents; everything before the first heading goes in a box of reading width.
            for child in list(intro.children):
                if isinstance(child, nodes.section):
                    if len(intro_box):
                        result.append(intro_box)
                        intro_box = nodes.container(classes=["lt-sbs-intro"])
                    result.append(child)
                else:
                    intro_box += child
            if len(intro_box):
                result.append(intro_box)

        listing = nodes.container(classes=["lt-sbs"])
        for block in parsed.blocks:
            listing += self._block(block, module, path)
        # The blocks form the last section of the page, after the article.
        code_section = nodes.section(ids=[f"{module.replace('.', '-')}-code"], names=["the code, line by line"])
        code_section += nodes.title("The code, line by line", "The code, line by line")
        code_section += listing
        result.append(code_section)
        return result

    def _api_line(self, module: str) -> nodes.Node:
        paragraph = nodes.paragraph(classes=["lt-sbs-api"])
        paragraph += nodes.Text("API reference: ")
        paragraph += _optional_link(module, "mod", nodes.literal(module, module))
        paragraph += nodes.Text(". Comments and docstrings on the left, the code they explain on the right.")
        return paragraph

    def _block(self, block: Block, module: str, path: Path) -> nodes.Node:
        first = block.first_code_line() or (block.prose[0].first_line if block.prose else 0)
        row = nodes.container(classes=["lt-sbs-block"], ids=[f"{module.replace('.', '-')}-L{first}"])
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
                label += _optional_link(f"{module}.{prose.name}", "obj", nodes.literal(prose.name, prose.name))
                holder += label
            parsed = nodes.section()
            context = self.env.ref_context
            saved = context.get("py:class")
            if prose.owner_class:
                context["py:class"] = prose.owner_class
            try:
                nested_parse_with_titles(
                    self.state, StringList(_docstring_rest(self.env.app, prose, module), str(path)), parsed
                )
            finally:
                if saved is None:
                    context.pop("py:class", None)
                else:
                    context["py:class"] = saved
            _flatten_sections(parsed)
            holder.extend(parsed.children)
            from sphinx.util.docfields import DocFieldTransformer

            DocFieldTransformer(_PythonFields(self)).transform_all(holder)
            prose_column += holder
        row += prose_column
        code_column = nodes.container(classes=["lt-sbs-code"])
        code = block.code_text()
        if code:
            literal = nodes.literal_block(code, code, language=LEXER)
            literal["classes"].append("lt-sbs-listing")
            code_column += literal
        row += code_column
        return row


def _optional_link(target: str, kind: str, content: nodes.Node) -> optional_api_link:
    node = optional_api_link()
    node["target"] = target
    node["kind"] = kind
    node += content
    return node


def _resolve_optional_links(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    domain = app.env.domains["py"] if hasattr(app.env, "domains") else app.env.get_domain("py")
    for node in list(doctree.findall(optional_api_link)):
        target, kind = node["target"], node["kind"]
        entry = None
        if kind == "mod" and target in domain.modules:
            entry = domain.modules[target]
            anchor = f"module-{target}"
        elif kind == "obj" and target in domain.objects:
            entry = domain.objects[target]
            anchor = entry.node_id
        if entry is None or not hasattr(app.builder, "get_relative_uri"):
            node.replace_self(node.children)
            continue
        reference = nodes.reference("", "", internal=True, classes=["lt-sbs-apilink"])
        reference["refuri"] = app.builder.get_relative_uri(docname, entry.docname) + "#" + anchor
        reference["reftitle"] = f"API reference of {target}"
        reference.extend(node.children)
        node.replace_self(reference)


# ---------------------------------------------------------------------------
# Generated stub pages and the API links back
# ---------------------------------------------------------------------------
def _module_path(srcdir: str | Path, module: str) -> Path:
    root = Path(srcdir).resolve().parent
    parts = module.split(".")
    if len(parts) == 1:
        return root / parts[0] / "__init__.py"
    return root.joinpath(*parts[:-1], parts[-1] + ".py")


def package_modules(root: Path) -> list[tuple[str, Path]]:
    """``(dotted name, path)`` of every module of the package, in reading order."""
    files = {
        ".".join(path.relative_to(root / PACKAGE).with_suffix("").parts): path
        for path in sorted((root / PACKAGE).rglob("*.py"))
        if path.name != "__init__.py" or path.parent == root / PACKAGE
    }
    order = [stem for stem in READING_ORDER if stem in files]
    order += sorted(stem for stem in files if stem not in order)
    return [(PACKAGE if stem == "__init__" else f"{PACKAGE}.{stem}", files[stem]) for stem in order]


def _write_if_changed(path: Path, text: str) -> None:
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def _first_line(path: Path) -> str:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except SyntaxError:
        return ""
    doc = ast.get_docstring(tree)
    if not doc:
        return ""
    # The first line as plain text: a role's target becomes its last name, shown as code.
    first = doc.strip().splitlines()[0].rstrip(".")
    return re.sub(r":[\w:.-]+:`~?(?:[^`<]*<)?([^`>]+)>?`", lambda m: f"``{m.group(1).split('.')[-1]}``", first)


def write_stub_pages(app: Sphinx) -> None:
    """Write ``docs/source/<module>.rst`` for every module, and the section's index."""
    srcdir = Path(app.srcdir)
    folder = srcdir / PAGES_DIR
    folder.mkdir(exist_ok=True)
    modules = package_modules(srcdir.parent)
    wanted = set()
    for module, path in modules:
        title = f"{module}"
        stub = (
            ":html_theme.sidebar_secondary.remove: true\n\n"
            f".. This page is generated by docs/_ext/sidebyside.py from {path.relative_to(srcdir.parent).as_posix()}.\n\n"
            f".. currentmodule:: {module}\n\n"
            f"{title}\n{'=' * len(title)}\n\n"
            f".. literate-source:: {module}\n"
        )
        name = f"{module}.rst"
        wanted.add(name)
        _write_if_changed(folder / name, stub)
    entries = "\n".join(f"   {module}" for module, _ in modules)
    table = "\n".join(f"* :doc:`{module}` — {_first_line(path) or module}" for module, path in modules)
    index = (
        ".. This page is generated by docs/_ext/sidebyside.py.\n\n"
        "Annotated source\n================\n\n"
        "Each module of the package, with its comments and docstrings beside the\n"
        "lines they explain (generated from the source when the site is built).\n"
        "Read them in this order:\n\n"
        f"{table}\n\n"
        ".. toctree::\n   :hidden:\n   :maxdepth: 1\n\n"
        f"{entries}\n"
    )
    wanted.add("index.rst")
    _write_if_changed(folder / "index.rst", index)
    for stale in folder.glob("*.rst"):
        if stale.name not in wanted:
            stale.unlink()


def add_source_link(app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]) -> None:
    """Put a "Read the annotated source" line at the top of every module's API entry."""
    if what != "module" or not (name == PACKAGE or name.startswith(PACKAGE + ".")):
        return
    if name not in {module for module, _ in package_modules(Path(app.srcdir).parent)}:
        return
    link = [
        ".. rst-class:: lt-source-link",
        "",
        f"   Read the annotated source: :doc:`{name} side by side </{PAGES_DIR}/{name}>`",
        "",
    ]
    lines[:0] = link


def _tolerate_missing(app: Sphinx, env: object, node: nodes.Element, contnode: nodes.Node) -> nodes.Node | None:
    """On the side-by-side pages, a reference the API reference cannot resolve stays plain code.

    The side-by-side pages describe no objects themselves (the API reference
    does), so a docstring's reference to a private helper, or to a module the
    API reference does not (yet) document, has no target here.  The same
    docstrings are checked with ``-n`` where the API reference renders them.
    Runs after intersphinx (priority 900), so external names still link.
    """
    if node.get("refdomain") == "py" and str(node.get("refdoc", "")).startswith(PAGES_DIR + "/"):
        return contnode
    return None


def setup(app: Sphinx) -> dict[str, object]:
    app.add_lexer(LEXER, PythonLexer)
    app.add_node(optional_api_link)
    app.add_directive("literate-source", LiterateSourceDirective)
    app.connect("builder-inited", write_stub_pages)
    app.connect("autodoc-process-docstring", add_source_link)
    app.connect("doctree-resolved", _resolve_optional_links)
    app.connect("missing-reference", _tolerate_missing, priority=900)
    app.add_css_file("sidebyside.css")
    # Editing this file changes how every page is generated: a new env_version makes Sphinx re-read them all.
    env_version = int(hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:8], 16)
    return {"version": "1", "env_version": env_version, "parallel_read_safe": True, "parallel_write_safe": True}
