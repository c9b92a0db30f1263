"""Each model family's proofs and running examples, one module a family, found by name.

A family's module here may define ``PROOFS`` (a tuple of
:class:`lt_site.base.Proof`: its badges) and ``EXAMPLES`` (a tuple of
:class:`lt_site.base.RunningExample`: what its annotated-source page shows
each line computed on).  :func:`collect` gathers them for
:mod:`lt_site.proofs` and :mod:`lt_site.examples`, module by module in
alphabetical order, so that a new family is a new module and nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

__all__ = ["collect"]


def collect(attribute: str) -> tuple[Any, ...]:
    """Every family module's ``attribute`` (``"PROOFS"`` or ``"EXAMPLES"``), concatenated."""
    found: list[Any] = []
    for module in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda info: info.name):
        found += getattr(importlib.import_module(f"{__name__}.{module.name}"), attribute, ())
    return tuple(found)
