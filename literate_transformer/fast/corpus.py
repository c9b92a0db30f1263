"""A real corpus for the chapters and the benchmarks: Python's own documentation, as sentences or as text.

Python ships the text of its reference documentation's topics (the pages
``help("if")`` shows) in ``pydoc_data.topics``: English prose about code,
written by others, on every machine that has Python, with no download.  It
is a dictionary from a topic's name (``"if"``, ``"formatstrings"``,
``"specialnames"``, ...) to the topic's page, rendered to plain text by
Sphinx's text writer when that Python was released: a title underlined with
asterisks, paragraphs of prose, the grammar's rules and the code examples
indented by three spaces.  Python 3.11 has 79 topics and about 465,000
characters; another release has other pages (the text is the running
Python's, so a number measured on it names the version).

Two readings of it:

* :func:`python_doc_sentences` cuts it into sentences by one rule, so that
  every benchmark and page reads the same list: the topics in the order of
  their names, each split at blank lines into paragraphs, whitespace
  collapsed, each paragraph split after a ``.``, ``!`` or ``?`` that a
  capital letter follows.
* :func:`python_doc_text` keeps the text as it is, for training a tokenizer
  and a language model, split into a training and a held-out part *by
  topic*: the topics in the order of their names, the first of every ten
  held out (:func:`python_doc_topics` names them).  A held-out page is one
  the model never read.  A split inside the topics would leave the held-out
  text's own terms, definitions and code examples (each page repeats its
  own) in the training text, and the held-out loss would reward memory
  rather than measure what was learned.  The rule needs no random seed, so
  every run holds out the same pages.  Topics that are one page (in
  Python 3.11, ``"else"`` and ``"if"``) count once, under the first name, so that no
  held-out page is also a training page; a paragraph that several pages
  repeat (a note, a rule of the grammar) may still stand on both sides.
"""

from __future__ import annotations

import re
from functools import cache

__all__ = ["python_doc_sentences", "SENTENCES", "python_doc_topics", "python_doc_text", "SPLITS", "HELD_OUT_EVERY"]

#: How many sentences the benchmarks and the chapter read.
SENTENCES = 1500

# A sentence ends at ., ! or ? followed by white space and a capital letter.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


#: The splits of :func:`python_doc_text`: the training text, the held-out topics, or both.
SPLITS = ("train", "validation", "all")

#: How often a topic is held out, in the order of the names (the first, the eleventh, ...).
HELD_OUT_EVERY = 10


@cache
def _topics() -> dict[str, str]:
    """Every topic's page, by name, in the order of the names (the one place ``pydoc_data`` is read)."""
    from pydoc_data.topics import topics

    return {name: topics[name] for name in sorted(topics)}


@cache
def _all_sentences() -> tuple[str, ...]:
    sentences = []
    for page in _topics().values():
        for paragraph in re.split(r"\n\s*\n", page):
            text = " ".join(paragraph.split())
            sentences += [sentence for sentence in _SENTENCE_END.split(text) if sentence]
    return tuple(sentences)


def python_doc_sentences(count: int = SENTENCES) -> list[str]:
    """The first ``count`` sentences of ``pydoc_data.topics``, cut by the module's rule.

    >>> sentences = python_doc_sentences(3)
    >>> len(sentences), all(isinstance(sentence, str) and sentence for sentence in sentences)
    (3, True)
    """
    sentences = _all_sentences()
    if not 1 <= count <= len(sentences):
        raise ValueError(f"count must be in [1, {len(sentences)}], got {count}")
    return list(sentences[:count])


def python_doc_topics(split: str = "all") -> list[str]:
    """The names of the topics in a split of :func:`python_doc_text`, in order (a page repeated under a later name
    is left out there).

    >>> held_out = python_doc_topics("validation")
    >>> held_out[0] == python_doc_topics()[0], held_out[1] == python_doc_topics()[HELD_OUT_EVERY]
    (True, True)

    Raises:
        ValueError: for a ``split`` not in :data:`SPLITS`.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    # A page that an earlier name already has is read once, under that name.
    first_names: dict[str, str] = {}
    for name, page in _topics().items():
        first_names.setdefault(page, name)
    names = list(first_names.values())
    if split == "all":
        return names
    held_out = split == "validation"
    return [name for index, name in enumerate(names) if (index % HELD_OUT_EVERY == 0) == held_out]


def python_doc_text(split: str = "all") -> str:
    """The pages of a split's topics as they are, in the order of their names (each ends with a newline, and
    one more stands between two: a blank line).

    >>> python_doc_text("validation").startswith(python_doc_text()[:1000])
    True

    Raises:
        ValueError: for a ``split`` not in :data:`SPLITS`.
    """
    pages = _topics()
    return "\n".join(pages[name] for name in python_doc_topics(split))
