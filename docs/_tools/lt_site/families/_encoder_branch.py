"""What the encoder branch's proofs and running examples share: the book example's batch, padded, on each family.

An encoder family whose record says all its page needs (its model, its sizes, the test that proves it) gets
its running example and its badge from :func:`record_family`, and no module of its own; a family with more
to show (ELECTRA's discriminator, XLM's languages, DeBERTa's two kinds of position keys) keeps a module that
uses the helpers here.  Not a family: :func:`~lt_site.families.collect` finds no ``PROOFS`` or ``EXAMPLES`` here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch
import transformers

from literate_transformer.core.records import FamilyRecord

from ..base import BOOK_DIMS, BOOK_EXAMPLE_SIZES, Proof, RunningExample, book_example, hf_and_ours, max_diff

#: The book example's sizes under the standard names BERT-like configs take.
BERT_SIZES = {name: value for name, value in BOOK_EXAMPLE_SIZES.items() if name != "num_labels"}
#: The legend in these examples: the book's, with T = 7 tokens, W = 10 (a narrower embedding), R = 8 (DeBERTa).
ENCODER_DIMS = dict(BOOK_DIMS, T=7, W=10, A=8)


def padded_batch(pad_token_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The book example's two sequences of 7 tokens, the second padded by 2 (padding holds ``pad_token_id``)."""
    example = book_example()
    mask = example["source_mask"]
    return example["source_ids"].masked_fill(mask == 0, pad_token_id), mask


def proof(config_class: str, model_class: str, sizes: dict[str, Any], pad_token_id: int = 0, **inputs: Any):
    """A badge's measurement: the largest difference of the last hidden states at the real tokens."""

    @torch.no_grad()
    def run() -> float:
        hf, ours = hf_and_ours(config_class, model_class, sizes, pad_token_id=pad_token_id)
        ids, mask = padded_batch(pad_token_id)
        theirs = hf(input_ids=ids, attention_mask=mask, **inputs).last_hidden_state
        return max_diff(ours(ids, mask, **inputs).last_hidden_state, theirs, mask.bool())

    return run


def example(build: Callable[[], torch.nn.Module], pad_token_id: int = 0, **inputs: Any) -> Callable[[], None]:
    """A running example: the family's model, built from its config, on the padded batch, with its attentions."""

    def run() -> None:
        torch.manual_seed(0)
        ids, mask = padded_batch(pad_token_id)
        build().eval()(ids, mask, output_attentions=True, **inputs)

    return run


def record_family(family: FamilyRecord) -> tuple[tuple[RunningExample, ...], tuple[Proof, ...]]:
    """An encoder family's ``EXAMPLES`` and ``PROOFS`` from its record: its model on the padded batch (the
    padding holding the record's ``pad_token_id``), and the badge of its last hidden state."""
    if not family.in_transformers():
        return (), ()
    config_class = getattr(transformers, family.config)
    model_class = getattr(importlib.import_module(f"literate_transformer.{family.module}"), family.example_model)
    pad_token_id = family.ids.get("pad_token_id", 0)
    config = dict(family.sizes, **family.ids)
    padding = f" with pad_token_id {pad_token_id}" if pad_token_id else ""
    running = RunningExample(
        family.key,
        f"{family.example}: 2 sequences of 7 tokens, the second padded by 2{padding}",
        dict(ENCODER_DIMS, **family.dims),
        example(lambda: model_class(config_class(**config)), pad_token_id=pad_token_id),
    )
    badge = Proof(
        f"models.{family.key}.{family.example_model}",
        f"transformers {family.example_model}",
        family.proof["test"],
        proof(family.config, family.example_model, dict(family.sizes), pad_token_id=pad_token_id),
        example=family.key,
    )
    return (running,), (badge,)
