"""From ``transformers`` to the package: one registry, filled by the families themselves.

Every family's file (:mod:`literate_transformer.models`) says which
``transformers`` classes it rebuilds, by registering a converter for them::

    @register("GPT2Model", "GPT2LMHeadModel")
    def gpt2_from_hf(hf_model): ...

:func:`from_hf` finds the families by looking into the ``models`` folder
(every module in it is imported the first time :func:`from_hf` runs), so a
new family is one new file: nothing here, in the core or in the book
changes.  ``import literate_transformer`` loads no family at all.

Loading by name
---------------
The families keep HuggingFace's module and parameter names, so a converter
is mostly ``load_state_dict``: :func:`map_state_dict` renames the few keys
that differ (each family's key map says which, and why) and
:func:`check_state_dict` checks that every tensor of the model is given,
once, with its shape, naming every key that is not (never a silently
half-initialised model, which ``load_state_dict(strict=False)`` would give).

>>> "BertModel" in supported()
True
>>> from_hf(torch.nn.Linear(2, 2))
Traceback (most recent call last):
    ...
TypeError: from_hf cannot convert a torch.nn.modules.linear.Linear: it converts the transformers models ...
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

__all__ = [
    "register",
    "from_hf",
    "supported",
    "model_class",
    "check_state_dict",
    "map_state_dict",
    "load_by_name",
    "map_language_model_state_dict",
]

#: The ``transformers`` class names :func:`from_hf` converts, and the converter each family registered.
REGISTRY: dict[str, Callable[[nn.Module], nn.Module]] = {}

Converter = Callable[[nn.Module], nn.Module]


def register(*hf_class_names: str) -> Callable[[Converter], Converter]:
    """Register a converter for the ``transformers`` classes of these names (a family's file does it once).

    Raises:
        ValueError: when another family has registered one of the names already.
    """

    def decorate(converter: Converter) -> Converter:
        for name in hf_class_names:
            if name in REGISTRY and REGISTRY[name] is not converter:
                raise ValueError(f"{name} is registered twice: {REGISTRY[name].__module__} and {converter.__module__}")
            REGISTRY[name] = converter
        return converter

    return decorate


def _discover() -> None:
    """Import every family's module of this folder once: each registers its classes as it is imported."""
    package = __name__.rpartition(".")[0]
    for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if module.name != "registry":
            importlib.import_module(f"{package}.{module.name}")


def supported() -> list[str]:
    """The ``transformers`` class names :func:`from_hf` converts, sorted."""
    _discover()
    return sorted(REGISTRY)


def model_class(name: str) -> type | None:
    """The package's class of that name for a registered ``transformers`` class (``"GPT2LMHeadModel"``), or ``None``.

    Every family names its models as ``transformers`` does, so the registry is also where
    ``lt.GPT2LMHeadModel`` is found.
    """
    if name not in supported():
        return None
    return getattr(sys.modules[REGISTRY[name].__module__], name, None)


def from_hf(model: nn.Module) -> nn.Module:
    """The package's equivalent of a ``transformers`` model: the same config and weights, in evaluation mode.

    The conversion is chosen by the model's class, exactly: a class no family
    registered (a BERT with a task head the package does not build, say) is
    refused.

    Args:
        model: A ``transformers`` model.

    Returns:
        The package's model.

    Raises:
        TypeError: for any other object, naming the supported classes.
    """
    cls = type(model)
    names = supported()
    if cls.__name__ not in REGISTRY or not cls.__module__.startswith("transformers."):
        raise TypeError(
            f"from_hf cannot convert a {cls.__module__}.{cls.__qualname__}: it converts the transformers models "
            f"{', '.join(names)}"
        )
    return REGISTRY[cls.__name__](model).eval()


def check_state_dict(
    mapped: Mapping[str, Tensor], expected: Mapping[str, Tensor], unexpected: Sequence[str], model: str
) -> dict[str, Tensor]:
    """Check a renamed checkpoint against the model's own ``state_dict()``: every key, every shape.

    Args:
        mapped: The checkpoint's tensors under the model's names.
        expected: The model's ``state_dict()``.
        unexpected: Checkpoint keys that map to no parameter.
        model: The model's name, for the message.

    Returns:
        ``mapped``, as a dict.

    Raises:
        ValueError: listing every missing, unexpected and mis-shaped key at once.
    """
    missing = sorted(set(expected) - set(mapped))
    misshaped = [
        f"{key}: checkpoint {tuple(mapped[key].shape)}, model {tuple(expected[key].shape)}"
        for key in sorted(mapped)
        if key in expected and tuple(mapped[key].shape) != tuple(expected[key].shape)
    ]
    problems = []
    if missing:
        problems.append("missing tensors: " + ", ".join(missing))
    if unexpected:
        problems.append("unexpected tensors: " + ", ".join(sorted(unexpected)))
    if misshaped:
        problems.append("mis-shaped tensors: " + "; ".join(misshaped))
    if problems:
        raise ValueError(f"the checkpoint does not fit {model}: " + " | ".join(problems))
    return dict(mapped)


def map_state_dict(
    state_dict: Mapping[str, Tensor],
    expected: Mapping[str, Tensor],
    key_map: Callable[[str], str | None],
    model: str,
) -> dict[str, Tensor]:
    """Rename a checkpoint's tensors with a family's key map, and check them all (:func:`check_state_dict`).

    Args:
        state_dict: The checkpoint's tensors.
        expected: The target model's ``state_dict()``.
        key_map: A checkpoint key to the model's, or ``None`` for a tensor the model does not keep
            (a constant buffer an older release saved, a head the model does not have).
        model: The model's name, for the message.

    Returns:
        A dictionary with exactly the keys of ``expected``.

    Raises:
        ValueError: listing every missing, unexpected, repeated and mis-shaped key.
    """
    mapped: dict[str, Tensor] = {}
    unexpected: list[str] = []
    for original_key, tensor in state_dict.items():
        key = key_map(original_key)
        if key is None:
            continue
        if key not in expected:
            unexpected.append(original_key)
        elif key in mapped and not (mapped[key] is tensor or torch.equal(mapped[key], tensor)):
            unexpected.append(f"{original_key} (a second, different tensor for {key})")
        else:
            mapped[key] = tensor
    return check_state_dict(mapped, expected, unexpected, model)


def load_by_name(model: nn.Module, hf_model: nn.Module) -> nn.Module:
    """Load a ``transformers`` model's weights into the package's model that keeps every one of its names.

    The converter of a family whose module and parameter names are all
    HuggingFace's: the key map is the identity, and :func:`map_state_dict`
    still checks that every tensor is given once, with its shape.  A
    constant buffer that neither model saves (``position_ids`` in most
    ``transformers`` encoders) is not a key on either side.

    Args:
        model: The package's model, built from ``hf_model``'s config.
        hf_model: The ``transformers`` model.

    Returns:
        ``model``, loaded and in evaluation mode.

    Raises:
        ValueError: listing every missing, unexpected and mis-shaped key.
    """
    state = map_state_dict(hf_model.state_dict(), model.state_dict(), lambda key: key, type(model).__name__)
    model.load_state_dict(state, strict=True)
    return model.eval()


def map_language_model_state_dict(
    state_dict: Mapping[str, Tensor],
    expected: Mapping[str, Tensor],
    model: str,
    *,
    table: str,
    tied: bool,
    dropped: Sequence[str] = (),
    head: str = "lm_head.weight",
) -> dict[str, Tensor]:
    """A language model's checkpoint, whose names are the model's: constant buffers dropped, a tied head checked.

    Args:
        state_dict: The checkpoint's tensors.
        expected: The model's ``state_dict()``.
        model: The model's name, for the messages.
        table: The key of the token-embedding table (``"transformer.wte.weight"``).
        tied: Whether the model's head *is* the table (``config.tie_word_embeddings``).
        dropped: Endings of keys older releases saved for constant buffers (a causal mask, rotary angles), which
            the model builds when it runs.
        head: The key of the head's weight.

    Returns:
        A dictionary with exactly the keys of ``expected``.

    Raises:
        ValueError: listing every missing, unexpected and mis-shaped key (:func:`map_state_dict`), or naming a
            head that the config ties to the table but that holds other values.
    """
    dropped = tuple(dropped)

    def key_map(key: str) -> str | None:
        return None if dropped and key.endswith(dropped) else key

    mapped = map_state_dict(state_dict, expected, key_map, model)
    if tied and head in state_dict and not torch.equal(state_dict[head], mapped[table]):
        raise ValueError(
            f"{head} differs from {table}: this {model}'s head is not tied, but its config says "
            "tie_word_embeddings=True"
        )
    return mapped
