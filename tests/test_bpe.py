"""The package's byte-level BPE learns what ``tokenizers``' BpeTrainer learns, merge for merge, id for id.

The reference is ``tokenizers`` itself: a ``BPE()`` model, the ``ByteLevel``
pre-tokenizer without a prefix space, ``BpeTrainer`` with the byte-level
alphabet, the same vocabulary size, minimum frequency and special tokens, fed
the same text.  Its merges and vocabulary are read from the trained
tokenizer's JSON.  The corpus is Python's documentation
(:func:`literate_transformer.fast.corpus.python_doc_text`); small texts made
of ties check the tie-breaking rule, random texts the rest, and the prompt
page's corpus of every script (``tests/data/bpe_corpus.json``) the
pre-tokenizer and the round trip.
"""

from __future__ import annotations

import json
import random
import unicodedata
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers.convert_slow_tokenizer import bytes_to_unicode as transformers_bytes_to_unicode

from literate_transformer import bpe
from literate_transformer.fast.corpus import python_doc_text

SCRIPTS = json.loads((Path(__file__).parent / "data" / "bpe_corpus.json").read_text(encoding="utf-8"))

#: The vocabulary of the tokenizer trained on the corpus in these tests.
VOCAB_SIZE = 1024


def reference(text: str, vocab_size: int, min_frequency: int = 0, special_tokens=()) -> tuple[Tokenizer, list, dict]:
    """``tokenizers``' byte-level BPE trained on ``text``: the tokenizer, its merges (pairs) and its vocabulary."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator([text], trainer=trainer)
    model = json.loads(tokenizer.to_str())["model"]
    merges = [tuple(merge.split(" ")) if isinstance(merge, str) else tuple(merge) for merge in model["merges"]]
    return tokenizer, merges, model["vocab"]


@pytest.fixture(scope="module")
def corpus() -> dict[str, str]:
    return {split: python_doc_text(split) for split in ("train", "validation")}


@pytest.fixture(scope="module")
def trained(corpus) -> tuple[bpe.BPETokenizer, tuple[Tokenizer, list, dict]]:
    """Both trainers on the corpus's training text, at :data:`VOCAB_SIZE`."""
    return bpe.train(corpus["train"], VOCAB_SIZE), reference(corpus["train"], VOCAB_SIZE)


# ---------------------------------------------------------------------------
# Equal to tokenizers
# ---------------------------------------------------------------------------
def test_the_merges_and_vocabulary_on_the_corpus_equal_tokenizers(trained, corpus):
    ours, (_, merges, vocab) = trained
    assert len(corpus["train"]) > 300_000
    assert len(ours.merges) == VOCAB_SIZE - 256 == len(merges)
    assert ours.merges == merges
    assert ours.vocab == vocab


def test_the_held_out_text_encodes_to_tokenizers_ids(trained, corpus):
    ours, (theirs, _, _) = trained
    ids = ours.encode(corpus["validation"])
    assert ids == theirs.encode(corpus["validation"]).ids
    # Not vacuous: thousands of tokens, most of them merges.
    assert len(ids) > 5_000 and sum(index >= 256 for index in ids) > len(ids) / 2


def test_text_of_every_script_encodes_to_tokenizers_ids(trained):
    ours, (theirs, _, _) = trained
    for text in SCRIPTS:
        assert ours.encode(text) == theirs.encode(text).ids, text


@pytest.mark.parametrize(
    "text",
    [
        # Every pair occurs once, met in the reverse of their ids' order.
        "dc\ncd\nba\nab",
        # After "ab" (id 256), ("ab", "x") and ("c", "d") tie: ids pick ("c", "d"), strings would pick ("ab", "x").
        "ab\nab\nab\nabx\ncd",
        # ("a", "b") and ("Ġ", "a") tie: by code point "a" comes before "Ġ" (by byte value, the space would).
        "ab\n a",
        # Overlapping pairs: "aaa" holds one ("a", "a") to merge, not two.
        "aaa aaaa aaaaa b bb bbb",
        "the cat sat on the mat; the bat ate the rat's hat",
    ],
)
def test_ties_and_overlaps_merge_as_in_tokenizers(text):
    ours = bpe.train(text, 300)
    _, merges, vocab = reference(text, 300)
    assert ours.merges == merges and ours.vocab == vocab
    assert ours.merges


def test_among_equal_counts_the_pair_of_smaller_ids_is_merged_first():
    ours = bpe.train("ab\nab\nab\nabx\ncd", 258)
    # ("a", "b") occurs 4 times; then ("ab", "x") and ("c", "d") once each, and "c" has a smaller id than "ab".
    assert ours.merges == [("a", "b"), ("c", "d")] == reference("ab\nab\nab\nabx\ncd", 258)[1]


def test_min_frequency_stops_the_merges_where_tokenizers_stops(corpus):
    text = corpus["validation"]
    ours = bpe.train(text, 4096, min_frequency=20)
    _, merges, vocab = reference(text, 4096, min_frequency=20)
    assert ours.merges == merges and ours.vocab == vocab
    assert 50 < len(ours.merges) < 4096 - 256 and min(ours.counts) >= 20


def test_special_tokens_take_the_first_ids_and_are_kept_whole_as_in_tokenizers(corpus):
    specials = ("<|endoftext|>", "<pad>", "<|end")
    text = corpus["validation"][:20_000]
    ours = bpe.train(text, 600, special_tokens=specials)
    theirs, merges, vocab = reference(text, 600, special_tokens=specials)
    assert ours.merges == merges and ours.vocab == vocab
    assert [ours.vocab[token] for token in specials] == [0, 1, 2]
    typed = "<|endoftext|>The if statement<pad><pad> is<|end|>used.<|endoftext|>"
    ids = ours.encode(typed)
    assert ids == theirs.encode(typed).ids
    assert ids.count(0) == 2 and ids.count(1) == 2 and ids.count(2) == 1
    assert ours.decode(ids) == typed


def test_random_texts_train_and_encode_as_in_tokenizers():
    generator = random.Random(0)
    pieces = ["a", "b", "ab", "c", " ", "  ", "\n", "é", "😀", "'s", "1", "x!"]
    for _ in range(40):
        text = "".join(generator.choice(pieces) for _ in range(generator.randint(1, 80)))
        vocab_size, min_frequency = generator.randint(256, 320), generator.choice([0, 2, 3])
        ours = bpe.train(text, vocab_size, min_frequency)
        theirs, merges, vocab = reference(text, vocab_size, min_frequency)
        assert (ours.merges, ours.vocab) == (merges, vocab), text
        probe = text[::-1] + text
        assert ours.encode(probe) == theirs.encode(probe).ids, text


def test_the_byte_alphabet_is_gpt2s_and_tokenizers():
    assert bpe.bytes_to_unicode() == transformers_bytes_to_unicode()
    assert sorted(bpe.bytes_to_unicode().values()) == sorted(pre_tokenizers.ByteLevel.alphabet())


def test_the_words_are_cut_as_tokenizers_bytelevel_cuts_them():
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    table = bpe.bytes_to_unicode()
    # Every script of the prompt page's corpus, and a sample of every block of assigned characters, each beside a
    # letter, a digit, a space and an apostrophe (what decides where a word ends).
    sample = [chr(c) for c in range(0, 0x110000, 17) if unicodedata.category(chr(c)) not in ("Cn", "Cs")]
    texts = [*SCRIPTS, "".join(f"a{c}1{c} '{c}" for c in sample)]
    for text in texts:
        ours = ["".join(table[byte] for byte in word.encode()) for word in bpe.pretokenize(text)]
        assert ours == [word for word, _ in byte_level.pre_tokenize_str(text)], text[:50]
    assert len(sample) > 15_000


# ---------------------------------------------------------------------------
# Decoding, the merges as text, and tokens per word
# ---------------------------------------------------------------------------
def test_decoding_the_encoding_gives_any_text_back(trained):
    ours, _ = trained
    generator = random.Random(0)
    # Any code point but the surrogates (which UTF-8 cannot write), newlines and emoji among them.
    characters = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    texts = [*SCRIPTS, "line\n\n\tend\r\n", "👩‍👩‍👧 🤗🤗", ""]
    texts += ["".join(generator.choices(characters, k=generator.randint(1, 40))) for _ in range(200)]
    for text in texts:
        assert ours.decode(ours.encode(text)) == text


def test_the_first_merges_read_as_text_with_their_counts(trained, corpus):
    ours, _ = trained
    first = ours.first_merges(20)
    assert [merge.rank for merge in first] == list(range(20))
    assert all(merge.joined == merge.left + merge.right for merge in first)
    # The first merge is the corpus's most frequent pair, counted here from the words directly.
    counts = Counter(pair for word in bpe.pretokenize(corpus["train"]) for pair in pairwise(word.encode("utf-8")))
    assert first[0].count == max(counts.values()) == counts[tuple(bytes(first[0].joined, "utf-8"))]
    # The most frequent pair's count never grows: a merge lowers counts, or makes pairs as rare as itself.
    assert all(a >= b for a, b in pairwise(ours.counts))


def test_tokens_per_word_divides_each_tokenizers_count_by_the_words():
    text = "one two  three\nfour"
    assert bpe.tokens_per_word(text, {"characters": list, "words": str.split}) == {
        "characters": len(text) / 4,
        "words": 1.0,
    }


def test_the_trained_tokenizer_cuts_fewer_tokens_per_word_than_bytes(trained, corpus):
    ours, _ = trained
    bytes_only = bpe.train(corpus["validation"], 256)
    per_word = bpe.tokens_per_word(corpus["validation"], {"bytes": bytes_only.encode, "ours": ours.encode})
    assert per_word["bytes"] == len(corpus["validation"].encode("utf-8")) / len(corpus["validation"].split())
    assert per_word["ours"] < per_word["bytes"] / 2


# ---------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("arguments", "error", "names"),
    [
        ((b"bytes", 300), TypeError, "text"),
        (("", 300), ValueError, "text"),
        (("a\ud800b", 300), ValueError, "text"),
        (("text", 255), ValueError, "vocab_size"),
        (("text", 257, 0, ("<s>", "</s>")), ValueError, "vocab_size"),
        (("text", 300.0), TypeError, "vocab_size"),
        (("text", 300, -1), ValueError, "min_frequency"),
        (("text", 300, 1.5), TypeError, "min_frequency"),
        (("text", 300, 0, "<s>"), TypeError, "special_tokens"),
        (("text", 300, 0, ("<s>", "")), TypeError, "special_tokens"),
    ],
)
def test_bad_training_input_is_refused_by_name(arguments, error, names):
    with pytest.raises(error, match=names):
        bpe.train(*arguments)


def test_bad_ids_text_or_counts_are_refused_by_name(trained):
    ours, _ = trained
    with pytest.raises(ValueError, match=r"ids must be in \[0, vocab_size=1024\), got 1024"):
        ours.decode([5, 1024])
    with pytest.raises(TypeError, match="ids must be ints"):
        ours.decode([5.0])
    with pytest.raises(TypeError, match="text must be a str"):
        ours.encode(["a list"])
    with pytest.raises(ValueError, match="count must be at least 0, got -1"):
        ours.first_merges(-1)
    with pytest.raises(TypeError, match="count must be an int"):
        ours.first_merges(2.0)
    with pytest.raises(ValueError, match="text must hold at least one word"):
        bpe.tokens_per_word(" \n", {"ours": ours.encode})
    with pytest.raises(TypeError, match=r"tokenizers\['ours'\]"):
        bpe.tokens_per_word("a word", {"ours": ours})


def test_the_tokens_as_text_are_tokenizers_tokens_read_as_text(trained, corpus):
    ours, (theirs, _, _) = trained
    text = corpus["validation"][:2000]
    assert ours.tokens(text) == [bpe.token_text(token) for token in theirs.encode(text).tokens]
    assert "".join(ours.tokens(text)) == text
