"""The documentation-topics task (literate_transformer.tasks): labels from the topics' parts, prose only, a split
that is deterministic, disjoint, stratified and keeps near-duplicates on one side; bad arguments refused by name."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from literate_transformer import tasks


@pytest.fixture(scope="module")
def task() -> tasks.TextClassification:
    return tasks.topic_classification()


def _words(sentence: str) -> frozenset[str]:
    return frozenset(re.findall(r"\w+", sentence.lower()))


def test_the_same_arguments_give_the_same_split_and_another_seed_another(task):
    assert tasks.topic_classification() == task
    other = tasks.topic_classification(seed=1)
    assert set(other.held_out_sentences) != set(task.held_out_sentences)
    assert set(other.held_out_sentences + other.train_sentences) == set(task.held_out_sentences + task.train_sentences)


def test_no_sentence_is_in_both_parts_or_twice_in_one(task):
    assert not set(task.train_sentences) & set(task.held_out_sentences)
    everything = task.train_sentences + task.held_out_sentences
    assert len(set(everything)) == len(everything)


def test_no_held_out_sentence_nearly_repeats_a_training_sentence_of_its_label(task):
    training: dict[int, list[frozenset[str]]] = {}
    for sentence, label in zip(task.train_sentences, task.train_labels, strict=True):
        training.setdefault(label, []).append(_words(sentence))
    repeats = [
        sentence
        for sentence, label in zip(task.held_out_sentences, task.held_out_labels, strict=True)
        for words in [_words(sentence)]
        if any(len(words & other) >= tasks.NEAR_DUPLICATE * len(words | other) for other in training[label])
    ]
    assert not repeats, repeats[:3]


def test_every_label_is_held_out_in_its_share(task):
    train, held_out = Counter(task.train_labels), Counter(task.held_out_labels)
    assert sorted(train) == sorted(held_out) == list(range(len(task.label_names)))
    for label, name in enumerate(task.label_names):
        share = held_out[label] / (held_out[label] + train[label])
        assert 0.2 <= share < 0.3, f"{name}: {share:.2f} held out"
        assert train[label] >= 100, name


def test_each_sentences_label_is_the_part_of_its_topic(task):
    assert task.label_names == tuple(tasks.LABELS)
    for labels, topics in ((task.train_labels, task.train_topics), (task.held_out_labels, task.held_out_topics)):
        for label, topic in zip(labels, topics, strict=True):
            assert topic in tasks.LABELS[task.label_names[label]], (label, topic)


def test_only_prose_is_kept_no_title_grammar_rule_or_code(task):
    for sentence in task.train_sentences + task.held_out_sentences:
        assert sentence[0].isupper() and sentence.endswith(".") and len(sentence.split()) >= tasks.MIN_WORDS
        assert "::=" not in sentence and ">>>" not in sentence and "*****" not in sentence, sentence


def test_a_page_under_two_names_is_read_once_under_the_first(task):
    from pydoc_data.topics import topics as pages

    names = sorted(name for names in tasks.LABELS.values() for name in names if name in pages)
    repeated = [later for index, later in enumerate(names) if pages[later] in {pages[name] for name in names[:index]}]
    if not repeated:
        pytest.skip('this Python\'s topics repeat no page (in Python 3.11, "if" repeats "else")')
    assert not set(repeated) & set(task.train_topics + task.held_out_topics)


def test_the_lists_returned_are_the_callers_own(task):
    first = tasks.topic_classification()
    first.train_sentences.clear()
    assert tasks.topic_classification().train_sentences == task.train_sentences


@pytest.mark.parametrize("held_out", [0, 1, 1.5, -0.2, "0.2", True])
def test_a_held_out_share_outside_zero_to_one_is_refused_naming_held_out(held_out):
    with pytest.raises(ValueError, match="held_out must be a share in"):
        tasks.topic_classification(held_out=held_out)


def test_a_held_out_share_that_empties_the_training_part_of_a_label_is_refused_naming_it():
    with pytest.raises(ValueError, match="held_out=0.999 leaves the label 'statements' with no sentence"):
        tasks.topic_classification(held_out=0.999)


@pytest.mark.parametrize("seed", ["0", 1.0, None])
def test_a_seed_that_is_not_an_int_is_refused_naming_seed(seed):
    with pytest.raises(ValueError, match="seed must be an int"):
        tasks.topic_classification(seed=seed)
