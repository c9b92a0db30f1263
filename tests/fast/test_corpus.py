"""The corpus's training and held-out text: whole topics of Python's documentation, split by one fixed rule."""

from __future__ import annotations

from pydoc_data.topics import topics

import pytest

from literate_transformer.fast.corpus import HELD_OUT_EVERY, python_doc_text, python_doc_topics


def test_the_first_topic_of_every_ten_by_name_is_held_out():
    # Each distinct page once, under its first name ("else" and "if" are one page).
    names = [name for name in sorted(topics) if all(topics[other] != topics[name] for other in topics if other < name)]
    assert "else" in names and "if" not in names and len(names) == len(set(topics.values()))
    assert python_doc_topics() == names
    assert python_doc_topics("validation") == names[::HELD_OUT_EVERY]
    assert set(python_doc_topics("train")) == set(names) - set(names[::HELD_OUT_EVERY])


def test_no_held_out_page_is_in_the_training_text():
    train, validation = python_doc_text("train"), python_doc_text("validation")
    for name in python_doc_topics("validation"):
        assert topics[name] in validation and topics[name] not in train, name
    for name in python_doc_topics("train"):
        assert topics[name] in train, name


def test_the_pages_are_joined_whole_by_one_newline_each():
    names = python_doc_topics()
    train, validation, whole = python_doc_text("train"), python_doc_text("validation"), python_doc_text()
    assert len(whole) == sum(len(topics[name]) for name in names) + len(names) - 1
    assert len(train) + len(validation) + 1 == len(whole)
    assert whole.startswith(topics[names[0]] + "\n") and whole.endswith("\n" + topics[names[-1]])


def test_the_held_out_text_is_a_small_part_of_the_corpus():
    share = len(python_doc_text("validation")) / len(python_doc_text())
    assert 0.04 < share < 0.2


def test_an_unknown_split_is_refused_naming_split():
    with pytest.raises(ValueError, match=r"split must be one of \('train', 'validation', 'all'\), got 'test'"):
        python_doc_text("test")
