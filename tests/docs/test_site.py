"""Checks of the built site: every chapter executed, every source line shown.

These tests read the HTML of a finished build; they do not build it.  Build
first (``nox -s docs``), then run ``nox -s site_tests`` (or
``pytest -m site``).  ``LT_SITE_HTML`` points at another output folder
(default ``docs/_build/html``).  Without a built site they fail, they do not
skip: a check that silently did not run must not look like a pass.

* **Chapters.**  Every ``docs/chapters/*.md`` has a page; the page holds as
  many executed cells as the chapter has code cells (none dropped); no cell
  shows a traceback or anything on stderr; every cell whose code prints has
  an output and every cell that calls ``plt.show()`` a figure; and the
  executed notebook is offered for download with its outputs.
* **Annotated source.**  Every module of the reading order
  (``literate_transformer.manifest``) and the package itself has a
  side-by-side page that shows every line of the module: each code line,
  verbatim and in order, in the code column; the words of each comment and
  docstring line, in order, in the prose.  Each page links to the chapter
  that builds its module; the pages' index lists them in reading order; the
  API reference links each module to its page.
* **Reading order.**  The chapters appear in the site's table of contents
  in the manifest's order, and every file of the package is either in the
  manifest or a package's ``__init__`` (checked without a site too, in
  ``tests/docs/test_reading_order.py``).
"""

from __future__ import annotations

import ast
import functools
import html as html_module
import io
import json
import os
import re
import tokenize
from html.parser import HTMLParser
from pathlib import Path

import pytest

from literate_transformer import manifest

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("LT_SITE_HTML", ROOT / "docs" / "_build" / "html"))
PACKAGE_DIR = ROOT / manifest.PACKAGE
# The chapters and the modules, in reading order, from the manifest (the one list the site is built from).
CHAPTERS = [ROOT / "docs" / f"{chapter.docname}.md" for chapter in manifest.CHAPTERS]
MODULES = [PACKAGE_DIR / "__init__.py"] + [
    PACKAGE_DIR / f"{module.replace('.', '/')}.py" for module in manifest.MODULES
]


# ---------------------------------------------------------------------------
# A minimal HTML tree (standard library only)
# ---------------------------------------------------------------------------
_BLOCK = {
    "p",
    "div",
    "dt",
    "dd",
    "li",
    "td",
    "th",
    "tr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "section",
    "dl",
    "ul",
    "ol",
}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Element:
    """An HTML element: tag, attributes, children (elements and strings)."""

    def __init__(self, tag: str, attrs: dict[str, str], parent: Element | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Element | str] = []
        self.classes = set((attrs.get("class") or "").split())

    def iter(self):
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None) -> list[Element]:
        return [
            node for node in self.iter() if (tag is None or node.tag == tag) and (cls is None or cls in node.classes)
        ]

    def text(self) -> str:
        if self.tag in ("script", "style"):
            return ""
        inner = "".join(child if isinstance(child, str) else child.text() for child in self.children)
        # Block elements end a word ("<dt>head view</dt><dd>the tokens" reads "head view the tokens").
        return f" {inner} " if self.tag in _BLOCK else inner


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        node = Element(tag, {key: value or "" for key, value in attrs}, self.current)
        self.current.children.append(node)
        if tag not in _VOID:
            self.current = node

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Element(tag, {key: value or "" for key, value in attrs}, self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def parse_html(path: Path) -> Element:
    builder = _TreeBuilder()
    builder.feed(path.read_text(encoding="utf-8"))
    return builder.root


def remove(root: Element, cls: str) -> Element:
    """``root`` without its elements of class ``cls`` (in place), e.g. the runtime values beside the code."""
    for node in list(root.iter()):
        node.children = [c for c in node.children if not (isinstance(c, Element) and cls in c.classes)]
    return root


def article(page: Element) -> Element:
    """The page's main content (pydata-sphinx-theme's ``<article class="bd-article">``)."""
    found = page.find_all("article", "bd-article") or page.find_all("main") or [page]
    return found[0]


@pytest.fixture(scope="session")
def site() -> Path:
    if not (SITE / "index.html").is_file():
        pytest.fail(
            f"no built site in {SITE}: run `nox -s docs` first (or point LT_SITE_HTML at a built site)",
            pytrace=False,
        )
    return SITE


# ---------------------------------------------------------------------------
# Chapters: executed, no errors, downloadable as notebooks
# ---------------------------------------------------------------------------
_CODE_CELL = re.compile(r"^(`{3,}|:{3,})\{code-cell\}")


def chapter_cells(path: Path) -> list[str]:
    """The source of each code cell of a MyST notebook that the page shows (``remove-cell`` ones excluded)."""
    cells, lines, index = [], path.read_text(encoding="utf-8").splitlines(), 0
    while index < len(lines):
        opening = _CODE_CELL.match(lines[index])
        if not opening:
            index += 1
            continue
        fence = opening.group(1)
        body, index = [], index + 1
        while index < len(lines) and not lines[index].startswith(fence):
            body.append(lines[index])
            index += 1
        index += 1
        options = [line for line in body if line.startswith(":")]
        if body and body[0].strip() == "---":  # YAML options block
            end = body.index("---", 1) if "---" in body[1:] else 0
            options, body = body[1:end], body[end + 1 :]
        else:
            body = [line for line in body if not line.startswith(":")]
        if any("remove-cell" in option for option in options):
            continue
        cells.append("\n".join(body))
    return cells


def prints_something(code: str) -> bool:
    """Whether a cell's code calls ``print`` (outside comments and strings)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:  # IPython magics: fall back to text
        return bool(re.search(r"^[^#\n]*\bprint\(", code, flags=re.MULTILINE))
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
        for node in ast.walk(tree)
    )


def test_there_are_chapters_and_modules():
    assert CHAPTERS, "the manifest lists no chapter"
    assert len(MODULES) > 1, "the manifest lists no module"
    assert sorted(CHAPTERS) == sorted((ROOT / "docs" / "chapters").glob("*.md")), "chapters outside the manifest"


def test_every_file_of_the_package_is_in_the_manifest_or_a_package_init():
    outside = [
        path.relative_to(ROOT).as_posix()
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
        if path.name != "__init__.py" and path not in MODULES
    ]
    assert not outside, f"not in {manifest.PACKAGE}.manifest, so without a page: {', '.join(outside)}"


def nav_links(page: Element) -> list[str]:
    """The targets of the links in the site's navigation sidebar, in order (fragments dropped)."""
    sidebars = page.find_all(cls="bd-sidebar-primary") or page.find_all("nav")
    return [node.attrs.get("href", "").split("#")[0] for sidebar in sidebars for node in sidebar.find_all("a")]


def test_the_table_of_contents_lists_the_chapters_in_reading_order(site):
    links = nav_links(parse_html(site / "index.html"))
    positions = []
    for chapter in manifest.CHAPTERS:
        target = f"{chapter.docname}.html"
        assert target in links, f"the sidebar of index.html has no link to {target}"
        positions.append(links.index(target))
    assert positions == sorted(positions), "the sidebar lists the chapters out of the manifest's order"
    titles = [node.text().strip() for node in parse_html(site / "index.html").find_all("a")]
    for chapter in manifest.CHAPTERS:
        assert any(chapter.title in title for title in titles), f"no link titled {chapter.title!r}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[path.stem for path in CHAPTERS])
def test_every_cell_of_the_chapter_ran_without_errors(site, chapter):
    page_path = site / "chapters" / f"{chapter.stem}.html"
    assert page_path.is_file(), f"{chapter.name} has no page {page_path} (is it in a toctree?)"
    cells = chapter_cells(chapter)
    shown = article(parse_html(page_path)).find_all("div", "cell")
    assert len(shown) == len(cells), (
        f"{chapter.name}: the source has {len(cells)} code cells but the page shows {len(shown)}"
    )
    problems = []
    for number, (source, cell) in enumerate(zip(cells, shown, strict=True), start=1):
        outputs = cell.find_all("div", "cell_output")
        for output in cell.iter():
            bad = output.classes & {"traceback", "stderr", "error"}
            if bad and output.tag == "div":
                problems.append(f"cell {number} shows {'/'.join(sorted(bad))} output: {output.text().strip()[:300]!r}")
        if prints_something(source) and not any(output.text().strip() for output in outputs):
            problems.append(f"cell {number} calls print() but shows no output (was it executed?): {source[:120]!r}")
        if "plt.show()" in source and not any(output.find_all("img") for output in outputs):
            problems.append(
                f"cell {number} calls plt.show() but shows no figure (a non-inline backend?): {source[:120]!r}"
            )
    assert not problems, f"{chapter.name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[path.stem for path in CHAPTERS])
def test_the_chapter_downloads_as_an_executed_notebook(site, chapter):
    page = (site / "chapters" / f"{chapter.stem}.html").read_text(encoding="utf-8")
    assert f"_sources/chapters/{chapter.stem}.ipynb" in page, f"{chapter.name}: the page offers no .ipynb download"
    notebook_path = site / "_sources" / "chapters" / f"{chapter.stem}.ipynb"
    assert notebook_path.is_file(), f"{chapter.name}: {notebook_path} is missing"
    notebook = json.loads(notebook_path.read_text(encoding="utf-8"))
    code_cells = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert code_cells, f"{notebook_path.name} has no code cells"
    for cell in code_cells:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if prints_something(source):
            assert cell.get("outputs"), f"{notebook_path.name}: a printing cell has no outputs: {source[:120]!r}"
        assert not any(output.get("output_type") == "error" for output in cell.get("outputs", [])), (
            f"{notebook_path.name}: a cell raised: {source[:120]!r}"
        )


# ---------------------------------------------------------------------------
# Annotated source pages: every line of every module
# ---------------------------------------------------------------------------
def module_name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(relative[:-1] if path.stem == "__init__" else relative)


def test_the_annotated_source_index_lists_the_modules_in_reading_order(site):
    links = [
        node.attrs.get("href", "").split("#")[0]
        for node in article(parse_html(site / "source" / "index.html")).find_all("a")
    ]
    positions = []
    for module in MODULES:
        target = f"{module_name(module)}.html"
        assert target in links, f"source/index.html does not list {target}"
        positions.append(links.index(target))
    assert positions == sorted(positions), "source/index.html lists the modules out of the manifest's order"


@pytest.mark.parametrize("module", manifest.MODULES)
def test_each_annotated_source_page_links_to_the_chapter_that_builds_its_module(site, module):
    chapter = manifest.chapter_of(module)
    page = parse_html(site / "source" / f"{manifest.PACKAGE}.{module}.html")
    header = [node for node in page.find_all("p", "lt-sbs-api")]
    assert header, f"the page of {module} has no header line"
    hrefs = {node.attrs.get("href", "") for node in header[0].find_all("a")}
    if chapter.docname is None:
        assert not any("chapters/" in href for href in hrefs)
    else:
        assert f"../{chapter.docname}.html" in hrefs, f"the page of {module} does not link to {chapter.docname}"


def classify_lines(source: str) -> dict[int, str]:
    """Line number -> "code", "comment" or "docstring" for every non-blank line.

    Written independently of the extension that renders the pages: comments
    from the tokenizer, docstrings (any string statement alone on its lines)
    from the syntax tree.
    """
    lines = source.splitlines()
    kinds = {number: "code" for number, line in enumerate(lines, start=1) if line.strip()}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and not token.line[: token.start[1]].strip():
            kinds[token.start[0]] = "comment"
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            and not lines[node.lineno - 1][: node.col_offset].strip()
            and not lines[node.end_lineno - 1][node.end_col_offset :].strip()
        ):
            for number in range(node.lineno, node.end_lineno + 1):
                if number in kinds:
                    kinds[number] = "docstring"
    return kinds


_NAPOLEON_HEADER = re.compile(
    r"^(Args|Arguments|Parameters|Keyword Args|Keyword Arguments|Other Parameters|Returns?|Raises|Yields?|"
    r"Attributes|Methods|Warns|See Also|References|Examples?|Notes?|Todo|Warnings?):\s*$"
)


def _role_text(match: re.Match) -> str:
    content = match.group(1)
    explicit = re.match(r"^(.*?)\s*<[^>]*>$", content, flags=re.DOTALL)
    if explicit:
        return explicit.group(1)
    content = content.lstrip("!")
    if content.startswith("~"):
        return content[1:].split(".")[-1]
    return content.lstrip(".")


def words(text: str) -> list[str]:
    return [word.strip("_") for word in re.findall(r"\w+", text) if word.strip("_")]


def prose_words(line: str) -> list[str]:
    """The words a reader sees for one comment or docstring line, markup removed."""
    text = line.strip()
    text = re.sub(r'^[rRbBuUfF]*("""|\'\'\')', "", text)  # opening quotes of a docstring
    text = re.sub(r'("""|\'\'\')$', "", text)  # closing quotes
    text = re.sub(r"^#:?", "", text).strip()  # comment marker
    text = re.sub(r"^(\d+[.)]|#\.|[-*+])\s+", "", text)  # a list item's marker is not a word on the page
    if _NAPOLEON_HEADER.match(text) or re.match(
        r"^:(label|name|class|nowrap|no-index|header-rows|stub-columns|widths|width|align):", text
    ):
        return []
    directive = re.match(r"^\.\.\s+[\w:-]+::\s*(.*)$", text)
    if directive:
        text = directive.group(1)
    elif text.startswith(".. "):  # reST comment or link target: not shown
        return []
    text = re.sub(r"`([^`<]*?)\s*<[^>]*>`_{1,2}", r"\1", text)  # `title <url>`_
    text = re.sub(r":[\w:.+-]+:`([^`]*)`", _role_text, text)  # :role:`target`
    # A link or role split over two lines: drop the URL half, keep the text half.
    text = re.sub(r"^[^`]*?<[^>`]*>`_{0,2}", "", text)
    text = re.sub(r":[\w:.+-]+:`", "", text)
    return words(text)


@pytest.mark.parametrize("module", MODULES, ids=[module_name(path) for path in MODULES])
def test_the_annotated_source_page_shows_every_line(site, module):
    name = module_name(module)
    page_path = site / "source" / f"{name}.html"
    assert page_path.is_file(), f"no annotated source page {page_path} for {module.name}"
    # The code as the module has it: the runtime values and cache names at the ends of lines are not part of it.
    content = remove(remove(article(parse_html(page_path)), "lt-rt"), "lt-hook")
    code_lines = [
        line.rstrip()
        for column in content.find_all("div", "lt-sbs-code")
        for pre in column.find_all("pre")
        for line in pre.text().splitlines()
    ]
    assert code_lines, f"{page_path.name} has no code column"
    page_words = " " + " ".join(words(content.text())) + " "

    source = module.read_text(encoding="utf-8")
    lines = source.splitlines()
    missing_code, missing_prose, position = [], [], 0
    for number, kind in sorted(classify_lines(source).items()):
        line = lines[number - 1]
        if kind == "code":
            # In order: each code line after the previous one.
            try:
                position = code_lines.index(line.rstrip(), position) + 1
            except ValueError:
                missing_code.append(f"{module.name}:{number}: {line.strip()}")
            continue
        expected = prose_words(line)
        if expected and f" {' '.join(expected)} " not in page_words:
            if kind == "comment" and line.rstrip() in code_lines:
                continue  # a directive to a tool (noqa, type: ignore), kept with its code
            missing_prose.append(f"{module.name}:{number}: {line.strip()}")
    report = []
    if missing_code:
        report += ["code lines missing (or out of order):", *missing_code[:20]]
    if missing_prose:
        report += ["comment/docstring lines whose words are missing:", *missing_prose[:20]]
    assert not report, f"{page_path.name} does not show every line of {module.name}:\n" + "\n".join(report)


def _api_pages(site: Path, index: bool = False) -> dict[str, object]:
    """The API reference's pages (``api/<part or module>.html``), parsed, by name; the index (``api``) too if asked."""
    pages = {f"api/{path.stem}": parse_html(path) for path in sorted((site / "api").glob("*.html"))}
    assert pages, "the API reference has no page per part and module (api/*.html)"
    return {"api": parse_html(site / "api.html"), **pages} if index else pages


def _module_ids(page) -> set[str]:
    return {
        node.attrs["id"][len("module-") :]
        for node in page.iter()
        if node.attrs.get("id", "").startswith("module-literate_transformer")
    }


def test_the_api_reference_has_a_page_per_part_linked_from_its_index(site):
    index = parse_html(site / "api.html")
    hrefs = {node.attrs.get("href", "").split("#")[0] for node in index.find_all("a")}
    parts = _api_pages(site)
    assert {f"{page}.html" for page in parts} <= hrefs
    # A part's page documents that part's introduction, a module's page that module: one page each.
    for name, page in parts.items():
        assert _module_ids(page) == {name.removeprefix("api/")}, f"{name}.html documents {_module_ids(page)}"
    # The names a reader calls, each a link to its entry (lt.encode to the function it is).
    names = {node.text().strip() for node in index.iter() if node.tag == "code"}
    assert {"lt.encode", "lt.LlamaForCausalLM", "lt.BertModel"} <= names
    entry_links = [node.attrs.get("href", "") for node in index.find_all("a")]
    assert any(link.endswith("#literate_transformer.fast.encode.encode") for link in entry_links)


def test_the_api_reference_links_each_module_to_its_annotated_source(site):
    pages = _api_pages(site, index=True)
    documented = sorted(module for page in pages.values() for module in _module_ids(page))
    expected = sorted(module_name(path) for path in MODULES)
    assert set(expected) <= set(documented), f"the API pages do not document: {set(expected) - set(documented)}"
    links = {
        node.attrs.get("href", "").split("#")[0].removeprefix("../")
        for page in pages.values()
        for node in page.find_all("a")
    }
    # The sub-packages' entries introduce their parts; only modules of the reading order have a page.
    missing = [name for name in expected if f"source/{name}.html" not in links]
    assert not missing, f"the API pages have no 'annotated source' link for: {', '.join(missing)}"


def test_each_annotated_source_page_links_back_to_its_api_entry(site):
    page_of = {module: name for name, page in _api_pages(site, index=True).items() for module in _module_ids(page)}
    missing = []
    for module in MODULES:
        name = module_name(module)
        if name not in page_of:
            continue  # not in the API reference (a private module): nothing to link to
        page = parse_html(site / "source" / f"{name}.html")
        hrefs = {node.attrs.get("href", "") for node in page.find_all("a")}
        if f"../{page_of[name]}.html#module-{name}" not in hrefs:
            missing.append(name)
    assert not missing, f"these annotated source pages do not link to their API entry: {', '.join(missing)}"


# ---------------------------------------------------------------------------
# Runtime values beside the code, and the proof badges
# ---------------------------------------------------------------------------
_SHAPE_COMMENT = re.compile(r"#\s*\(\s*(\w+(?:\s*,\s*\w+)*)\s*,?\s*\)\s*$")
#: Letters whose size differs between calls of one example (query and key lengths: a cached step has T = 1).
FREE_LETTERS = {"T", "S"}


def shape_comments(source: str) -> dict[int, tuple[str, ...]]:
    """Line -> the letters of its trailing shape comment (``# (B, H, T, D)``)."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and token.line[: token.start[1]].strip():
            match = _SHAPE_COMMENT.match(token.string)
            if match:
                found[token.start[0]] = tuple(part.strip() for part in match.group(1).split(","))
    return found


def runtime_values(page_path: Path) -> tuple[dict[int, list[tuple[str, str]]], dict[str, dict[str, int]]]:
    """Line -> ``[(example, shape text)]`` of the runtime values shown at its end; and each example's sizes."""
    content = article(parse_html(page_path))
    values: dict[int, list[tuple[str, str]]] = {}
    for line in content.find_all("span", "lt-line"):
        for value in line.find_all("span", "lt-rt"):
            shape = value.find_all("span", "lt-rt-shape")[0].text()
            values.setdefault(int(line.attrs["data-line"]), []).append((value.attrs.get("data-example", ""), shape))
    dims = {
        node.attrs["data-example"]: json.loads(node.attrs["data-dims"])
        for node in content.find_all("span", "lt-rt-dims")
    }
    return values, dims


def agrees(letters: tuple[str, ...], shape: tuple[int, ...], dims: dict[str, int]) -> bool:
    """Whether a runtime shape fits a shape comment, with the example's sizes for the fixed letters."""
    if len(letters) != len(shape):
        return False
    for letter, size in zip(letters, shape, strict=True):
        if letter.isdigit() and int(letter) != size:
            return False
        if letter in dims and letter not in FREE_LETTERS and dims[letter] != size:
            return False
    return True


@pytest.mark.parametrize("module", MODULES, ids=[module_name(path) for path in MODULES])
def test_every_shape_comment_shows_the_shape_its_line_computed(site, module):
    comments = shape_comments(module.read_text(encoding="utf-8"))
    page_path = site / "source" / f"{module_name(module)}.html"
    values, dims = runtime_values(page_path)
    missing = [f"{module.name}:{line}" for line in comments if line not in values]
    wrong = []
    for line, letters in comments.items():
        for example, shape_text in values.get(line, []):
            shape = tuple(int(size) for size in re.findall(r"\d+", shape_text))
            if example not in dims:
                wrong.append(f"{module.name}:{line}: no sizes on the page for the {example!r} example")
            elif not agrees(letters, shape, dims[example]):
                wrong.append(f"{module.name}:{line}: comment ({', '.join(letters)}) but the page shows {shape_text}")
    assert not missing, "shape-commented lines without a runtime shape on the page:\n" + "\n".join(missing)
    assert not wrong, "runtime shapes that contradict their line's comment:\n" + "\n".join(wrong)


def test_a_line_that_calls_a_module_shows_the_lens_cache_name_of_its_result(site):
    # BERT's encoder runs its layers in a loop: that line shows the name the lens keeps each layer's output
    # under, the index a letter, and the names are those lt.lens.run_with_cache gives the checkpoint's model.
    page = parse_html(site / "source" / "literate_transformer.models.bert.html")
    names = [node.text() for node in page.find_all("span", "lt-hook")]
    assert 'cache["encoder.layer.{i}"]' in names, names
    assert 'cache["embeddings"]' in names and 'cache["encoder.layer.{i}.attention.self.query"]' in names, names
    # No page names a module the way no model does: the static cache's wrapper, or a bare sub-module.
    pages = sorted((site / "source").glob("*.html"))
    everywhere = [node.text() for path in pages for node in parse_html(path).find_all("span", "lt-hook")]
    assert not [name for name in everywhere if "model.model." in name], everywhere


def test_runtime_values_add_at_most_200_kb_to_a_page(site):
    sizes = {}
    for page_path in sorted((site / "source").glob("*.html")):
        html = page_path.read_text(encoding="utf-8")
        sizes[page_path.name] = sum(
            len(match.group(0))
            # Each value beside the code, its attributes in any order.
            for match in re.finditer(r'<span [^>]*\bclass="lt-rt"[^>]*>.*?</span></span>', html)
        )
    assert max(sizes.values()) > 0, "no page shows a runtime value"
    assert max(sizes.values()) <= 200_000, {name: size for name, size in sizes.items() if size > 200_000}


#: Pages that compute masked scores (finfo.min), whose statistics once overflowed in float32 (a mean of -inf),
#: and whether their running example masks any score (the kernels' does; BERT's unpadded sentence does not).
FINITE_STATISTICS = {"core.kernels": True, "core.masks": False}


@pytest.mark.parametrize("module", FINITE_STATISTICS)
def test_the_statistics_of_masked_scores_are_finite(site, module):
    page = article(parse_html(site / "source" / f"{manifest.PACKAGE}.{module}.html"))
    statistics = [" ".join(node.text().split()) for node in page.find_all("span", "lt-rt-stats")]
    assert statistics, f"{module}: no runtime statistics on the page"
    if FINITE_STATISTICS[module]:
        # The masked scores themselves are on the page: finfo(float32).min is about -3.403e+38.
        assert any("min -3.403e+38" in line for line in statistics), f"{module}: no masked scores shown"
    numbers = [float(value) for line in statistics for value in re.findall(r"(?:mean|std|min|max) (\S+)", line)]
    bad = [line for line in statistics if re.search(r"\b(?:-?inf|nan)\b", line)]
    assert not bad and all(abs(number) < float("inf") for number in numbers), bad


_BADGE = re.compile(r"^= (?P<reference>.+) · max \|Δ\| (?P<diff>\S+) \((?P<dtype>\w+)\)$")


@functools.cache
def badges(page_path: Path) -> tuple[tuple[str, float], ...]:
    """``(reference, max |Δ|)`` of every proof badge on a page (each page parsed once: the site does not change)."""
    found = []
    for badge in article(parse_html(page_path)).find_all("span", "lt-proof"):
        match = _BADGE.match(" ".join(badge.text().split()))
        assert match, f"{page_path.name}: a badge reads {badge.text()!r}"
        found.append((match["reference"], float(match["diff"])))
    return tuple(found)


def test_every_proof_has_its_badge_on_its_module_page_and_in_its_chapter(site):
    from lt_site.proofs import PROOFS

    problems = []
    for proof in PROOFS:
        module = proof.subject.rpartition(".")[0]
        pages = [site / "source" / f"{manifest.PACKAGE}.{module}.html"]
        chapter = manifest.chapter_of(module)
        if chapter.docname:
            pages.append(site / f"{chapter.docname}.html")
        for page_path in pages:
            shown = [diff for reference, diff in badges(page_path) if reference == proof.reference]
            if not shown:
                problems.append(f"{page_path.relative_to(site)}: no badge '= {proof.reference}' for {proof.subject}")
            elif max(shown) > proof.tolerance:
                problems.append(
                    f"{page_path.relative_to(site)}: {proof.subject} shows {max(shown)} > {proof.tolerance}"
                )
    assert not problems, "\n".join(problems)


def test_a_chapters_badges_stand_after_its_opening(site):
    """The title and the "In this chapter" opening read undisturbed; the badges stand where the lesson starts."""
    problems, boxes = [], 0
    for chapter in manifest.CHAPTERS:
        nodes = list(article(parse_html(site / f"{chapter.docname}.html")).iter())
        found = [index for index, node in enumerate(nodes) if "lt-proofs" in node.classes]
        if not found:
            continue
        boxes += len(found)
        opening = [
            index
            for index, node in enumerate(nodes)
            if "admonition" in node.classes and " ".join(node.text().split()).startswith("In this chapter")
        ]
        if len(found) != 1 or "lt-proofs-chapter" not in nodes[found[0]].classes:
            problems.append(f"{chapter.docname}: {len(found)} badge boxes, classes {nodes[found[0]].classes}")
        elif not opening or found[0] < opening[0]:
            problems.append(f"{chapter.docname}: the badges come before the chapter's opening")
    assert boxes, "no chapter shows a badge box"
    assert not problems, "\n".join(problems)


def test_each_badge_links_to_the_test_that_proves_it(site):
    from lt_site.proofs import PROOFS

    proofs_page = re.sub(r"<[^>]+>", "", (site / "proofs.html").read_text(encoding="utf-8"))
    for proof in PROOFS:
        path, _, function = proof.test.partition("::")
        # A method of a class of shared tests is named Class.method: the page shows the method's def.
        owner, _, function = function.rpartition(".")
        assert f"def {function}(" in proofs_page, f"the proofs page does not show {proof.test}"
        test_file = (ROOT / path).read_text(encoding="utf-8")
        assert f"def {function}(" in test_file, f"{proof.test} does not exist"
        assert not owner or f"class {owner}" in test_file, f"{proof.test} does not exist"


def test_every_executed_page_says_what_it_was_executed_with(site):
    from lt_site.environment import describe

    expected = f"This page's outputs were computed with {describe()}."
    pages = [site / f"{chapter.docname}.html" for chapter in manifest.CHAPTERS]
    pages += sorted((site / "auto_examples").glob("plot_*.html"))
    assert len(pages) > len(manifest.CHAPTERS), "no gallery example page was built"
    missing = [
        page.relative_to(site).as_posix()
        for page in pages
        if expected not in " ".join(article(parse_html(page)).text().split())
    ]
    assert not missing, f"pages without the line {expected!r}:\n" + "\n".join(missing)


# ---------------------------------------------------------------------------
# Each family read top to bottom: its forward pass, every function once, in call order
# ---------------------------------------------------------------------------
#: The families: BERT and the model modules of the three branches' chapters (13 to 15).
FAMILIES = ["models.bert"] + [
    module
    for chapter in manifest.CHAPTERS
    if 13 <= chapter.number <= 15
    for module in chapter.modules
    if module.startswith("models.")
]


def top_to_bottom(page_path: Path) -> list[tuple[str, str, int, int, Element]]:
    """``(name, path, first line, last line, section)`` of each function a family's page shows, in order.

    ``path`` is relative to the package; ``section`` is the function's section (its runtime values included).
    """
    content = article(parse_html(page_path))
    shown = []
    for marker in content.find_all("span", "lt-ttb-function"):
        section = marker.parent
        while section is not None and section.tag != "section":
            section = section.parent
        assert section is not None, f"{page_path.name}: {marker.attrs} outside a section"
        first, last = (int(number) for number in marker.attrs["data-lines"].split("-"))
        shown.append((marker.attrs["data-name"], marker.attrs["data-path"], first, last, section))
    return shown


def test_every_module_that_registers_models_is_a_family():
    registering = [
        f"models.{path.stem}"
        for path in sorted((PACKAGE_DIR / "models").glob("*.py"))
        if path.stem != "registry" and re.search(r"^@?register\(", path.read_text(encoding="utf-8"), re.MULTILINE)
    ]
    assert registering, "no module of models/ registers a model"
    assert sorted(set(registering) - set(FAMILIES)) == []


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_reads_top_to_bottom_once_from_its_files(site, family):
    page_path = site / "top_to_bottom" / f"{manifest.PACKAGE}.{family}.html"
    assert page_path.is_file(), f"{family} has no page read top to bottom"
    shown = top_to_bottom(page_path)
    assert len(shown) >= 5, f"{page_path.name} shows {len(shown)} functions"
    names = [(path, name) for name, path, *_ in shown]
    assert len(names) == len(set(names)), f"{page_path.name} shows a function twice"
    wrong = []
    for name, path, first, last, section in shown:
        # Each function's lines, verbatim and numbered as in its file, with a link to its annotated source.
        lines = (PACKAGE_DIR / path).read_text(encoding="utf-8").splitlines()[first - 1 : last]
        spans = remove(section, "lt-rt").find_all("span", "lt-line")
        numbers = [int(span.attrs["data-line"]) for span in spans]
        if numbers != list(range(first, last + 1)) or [span.text().rstrip() for span in spans] != [
            line.rstrip() for line in lines
        ]:
            wrong.append(f"{name} ({path}:{first}-{last}) is not shown as its file has it")
        module = f"{manifest.PACKAGE}.{path.removesuffix('.py').replace('/', '.')}".removesuffix(".__init__")
        hrefs = [node.attrs.get("href", "") for node in section.find_all("a")]
        if not any(href.startswith(f"../source/{module}.html#") for href in hrefs):
            wrong.append(f"{name} does not link to the annotated source of {module}")
    assert not wrong, f"{page_path.name}:\n" + "\n".join(wrong)
    # Reachable: from the index of the pages (in the site's navigation) and from the family's annotated source.
    index_links = [
        a.attrs.get("href", "") for a in article(parse_html(site / "top_to_bottom" / "index.html")).find_all("a")
    ]
    assert page_path.name in index_links, f"top_to_bottom/index.html does not list {page_path.name}"
    source_page = parse_html(site / "source" / f"{manifest.PACKAGE}.{family}.html")
    assert f"../top_to_bottom/{page_path.name}" in [a.attrs.get("href", "") for a in source_page.find_all("a")]


def test_the_pages_read_top_to_bottom_are_in_the_navigation(site):
    assert "top_to_bottom/index.html" in nav_links(parse_html(site / "index.html"))


@pytest.mark.parametrize("family", FAMILIES)
def test_a_familys_shapes_are_its_own_examples_and_agree_with_the_comments(site, family):
    page_path = site / "top_to_bottom" / f"{manifest.PACKAGE}.{family}.html"
    content = article(parse_html(page_path))
    dims = {
        node.attrs["data-example"]: json.loads(node.attrs["data-dims"])
        for node in content.find_all("span", "lt-rt-dims")
    }
    assert list(dims) == [family.rsplit(".", 1)[-1]], f"{page_path.name}: the values of the examples {list(dims)}"
    example, sizes = next(iter(dims.items()))
    wrong, shapes = [], 0
    for _, path, _, _, section in top_to_bottom(page_path):
        comments = shape_comments((PACKAGE_DIR / path).read_text(encoding="utf-8"))
        for line in section.find_all("span", "lt-line"):
            for value in line.find_all("span", "lt-rt"):
                shapes += 1
                number = int(line.attrs["data-line"])
                shape = tuple(int(size) for size in re.findall(r"\d+", value.find_all("span", "lt-rt-shape")[0].text()))
                if value.attrs.get("data-example") != example:
                    wrong.append(f"{path}:{number}: a value of the {value.attrs.get('data-example')} example")
                elif number in comments and not agrees(comments[number], shape, sizes):
                    wrong.append(f"{path}:{number}: comment ({', '.join(comments[number])}) but the page shows {shape}")
    assert shapes, f"{page_path.name} shows no runtime value"
    assert not wrong, f"{page_path.name}:\n" + "\n".join(wrong)


def test_qwen3_reads_its_stack_layer_attention_and_kernel_in_call_order(site):
    shown = top_to_bottom(site / "top_to_bottom" / f"{manifest.PACKAGE}.models.qwen3.html")
    order = [(path, name) for name, path, *_ in shown]
    expected = [
        ("models/llama.py", "LlamaModel.forward"),
        ("parts/stack.py", "DecoderStack.run_stack"),
        ("parts/stack.py", "DecoderLayer.forward"),
        ("parts/attention.py", "Attention.forward"),
        ("models/qwen3.py", "Qwen3Attention.position"),
        ("core/kernels.py", "attend"),
        ("core/kernels.py", "scaled_dot_product_attention"),
    ]
    missing = [function for function in expected if function not in order]
    assert not missing, f"the Qwen3 page does not show {missing}; it shows {order}"
    positions = [order.index(function) for function in expected]
    assert positions == sorted(positions), [order[position] for position in sorted(positions)]
    # Qwen3's own change: the norms on each head's queries and keys, in the lines of its position().
    position = next(section for name, _, _, _, section in shown if name == "Qwen3Attention.position")
    code = remove(position, "lt-rt").text()
    assert "self.q_norm(query)" in code and "self.k_norm(key)" in code, code


# ---------------------------------------------------------------------------
# The lesson in front: what a reader sees open teaches, the checks run out of the way
# ---------------------------------------------------------------------------
#: The most lines a code cell shown open may have.
MAX_SHOWN_LINES = 30
#: Tags that keep a cell's code out of sight: behind a toggle (hide-*) or off the page (remove-*).
HIDDEN_TAGS = ("tag_hide-input", "tag_hide-cell", "tag_remove-input", "tag_remove-cell")


def _code_text(block: Element) -> str:
    return html_module.unescape(block.text()).strip("\n")


def shown_code(page_path: Path) -> list[str]:
    """The code a reader sees open on a built page: a chapter's cells not hidden by a tag, a gallery's blocks."""
    content = remove(article(parse_html(page_path)), "lt-rt")
    cells = content.find_all("div", "cell")
    if cells:
        shown = [cell for cell in cells if not any(tag in cell.classes for tag in HIDDEN_TAGS)]
        return [
            _code_text(pre)
            for cell in shown
            for block in cell.find_all("div", "cell_input")
            for pre in block.find_all("pre")
        ]
    # A sphinx-gallery page: every block of the script is shown.
    return [_code_text(pre) for block in content.find_all("div", "highlight-Python") for pre in block.find_all("pre")]


def _lesson_pages() -> list[str]:
    pages = [f"{chapter.docname}" for chapter in manifest.CHAPTERS]
    return pages + [f"auto_examples/{path.stem}" for path in sorted((ROOT / "gallery").glob("plot_*.py"))]


@pytest.mark.parametrize("page", _lesson_pages())
def test_no_code_shown_open_checks_glues_or_runs_long(site, page):
    shown = shown_code(site / f"{page}.html")
    assert shown, f"{page}: no code shown at all"
    problems = []
    for code in shown:
        first = code.splitlines()[0] if code else ""
        if re.search(r"\bglue\(", code):
            problems.append(f"a glue( call shown open, in the cell starting {first!r}")
        if re.search(r"^\s*assert\b", code, flags=re.MULTILINE):
            problems.append(f"an assert statement shown open, in the cell starting {first!r}")
        if code.count("\n") + 1 > MAX_SHOWN_LINES:
            problems.append(f"a cell of {code.count(chr(10)) + 1} lines shown open, starting {first!r}")
    assert not problems, f"{page}:\n" + "\n".join(problems)


# ---------------------------------------------------------------------------
# "What if" panels: both variants and their difference, executed
# ---------------------------------------------------------------------------
#: The chapters that show what readers confuse most both ways: the padding mask (04), the layer
#: norm's place (06), the causal mask (10).
WHAT_IF_CHAPTERS = ["chapters/04_bert_self_attention", "chapters/06_feed_forward_and_layer_norm", "chapters/10_decoder"]


def tab_sets(path: Path) -> list[list[tuple[str, int]]]:
    """Each ``{tab-set}`` of a MyST page: per ``{tab-item}``, its label and how many ``{glue:figure}`` it shows."""
    sets: list[list[tuple[str, int]]] = []
    inside = False
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if re.match(r"^:{3,}\{tab-set\}", stripped):
            sets.append([])
            inside = True
        elif inside and (match := re.match(r"^:{3,}\{tab-item\}\s*(.+)$", stripped)):
            sets[-1].append((match.group(1).strip(), 0))
        elif inside and sets[-1] and re.match(r"^`{3,}\{glue:figure\}", stripped):
            label, count = sets[-1][-1]
            sets[-1][-1] = (label, count + 1)
        elif inside and re.fullmatch(r"::::+", stripped) and len(stripped) >= 4:
            inside = False
    return sets


def test_the_what_if_chapters_have_their_panels():
    for docname in WHAT_IF_CHAPTERS:
        panels = tab_sets(ROOT / "docs" / f"{docname}.md")
        assert panels, f"{docname} has no what-if panel ({{tab-set}})"
        for panel in panels:
            labels = [label for label, _ in panel]
            assert len(panel) == 3 and labels[-1] == "Difference", f"{docname}: a panel's tabs are {labels}"
            assert all(count >= 1 for _, count in panel), f"{docname}: a tab without a figure: {panel}"


@pytest.mark.parametrize("docname", WHAT_IF_CHAPTERS)
def test_each_what_if_tab_shows_its_executed_figures(site, docname):
    expected = tab_sets(ROOT / "docs" / f"{docname}.md")
    page = article(parse_html(site / f"{docname}.html"))
    built = page.find_all("div", "sd-tab-set")
    assert len(built) == len(expected), f"{docname}: {len(built)} tab sets built, {len(expected)} written"
    for written, tab_set in zip(expected, built, strict=True):
        labels = [" ".join(label.text().split()) for label in tab_set.find_all("label")]
        contents = tab_set.find_all("div", "sd-tab-content")
        assert labels == [label for label, _ in written], f"{docname}: tabs {labels}"
        for (label, figures), content in zip(written, contents, strict=True):
            images = [img for img in content.find_all("img") if img.attrs.get("src")]
            assert len(images) == figures, f"{docname}, tab {label!r}: {len(images)} images, {figures} glued"
            # Every number glued into the text was computed: no glue key left unresolved.
            text = " ".join(content.text().split())
            assert "glue" not in text and text, f"{docname}, tab {label!r}: {text[:200]!r}"


def test_no_page_loads_font_awesomes_script(site):
    """The theme's icons come from its stylesheet's fonts; its 1.6 MB script is left out (docs/_ext/lean_theme.py)."""
    # The pages of this build (the search index names them; an older build's leftovers are not among them).
    index = (site / "searchindex.js").read_text("utf-8")
    docnames = json.loads(re.search(r'"docnames":(\[.*?\])', index).group(1))
    assert len(docnames) > 20, f"only {len(docnames)} pages in {site}"
    loading = [name for name in docnames if "scripts/fontawesome.js" in (site / f"{name}.html").read_text("utf-8")]
    assert not loading, f"{len(loading)} pages still load fontawesome.js, among them {loading[:3]}"
