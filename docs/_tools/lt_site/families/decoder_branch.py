"""The decoder branch on the site: its families' proofs and running examples, read from their records, and the
decoding proofs.

Every decoder family of the branch is proved the same way on the site: a
random ``transformers`` model with the book example's sizes (under the
family's names), the package's from ``from_hf``, and the largest difference
of their logits at the real positions of the book example's right-padded
ids.  Its running example runs the package's model on two prompts of 5
tokens, the second left-padded by 2, then writes 3 new tokens with one of
the decodings.  All of it is in the family's record
(:mod:`literate_transformer.core.records`: its sizes, its model in words,
its decoding), so :func:`record_family` makes both, and a decoder family
needs no module here.  This module also holds the proofs of the decoding
strategies and of the rotary part, which belong to no family.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch
import transformers
from transformers.generation.logits_process import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from literate_transformer.book.decoding import filter_scores
from literate_transformer.core.records import FamilyRecord
from literate_transformer.parts.rotary import RotaryEmbedding

from ..base import (
    BOOK_DIMS,
    BOOK_EXAMPLE_SIZES,
    Proof,
    RunningExample,
    book_example,
    config_sizes,
    hf_and_ours,
    max_diff,
)

__all__ = ["SIZES", "LOGITS_TEST", "logits_difference", "logits_proof", "decoder_example", "record_family", "PROOFS"]

#: The book example's sizes under the standard names every transformers config answers to.
SIZES = config_sizes(None, BOOK_DIMS, max_position_embeddings=BOOK_EXAMPLE_SIZES["max_position_embeddings"])
#: The running examples' prompts: 2 of 5 tokens, the second left-padded by 2.
PROMPT_LENGTH, PADDING = 5, 2
#: The test every decoder family runs on its own shapes (its file's ``Test...`` class inherits it).
LOGITS_TEST = (
    "tests/families.py::DecoderFamilyTests.test_logits_equal_hfs_at_the_real_positions_of_a_right_padded_batch"
)


@torch.no_grad()
def logits_difference(config_class: str, model_class: str, sizes: dict[str, Any], **ids: int) -> float:
    """max |ours - transformers| of the logits at the real positions of the book example's right-padded ids."""
    hf, ours = hf_and_ours(config_class, model_class, sizes, **ids)
    ids = book_example()["source_ids"]
    mask = torch.ones_like(ids)
    mask[1, -2:] = 0  # right padding: every query row keeps a real key
    return max_diff(ours(ids, attention_mask=mask).logits, hf(input_ids=ids, attention_mask=mask).logits, mask.bool())


def logits_proof(family: FamilyRecord) -> Proof:
    """A decoder family's badge: its example's model's logits equal ``transformers``' on the book example (the
    test its record names, or the branch's)."""
    model, config = family.example_model, family.config
    return Proof(
        f"models.{family.key}.{model}",
        f"transformers {model}",
        family.proof.get("test", LOGITS_TEST),
        lambda: logits_difference(config, model, dict(family.sizes), **family.ids),
        example=family.key,
    )


def decoder_example(
    name: str, what: str, build: Callable[[], torch.nn.Module], dims: dict[str, int], **decoding: Any
) -> RunningExample:
    """A running example: ``build()``'s model on 2 prompts (the second left-padded by 2), then 3 new tokens.

    Args:
        name: The example's name (the family's).
        what: The model, in words, for the page.
        build: Builds the package's model (random weights).
        dims: The legend's sizes that differ from the book example's.
        **decoding: ``generate()``'s options (greedy without any).
    """

    def run() -> None:
        torch.manual_seed(0)
        model = build().eval()
        prompt = torch.randint(3, SIZES["vocab_size"], (2, PROMPT_LENGTH))
        prompt_mask = torch.ones(2, PROMPT_LENGTH, dtype=torch.long)
        prompt_mask[1, :PADDING] = 0
        model(prompt, attention_mask=prompt_mask, output_attentions=True)
        model.generate(prompt, prompt_mask, max_new_tokens=3, **decoding)

    how = ", ".join(f"{key}={value}" for key, value in decoding.items()) or "greedy"
    description = (
        f"{what}, with the book example's sizes: 2 prompts of {PROMPT_LENGTH} tokens, the second left-padded by "
        f"{PADDING}, then 3 new tokens ({how})"
    )
    return RunningExample(name, description, dict(BOOK_DIMS, S=PROMPT_LENGTH, **dims), run)


def record_family(family: FamilyRecord) -> tuple[tuple[RunningExample, ...], tuple[Proof, ...]]:
    """A decoder family's ``EXAMPLES`` and ``PROOFS`` from its record: its running example and its logits' badge.

    Nothing where this release of ``transformers`` lacks the family (nothing to build the example's config
    from, nothing to prove it against).
    """
    if not family.in_transformers():
        return (), ()
    config_class = getattr(transformers, family.config)
    model_class = getattr(importlib.import_module(f"literate_transformer.{family.module}"), family.example_model)
    config = dict(family.sizes, **family.ids)
    example = decoder_example(
        family.key, family.example, lambda: model_class(config_class(**config)), dict(family.dims), **family.generate
    )
    return (example,), (logits_proof(family),)


# ---------------------------------------------------------------------------
# The proofs that belong to no family: the filters of sampling, beam search, the rotary angles
# ---------------------------------------------------------------------------
@torch.no_grad()
def _filters() -> float:
    scores = torch.randn(4, SIZES["vocab_size"], generator=torch.Generator().manual_seed(0)) * 3
    warpers = LogitsProcessorList([TemperatureLogitsWarper(0.7), TopKLogitsWarper(9), TopPLogitsWarper(0.8)])
    # Compared as the probabilities they leave (a filtered score is -inf on both sides).
    ours = filter_scores(scores, 0.7, 9, 0.8).softmax(-1)
    return max_diff(ours, warpers(None, scores).softmax(-1))


@torch.no_grad()
def _beam_search() -> float:
    hf, ours = hf_and_ours("GPT2Config", "GPT2LMHeadModel", SIZES, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    prompt = book_example()["source_ids"][:, :PROMPT_LENGTH]
    expected = hf.generate(prompt, max_new_tokens=6, num_beams=3, do_sample=False)
    # The largest difference between the token ids written: 0 when they are the same ids.
    return max_diff(ours.generate(prompt, max_new_tokens=6, num_beams=3), expected)


@torch.no_grad()
def _rotary() -> float:
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = transformers.LlamaConfig(**SIZES)
    theirs = LlamaRotaryEmbedding(config=config)
    positions = torch.arange(SIZES["max_position_embeddings"])[None]
    expected = theirs(torch.zeros(1), positions)
    actual = RotaryEmbedding(config.head_dim)(positions)
    return max(max_diff(mine, hf) for mine, hf in zip(actual, expected, strict=True))


PROOFS = (
    Proof(
        "book.decoding.filter_scores",
        "transformers Temperature, TopK and TopP LogitsWarpers",
        "tests/book/test_decoding.py::test_the_three_filters_apply_in_transformers_order",
        _filters,
        example="book",
    ),
    Proof(
        "book.decoding.beam_search",
        "transformers generate(num_beams=3)",
        "tests/book/test_decoding.py::test_every_decoding_with_end_of_sequence_tokens_gives_hfs_ids",
        _beam_search,
        example="book",
    ),
    Proof(
        "parts.rotary.RotaryEmbedding",
        "transformers LlamaRotaryEmbedding",
        "tests/parts/test_rotary.py::test_llamas_cos_and_sin_equal_transformers_rotary_embedding",
        _rotary,
        example="book",
    ),
)
