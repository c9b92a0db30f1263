"""The family tree is read off the family modules: parents from the classes they subclass, changes from theirs."""

from __future__ import annotations

import sys
import types

import pytest
from torch import nn

from literate_transformer.family_tree import family_tree
from literate_transformer.models import bert


@pytest.fixture
def child_family(monkeypatch):
    """A family module that subclasses BERT's embeddings and writes one new class, as a real family would."""
    module = types.ModuleType("literate_transformer.models.child", "Child: BERT with other embeddings.")

    class ChildEmbeddings(bert.BertEmbeddings):
        pass

    class ChildPooler(nn.Module):
        pass

    for cls in (ChildEmbeddings, ChildPooler):
        cls.__module__ = module.__name__
        setattr(module, cls.__name__, cls)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return "models.child"


def test_a_family_hangs_from_the_family_whose_classes_it_subclasses(child_family):
    tree = family_tree(["models.bert", child_family])
    bert_node, child = tree.nodes
    assert (bert_node.name, bert_node.parent) == ("BERT", None)
    assert (child.name, child.parent, child.changes) == ("Child", "models.bert", ["Embeddings", "Pooler"])


def test_a_family_hangs_from_its_nearest_family_and_its_prefix_is_whole_words():
    # GPT-Neo's classes descend from GPT-3's, which descend from GPT-2's and GPT's: its parent is the nearest.
    tree = family_tree(["models.openai_gpt", "models.gpt2", "models.gpt3", "models.gpt_neo"])
    assert [(node.name, node.parent) for node in tree.nodes] == [
        ("GPT", None),
        ("GPT-2", "models.openai_gpt"),
        ("GPT-3", "models.gpt2"),
        ("GPT-Neo", "models.gpt3"),
    ]
    # The prefix is every whole word the class names share: OpenAIGPT, GPT2 (not GPT2M of GPT2MLP and GPT2Model).
    assert tree.nodes[0].changes == ["Conv1D", "Attention", "MLP", "Block", "Model", "LMHeadModel"]
    assert tree.nodes[1].changes == ["Attention", "MLP", "Block", "Model", "LMHeadModel"]


def test_the_drawing_shows_every_family_and_what_it_changes(child_family):
    svg = family_tree(["models.bert", child_family]).svg()
    assert svg.startswith("<svg") and svg.count("<rect") == 2 and svg.count("<line") == 1
    assert ">Child<" in svg and ">Embeddings<" in svg and "Child from models.bert" in svg


def test_beside_marks_the_lines_a_family_changes_and_only_those():
    from literate_transformer.family_tree import beside

    def parent(x):
        y = x + 1
        return y * 2

    def child(x):
        y = x + 1
        return y * 3

    shown = beside(parent, child)
    # The name line and the last line differ; the line they share is not marked.
    assert shown.changed == {0, 2} and shown.child[2].strip() == "return y * 3"
    html = shown._repr_html_()
    assert html.count('class="lt-changed"') == 4  # two lines that went from the parent, two that came


def test_beside_shows_the_changes_with_their_context_folds_the_rest_and_links_the_whole():
    from literate_transformer.family_tree import MAX_LINES, beside, shown_lines
    from literate_transformer.models import bert, distilbert, gpt2, openai_gpt

    shown = beside(bert.BertLayer.forward, distilbert.DistilBertTransformerBlock.forward)
    # Docstrings are not compared: no line of either column is one of them.
    assert not any('"""' in line for line in shown.parent + shown.child)
    html = shown._repr_html_()
    assert '<a href="../source/literate_transformer.models.bert.html">models.bert.BertLayer.forward</a>' in html
    assert '<a href="../source/literate_transformer.models.distilbert.html">' in html
    # A long unchanged run is one note that counts its lines; every changed line is shown.
    rows = shown_lines(30, {2, 25})
    assert rows == [0, 1, 2, 3, 4, "  ⋯ 18 lines the same", 23, 24, 25, 26, 27, "  ⋯ 2 lines the same"]
    # No column runs past the limit, the whole class included.
    whole = beside(openai_gpt.OpenAIGPTBlock, gpt2.GPT2Block)
    for lines, marked in ((whole.parent, whole.parent_changed), (whole.child, whole.changed)):
        assert len(shown_lines(len(lines), marked)) <= MAX_LINES
