"""lt.encode: sentence-transformers' sentence embeddings on the fast path, within 1e-5.

The corpus is real text (sentences of Python's documentation, the
benchmark's corpus) plus a sentence longer than the checkpoint's
``max_seq_length``, so that truncation is exercised.  The equality needs
``sentence_transformers`` (the ``reference`` extra); without it that test is
skipped with the reason.
"""

from __future__ import annotations

import pytest
import torch

import literate_transformer as lt
from literate_transformer.fast.corpus import python_doc_sentences
from literate_transformer.fast.encode import PROGRESS_BAR_BATCHES, max_seq_length

ATOL = 1e-5
#: Enough sentences for several batches of different lengths, and one far beyond max_seq_length.
SENTENCES = python_doc_sentences(20) + [" ".join(["attention"] * 300)]


@pytest.fixture(scope="module")
def ours():
    return lt.encode(SENTENCES, batch_size=8, show_progress_bar=False)


def test_encode_equals_sentence_transformers_encode(ours):
    sentence_transformers = pytest.importorskip(
        "sentence_transformers",
        reason="sentence-transformers is not installed (the `reference` extra; `nox -s tests` installs it)",
    )
    reference = sentence_transformers.SentenceTransformer(str(lt.resolve_checkpoint().folder), device="cpu")
    assert reference.max_seq_length == max_seq_length()
    theirs = reference.encode(SENTENCES, batch_size=8, convert_to_tensor=True).cpu()
    assert ours.shape == theirs.shape == (len(SENTENCES), 384)
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)


def test_each_row_is_its_own_sentences_vector_whatever_the_batch(ours):
    alone = lt.encode([SENTENCES[3], SENTENCES[-1]], batch_size=1, show_progress_bar=False)
    torch.testing.assert_close(alone, ours[[3, -1]], atol=ATOL, rtol=0)


def test_the_truncation_length_is_the_checkpoints_sentence_transformers_setting():
    assert max_seq_length() == 256


@pytest.mark.parametrize(
    ("sentences", "batch_size", "error", "match"),
    [
        ("one sentence", 32, TypeError, "sentences must be a list of strings"),
        ([], 32, ValueError, "at least one sentence"),
        (["a", 3], 32, TypeError, r"sentences\[1\] is an int"),
        (["a"], 0, ValueError, "batch_size must be at least 1"),
        (["a"], "8", TypeError, "batch_size must be an int"),
    ],
)
def test_bad_input_is_refused_by_name(sentences, batch_size, error, match):
    with pytest.raises(error, match=match):
        lt.encode(sentences, batch_size=batch_size)


def test_a_long_corpus_shows_a_progress_bar_and_a_short_one_does_not(capsys):
    sentences = ["a"] * (PROGRESS_BAR_BATCHES + 1)
    lt.encode(sentences[:PROGRESS_BAR_BATCHES], batch_size=1)
    assert "Batches" not in capsys.readouterr().err
    lt.encode(sentences, batch_size=1)
    assert "Batches" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"truncate_at": 1}, ValueError, r"truncate_at must be in \[2, 512\]"),
        ({"truncate_at": 0}, ValueError, r"truncate_at must be in \[2, 512\]"),
        ({"truncate_at": -3}, ValueError, r"truncate_at must be in \[2, 512\]"),
        ({"truncate_at": 513}, ValueError, r"truncate_at must be in \[2, 512\]"),
        ({"truncate_at": 8.0}, TypeError, "truncate_at must be an int"),
        ({"model": "bert"}, TypeError, "model must be a literate_transformer FastBertModel, got str"),
    ],
)
def test_a_bad_truncation_or_model_is_refused_by_name(options, error, match):
    with pytest.raises(error, match=match):
        lt.encode(["time flies like an arrow"], **options)


def test_a_bert_model_given_as_the_model_is_refused_with_what_to_do():
    with pytest.raises(TypeError, match=r"make one with lt.FastBertModel.from_bert\(model\).*got BertModel"):
        lt.encode(["time flies like an arrow"], model=lt.BertModel.from_pretrained())
