"""Sentence embeddings: mean pooling over real tokens, then L2 normalisation.

The default checkpoint, ``sentence-transformers/all-MiniLM-L6-v2``, was
trained to be read this way.  The equality with sentence-transformers itself
needs the ``sentence_transformers`` package (the ``reference`` extra); without it
that test is skipped with the reason.  Tolerance: fp32, absolute 1e-5.
"""

from __future__ import annotations

import pytest
import torch

import literate_transformer as lt
from literate_transformer.models.bert import BertModel, mean_pooling, sentence_embeddings

ATOL = 1e-5

#: Sentences of different lengths, so that the batch is padded.
SENTENCES = [
    "time flies like an arrow",
    "fruit flies like a banana",
    "a fast arrow flies through the air",
    "bananas are yellow",
    "the train leaves at noon, so we have time for lunch",
]


def test_mean_pooling_averages_the_real_tokens_only():
    hidden = torch.randn(2, 5, 6)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    pooled = mean_pooling(hidden, mask)
    torch.testing.assert_close(pooled[0], hidden[0, :3].mean(dim=0))
    torch.testing.assert_close(pooled[1], hidden[1].mean(dim=0))


def test_mean_pooling_ignores_what_sits_at_padding_positions():
    hidden = torch.randn(2, 5, 6)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    changed = hidden.clone()
    changed[mask == 0] = 1e3
    torch.testing.assert_close(mean_pooling(changed, mask), mean_pooling(hidden, mask))


def test_mean_pooling_without_a_mask_is_the_plain_mean():
    hidden = torch.randn(3, 4, 6)
    torch.testing.assert_close(mean_pooling(hidden), hidden.mean(dim=1))


def test_a_row_without_real_tokens_pools_to_zeros_not_nan():
    pooled = mean_pooling(torch.randn(1, 3, 6), torch.zeros(1, 3, dtype=torch.long))
    assert torch.equal(pooled, torch.zeros(1, 6))


def test_sentence_embeddings_have_unit_length():
    embeddings = sentence_embeddings(torch.randn(4, 7, 6), torch.ones(4, 7))
    torch.testing.assert_close(embeddings.norm(dim=-1), torch.ones(4))


def test_pooling_refuses_a_mask_of_the_wrong_shape():
    with pytest.raises(ValueError, match="attention_mask"):
        mean_pooling(torch.randn(2, 5, 6), torch.ones(2, 4))


@pytest.fixture(scope="module")
def ours():
    tokenizer = lt.load_tokenizer()
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    model = BertModel.from_pretrained().eval()
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    return sentence_embeddings(hidden, batch["attention_mask"])


def test_our_sentence_embeddings_equal_sentence_transformers_encode(ours):
    sentence_transformers = pytest.importorskip(
        "sentence_transformers",
        reason="sentence-transformers is not installed (the `reference` extra; `nox -s tests` installs it)",
    )
    folder = lt.resolve_checkpoint().folder
    reference = sentence_transformers.SentenceTransformer(str(folder), device="cpu")
    theirs = reference.encode(SENTENCES, convert_to_tensor=True, batch_size=len(SENTENCES)).cpu()
    assert theirs.shape == ours.shape
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)
    # The numbers a reader looks at: the cosine-similarity matrix.
    torch.testing.assert_close(ours @ ours.T, theirs @ theirs.T, atol=ATOL, rtol=0)


def test_sentence_embeddings_do_not_depend_on_the_batch(ours):
    tokenizer = lt.load_tokenizer()
    model = BertModel.from_pretrained().eval()
    alone = tokenizer(SENTENCES[:1], return_tensors="pt")
    with torch.no_grad():
        single = sentence_embeddings(model(**alone).last_hidden_state, alone["attention_mask"])
    torch.testing.assert_close(single[0], ours[0], atol=ATOL, rtol=0)
