"""Each model family's proofs and running examples: from its record, or from a module of its own here.

Most families' proofs and running examples are what their records say
(:mod:`literate_transformer.core.records`): a decoder's logits on a padded
batch and its greedy, sampled or beam decoding of two prompts, an encoder's
last hidden state on a padded batch.  :func:`collect` makes those from the
records (:func:`lt_site.families.decoder_branch.record_family`,
:func:`lt_site.families._encoder_branch.record_family`).  A family with more
to show has a module here of its own name, defining ``PROOFS`` (a tuple of
:class:`lt_site.base.Proof`: its badges) and ``EXAMPLES`` (a tuple of
:class:`lt_site.base.RunningExample`: what its annotated-source page shows
each line computed on), and the modules of what belongs to no family (the
fast path, the lens, LoRA) define them the same way.  :func:`collect`
gathers all of them, by name in alphabetical order, so that a new family is
its record and, only if it has more to show, a module here.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

from literate_transformer.core.records import records

__all__ = ["collect"]


def _from_record(key: str) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The ``(EXAMPLES, PROOFS)`` a family's record makes, by its branch (none for a branch without a generic)."""
    family = records()[key]
    if family.branch == "decoder":
        from .decoder_branch import record_family
    elif family.branch == "encoder":
        from ._encoder_branch import record_family
    else:
        return (), ()
    return record_family(family)


def collect(attribute: str) -> tuple[Any, ...]:
    """Every family's and every module's ``attribute`` (``"PROOFS"`` or ``"EXAMPLES"``), concatenated by name: a
    module here, where there is one, else the family's record (a record with a running example)."""
    modules = {info.name for info in pkgutil.iter_modules([str(Path(__file__).parent)])}
    from_records = {key for key, family in records().items() if family.example and key not in modules}
    found: list[Any] = []
    for name in sorted(modules | from_records):
        if name in modules:
            found += getattr(importlib.import_module(f"{__name__}.{name}"), attribute, ())
        else:
            examples, proofs = _from_record(name)
            found += examples if attribute == "EXAMPLES" else proofs if attribute == "PROOFS" else ()
    return tuple(found)
