"""The side-by-side parser: a module's source cut into its docstring and blocks of prose and code.

``sidebyside_parse`` is a pure function of the source text; these tests
feed it strings.  No Sphinx, no docutils.
"""

from __future__ import annotations

import doctest
import subprocess
import sys
import textwrap

import sidebyside_parse
from sidebyside_parse import docstring_summary, split_module


def cut(source: str):
    return split_module(textwrap.dedent(source).lstrip("\n"))


def shown(module):
    """Each block as (prose kinds and texts, code text)."""
    return [([(prose.kind, prose.text) for prose in block.prose], block.code_text()) for block in module.blocks]


def test_the_parser_imports_neither_sphinx_nor_docutils():
    code = "import sys, sidebyside_parse; print(sorted(m for m in sys.modules if m.split('.')[0] in ('sphinx', 'docutils')))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=sidebyside_parse.__file__.rsplit("/", 1)[0],
    )
    assert result.stdout.strip() == "[]"


def test_the_module_docstring_is_the_introduction_not_a_block():
    module = cut('''
        """Title.

        The article.
        """

        x = 1
    ''')
    assert module.docstring == "Title.\n\nThe article."
    assert module.docstring_lines == (1, 4)
    assert shown(module) == [([], "x = 1")]


def test_a_run_of_comments_starts_a_block_and_explains_the_code_below_it():
    module = cut("""
        a = 1
        # Scale the scores
        # by the head size.
        b = a / 8  # (B, H, T, S)
        c = b + 1

        # Then normalise.
        d = c.softmax(-1)
    """)
    assert shown(module) == [
        ([], "a = 1"),
        ([("comment", "Scale the scores\nby the head size.")], "b = a / 8  # (B, H, T, S)\nc = b + 1"),
        ([("comment", "Then normalise.")], "d = c.softmax(-1)"),
    ]


def test_trailing_comments_stay_in_the_code():
    module = cut("""
        scores = q @ k.T  # (B, H, T, S)
    """)
    assert shown(module) == [([], "scores = q @ k.T  # (B, H, T, S)")]


def test_comment_lines_separated_by_a_blank_line_are_two_pieces_of_prose():
    module = cut("""
        # First thought.

        # Second thought.
        x = 1
    """)
    assert [prose.text for prose in module.blocks[0].prose] == ["First thought.", "Second thought."]


def test_docstrings_are_prose_named_for_their_object_and_comments_are_not():
    module = cut('''
        class Head:
            """One attention head."""

            def forward(self, x):
                """Attend.

                Args:
                    x: The input.
                """
                # Project.
                return x
    ''')
    prose = [(p.kind, p.name, p.what, p.owner_class) for block in module.blocks for p in block.prose]
    assert prose == [
        ("docstring", "Head", "class", "Head"),
        ("docstring", "Head.forward", "method", "Head"),
        ("comment", None, "attribute", None),
    ]
    # The docstring is cleaned (indentation removed), its quotes are not code.
    assert module.blocks[1].prose[0].text == "Attend.\n\nArgs:\n    x: The input."
    assert '"""' not in "".join(block.code_text() for block in module.blocks)


def test_a_function_docstring_is_a_function_and_a_nested_one_keeps_its_path():
    module = cut('''
        def outer():
            """Outer."""

            def inner():
                """Inner."""
    ''')
    prose = [(p.name, p.what) for block in module.blocks for p in block.prose]
    assert prose == [("outer", "function"), ("outer.inner", "function")]


def test_a_decorated_definition_starts_its_block_at_the_first_decorator():
    module = cut('''
        x = 1


        @dataclass
        @other
        class Config:
            """The settings."""

            size: int = 4
    ''')
    assert shown(module) == [
        ([], "x = 1"),
        ([("docstring", "The settings.")], "@dataclass\n@other\nclass Config:\n\n    size: int = 4"),
    ]


def test_tool_comments_stay_with_the_code():
    module = cut("""
        #!/usr/bin/env python
        # noqa: E501
        # type: ignore
        # fmt: off
        # A real comment.
        x = 1
    """)
    assert shown(module) == [
        ([], "#!/usr/bin/env python\n# noqa: E501\n# type: ignore\n# fmt: off"),
        ([("comment", "A real comment.")], "x = 1"),
    ]


def test_attribute_docstrings_and_hash_colon_comments_are_prose():
    module = cut('''
        #: The heads.
        HEADS = 12
        WIDTH: int = 64
        """The width of one head."""
    ''')
    prose = [(p.kind, p.text, p.name, p.what) for block in module.blocks for p in block.prose]
    assert prose == [
        ("comment", "The heads.", None, "attribute"),
        ("docstring", "The width of one head.", "WIDTH", "attribute"),
    ]
    # The attribute docstring's block starts at its assignment.
    assert module.blocks[-1].code_text() == "WIDTH: int = 64"


def test_a_string_that_is_part_of_an_expression_is_code():
    module = cut('''
        x = """not a
        docstring"""
        print("inline")  # a call
    ''')
    assert shown(module) == [([], 'x = """not a\ndocstring"""\nprint("inline")  # a call')]


def test_every_code_line_keeps_its_line_number():
    module = cut("""
        # Comment.
        a = 1

        b = 2
    """)
    assert module.blocks[0].code_lines() == [(2, "a = 1"), (3, ""), (4, "b = 2")]
    assert module.blocks[0].first_code_line() == 2


def test_a_module_without_a_docstring_has_an_empty_introduction():
    module = cut("""
        x = 1
    """)
    assert module.docstring == "" and module.docstring_lines is None


def test_the_summary_is_the_docstrings_first_line_with_roles_as_code():
    assert docstring_summary('"""Masks: :func:`~pkg.masks.causal_mask`, :mod:`pkg.core`, :class:`it <pkg.M>`."""') == (
        "Masks: ``causal_mask``, ``pkg.core``, ``it``"
    )
    assert docstring_summary("x = 1") == ""
    assert docstring_summary("def (") == ""


def test_the_examples_in_the_parsers_docstrings_hold():
    failures, tried = doctest.testmod(sidebyside_parse)
    assert tried and not failures
