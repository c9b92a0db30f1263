"""A real corpus for chapter 16 and the benchmarks: sentences of Python's own documentation.

Python ships the text of its reference documentation's topics (the pages
``help("if")`` shows) in ``pydoc_data.topics``: English prose about code,
written by others, on every machine that has Python.  :func:`python_doc_sentences`
cuts it into sentences by one rule, so that every benchmark and page reads the
same list: the topics in the order of their names, each split at blank lines
into paragraphs, whitespace collapsed, each paragraph split after a ``.``, ``!``
or ``?`` that a capital letter follows.
"""

from __future__ import annotations

import re
from functools import cache

__all__ = ["python_doc_sentences", "SENTENCES"]

#: How many sentences the benchmarks and the chapter read.
SENTENCES = 1500

# A sentence ends at ., ! or ? followed by white space and a capital letter.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@cache
def _all_sentences() -> tuple[str, ...]:
    from pydoc_data.topics import topics

    sentences = []
    for name in sorted(topics):
        for paragraph in re.split(r"\n\s*\n", topics[name]):
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
