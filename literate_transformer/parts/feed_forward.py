r"""Feed-forward variants: the plain two-layer network, and the gated one of today's decoders.

Every transformer layer passes each token vector, on its own, through a
small network.  The book's (:class:`~literate_transformer.book.feed_forward.FeedForward`,
BERT, GPT-2, BART) widens, applies a non-linearity and narrows back:

.. math::

    \operatorname{FFN}(x) = \operatorname{act}(x W_1 + b_1)\, W_2 + b_2 .

The **gated** variant (Shazeer, 2020, "GLU Variants Improve Transformer",
arXiv:2002.05202) computes two widenings and lets one gate the other,
element by element, before narrowing back:

.. math::

    \operatorname{FFN}_\text{gated}(x) = \big(\operatorname{act}(x W_\text{gate}) \odot x W_\text{up}\big)\, W_\text{down} .

With the SiLU, :math:`\operatorname{act}(z) = z\,\sigma(z)`, it is **SwiGLU**
(Llama, Qwen3, Mistral); with the GELU, GEGLU (T5 v1.1's ``gated-gelu``).
It has three matrices where the plain network has two, so a model that
keeps the parameter count shrinks :math:`F` to about :math:`\tfrac{2}{3}`
of :math:`4E` (Llama-2-7B: :math:`E = 4096`, :math:`F = 11008`).

:func:`feed_forward` and :func:`gated_feed_forward` are the two equations,
one line per term; a family's module keeps its own parameter names
(``c_fc``/``c_proj``, ``fc1``/``fc2``, ``wi_0``/``wi_1``/``wo``) and calls
the one it computes.  :class:`GatedFeedForward` is the gated network under
Llama's names, which its descendants reuse as they are.

>>> import torch
>>> from torch import nn
>>> up, down = nn.Linear(4, 8), nn.Linear(8, 4)
>>> feed_forward(torch.randn(2, 3, 4), up, down, nn.GELU()).shape
torch.Size([2, 3, 4])
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from ..core.activations import get_activation

__all__ = ["feed_forward", "gated_feed_forward", "GatedFeedForward"]


def feed_forward(
    hidden_states: Tensor,
    up: Callable[[Tensor], Tensor],
    down: Callable[[Tensor], Tensor],
    activation: Callable[[Tensor], Tensor],
    dropout: Callable[[Tensor], Tensor] | None = None,
    activation_dropout: Callable[[Tensor], Tensor] | None = None,
) -> Tensor:
    r"""The plain feed-forward network, :math:`\operatorname{act}(x W_1 + b_1) W_2 + b_2`, then dropout.

    Args:
        hidden_states: ``(B, T, E)``.
        up: The widening layer :math:`W_1` (E -> F).
        down: The narrowing layer :math:`W_2` (F -> E).
        activation: The non-linearity.
        dropout: Dropout on the output, or ``None``.
        activation_dropout: Dropout between the two layers (BART's ``activation_dropout``), or ``None``.

    Returns:
        ``(B, T, E)``.
    """
    # Widen, then the non-linearity: without it the two layers would be one.
    intermediate = activation(up(hidden_states))  # (B, T, F)
    if activation_dropout is not None:
        intermediate = activation_dropout(intermediate)
    # Back to the model's width.
    output = down(intermediate)  # (B, T, E)
    return output if dropout is None else dropout(output)


def gated_feed_forward(
    hidden_states: Tensor,
    gate: Callable[[Tensor], Tensor],
    up: Callable[[Tensor], Tensor],
    down: Callable[[Tensor], Tensor],
    activation: Callable[[Tensor], Tensor],
    activation_dropout: Callable[[Tensor], Tensor] | None = None,
) -> Tensor:
    r"""The gated feed-forward network, :math:`(\operatorname{act}(x W_\text{gate}) \odot x W_\text{up}) W_\text{down}`.

    Args:
        hidden_states: ``(B, T, E)``.
        gate: The widening layer whose output goes through the activation (E -> F).
        up: The widening layer it gates, element by element (E -> F).
        down: The narrowing layer (F -> E).
        activation: The non-linearity of the gate (SiLU for SwiGLU).
        activation_dropout: Dropout on the gated product, before the narrowing layer (T5's), or ``None``.

    Returns:
        ``(B, T, E)``.
    """
    # The gate: act(x W_gate), one factor per intermediate feature.
    gated = activation(gate(hidden_states))  # (B, T, F)
    # ... times the other widening, x W_up, element by element.
    intermediate = gated * up(hidden_states)  # (B, T, F)
    if activation_dropout is not None:
        intermediate = activation_dropout(intermediate)
    # Back to the model's width.
    return down(intermediate)


class GatedFeedForward(nn.Module):
    """The gated feed-forward network under Llama's names: ``gate_proj``, ``up_proj``, ``down_proj``.

    Args:
        hidden_size: ``E``.
        intermediate_size: ``F``.
        hidden_act: The gate's activation, a name of
            :data:`~literate_transformer.core.activations.ACTIVATIONS` (``"silu"`` for SwiGLU).
        bias: Biases on the three layers (Llama's ``mlp_bias``, ``False`` by default).
    """

    def __init__(self, hidden_size: int, intermediate_size: int, hidden_act: str = "silu", bias: bool = False):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=bias)
        self.act_fn = get_activation(hidden_act)

    def forward(self, hidden_states: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, E)``: :func:`gated_feed_forward` with this module's layers."""
        return gated_feed_forward(hidden_states, self.gate_proj, self.up_proj, self.down_proj, self.act_fn)
