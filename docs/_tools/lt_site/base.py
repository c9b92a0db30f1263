"""What the site's proofs and running examples are made of, for the package's parts and every family alike.

A :class:`Proof` measures one equality on a running example (a badge on the
site); a :class:`RunningExample` runs some of the package's code so that the
annotated source can show what each line computed.  The core's are in
:mod:`lt_site.proofs` and :mod:`lt_site.examples`; each model family adds
its own in a module of :mod:`lt_site.families` (``PROOFS`` and ``EXAMPLES``),
found there by name, so that a new family edits nothing here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import torch
import transformers
from torch import Tensor, nn

from literate_transformer.core.config import TransformerConfig
from literate_transformer.core.records import ROOT, config_sizes, record
from literate_transformer.models.registry import from_hf
from literate_transformer.pretraining.training_step import randomized

from .measurement import Measurement

__all__ = [
    "ATOL",
    "Proof",
    "Measurement",
    "RunningExample",
    "BOOK_EXAMPLE_SIZES",
    "BOOK_DIMS",
    "config_sizes",
    "max_diff",
    "first",
    "book_example",
    "randomized",
    "hf_and_ours",
]

#: The tolerance of the float32 comparisons (the tests' absolute tolerance).
ATOL = 1e-5


@dataclass(frozen=True)
class Proof:
    """One equality, measured on the running example.

    Attributes:
        subject: The object it is about, relative to the package (``"models.bert.BertSelfAttention"``).
        reference: What it equals, as the badge names it.
        test: The test that proves it in general (``path::function``).
        run: Runs both sides and returns the largest absolute difference.
        tolerance: The largest difference allowed.
        example: The running example it ran on (a name of :func:`lt_site.examples.running_examples`).
        dtype: What was compared: ``"float32"`` numbers, or ``"int64"`` token ids (then 0 means identical).
    """

    subject: str
    reference: str
    test: str
    run: Callable[[], float] = field(repr=False)
    tolerance: float = ATOL
    example: str = "bert"
    dtype: str = "float32"


@dataclass(frozen=True)
class RunningExample:
    """An input run through some modules so that their pages can show what each line computed.

    Attributes:
        name: A short name.
        description: One sentence for the page: what ran, on what input.
        dims: The sizes of the legend's letters in this example (``{"B": 1, "T": 7, ...}``).
        run: What to run.
    """

    name: str
    description: str
    dims: dict[str, int]
    run: Callable[[], object] = field(repr=False)


#: The sizes of the legend's letters in an example run on the book example's sizes (B = 2, T = 5, S = 7; the
#: sizes all distinct, to tell the letters apart): the root's record's (``models/transformer.ini``).
BOOK_DIMS: dict[str, int] = dict(record(ROOT).dims)

#: The small configuration of the book's running example (the root's record's sizes): the legend's sizes under
#: the standard names, a position table longer than the example's sequences, and C labels.
BOOK_EXAMPLE_SIZES: dict[str, Any] = dict(record(ROOT).sizes)


def max_diff(ours: Tensor, theirs: Tensor, where: Tensor | None = None) -> float:
    if where is not None:
        ours, theirs = ours[where], theirs[where]
    return (ours.float() - theirs.float()).abs().max().item()


def first(output: Any) -> Tensor:
    """A HuggingFace module's main output, whether it returns a tensor or a tuple (releases differ)."""
    return output[0] if isinstance(output, tuple) else output


@lru_cache(maxsize=1)
def book_example() -> dict[str, Any]:

    generator = torch.Generator().manual_seed(0)
    config = TransformerConfig(
        **BOOK_EXAMPLE_SIZES, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, layer_norm_eps=1e-5
    )
    batch, target_length, source_length = 2, 5, 7
    source_mask = torch.ones(batch, source_length, dtype=torch.long)
    source_mask[1, -2:] = 0
    return {
        "config": config,
        "hidden": torch.randn(batch, target_length, config.hidden_size, generator=generator),
        "memory": torch.randn(batch, source_length, config.hidden_size, generator=generator),
        "source_ids": torch.randint(3, config.vocab_size, (batch, source_length), generator=generator),
        "source_mask": source_mask,
    }


def hf_and_ours(config_class: str, model_class: str, sizes: dict[str, Any], **ids: int) -> tuple[nn.Module, nn.Module]:
    """A ``transformers`` model with random weights (layer norms included), and the package's from ``from_hf``."""

    config = getattr(transformers, config_class)(**sizes, **ids, attn_implementation="eager")
    torch.manual_seed(0)
    hf = randomized(getattr(transformers, model_class)(config))
    return hf, from_hf(hf)
