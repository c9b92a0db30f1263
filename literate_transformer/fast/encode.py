r"""Sentence embeddings on the fast path: what ``SentenceTransformer.encode`` computes, with less work.

The default checkpoint, ``sentence-transformers/all-MiniLM-L6-v2``, exists
to turn sentences into vectors whose dot products are their similarities.
``sentence_transformers.SentenceTransformer.encode`` does it in three steps,
listed in the checkpoint's ``modules.json``: the BERT encoder, mean pooling
over the real tokens, L2 normalisation.  :func:`encode` computes the same
vectors (a test proves them equal within ``1e-5``) and spends less work
doing it:

* **Sorted by tokens, batched.**  Both sort the sentences by length before
  cutting them into batches, so that each batch holds sentences of similar
  lengths and little padding.  sentence-transformers sorts by *characters*;
  here the whole corpus is tokenized first (one call of the fast tokenizer)
  and sorted by *tokens*, the length the model actually pays for.
* **No padding at all.**  Each batch is packed, its real tokens end to end
  (:class:`~literate_transformer.fast.bert.PackedBatch`), and run through
  :class:`~literate_transformer.fast.bert.FastBertModel`: one fused Q, K, V
  projection, attention inside each sentence only.
* **Pooling on the packed tokens.**  Mean pooling is a sum per sentence,
  one ``index_add_`` over the ``(U, E)`` packed states, divided by the
  sentence's length (the tokenizer's, on the host).

As in sentence-transformers, a sentence longer than the checkpoint's
``max_seq_length`` (256 tokens for this checkpoint, in its
``sentence_bert_config.json``) is truncated there, and a progress bar is
shown on a long corpus.

>>> vectors = encode(["time flies like an arrow", "fruit flies like a banana"], show_progress_bar=False)
>>> vectors.shape, bool(torch.allclose(vectors.norm(dim=-1), torch.ones(2)))
(torch.Size([2, 384]), True)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ..core.checkpoints import load_tokenizer, resolve_checkpoint
from ..core.validation import a_or_an
from .bert import FastBertModel, PackedBatch

__all__ = ["encode", "max_seq_length", "PROGRESS_BAR_BATCHES"]

#: A corpus of more batches than this shows a progress bar (when ``show_progress_bar`` is ``None``).
PROGRESS_BAR_BATCHES = 10


def max_seq_length(folder: str | Path | None = None) -> int:
    """The checkpoint's truncation length: sentence-transformers' ``max_seq_length``.

    Read from the checkpoint's ``sentence_bert_config.json`` (what
    sentence-transformers reads); a checkpoint without one is truncated at
    its ``max_position_embeddings``.

    >>> max_seq_length()
    256
    """
    checkpoint = resolve_checkpoint(folder)
    settings = Path(checkpoint.folder) / "sentence_bert_config.json"
    if settings.is_file():
        value = json.loads(settings.read_text()).get("max_seq_length")
        if value is not None:
            return int(value)
    return int(checkpoint.config["max_position_embeddings"])


@lru_cache(maxsize=1)
def _default_model() -> FastBertModel:
    return FastBertModel.from_pretrained()


@lru_cache(maxsize=1)
def _default_tokenizer() -> Any:
    return load_tokenizer()


def _check_encode_inputs(sentences: object, batch_size: object) -> None:
    if isinstance(sentences, str) or not isinstance(sentences, (list, tuple)):
        raise TypeError(
            f"sentences must be a list of strings (wrap a single sentence in a list), got {type(sentences).__name__}"
        )
    if not sentences:
        raise ValueError("sentences must hold at least one sentence, got an empty list")
    for position, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise TypeError(
                f"sentences must be a list of strings, but sentences[{position}] is "
                f"{a_or_an(type(sentence).__name__)} {type(sentence).__name__}"
            )
    if not isinstance(batch_size, int) or isinstance(batch_size, bool):
        raise TypeError(f"batch_size must be an int, got {type(batch_size).__name__}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")


def _check_model_and_length(model: object, truncate_at: object) -> None:
    if not isinstance(model, FastBertModel):
        hint = " (make one with lt.FastBertModel.from_bert(model))" if hasattr(model, "embeddings") else ""
        raise TypeError(f"model must be a literate_transformer FastBertModel{hint}, got {type(model).__name__}")
    if not isinstance(truncate_at, int) or isinstance(truncate_at, bool):
        raise TypeError(f"truncate_at must be an int (tokens kept per sentence), got {type(truncate_at).__name__}")
    longest = model.config.max_position_embeddings
    if not 2 <= truncate_at <= longest:
        raise ValueError(
            f"truncate_at must be in [2, {longest}]: [CLS] and [SEP] at least, and no more tokens than the model "
            f"has positions (max_position_embeddings={longest}); got {truncate_at}"
        )


@torch.inference_mode()
def encode(
    sentences: Sequence[str],
    batch_size: int = 32,
    *,
    model: FastBertModel | None = None,
    tokenizer: Any = None,
    truncate_at: int | None = None,
    show_progress_bar: bool | None = None,
) -> Tensor:
    """The checkpoint's sentence embeddings: mean-pooled, normalised, one row per sentence.

    Args:
        sentences: The sentences, a list of strings.
        batch_size: Sentences per forward pass.
        model: A :class:`~literate_transformer.fast.bert.FastBertModel` (compiled or not); by default the
            offline checkpoint's.
        tokenizer: Its tokenizer; by default the checkpoint's.
        truncate_at: Tokens kept per sentence (``[CLS]`` and ``[SEP]`` included); by default the
            checkpoint's :func:`max_seq_length`.
        show_progress_bar: Show one; ``None``: on a corpus of more than :data:`PROGRESS_BAR_BATCHES` batches.

    Returns:
        ``(len(sentences), E)``, each row of Euclidean norm 1, in the order of ``sentences``.

    Raises:
        TypeError: for ``sentences`` that is not a list of strings, a ``batch_size`` or ``truncate_at`` that is
            not an int, or a ``model`` that is not a :class:`~literate_transformer.fast.bert.FastBertModel`.
        ValueError: for an empty list, a ``batch_size`` below 1, or a ``truncate_at`` outside
            ``[2, max_position_embeddings]``.
    """
    _check_encode_inputs(sentences, batch_size)
    model = _default_model() if model is None else model
    tokenizer = _default_tokenizer() if tokenizer is None else tokenizer
    truncate_at = max_seq_length() if truncate_at is None else truncate_at
    _check_model_and_length(model, truncate_at)
    device = model.embeddings.word_embeddings.weight.device
    dtype = model.embeddings.word_embeddings.weight.dtype
    # 1) Tokenize the whole corpus at once: ids as plain lists, their lengths known on the host.
    token_ids = tokenizer(list(sentences), truncation=True, max_length=truncate_at)["input_ids"]
    # 2) Longest first, so that each batch holds sentences of (nearly) one length.
    order = sorted(range(len(token_ids)), key=lambda position: -len(token_ids[position]))
    starts = range(0, len(order), batch_size)
    if show_progress_bar is None:
        show_progress_bar = len(starts) > PROGRESS_BAR_BATCHES
    if show_progress_bar:
        from tqdm import tqdm

        starts = tqdm(starts, desc="Batches")
    embeddings = torch.empty(len(order), model.config.hidden_size, device=device, dtype=dtype)
    for start in starts:
        chosen = order[start : start + batch_size]
        batch = PackedBatch([len(token_ids[position]) for position in chosen], device=device, dtype=dtype)
        # 3) The batch's real tokens end to end, through the fast encoder.
        flat_ids = torch.tensor([token for position in chosen for token in token_ids[position]], device=device)
        states = model.forward_packed(flat_ids, batch)
        # 4) Mean pooling: the sum of each sentence's token vectors over its length ...
        sentence_of_token = torch.repeat_interleave(
            torch.arange(batch.batch_size, device=device), torch.tensor(batch.lengths, device=device)
        )
        sums = states.new_zeros(batch.batch_size, states.shape[-1]).index_add_(0, sentence_of_token, states)
        means = sums / torch.tensor(batch.lengths, device=device, dtype=dtype)[:, None]
        # 5) ... normalised to length 1, and put back in the caller's order.
        embeddings[torch.tensor(chosen, device=device)] = F.normalize(means, p=2, dim=-1)
    return embeddings
