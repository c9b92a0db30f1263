"""Chapter 18 on the site: the lens's proofs (the badges), on the Llama family's running example.

Not a model family: :mod:`literate_transformer.lens` reads and changes any model's forward pass.  Its
badges run on a random ``transformers`` Llama of the Llama example's sizes (4 query heads sharing 2 key/value
heads) and the package's copy of it (``from_hf``):

* :func:`~literate_transformer.lens.run_with_cache`: the cache of a run against what ``transformers`` reports
  with ``output_hidden_states`` and ``output_attentions``;
* :func:`~literate_transformer.lens.patch`: a corrupted run, the clean run's first layer patched in at every
  position, against the clean run (0: the same numbers);
* :func:`~literate_transformer.lens.patch`: a patch of every module by the identity against the unpatched run
  (0: the same numbers).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

from literate_transformer import lens
from literate_transformer.core.records import record

from ..base import Proof, book_example, hf_and_ours, max_diff

__all__ = ["PROOFS"]

#: Llama's running example's sizes (its record's).
LLAMA_SIZES = dict(record("llama").sizes)

#: The module whose output the patch proof puts back: the first layer, every position.
PATCHED = "model.layers.0"


@lru_cache(maxsize=1)
def _example() -> dict[str, Any]:
    hf, ours = hf_and_ours("LlamaConfig", "LlamaForCausalLM", LLAMA_SIZES, bos_token_id=1, eos_token_id=2)
    clean = book_example()["source_ids"]
    generator = torch.Generator().manual_seed(1)
    corrupted = torch.randint(3, LLAMA_SIZES["vocab_size"], clean.shape, generator=generator)
    return {"hf": hf, "ours": ours, "clean": clean, "corrupted": corrupted}


@torch.no_grad()
def _cache() -> float:
    """max |cache - transformers'| over the hidden states (embeddings, each layer, the last after the norm) and
    every layer's attention probabilities."""
    example = _example()
    _, cache = lens.run_with_cache(example["ours"], input_ids=example["clean"])
    reported = example["hf"](input_ids=example["clean"], output_hidden_states=True, output_attentions=True)
    layers = LLAMA_SIZES["num_hidden_layers"]
    names = ["model.embed_tokens", *(f"model.layers.{i}" for i in range(layers - 1)), "model.norm"]
    if len(names) != len(reported.hidden_states):
        return float("inf")
    differences = [max_diff(cache[name], hidden) for name, hidden in zip(names, reported.hidden_states, strict=True)]
    differences += [max_diff(cache.attentions(i), weights) for i, weights in enumerate(reported.attentions)]
    return max(differences)


@torch.no_grad()
def _clean_into_corrupted() -> float:
    """max |corrupted run with the clean first layer patched in at every position - clean run| of the logits."""
    example = _example()
    model = example["ours"]
    clean, cache = lens.run_with_cache(model, names=PATCHED, input_ids=example["clean"])
    with lens.patch(model, {PATCHED: lambda hidden: cache[PATCHED]}):
        patched = model(input_ids=example["corrupted"])
    return max_diff(patched.logits, clean.logits)


@torch.no_grad()
def _identity() -> float:
    """max |run with every module patched by the identity - unpatched run| of the logits."""
    example = _example()
    model = example["ours"]
    unpatched, cache = lens.run_with_cache(model, input_ids=example["clean"])
    with lens.patch(model, dict.fromkeys(cache.keys(), lambda hidden: hidden)):
        patched = model(input_ids=example["clean"])
    return max_diff(patched.logits, unpatched.logits)


PROOFS = (
    Proof(
        "lens.run_with_cache",
        "transformers output_hidden_states and output_attentions (Llama)",
        "tests/test_lens.py::test_a_llamas_cache_is_transformers_hidden_states_and_attentions",
        _cache,
        example="llama",
    ),
    Proof(
        "lens.patch",
        "the clean run, its first layer patched into a corrupted run at every position",
        "tests/test_lens.py::test_a_patched_position_changes_that_position_and_the_later_ones_only",
        _clean_into_corrupted,
        tolerance=0.0,
        example="llama",
    ),
    Proof(
        "lens.patch",
        "the unpatched run, every module patched by the identity",
        "tests/test_lens.py::test_every_family_caches_patches_and_is_restored",
        _identity,
        tolerance=0.0,
        example="llama",
    ),
)
