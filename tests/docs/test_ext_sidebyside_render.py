"""The side-by-side renderer: blocks to docutils nodes, without a Sphinx build.

Comments are not reStructuredText; the renderer recognises ``$math$``,
backticks and roles in them.  Each block is one row: prose left, code right.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("docutils", reason="docutils is not installed (the docs extras); the renderer is not tested")

from docutils import nodes  # noqa: E402
from sidebyside_parse import split_module  # noqa: E402
from sidebyside_render import (  # noqa: E402
    LEXER,
    block_node,
    code_node,
    comment_nodes,
    flatten_sections,
    intro_nodes,
    line_spans,
    listing_section,
    optional_api_link,
)


def kinds(paragraph: nodes.Element) -> list[tuple[str, str]]:
    return [(type(child).__name__, child.astext()) for child in paragraph.children]


def test_dollar_math_in_a_comment_is_a_math_node():
    (paragraph,) = comment_nodes(r"Scores $Q K^\top / \sqrt{D}$, one per key.")
    assert kinds(paragraph) == [("Text", "Scores "), ("math", r"Q K^\top / \sqrt{D}"), ("Text", ", one per key.")]


def test_a_math_role_in_a_comment_is_a_math_node():
    (paragraph,) = comment_nodes(":math:`W^O`, mixing the heads.")
    assert kinds(paragraph) == [("math", "W^O"), ("Text", ", mixing the heads.")]


def test_stars_around_words_are_emphasis_and_stars_between_factors_are_not():
    (paragraph,) = comment_nodes("LayerNorm *after* it, *not before*; a * b * c and x*y*z stay.")
    assert [node.astext() for node in paragraph.findall(nodes.emphasis)] == ["after", "not before"]
    assert paragraph.astext() == "LayerNorm after it, not before; a * b * c and x*y*z stay."


def test_a_single_dollar_sign_is_not_math():
    (paragraph,) = comment_nodes("It costs $5, not more.")
    assert not list(paragraph.findall(nodes.math))


def test_backticks_in_a_comment_are_code():
    (paragraph,) = comment_nodes("Call `softmax` on ``scores``.")
    assert kinds(paragraph) == [
        ("Text", "Call "),
        ("literal", "softmax"),
        ("Text", " on "),
        ("literal", "scores"),
        ("Text", "."),
    ]


def test_a_role_in_a_comment_shows_as_sphinx_shows_its_reference():
    (paragraph,) = comment_nodes(
        "See :func:`~pkg.masks.causal_mask`, :class:`pkg.Model` and :mod:`the masks <pkg.masks>`."
    )
    literals = [child.astext() for child in paragraph.findall(nodes.literal)]
    assert literals == ["causal_mask", "pkg.Model", "the masks"]


def test_text_that_is_not_rest_stays_as_written():
    (paragraph,) = comment_nodes("a * b and x_ and |y|")
    assert paragraph.astext() == "a * b and x_ and |y|"


def test_blank_comment_lines_and_list_items_start_paragraphs():
    paragraphs = comment_nodes("First line\ncontinues.\n\nSteps:\n1) one\n- two")
    assert [p.astext() for p in paragraphs] == ["First line continues.", "Steps:", "1) one", "- two"]


def test_the_code_node_keeps_the_source_line_of_every_line():
    node = code_node([(10, "x = 1"), (11, ""), (12, "y = x  # (B, T)")])
    assert isinstance(node, nodes.literal_block)
    assert node.astext() == "x = 1\n\ny = x  # (B, T)"
    assert node["language"] == LEXER
    assert node["source_lines"] == [10, 11, 12]


HIGHLIGHTED = (
    '<div class="highlight"><pre><span></span><span class="k">def</span> <span class="nf">f</span>():\n'
    '    <span class="k">return</span> <span class="mi">1</span>  <span class="c1"># ()</span>\n'
    "</pre></div>\n"
)


def test_each_highlighted_line_becomes_a_span_with_its_source_line_and_indentation():
    html = line_spans(HIGHLIGHTED, [41, 42])
    assert html.startswith('<div class="highlight"><pre><span></span><span class="lt-line" data-line="41"')
    assert '<span class="lt-line" data-line="41" style="--indent: 0ch"><span class="k">def</span>' in html
    assert '<span class="lt-line" data-line="42" style="--indent: 4ch">    <span class="k">return</span>' in html
    # The text, newlines included, is what it was.
    assert re.sub(r"<[^>]+>", "", html) == re.sub(r"<[^>]+>", "", HIGHLIGHTED)


def test_lines_that_do_not_match_their_numbers_are_left_as_they_are():
    assert line_spans(HIGHLIGHTED, [41]) == HIGHLIGHTED
    assert line_spans("<p>no pre</p>", [1]) == "<p>no pre</p>"


def test_a_block_is_a_row_of_prose_and_code_with_an_id_for_its_first_line():
    source = 'class Head:\n    """One head."""\n\n    # Project $x W$.\n    y = 1  # (B, T, D)\n'
    module = split_module(source)
    seen = []

    def render_docstring(prose):
        seen.append(prose.name)
        return [nodes.paragraph(prose.text, prose.text)]

    rows = [block_node(block, "pkg.attention", render_docstring) for block in module.blocks]
    assert [row["ids"] for row in rows] == [["pkg-attention-L1"], ["pkg-attention-L5"]]
    first, second = rows
    prose, code = first.children
    assert prose["classes"] == ["lt-sbs-prose"] and code["classes"] == ["lt-sbs-code"]
    # The class is named (a link to its API entry when there is one) above its docstring.
    (link,) = prose.findall(optional_api_link)
    assert link["target"] == "pkg.attention.Head" and link["kind"] == "obj"
    assert seen == ["Head"]
    assert code.astext() == "class Head:"
    assert list(second.children[0].findall(nodes.math))[0].astext() == "x W"
    # Code keeps its indentation: a method body reads as one.
    assert second.children[1].astext() == "    y = 1  # (B, T, D)"


def test_a_block_without_code_has_an_empty_code_column():
    (block,) = split_module("# Only a comment.\n").blocks
    row = block_node(block, "m", lambda prose: [])
    assert len(row.children[1]) == 0


def test_the_listing_section_holds_every_row_in_order():
    module = split_module("# One.\na = 1\n# Two.\nb = 2\n")
    section = listing_section(module.blocks, "pkg.m", lambda prose: [])
    assert section["ids"] == ["pkg-m-code"]
    assert section[0].astext() == "The code, line by line"
    assert [row["ids"][0] for row in section.findall(nodes.container) if "lt-sbs-block" in row["classes"]] == [
        "pkg-m-L2",
        "pkg-m-L4",
    ]


def test_the_introduction_keeps_sections_and_boxes_the_text_between_them():
    section = nodes.section()
    section += nodes.title("Heading", "Heading")
    children = [nodes.paragraph("a", "a"), nodes.paragraph("b", "b"), section, nodes.paragraph("c", "c")]
    result = intro_nodes(children)
    assert [type(node).__name__ for node in result] == ["container", "section", "container"]
    assert result[0]["classes"] == ["lt-sbs-intro"] and len(result[0]) == 2


def test_sections_inside_a_column_become_rubrics():
    holder = nodes.container()
    section = nodes.section()
    section += nodes.title("Returns", "Returns")
    section += nodes.paragraph("text", "text")
    holder += section
    flatten_sections(holder)
    assert [type(node).__name__ for node in holder.children] == ["rubric", "paragraph"]
