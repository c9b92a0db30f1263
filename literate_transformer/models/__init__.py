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

Which file registers which class is read from the files themselves
(``registered_models``), without importing them: converting a Llama
imports Llama's family and the families it builds on, no other.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

__all__ = ["registered_models"]


@functools.lru_cache(maxsize=1)
def registered_models() -> dict[str, str]:
    """The models the families register under HuggingFace's class names, each with its family's module.

    Read from the source (nothing imported): a name counts where its family's file registers it
    (``register(GPT2Model, ...)``) and defines it.

    >>> registered_models()["LlamaForCausalLM"]
    'llama'
    """
    found: dict[str, str] = {}
    for path in sorted(Path(__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
        defined |= {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "register":
                registered = {arg.id for arg in node.args if isinstance(arg, ast.Name)} & defined
                found.update(dict.fromkeys(sorted(registered), path.stem))
    return found
