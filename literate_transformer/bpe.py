r"""Byte-level BPE: a tokenizer trained from scratch, and proved to learn what ``tokenizers`` learns.

A model reads ids, not text; the tokenizer decides which pieces of text get
an id.  *Byte pair encoding* (BPE; Sennrich et al., 2016, after Gage's 1994
compression scheme) learns those pieces from a corpus: start from single
symbols, and again and again join the two adjacent symbols that occur
together most often into one new symbol, until the vocabulary has the size
asked for.  GPT-2 (Radford et al., 2019) made it *byte-level*: the symbols
it starts from are the 256 byte values of UTF-8, so every text, in any
script, with emoji or bytes no one foresaw, has a tokenization, and no token
is ever "unknown".  GPT-2, RoBERTa, Llama 3, SmolLM2 and most decoders since
tokenize this way; this module trains such a tokenizer in a few readable
lines, as ``tokenizers``' ``BpeTrainer`` does (its ``trainer.rs`` in Rust).

Training, in four steps
-----------------------
1. **Words.**  GPT-2's regular expression (:data:`GPT2_PATTERN`) cuts the
   text into words before anything is counted: a run of letters with the
   space before it (``" the"``), a run of digits, a run of punctuation,
   white space, and the English contractions (``'s``, ``'ll``).  A merge
   never crosses a word's border, so no token joins ``"dog"`` to ``"."``.
   Each distinct word is counted once, with how often it occurs.
2. **Bytes as printable symbols.**  Each word's UTF-8 bytes are written
   with :func:`bytes_to_unicode`'s alphabet: a printable character for
   every byte, the byte's own where it is printable and a stand-in above
   U+0100 where it is not (the space becomes ``"Ġ"``, the newline ``"Ċ"``),
   so that a vocabulary of bytes is a vocabulary of strings.  The first 256
   tokens are those symbols.
3. **Pairs.**  Every adjacent pair of symbols in every word is counted,
   weighted by the word's count:

   .. math:: \operatorname{count}(a, b) = \sum_{w} \operatorname{count}(w)\,
             \bigl|\{\, i : w_i = a,\ w_{i+1} = b \,\}\bigr|

4. **Merges.**  The most frequent pair becomes a new token, appended to the
   vocabulary and recorded as a *merge*; every occurrence of it in the words
   is joined (left to right, so ``a a a`` becomes ``aa a``); the counts are
   brought up to date, and the next most frequent pair is merged, until the
   vocabulary has ``vocab_size`` tokens or no pair occurs ``min_frequency``
   times.

Merging touches only the words that hold the pair, so only their pairs are
counted again (the *incremental* update): an index from each pair to the
words it occurs in says which, and a heap keeps the pairs by count, so that
finding the most frequent costs a logarithm, not a pass over every pair.

Ties, and why the merges equal ``tokenizers``'
----------------------------------------------
When two pairs are equally frequent the choice is a convention, and it
changes every merge after it.  ``tokenizers``' trainer orders its queue by
count and then by the pair's *ids*, smaller first (its ``Merge`` type's
``Ord``: "ascending order" of the pair), and numbers its first tokens as
follows: the special tokens in the order given, then the alphabet sorted by
code point (so ``"!"`` is 0, not the byte 0).  This module numbers its
tokens the same way and breaks ties the same way (the heap holds
``(-count, pair)``), so it learns the same merges in the same order and the
same vocabulary with the same ids; tests prove it on the corpus, on texts
made of ties and on random texts.  One case stays outside that proof: a
merge whose joined string is already a token (``"ab" + "c"`` after
``"a" + "bc"``) would add no token, and ``tokenizers`` would then join the
pair only in the words one entry of its queue recorded, where this module
joins it in every word that holds it.  No text the tests train on, nor any
of thousands of random ones tried, produced such a merge.

Encoding and decoding
---------------------
To encode, each word is written in bytes as in training, and the merges
are applied in the order they were learned: the adjacent pair learned
earliest is joined wherever it occurs, then the next, until no learned pair
is left (GPT-2's ``bpe``; ``tokenizers`` applies the same rule with a
heap).  Special tokens typed in the text are cut out first and kept whole.
Decoding joins the tokens' bytes and reads them as UTF-8, so
``decode(encode(text)) == text`` for every string UTF-8 can write (a lone
surrogate is refused).

One more difference, of data rather than design: the words are cut with the
``regex`` module, whose letters and digits follow its own version of the
Unicode database; ``tokenizers`` cuts them with Oniguruma's.  The two agree
on the characters Python's ``unicodedata`` assigns (a test compares them
on a sample of every block) and may differ on one that only a later Unicode
assigned.

>>> tokenizer = train("low lower lowest low low", vocab_size=260)
>>> tokenizer.merges
[('l', 'o'), ('lo', 'w'), ('Ġ', 'low'), ('Ġlow', 'e')]
>>> tokenizer.decode(tokenizer.encode("slowest!"))
'slowest!'
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import pairwise
from typing import NamedTuple

import regex

__all__ = [
    "GPT2_PATTERN",
    "bytes_to_unicode",
    "pretokenize",
    "token_text",
    "train",
    "BPETokenizer",
    "Merge",
    "tokens_per_word",
]

#: GPT-2's pre-tokenizer, which cuts out contractions, letters, digits and punctuation, each with the space
#: before it, and white space (a run of spaces keeps its last one for the next word: ``\s+(?!\S)``).
#: ``tokenizers``' ``ByteLevel`` pre-tokenizer uses this pattern when ``use_regex=True``, its default.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

_WORDS = regex.compile(GPT2_PATTERN)


@cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's alphabet: a printable character for each of the 256 byte values.

    A byte that is a printable Latin-1 character stands for itself; each of the others (the control
    characters, the space, ...) takes, in the order of the bytes, the next character from U+0100 on.

    >>> table = bytes_to_unicode()
    >>> table[ord("a")], table[ord(" ")], table[ord("\\n")], len(set(table.values()))
    ('a', 'Ġ', 'Ċ', 256)
    """
    printable = {*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)}
    table, stand_in = {}, 0x100
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte], stand_in = chr(stand_in), stand_in + 1
    return table


@cache
def _unicode_to_bytes() -> dict[str, int]:
    return {symbol: byte for byte, symbol in bytes_to_unicode().items()}


def pretokenize(text: str) -> list[str]:
    """The words :data:`GPT2_PATTERN` cuts ``text`` into, as text.

    >>> pretokenize("It's 2 o'clock.  Go!")
    ['It', "'s", ' 2', ' o', "'", 'clock', '.', ' ', ' Go', '!']
    """
    return _WORDS.findall(text)


def _spell(word: str) -> str:
    """A word's UTF-8 bytes, written in :func:`bytes_to_unicode`'s alphabet."""
    table = bytes_to_unicode()
    return "".join(table[byte] for byte in word.encode("utf-8"))


def token_text(token: str) -> str:
    """A token as the text its bytes spell (``"Ġthe"`` -> ``" the"``); a byte that ends no character is escaped.

    >>> token_text("Ġthe"), token_text("âĢ"), token_text("âĢĶ")
    (' the', '\\\\xe2\\\\x80', '—')
    """
    return bytes(_unicode_to_bytes()[symbol] for symbol in token).decode("utf-8", errors="backslashreplace")


def _merge(word: tuple[int, ...], pair: tuple[int, int], new_id: int) -> tuple[int, ...]:
    """``word`` with each occurrence of ``pair`` joined into ``new_id``, left to right (``a a a`` -> ``aa a``)."""
    merged, index = [], 0
    while index < len(word):
        if word[index] == pair[0] and index + 1 < len(word) and word[index + 1] == pair[1]:
            merged.append(new_id)
            index += 2
        else:
            merged.append(word[index])
            index += 1
    return tuple(merged)


class Merge(NamedTuple):
    """One merge as a reader sees it: its rank, the two tokens it joined and the token it made (as text), and how
    often the pair occurred when it was merged."""

    rank: int
    left: str
    right: str
    joined: str
    count: int


@dataclass
class BPETokenizer:
    """A trained byte-level BPE tokenizer: its vocabulary and its merges, in the order they were learned.

    Attributes:
        vocab: Each token (in :func:`bytes_to_unicode`'s alphabet) and its id; the special tokens first, then
            the 256 byte symbols by code point, then each merge's token.
        merges: The pairs joined, in the order they were learned (``("Ġ", "t")`` made ``"Ġt"``).
        counts: How often each merged pair occurred when it was merged (weighted by its words' counts).
        special_tokens: The tokens kept whole, never cut or merged (their ids come first).
    """

    vocab: dict[str, int]
    merges: list[tuple[str, str]]
    counts: list[int] = field(default_factory=list)
    special_tokens: tuple[str, ...] = ()
    _ranks: dict[tuple[str, str], int] = field(init=False, repr=False, compare=False)
    _tokens: dict[int, str] = field(init=False, repr=False, compare=False)
    _cache: dict[str, list[int]] = field(init=False, repr=False, compare=False)
    _specials: regex.Pattern | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self._tokens = {index: token for token, index in self.vocab.items()}
        self._cache = {}
        # The special tokens, longest first, so that one that begins another does not cut it.
        ordered = sorted(self.special_tokens, key=len, reverse=True)
        self._specials = regex.compile("(" + "|".join(map(regex.escape, ordered)) + ")") if ordered else None

    @property
    def vocab_size(self) -> int:
        """How many tokens the vocabulary holds."""
        return len(self.vocab)

    def _word_ids(self, word: str) -> list[int]:
        """The ids of one word: its byte symbols, joined by the merges in the order they were learned."""
        if word not in self._cache:
            symbols = list(_spell(word))
            while len(symbols) > 1:
                # The adjacent pair learned earliest; none learned: the word is done.
                pair = min(pairwise(symbols), key=lambda pair: self._ranks.get(pair, len(self._ranks)))
                if pair not in self._ranks:
                    break
                joined, index = [], 0
                while index < len(symbols):
                    if index + 1 < len(symbols) and (symbols[index], symbols[index + 1]) == pair:
                        joined.append(symbols[index] + symbols[index + 1])
                        index += 2
                    else:
                        joined.append(symbols[index])
                        index += 1
                symbols = joined
            self._cache[word] = [self.vocab[symbol] for symbol in symbols]
        return self._cache[word]

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``: special tokens cut out whole, the rest cut into words and each word merged.

        Raises:
            TypeError: for a ``text`` that is not a ``str``.
            ValueError: for a ``text`` that UTF-8 cannot write (a lone surrogate).
        """
        _check_text(text, allow_empty=True)
        ids: list[int] = []
        pieces = self._specials.split(text) if self._specials else [text]
        for piece in pieces:
            if piece in self.special_tokens:
                ids.append(self.vocab[piece])
            else:
                for word in pretokenize(piece):
                    ids += self._word_ids(word)
        return ids

    def tokens(self, text: str) -> list[str]:
        """The tokens of ``text`` as text (``[" the", " cat"]``): :meth:`encode`, each id read back."""
        tokens = [self._tokens[index] for index in self.encode(text)]
        return [token if token in self.special_tokens else token_text(token) for token in tokens]

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``: their tokens' bytes, joined and read as UTF-8 (bytes that end no character read
        as U+FFFD, as ``tokenizers``' ``ByteLevel`` decoder reads them).

        Raises:
            TypeError: for an id that is not an ``int``.
            ValueError: for an id outside the vocabulary.
        """
        table = _unicode_to_bytes()
        data = bytearray()
        for index in ids:
            if not isinstance(index, int) or isinstance(index, bool):
                raise TypeError(f"ids must be ints, got {type(index).__name__} {index!r}")
            if index not in self._tokens:
                raise ValueError(f"ids must be in [0, vocab_size={self.vocab_size}), got {index}")
            token = self._tokens[index]
            data += token.encode("utf-8") if token in self.special_tokens else bytes(table[s] for s in token)
        return data.decode("utf-8", errors="replace")

    def first_merges(self, count: int = 20) -> list[Merge]:
        """The first ``count`` merges as text: what each joined, what it made, and how often the pair occurred.

        Raises:
            TypeError: for a ``count`` that is not an ``int``.
            ValueError: for a ``count`` below 0.
        """
        if isinstance(count, bool) or not isinstance(count, int):
            raise TypeError(f"count must be an int, got {type(count).__name__}")
        if count < 0:
            raise ValueError(f"count must be at least 0, got {count}")
        return [
            Merge(rank, token_text(left), token_text(right), token_text(left + right), self.counts[rank])
            for rank, (left, right) in enumerate(self.merges[:count])
        ]


def _check_text(text: object, allow_empty: bool = False) -> None:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text and not allow_empty:
        raise ValueError("text must not be empty: an empty corpus has no pair to count")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"text must be writable as UTF-8: {error.reason} at index {error.start}") from None


def _check_settings(vocab_size: object, min_frequency: object, special_tokens: object) -> tuple[str, ...]:
    if isinstance(special_tokens, str) or not isinstance(special_tokens, Iterable):
        raise TypeError(f"special_tokens must be a sequence of str, got {type(special_tokens).__name__}")
    specials = tuple(dict.fromkeys(special_tokens))
    if not all(isinstance(token, str) and token for token in specials):
        raise TypeError(f"special_tokens must be non-empty strs, got {specials!r}")
    for name, value in (("vocab_size", vocab_size), ("min_frequency", min_frequency)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    least = 256 + len(specials)
    if vocab_size < least:
        raise ValueError(
            f"vocab_size must be at least {least} (the 256 bytes and {len(specials)} special tokens), got {vocab_size}"
        )
    if min_frequency < 0:
        raise ValueError(f"min_frequency must be at least 0, got {min_frequency}")
    return specials


def train(
    text: str, vocab_size: int = 1024, min_frequency: int = 0, special_tokens: Sequence[str] = ()
) -> BPETokenizer:
    """Train a byte-level BPE tokenizer on ``text``: the module's four steps, as ``tokenizers``' trainer takes them.

    Args:
        text: The corpus, one string (cut into words by :data:`GPT2_PATTERN`; special tokens in it are plain text).
        vocab_size: How many tokens to end with: the special tokens, the 256 bytes and one per merge.
        min_frequency: The fewest occurrences a pair needs to be merged (0 and 1 alike: every pair that occurs).
        special_tokens: Tokens kept whole when encoding; they take the first ids.

    Returns:
        The tokenizer: its vocabulary, its merges in order and each merged pair's count.

    Raises:
        TypeError: for a ``text`` that is not a ``str``, a ``vocab_size`` or ``min_frequency`` that is not an
            ``int``, or ``special_tokens`` that are not strings.
        ValueError: for an empty ``text``, a ``vocab_size`` below 256 plus the special tokens, or a negative
            ``min_frequency``.
    """
    _check_text(text)
    specials = _check_settings(vocab_size, min_frequency, special_tokens)

    # 1. The words, each spelled in the byte alphabet, and how often each occurs.
    word_counts = Counter(_spell(word) for word in pretokenize(text))
    # 2. The first tokens: the special ones, then the 256 byte symbols by code point (tokenizers' numbering).
    vocab = {token: index for index, token in enumerate(dict.fromkeys([*specials, *sorted(_unicode_to_bytes())]))}
    tokens = list(vocab)
    words = [tuple(vocab[symbol] for symbol in word) for word in word_counts]
    counts = list(word_counts.values())

    # 3. Every adjacent pair's count, weighted by its word's count, and the words each pair occurs in.
    pair_counts: Counter[tuple[int, int]] = Counter()
    where: defaultdict[tuple[int, int], set[int]] = defaultdict(set)
    for index, word in enumerate(words):
        for pair in pairwise(word):
            pair_counts[pair] += counts[index]
            where[pair].add(index)
    # The most frequent pair on top; among equal counts, the pair of smaller ids (tokenizers' order).
    heap = [(-count, pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)

    # 4. Merge the most frequent pair, again and again.
    merges, merge_counts = [], []
    while len(vocab) < vocab_size and heap:
        negated, pair = heapq.heappop(heap)
        # An entry pushed before the pair's count last changed is out of date: a newer one is in the heap.
        if -negated != pair_counts.get(pair):
            continue
        if -negated < max(min_frequency, 1):
            break
        joined = tokens[pair[0]] + tokens[pair[1]]
        new_id = vocab.setdefault(joined, len(vocab))
        if new_id == len(tokens):
            tokens.append(joined)
        merges.append((tokens[pair[0]], tokens[pair[1]]))
        merge_counts.append(-negated)
        # Join the pair in the words that hold it, and count again the pairs of those words only.
        change: Counter[tuple[int, int]] = Counter()
        for index in where.pop(pair):
            word, merged = words[index], _merge(words[index], pair, new_id)
            for old in pairwise(word):
                change[old] -= counts[index]
            for new in pairwise(merged):
                change[new] += counts[index]
                where[new].add(index)
            words[index] = merged
        for changed, delta in change.items():
            if delta:
                pair_counts[changed] += delta
                if pair_counts[changed] > 0:
                    heapq.heappush(heap, (-pair_counts[changed], changed))
                else:
                    del pair_counts[changed]
    return BPETokenizer(vocab, merges, merge_counts, specials)


def tokens_per_word(text: str, tokenizers: Mapping[str, Callable[[str], Sequence]]) -> dict[str, float]:
    """How many tokens each tokenizer cuts ``text`` into, per word (words: ``text.split()``).

    Each tokenizer is a function from text to its tokens or ids, without special tokens added:
    ``ours.encode``, or ``functools.partial(hf_tokenizer.encode, add_special_tokens=False)``.

    >>> tokens_per_word("one two three", {"by character": list, "by word": str.split})
    {'by character': 4.333333333333333, 'by word': 1.0}

    Raises:
        TypeError: for a ``text`` that is not a ``str`` or a tokenizer that is not callable.
        ValueError: for a ``text`` without a word.
    """
    _check_text(text, allow_empty=True)
    words = len(text.split())
    if not words:
        raise ValueError("text must hold at least one word (text.split() is empty)")
    for name, tokenize in tokenizers.items():
        if not callable(tokenize):
            raise TypeError(
                f"tokenizers[{name!r}] must be a function from text to tokens, got {type(tokenize).__name__}"
            )
    return {name: len(tokenize(text)) / words for name, tokenize in tokenizers.items()}
