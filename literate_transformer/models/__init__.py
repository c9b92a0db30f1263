"""Models under HuggingFace's names, one file per family, built from the package's shared parts.

Each module here is one family of the tree of chapter 12: its classes carry
``transformers``' class, module and parameter names, so that a checkpoint
loads by name and every number can be compared with HuggingFace's.  A family
imports the shared parts (:mod:`~literate_transformer.parts`: norms,
positions, feed-forward variants, attention) and its parent's modules, and
writes only what it changes: :mod:`~literate_transformer.models.roberta`
is BERT with padding-aware positions, :mod:`~literate_transformer.models.m2m_100`
is BART with pre-LN layers and sinusoids.  Its classes declare what the one
conversion from ``transformers`` needs to know
(:class:`~literate_transformer.models.registry.ConvertsFromHF`), and each
file ends with its registration with
:func:`~literate_transformer.models.registry.register`, which is how
:func:`~literate_transformer.models.registry.from_hf` finds it;
:func:`~literate_transformer.models.registry.supported` lists the
``transformers`` classes it converts.

Which family registers which class is read from the families' records
(``models/<family>.ini``, :mod:`~literate_transformer.core.records`), without
importing any family: converting a Llama imports Llama's family and the
families it builds on, no other.  A family is its file and its record, side
by side; a test checks that each file registers exactly the classes its
record names.
"""

from __future__ import annotations

import functools

from ..core.records import records

__all__ = ["registered_models"]


@functools.lru_cache(maxsize=1)
def registered_models() -> dict[str, str]:
    """The models the families register under HuggingFace's class names, each with its family's module.

    Read from the records' ``[transformers] models`` (nothing imported).

    >>> registered_models()["LlamaForCausalLM"]
    'llama'
    """
    return {name: found.key for found in records().values() for name in found.models}
