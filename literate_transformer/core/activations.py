r"""Activations: the feed-forward layer's non-linearity, named as HuggingFace names it.

A transformer's feed-forward layer is two linear maps with a non-linearity
between them (without it the two would collapse into one linear map).  Every
configuration names it by a string, ``config.hidden_act``, and every model of
this package looks the string up here, in one registry, the way
HuggingFace's models all read ``ACT2FN[config.hidden_act]``:

.. list-table::
   :header-rows: 1

   * - name
     - function
     - used by
   * - ``"gelu"``
     - :math:`x\,\Phi(x)`, the exact GELU
     - BERT, BART
   * - ``"gelu_new"``, ``"gelu_pytorch_tanh"``
     - its tanh approximation, :math:`\tfrac{x}{2}\big(1 + \tanh(\sqrt{2/\pi}\,(x + 0.044715 x^3))\big)`
     - GPT-2
   * - ``"relu"``
     - :math:`\max(0, x)`
     - the 2017 paper, T5
   * - ``"silu"``, ``"swish"``
     - :math:`x\,\sigma(x)`
     - the gated feed-forward layers of LLaMA
   * - ``"tanh"``
     - :math:`\tanh(x)`
     - BERT's pooler

:func:`get_activation` builds a fresh module for a name and refuses an unknown
one with a message that lists the names it knows;
:class:`~literate_transformer.core.config.TransformerConfig` validates
``hidden_act`` against the same registry.

>>> get_activation("gelu")
GELU(approximate='none')
>>> get_activation("gelu_new")
GELU(approximate='tanh')
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

__all__ = ["ACTIVATIONS", "get_activation"]

#: HuggingFace's ``hidden_act`` names and the module each stands for (a factory: every layer gets its own module).
ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    # BERT's own: the exact GELU, $x\,\Phi(x)$ ($\Phi$ the standard normal CDF).
    "gelu": nn.GELU,
    # GPT-2's tanh approximation of GELU, under its two HuggingFace names.
    "gelu_new": lambda: nn.GELU(approximate="tanh"),
    "gelu_pytorch_tanh": lambda: nn.GELU(approximate="tanh"),
    "relu": nn.ReLU,
    "silu": nn.SiLU,
    "swish": nn.SiLU,
    "tanh": nn.Tanh,
}


def get_activation(name: str) -> nn.Module:
    """The activation module for a HuggingFace ``hidden_act`` name.

    Args:
        name: A key of :data:`ACTIVATIONS`.

    Returns:
        A new module.

    Raises:
        TypeError: if ``name`` is not a string.
        ValueError: for an unknown name, listing the known ones.
    """
    if not isinstance(name, str):
        raise TypeError(f"hidden_act must be a string such as 'gelu', got {type(name).__name__}")
    if name not in ACTIVATIONS:
        raise ValueError(f"hidden_act must be one of {sorted(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name]()
