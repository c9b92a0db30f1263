"""From ``transformers`` to the package: one registry, filled by the families themselves.

Every family's file (:mod:`literate_transformer.models`) registers the
models it rebuilds, which carry ``transformers``' class names::

    register(GPT2Model, GPT2LMHeadModel)

:func:`from_hf` finds the family of a class in the families' records
(``models/<family>.ini``, :mod:`~literate_transformer.core.records`, whose
``models`` name the classes its file registers) and imports that family
alone, so a new family is its file and its record: nothing here, in the
core or in the book changes.  ``import literate_transformer`` loads no
family at all.

One conversion, declared
------------------------
The families keep HuggingFace's module and parameter names, so converting
a ``transformers`` model is one procedure for all of them
(:meth:`ConvertsFromHF.from_hf`): build the package's class of the same
name from the model's config, rename the few checkpoint keys that differ,
check that every tensor of the model is given once, with its shape
(:func:`check_state_dict`, never a silently half-initialised model, which
``load_state_dict(strict=False)`` would give), load, and switch to
evaluation mode.  What differs between families is data, which each
declares on its classes: the prefix checkpoints of a model with heads put
before its keys (``hf_prefix``), the constant buffers older releases saved
(``hf_dropped``), the head that is the token table when the config
ties them (``hf_ties``), older names of parameters (``hf_renames``), the heads of larger models it
does not have (``hf_heads``), a pooler that a checkpoint has or not
(``hf_pooler``); a family that reads the config its own way writes
:meth:`ConvertsFromHF.hf_config`, and one with a check of its own overrides
:meth:`ConvertsFromHF.map_hf_state_dict`.

Its config's checks are declared the same way, as data
(:class:`~literate_transformer.core.config.ChecksConfig`, which
:class:`ConvertsFromHF` extends): the ``model_type`` and class name of its
configs, the options it does not build, the fields of its width, heads and
activation, its counts that must be positive, and, where no table says it,
a ``check_own_config`` of its own.

>>> "BertModel" in supported()
True
>>> from_hf(torch.nn.Linear(2, 2))
Traceback (most recent call last):
    ...
TypeError: from_hf cannot convert a torch.nn.modules.linear.Linear: it converts the transformers models ...
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from ..core.config import ChecksConfig

__all__ = [
    "ConvertsFromHF",
    "register",
    "from_hf",
    "supported",
    "model_class",
    "check_state_dict",
    "map_state_dict",
]

#: The ``transformers`` class names :func:`from_hf` converts, and the package's class of that name.
REGISTRY: dict[str, type[ConvertsFromHF]] = {}


def register(*models: type[ConvertsFromHF]) -> None:
    """Register a family's models, each under its class name, which is ``transformers``' (a family's file does it once).

    Raises:
        TypeError: for a class that does not convert from ``transformers`` (:class:`ConvertsFromHF`).
        ValueError: when another family has registered one of the names already.
    """
    for model in models:
        if not (isinstance(model, type) and issubclass(model, ConvertsFromHF)):
            raise TypeError(f"register takes the family's model classes (ConvertsFromHF), got {model!r}")
        name = model.__name__
        if name in REGISTRY and REGISTRY[name] is not model:
            raise ValueError(f"{name} is registered twice: {REGISTRY[name].__module__} and {model.__module__}")
        REGISTRY[name] = model


def _discover(name: str | None = None) -> None:
    """Import the family that registers ``name`` (every family when ``None``): it registers as it is imported.

    Which family registers which name is read from the records (``models.registered_models``),
    so converting one family imports that family and what it builds on, no other.
    """
    from . import registered_models

    modules = registered_models()
    wanted = sorted(set(modules.values())) if name is None else [modules[name]] if name in modules else []
    package = __name__.rpartition(".")[0]
    for module in wanted:
        importlib.import_module(f"{package}.{module}")


def supported() -> list[str]:
    """The ``transformers`` class names :func:`from_hf` converts, sorted (every family is imported)."""
    _discover()
    return sorted(REGISTRY)


def model_class(name: str) -> type | None:
    """The package's class of that name for a registered ``transformers`` class (``"GPT2LMHeadModel"``), or ``None``.

    Every family names its models as ``transformers`` does, so the registry is also where
    ``lt.GPT2LMHeadModel`` is found.  Only the family that registers the name is imported.
    """
    _discover(name)
    return REGISTRY.get(name)


def from_hf(model: nn.Module) -> nn.Module:
    """The package's equivalent of a ``transformers`` model: the same config and weights, in evaluation mode.

    The conversion is chosen by the model's class, exactly: a class no family
    registered (a BERT with a task head the package does not build, say) is
    refused.

    Args:
        model: A ``transformers`` model.

    Returns:
        The package's model (:meth:`ConvertsFromHF.from_hf` of its class of the same name).

    Raises:
        TypeError: for any other object, naming the supported classes.
    """
    cls = type(model)
    if model_class(cls.__name__) is None or not cls.__module__.startswith("transformers."):
        raise TypeError(
            f"from_hf cannot convert a {cls.__module__}.{cls.__qualname__}: it converts the transformers models "
            f"{', '.join(supported())}"
        )
    return REGISTRY[cls.__name__].from_hf(model).eval()


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


class ConvertsFromHF(ChecksConfig):
    """The one conversion from ``transformers``, driven by what a family declares on its classes.

    A family's stack and its model with a head inherit it (through their
    parents) and set what differs, as class attributes.  Everything else is
    this procedure, the same for every family (:meth:`from_hf`).  A model
    with a head converts as its stack (its ``model_class``) declares, and
    adds what it declares itself (its head).
    """

    #: The family's name in messages (the class's name when ``None``).
    hf_name: ClassVar[str | None] = None
    #: What checkpoints of a model with heads put before every key of this model (BERT's ``"bert."``), stripped.
    hf_prefix: ClassVar[str] = ""
    #: Endings of keys that older releases saved for constant buffers (a causal mask, rotary frequencies), dropped.
    hf_dropped: ClassVar[tuple[str, ...]] = ()
    #: Key prefixes of heads that checkpoints of larger models carry and this model does not have (BERT's
    #: pretraining heads, ``"cls."``), dropped.
    hf_heads: ClassVar[tuple[str, ...]] = ()
    #: Older names of parameters, by the last part of their key (TensorFlow's layer norms' ``gamma`` and ``beta``).
    hf_renames: ClassVar[Mapping[str, str]] = {}
    #: The key prefix of a pooler that a checkpoint may have or not (``"pooler."``); the model is built with one
    #: (``add_pooling_layer``) where the checkpoint has it.
    hf_pooler: ClassVar[str | None] = None
    #: ``(copy, original)`` pairs of keys that are one tensor when the head is tied to the token table (the head
    #: and the table), whose copy in a checkpoint must hold the original's values.
    hf_ties: ClassVar[tuple[tuple[str, str], ...]] = ()

    @classmethod
    def declared(cls, name: str) -> Any:
        """A declaration (``"hf_dropped"``, ...): this class's, or else its stack's (``model_class``)."""
        value = getattr(cls, name)
        stack = getattr(cls, "model_class", None)
        return value if value or stack is None else getattr(stack, name)

    @classmethod
    def hf_key(cls, key: str) -> str | None:
        """A checkpoint's key as this model names it, or ``None`` for a tensor the model does not keep.

        The same name, but for what the family declares: ``hf_heads`` and ``hf_dropped`` dropped, ``hf_prefix``
        stripped, ``hf_renames`` applied to the key's last part.
        """
        dropped, heads = cls.declared("hf_dropped"), cls.hf_heads
        if (heads and key.startswith(heads)) or (dropped and key.endswith(dropped)):
            return None
        key = key.removeprefix(cls.hf_prefix) if cls.hf_prefix else key
        path, _, leaf = key.rpartition(".")
        return f"{path}.{cls.hf_renames[leaf]}" if leaf in cls.hf_renames else key

    @classmethod
    def map_hf_state_dict(
        cls, state_dict: Mapping[str, Tensor], expected: Mapping[str, Tensor], tied: bool = False
    ) -> dict[str, Tensor]:
        """A checkpoint's tensors under this model's names (:meth:`hf_key`), every one checked.

        Args:
            state_dict: The checkpoint's tensors.
            expected: The model's ``state_dict()``.
            tied: Whether the config ties the head to the token table (``tie_word_embeddings``).

        Returns:
            A dictionary with exactly the keys of ``expected``.

        Raises:
            ValueError: listing every missing, unexpected and mis-shaped key (:func:`map_state_dict`), or naming a
                head that the config ties to the table but that holds other values.
        """
        name = cls.declared("hf_name") or cls.__name__
        for copy, original in cls.hf_ties if tied else ():
            if (
                copy in state_dict
                and original in state_dict
                and not torch.equal(state_dict[copy], state_dict[original])
            ):
                raise ValueError(
                    f"{copy} differs from {original}: this {name}'s head is not tied, and the model ties it"
                )
        return map_state_dict(state_dict, expected, cls.hf_key, name)

    @classmethod
    def head_is_tied(cls, config: Any) -> bool:
        """Whether the model's head is its token table: as the config says (``tie_word_embeddings``)."""
        return bool(getattr(config, "tie_word_embeddings", False))

    @classmethod
    def hf_config(cls, hf_model: nn.Module, **config_changes: Any) -> Any:
        """The config to build from: ``hf_model``'s, as it is.

        Raises:
            TypeError: for config changes, which only a family that takes them accepts (BERT's).
        """
        if config_changes:
            raise TypeError(
                f"{cls.__name__}.from_hf() takes no config changes, got {', '.join(sorted(config_changes))}"
            )
        return hf_model.config

    @classmethod
    def build_from_hf(cls, hf_model: nn.Module, **config_changes: Any) -> nn.Module:
        """The model to load ``hf_model``'s weights into: built from :meth:`hf_config`, with a pooler where the
        checkpoint has one (``hf_pooler``)."""
        options = {}
        if cls.hf_pooler:
            options["add_pooling_layer"] = any(
                (cls.hf_key(key) or "").startswith(cls.hf_pooler) for key in hf_model.state_dict()
            )
        return cls(cls.hf_config(hf_model, **config_changes), **options)

    @classmethod
    def from_hf(cls, hf_model: nn.Module, **config_changes: Any) -> Any:
        """This class with the config and weights of the ``transformers`` model of the same name, in evaluation mode.

        Args:
            hf_model: The ``transformers`` model.
            **config_changes: Config fields to override, where the family takes them (:meth:`build_from_hf`).

        Raises:
            ValueError: listing every missing, unexpected and mis-shaped tensor, or a head the config ties that
                is not the table.
        """
        model = cls.build_from_hf(hf_model, **config_changes)
        tied = cls.head_is_tied(hf_model.config)
        model.load_state_dict(cls.map_hf_state_dict(hf_model.state_dict(), model.state_dict(), tied), strict=True)
        return model.eval()
