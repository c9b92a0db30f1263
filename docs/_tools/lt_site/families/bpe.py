"""The byte-level BPE trainer on the site: its running example and its proof (the badge).

Not a model family: :mod:`literate_transformer.bpe` trains a tokenizer.  Its example is the held-out pages of
Python's documentation (:func:`~literate_transformer.fast.corpus.python_doc_text`), trained to a vocabulary of
:data:`VOCAB_SIZE` by the package and by ``tokenizers``' ``BpeTrainer`` (byte-level alphabet and
pre-tokenizer, no special tokens).  The badge is the largest difference of an id between the two: each
token's id in the two vocabularies, and the ids of the two tokens each merge joined, merge by merge (0: the
same vocabulary and the same merges in the same order; a vocabulary or a merge list of another length counts
as infinite).
"""

from __future__ import annotations

import json

from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from literate_transformer import bpe
from literate_transformer.fast.corpus import python_doc_text

from ..base import Proof, RunningExample

__all__ = ["EXAMPLES", "PROOFS", "VOCAB_SIZE"]

#: The vocabulary both trainers train the example to: the 256 bytes and 256 merges.
VOCAB_SIZE = 512


def _trained() -> bpe.BPETokenizer:
    """The package's tokenizer, trained on the example's text."""
    return bpe.train(python_doc_text("validation"), VOCAB_SIZE)


def _tokenizers_trained() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """``tokenizers``' vocabulary and merges, trained on the example's text with the same settings."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator([python_doc_text("validation")], trainer=trainer)
    model = json.loads(tokenizer.to_str())["model"]
    merges = [tuple(merge.split(" ")) if isinstance(merge, str) else tuple(merge) for merge in model["merges"]]
    return model["vocab"], merges


def _merges_and_vocabulary() -> float:
    ours = _trained()
    vocab, merges = _tokenizers_trained()
    if ours.vocab.keys() != vocab.keys() or len(ours.merges) != len(merges):
        return float("inf")
    differences = [abs(ours.vocab[token] - vocab[token]) for token in vocab]
    for our_pair, their_pair in zip(ours.merges, merges, strict=True):
        differences += [abs(ours.vocab[a] - vocab[b]) for a, b in zip(our_pair, their_pair, strict=True)]
    return float(max(differences))


EXAMPLES = (
    RunningExample(
        "bpe",
        "the held-out pages of Python's documentation (pydoc_data.topics, the first topic of every ten by name) "
        f"trained to a vocabulary of {VOCAB_SIZE} byte-level BPE tokens",
        {"V": VOCAB_SIZE},
        _trained,
    ),
)

PROOFS = (
    Proof(
        "bpe.train",
        "tokenizers BpeTrainer (merges and vocabulary)",
        "tests/test_bpe.py::test_the_merges_and_vocabulary_on_the_corpus_equal_tokenizers",
        _merges_and_vocabulary,
        tolerance=0.0,
        example="bpe",
        dtype="int64",
    ),
)
