r"""Configuration: the handful of numbers that define a transformer.

Every module in this package is built from one object that answers questions
such as *how wide is a token vector?* (``hidden_size``) or *how many heads
share that width?* (``num_attention_heads``).  HuggingFace keeps these numbers
in :class:`transformers.BertConfig`; the book *Natural Language Processing
with Transformers* passes such ``AutoConfig`` objects straight into its
from-scratch modules.  We do both:

* :class:`TransformerConfig` is a plain :func:`~dataclasses.dataclass` whose
  field names are **exactly** those of :class:`transformers.BertConfig`, so a
  reader can move between the two without a dictionary.
* Every module of the book's path and of BERT accepts either a
  :class:`TransformerConfig` *or* a ``transformers`` configuration object
  with BERT's field names; :func:`as_config` converts the latter and
  validates it.  The other families (GPT-2's ``n_embd``, BART's
  ``d_model``, Llama's ``rms_norm_eps``) read their own ``transformers``
  config, under its own names, in their own module of
  :mod:`literate_transformer.models`: this file knows no family but BERT's
  field names.

Validation happens once, when the config is built.  A config that would only
fail deep inside a matrix multiply (for example a hidden size that does not
split evenly into heads) is refused here with a message that names both
numbers.

The default values are those of ``bert-base-uncased``:

>>> config = TransformerConfig()
>>> config.hidden_size, config.num_attention_heads, config.head_size
(768, 12, 64)
>>> TransformerConfig(hidden_size=100, num_attention_heads=12)
Traceback (most recent call last):
    ...
ValueError: hidden_size (100) must be divisible by num_attention_heads (12): each head gets hidden_size // num_attention_heads features.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from .activations import ACTIVATIONS
from .checkpoints import resolve_checkpoint
from .kernels import ATTENTION_IMPLEMENTATIONS
from .validation import check_positive_int

__all__ = [
    "TransformerConfig",
    "as_config",
    "ChecksConfig",
    "check_config",
    "check_heads",
    "check_activation",
    "check_unsupported",
    "check_finite",
]

#: The fields that fix the shapes of a model's weights, in HuggingFace's order
#: (what a saved or exported model and the code that reads it must agree on).
SIZE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
)


@dataclass
class TransformerConfig:
    r"""The architecture of a BERT-style transformer.

    Field names and defaults mirror :class:`transformers.BertConfig` (the
    defaults describe ``bert-base-uncased``), so a config can be built from a
    HuggingFace one with :meth:`from_hf` and turned back with :meth:`to_hf`.

    Args:
        vocab_size: Number of rows in the token-embedding table (``V``).
        hidden_size: Width of every token vector between layers (``E``).
        num_hidden_layers: Number of stacked encoder (or decoder) layers.
        num_attention_heads: Heads per attention layer (``H``);
            ``hidden_size`` must be divisible by it.
        intermediate_size: Width of the feed-forward layer's hidden layer.
        hidden_act: Activation of the feed-forward layer, a name of the
            registry :data:`~literate_transformer.core.activations.ACTIVATIONS`.
        hidden_dropout_prob: Dropout on embeddings and sub-layer outputs.
        attention_probs_dropout_prob: Dropout on the attention weights.
        max_position_embeddings: Longest sequence the learned position
            embeddings cover.
        type_vocab_size: Number of segment (token-type) embeddings; ``0``
            for a model without them (GPT-2, BART).
        initializer_range: Standard deviation of the weight initialisation.
        layer_norm_eps: The epsilon added to the variance in layer norm.
        pad_token_id: Id of the padding token.
        is_decoder: Use causal (look-ahead masked) self-attention.
        add_cross_attention: Give each layer an encoder-decoder attention
            sub-layer (only meaningful with ``is_decoder``).
        num_labels: Number of classes of a classification head.
        classifier_dropout: Dropout before the classifier; ``None`` means
            ``hidden_dropout_prob``, as in HuggingFace.
        attn_implementation: ``"eager"`` (the commented, step-by-step
            attention) or ``"sdpa"`` (PyTorch's fused kernel).
        bos_token_id: The beginning-of-sequence token, or ``None``.
        eos_token_id: The end-of-sequence token, at which generation stops,
            or ``None``.

    Raises:
        ValueError: if a field is out of range, naming the field and value.
        TypeError: if a field has the wrong type.
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    is_decoder: bool = False
    add_cross_attention: bool = False
    num_labels: int = 2
    classifier_dropout: float | None = None
    attn_implementation: str = "eager"
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    #: Extra fields of the source config that this package does not use
    #: (kept so :meth:`to_hf` round-trips them).
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Every size but the number of token types (0: no token-type embeddings) is at least 1.
        positive_ints = [name for name in SIZE_FIELDS if name != "type_vocab_size"] + ["num_labels"]
        for name in positive_ints:
            value = getattr(self, name)
            # bool is a subclass of int; a True hidden size is a bug, not a 1.
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
            if value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value}")
        if not isinstance(self.type_vocab_size, int) or isinstance(self.type_vocab_size, bool):
            raise TypeError(
                f"type_vocab_size must be an int, got {type(self.type_vocab_size).__name__} ({self.type_vocab_size!r})"
            )
        if self.type_vocab_size < 0:
            raise ValueError(f"type_vocab_size must be a non-negative integer, got {self.type_vocab_size}")
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads}): each head gets hidden_size // num_attention_heads features."
            )
        probabilities = ["hidden_dropout_prob", "attention_probs_dropout_prob"]
        if self.classifier_dropout is not None:
            probabilities.append("classifier_dropout")
        for name in probabilities:
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise TypeError(f"{name} must be a float, got {type(value).__name__} ({value!r})")
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1), got {value}")
        for name in ("layer_norm_eps", "initializer_range"):
            value = getattr(self, name)
            # NaN > 0 is False; an infinity is refused by name too.
            if not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ValueError(f"{name} must be a positive, finite float, got {value!r}")
        if not isinstance(self.hidden_act, str) or self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act must be one of {sorted(ACTIVATIONS)}, got {self.hidden_act!r}")
        if self.attn_implementation not in ATTENTION_IMPLEMENTATIONS:
            raise ValueError(
                f"attn_implementation must be one of {ATTENTION_IMPLEMENTATIONS}, got {self.attn_implementation!r}"
            )
        for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int token id or None, got {type(value).__name__} ({value!r})")
            if not 0 <= value < self.vocab_size:
                raise ValueError(f"{name} must be in [0, vocab_size={self.vocab_size}), got {value}")

    # ------------------------------------------------------------------
    # Derived numbers
    # ------------------------------------------------------------------
    @property
    def head_size(self) -> int:
        """The number of features per attention head, ``hidden_size // num_attention_heads`` (``D``)."""
        return self.hidden_size // self.num_attention_heads

    # ------------------------------------------------------------------
    # Conversions
    # ------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TransformerConfig:
        """Build a config from a checkpoint's ``config.json`` (as a dict).

        Fields this dataclass knows are copied; others are kept in
        :attr:`extra`.  An ``attn_implementation`` other than ``"eager"`` and
        ``"sdpa"`` (HuggingFace knows more) falls back to the default.
        """
        names = {f.name for f in fields(cls)} - {"extra"}
        kwargs = {name: data[name] for name in names if name in data}
        if kwargs.get("attn_implementation") not in ATTENTION_IMPLEMENTATIONS:
            kwargs.pop("attn_implementation", None)
        extra = {key: value for key, value in data.items() if key not in names}
        return cls(**kwargs, extra=extra)

    @classmethod
    def from_hf(cls, hf_config: Any) -> TransformerConfig:
        """Build a config from a ``transformers`` configuration object.

        As :meth:`from_dict`; HuggingFace stores the attention implementation
        in a private attribute, which is read when present.
        """
        data = hf_config.to_dict() if hasattr(hf_config, "to_dict") else dict(vars(hf_config))
        if getattr(hf_config, "num_labels", None) is not None:
            data.setdefault("num_labels", hf_config.num_labels)
        implementation = getattr(hf_config, "_attn_implementation", None)
        if implementation in ATTENTION_IMPLEMENTATIONS:
            data = {**data, "attn_implementation": implementation}
        return cls.from_dict(data)

    @classmethod
    def from_pretrained(cls, path_or_name: str | os.PathLike[str] | None = None) -> TransformerConfig:
        """Read the config of a checkpoint (by default the offline one).

        See :func:`literate_transformer.core.checkpoints.resolve_checkpoint` for
        how ``path_or_name`` is resolved.
        """
        return cls.from_dict(resolve_checkpoint(path_or_name).config)

    def to_hf(self) -> Any:
        """Return the equivalent :class:`transformers.BertConfig` (every field is one of its own)."""
        from transformers import BertConfig

        excluded = ("extra", "attn_implementation")
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in excluded}
        hf = BertConfig(**data)
        hf._attn_implementation = self.attn_implementation
        return hf

    def sizes(self) -> dict[str, int]:
        """The fields that fix the shapes of the weights (``SIZE_FIELDS``), with their values.

        >>> TransformerConfig(hidden_size=64, num_attention_heads=4).sizes()["hidden_size"]
        64
        """
        return {name: getattr(self, name) for name in SIZE_FIELDS}

    def replace(self, **changes: Any) -> TransformerConfig:
        """Return a copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


def as_config(config: Any) -> TransformerConfig:
    """Accept a :class:`TransformerConfig` or a ``transformers`` config.

    Args:
        config: Either config type.

    Returns:
        A validated :class:`TransformerConfig`.

    Raises:
        TypeError: if ``config`` is neither, or is a ``transformers`` config
            whose fields are not BERT's (it says where its family's models are).

    >>> from transformers import BertConfig, GPT2Config
    >>> as_config(BertConfig(hidden_size=64, num_attention_heads=4)).head_size
    16
    >>> as_config(GPT2Config())
    Traceback (most recent call last):
        ...
    TypeError: config is a transformers GPT2Config, whose fields are not BERT's: its family's models read it as it is (literate_transformer.models.gpt2)
    """
    if isinstance(config, TransformerConfig):
        return config
    if hasattr(config, "hidden_size") and hasattr(config, "num_attention_heads"):
        # GPT-2 and BART answer to hidden_size through an alias, but their to_dict() uses their own names.
        if hasattr(config, "to_dict") and "hidden_size" not in config.to_dict():
            family = getattr(config, "model_type", None) or "<family>"
            raise TypeError(
                f"config is a transformers {type(config).__name__}, whose fields are not BERT's: "
                f"its family's models read it as it is (literate_transformer.models.{family})"
            )
        return TransformerConfig.from_hf(config)
    raise TypeError(
        "config must be a literate_transformer.TransformerConfig or a transformers config object "
        f"(with hidden_size and num_attention_heads), got {type(config).__name__}"
    )


# ---------------------------------------------------------------------------
# A family's config checks, as data
# ---------------------------------------------------------------------------
def check_config(config: Any, model_type: str, name: str, unsupported: Mapping[str, object] | None = None) -> Any:
    """A ``transformers`` config of one family, checked before anything is built: what every family checks.

    Args:
        config: The config.
        model_type: The family's ``model_type`` (``"gpt2"``).
        name: Its config class's name, for the messages (``"GPT2Config"``).
        unsupported: The family's options this package does not build, each with the only value it accepts
            (:func:`~literate_transformer.core.config.check_unsupported`).

    Returns:
        ``config``.

    Raises:
        TypeError: for a config of another family.
        ValueError: for an option of ``unsupported`` set otherwise.

    >>> from transformers import GPT2Config
    >>> check_config(GPT2Config(), "gpt2", "GPT2Config", {"add_cross_attention": False}).model_type
    'gpt2'
    >>> check_config(GPT2Config(), "llama", "LlamaConfig")
    Traceback (most recent call last):
        ...
    TypeError: config must be a transformers LlamaConfig, got GPT2Config (model_type 'gpt2', not 'llama')
    """
    found = getattr(config, "model_type", None)
    if found != model_type:
        raise TypeError(
            f"config must be a transformers {name}, got {type(config).__name__} "
            f"(model_type {found!r}, not {model_type!r})"
        )
    check_unsupported(config, name, unsupported or {})
    return config


def check_heads(config: Any, hidden: str = "n_embd", heads: str = "n_head", name: str = "") -> None:
    """The heads must divide the hidden size (``hidden`` and ``heads`` are the family's names, and ``name`` its
    config class's, for the message)."""
    prefix = f"{name}." if name else ""
    if config.num_attention_heads < 1 or config.hidden_size % config.num_attention_heads:
        raise ValueError(
            f"{prefix}{hidden} ({config.hidden_size}) must be divisible by {heads} ({config.num_attention_heads})"
        )


def check_activation(name: object, field: str, known: Mapping[str, object] | None = None) -> None:
    """An activation this package builds (a name of ``known``, by default the activation registry's), or a
    ValueError naming the config's field."""
    known = ACTIVATIONS if known is None else known
    if name not in known:
        raise ValueError(f"{field}={name!r} is not supported (one of {sorted(known)})")


def check_unsupported(config: Any, name: str, unsupported: Mapping[str, object]) -> None:
    """Options this package does not build: each field of ``unsupported`` holds the one value accepted, or is absent.

    Args:
        config: The config.
        name: The config class's name, for the message.
        unsupported: Each field, with the only value this package builds.

    Raises:
        ValueError: naming the field, its value, and the value accepted.
    """
    for field_name, supported in unsupported.items():
        if getattr(config, field_name, supported) != supported:
            raise ValueError(
                f"{name}.{field_name}={getattr(config, field_name)!r} is not supported (only {supported!r})"
            )


def _floats(value: object, where: str) -> list[tuple[str, float]]:
    """Every float in a config's fields, nested dicts and lists included, with where it is (``rope_parameters.factor``)."""
    if isinstance(value, float):
        return [(where, value)]
    if isinstance(value, dict):
        return [
            found for key, item in value.items() for found in _floats(item, f"{where}.{key}" if where else str(key))
        ]
    if isinstance(value, (list, tuple)):
        return [found for index, item in enumerate(value) for found in _floats(item, f"{where}[{index}]")]
    return []


def check_finite(config: Any, name: str) -> None:
    """Every float of a config is finite: a NaN ``rope_theta`` or ``rms_norm_eps`` builds a model whose every output
    is NaN, so it is refused by name, before anything is built.

    >>> from transformers import LlamaConfig
    >>> check_finite(LlamaConfig(rms_norm_eps=float("nan")), "LlamaConfig")
    Traceback (most recent call last):
        ...
    ValueError: LlamaConfig.rms_norm_eps is nan: every number of a config must be finite
    """
    fields_ = config.to_dict() if hasattr(config, "to_dict") else dict(vars(config))
    for where, value in _floats(fields_, ""):
        if not math.isfinite(value):
            raise ValueError(f"{name}.{where} is {value!r}: every number of a config must be finite")


class ChecksConfig:
    """A family's config checks, declared on its model class as data, and a check of its own where it needs one.

    Every family refuses a config of another family and the options of
    ``transformers``' class that it does not build; most check that their
    heads divide the width, that the activation is one the package has, and
    that some counts are positive.  A family states which fields those are,
    under ``transformers``' names, and :meth:`check_config` checks them, once,
    before anything is built, each error naming the config's field.  What
    no table says (GPT-J's rotary width, Mixtral's experts per token against
    its experts) goes in :meth:`check_own_config`, which a descendant extends
    by calling its parent's.

    >>> from transformers import GPT2Config
    >>> class TinyGPT2(ChecksConfig):
    ...     config_type, config_name, config_heads = "gpt2", "GPT2Config", ("n_embd", "n_head")
    >>> TinyGPT2.check_config(GPT2Config(n_embd=30, n_head=4))
    Traceback (most recent call last):
        ...
    ValueError: GPT2Config.n_embd (30) must be divisible by n_head (4)
    """

    #: The ``model_type`` of the family's ``transformers`` configs (``"gpt2"``).
    config_type: ClassVar[str] = ""
    #: The config class's name, for the messages (``"GPT2Config"``).
    config_name: ClassVar[str] = ""
    #: The options this package does not build, each with the only value it accepts
    #: (:func:`~literate_transformer.core.config.check_unsupported`).
    config_unsupported: ClassVar[Mapping[str, object]] = {}
    #: The width's and the head count's fields, by the config's own names, where the heads must divide the width
    #: (``("n_embd", "n_head")``); empty: not checked here.
    config_heads: ClassVar[tuple[str, ...]] = ()
    #: The field that names the activation (``"hidden_act"``); ``None``: not checked here.
    config_activation: ClassVar[str | None] = None
    #: The activations that field may name (``None``: the package's registry,
    #: :data:`~literate_transformer.core.activations.ACTIVATIONS`).
    config_activations: ClassVar[Mapping[str, object] | None] = None
    #: Fields that must be positive ints (a count of experts, a window).
    config_positive: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def check_config(cls, config: Any) -> Any:
        """``config``, checked as the family declares, then by :meth:`check_own_config`.

        Raises:
            TypeError: for a config of another family.
            ValueError: naming the field, for an option this package does not build, a float that is not finite,
                heads that do not divide the width, an unknown activation, a count that is not a positive int, or what the family's own
                check refuses.
        """
        name = cls.config_name
        check_config(config, cls.config_type, name, cls.config_unsupported)
        check_finite(config, name)
        if cls.config_heads:
            check_heads(config, *cls.config_heads, name=name)
        if cls.config_activation is not None:
            field_name = cls.config_activation
            check_activation(getattr(config, field_name), f"{name}.{field_name}", cls.config_activations)
        for field_name in cls.config_positive:
            check_positive_int(getattr(config, field_name), f"{name}.{field_name}")
        cls.check_own_config(config)
        return config

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """What the family checks beyond its declarations: nothing here."""
