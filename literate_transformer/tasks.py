r"""A real task to fine-tune on, offline: which part of Python's documentation does a sentence come from?

Python ships the text of its reference documentation's topics, the pages
``help("if")`` shows, in ``pydoc_data.topics`` (79 topics in Python 3.11; the
text is the running Python's, so another release has other pages).  Each
topic comes from one page of the documentation, and the pages fall into a
few parts a reader tells apart at once.  :func:`topic_classification` labels
each sentence of four of them by its part:

* ``statements``: *The Python Language Reference*, chapters 7 (Simple
  statements) and 8 (Compound statements); for example ``if``, ``for``,
  ``try``, ``with``, ``import``;
* ``expressions``: *The Python Language Reference*, chapter 6 (Expressions);
  for example ``calls``, ``comparisons``, ``lambda``, ``slicings``;
* ``special methods``: *The Python Language Reference*, section 3.3 (Special
  method names: the data model's ``__init__``, ``__getattr__``,
  ``__add__``...); for example ``customization``, ``attribute-access``;
* ``built-in types``: *The Python Standard Library*, Built-in Types (the
  methods of ``str``, ``list``, ``dict``; truth; modules, functions,
  ``None``); for example ``string-methods``, ``typesmapping``.

:data:`LABELS` lists every topic of each label.  The other topics are left
out, each for a reason: two repeat whole other topics (``compound`` holds
every compound statement's page, ``specialnames`` every special method's);
the standard type hierarchy and "objects, values and types" (``types``,
``objects``, data model 3.1 and 3.2) describe the built-in types too, and
would blur the line between two labels; and the rest are parts too small to
hold out a share of (the execution model, the lexical analysis, the format
mini-language, the debugger).

The sentences
-------------
Each topic is cut into sentences by :mod:`~literate_transformer.fast.corpus`'s
rule (paragraphs at blank lines, whitespace collapsed, a sentence ending at
``.``, ``!`` or ``?`` followed by a capital letter), and only prose is kept: a
sentence that starts with a capital letter, ends with a full stop and has at
least :data:`MIN_WORDS` words.  That drops the titles (which name the topic,
and so the label), the grammar's rules (``if_stmt ::= ...``) and the code
examples.  A sentence that two topics share (``"else"`` is ``"if"``'s page
under a second name) is kept once, under the first topic by name.

The split: near-duplicates stay together
----------------------------------------
The documentation repeats its templates: ``"Return a copy of the string
with all the cased characters converted to uppercase."`` and ``"... to
lowercase."`` differ by one word.  A split that put one in training and the
other in the held-out part would measure memory, not reading.  So the
sentences of each label are first grouped: two sentences whose sets of
words overlap by at least :data:`NEAR_DUPLICATE` (Jaccard's index, words
shared over words in either) fall in one group, and so do their groups.
Then each label's groups are shuffled with ``seed`` and taken in turn into
the held-out part until it holds ``held_out`` of the label's sentences; the
rest train.  So no held-out sentence nearly repeats a training sentence of
its label, and every label is in both parts in its own proportion.  (Held
out by whole topics instead, the question becomes "which part is a page
you have never seen from?", much harder for every method: unseen pages
bring their own vocabulary.)

>>> task = topic_classification()
>>> task.label_names
('statements', 'expressions', 'special methods', 'built-in types')
>>> sorted(set(task.train_labels)) == sorted(set(task.held_out_labels)) == [0, 1, 2, 3]
True
>>> set(task.train_sentences) & set(task.held_out_sentences)
set()
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Sequence
from functools import cache

__all__ = ["LABELS", "MIN_WORDS", "NEAR_DUPLICATE", "TextClassification", "topic_classification"]

#: Each label and its topics (the names ``pydoc_data.topics`` gives the pages); a topic the running Python lacks
#: is skipped.
LABELS: dict[str, tuple[str, ...]] = {
    "statements": (
        *("assert", "assignment", "augassign", "async", "break", "class", "continue", "del", "else", "for"),
        *("function", "global", "if", "import", "nonlocal", "pass", "raise", "return", "try", "while", "with"),
        "yield",
    ),
    "expressions": (
        *("atom-identifiers", "atom-literals", "attribute-references", "await", "binary", "bitwise", "booleans"),
        *("calls", "comparisons", "conversions", "dict", "exprlists", "in", "lambda", "lists", "operator-summary"),
        *("power", "shifting", "slicings", "subscriptions", "unary"),
    ),
    "special methods": (
        *("attribute-access", "callable-types", "context-managers", "customization", "numeric-types"),
        "sequence-types",
    ),
    "built-in types": (
        *("bltin-code-objects", "bltin-ellipsis-object", "bltin-null-object", "bltin-type-objects", "specialattrs"),
        *("string-methods", "truth", "typesfunctions", "typesmapping", "typesmethods", "typesmodules", "typesseq"),
        "typesseq-mutable",
    ),
}

#: The fewest words a kept sentence has.
MIN_WORDS = 5
#: Two sentences of a label are near-duplicates when this share of their words (Jaccard's index) is common.
NEAR_DUPLICATE = 0.6

# A sentence ends at ., ! or ? followed by white space and a capital letter (fast.corpus's rule).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@dataclasses.dataclass(frozen=True)
class TextClassification:
    """A labelled text task in two parts, each in a seeded random order (so a batch cut from the front mixes the
    labels).

    Attributes:
        label_names: The labels' names; a label is its index here.
        train_sentences: The training sentences.
        train_labels: Their labels, ints in ``[0, len(label_names))``.
        train_topics: The topic (``pydoc_data.topics``' name) each came from.
        held_out_sentences: The sentences training never sees.
        held_out_labels: Their labels.
        held_out_topics: Their topics.
    """

    label_names: tuple[str, ...]
    train_sentences: list[str]
    train_labels: list[int]
    train_topics: list[str]
    held_out_sentences: list[str]
    held_out_labels: list[int]
    held_out_topics: list[str]


def _is_prose(sentence: str) -> bool:
    """A sentence of prose: a capital first, a full stop last, at least MIN_WORDS words."""
    return sentence[:1].isupper() and sentence.endswith(".") and len(sentence.split()) >= MIN_WORDS


@cache
def _sentences() -> dict[str, tuple[tuple[str, str], ...]]:
    """Each label's kept sentences with their topics, each sentence once (under the first topic by name)."""
    from pydoc_data.topics import topics

    first_topic: dict[str, str] = {}
    for name in sorted(name for names in LABELS.values() for name in names if name in topics):
        for paragraph in re.split(r"\n\s*\n", topics[name]):
            for sentence in _SENTENCE_END.split(" ".join(paragraph.split())):
                if _is_prose(sentence):
                    first_topic.setdefault(sentence, name)
    return {
        label: tuple((sentence, topic) for sentence, topic in first_topic.items() if topic in names)
        for label, names in LABELS.items()
    }


def _near_duplicate_groups(sentences: Sequence[str]) -> list[list[int]]:
    """The sentences' indices in groups: two whose word sets overlap by NEAR_DUPLICATE or more share a group."""
    words = [frozenset(re.findall(r"\w+", sentence.lower())) for sentence in sentences]
    parent = list(range(len(sentences)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    for i in range(len(words)):
        for j in range(i):
            # Jaccard's index |a & b| / |a | b|, compared without dividing.
            if len(words[i] & words[j]) >= NEAR_DUPLICATE * len(words[i] | words[j]):
                parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for index in range(len(sentences)):
        groups.setdefault(root(index), []).append(index)
    return list(groups.values())


@cache
def _split(held_out: float, seed: int) -> TextClassification:
    rng = random.Random(seed)
    parts: dict[str, list[tuple[str, int, str]]] = {"train": [], "held_out": []}
    for label, (name, rows) in enumerate(_sentences().items()):
        groups = _near_duplicate_groups([sentence for sentence, _ in rows])
        rng.shuffle(groups)
        target, taken = held_out * len(rows), 0
        for group in groups:
            part = "held_out" if taken < target else "train"
            taken += len(group) if part == "held_out" else 0
            parts[part] += [(rows[index][0], label, rows[index][1]) for index in group]
        if taken in (0, len(rows)):
            raise ValueError(f"held_out={held_out} leaves the label {name!r} with no sentence in one part")
    for rows in parts.values():
        rng.shuffle(rows)
    return TextClassification(
        tuple(LABELS),
        *(list(column) for column in zip(*parts["train"], strict=True)),
        *(list(column) for column in zip(*parts["held_out"], strict=True)),
    )


def topic_classification(held_out: float = 0.2, seed: int = 0) -> TextClassification:
    """Sentences of Python's documentation labelled by the part of the documentation they come from (:data:`LABELS`).

    Args:
        held_out: The share of each label's sentences held out, in (0, 1); the split takes whole groups of
            near-duplicates, so the share is reached or just passed.
        seed: The seed of the shuffles (the groups of each label, then each part's order).

    Returns:
        A :class:`TextClassification` (new lists at each call; the same ones for the same arguments).

    Raises:
        ValueError: for a ``held_out`` outside (0, 1) or that leaves a label without a sentence in one part, or a
            ``seed`` that is not an int.
    """
    if isinstance(held_out, bool) or not isinstance(held_out, (int, float)) or not 0 < held_out < 1:
        raise ValueError(f"held_out must be a share in (0, 1), got {held_out!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {seed!r}")
    task = _split(float(held_out), seed)
    # Fresh lists: the cached split stays as it was whatever the caller does to them.
    return dataclasses.replace(task, **{field.name: list(getattr(task, field.name)) for field in _LISTS})


#: The fields of a TextClassification that hold lists.
_LISTS = dataclasses.fields(TextClassification)[1:]
