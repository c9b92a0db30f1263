r"""The residual sub-layer: a skip connection and a layer norm, before or after.

Every sub-layer of a transformer layer (self-attention, cross-attention, the
feed-forward network) sits inside the same plumbing: its input is added back
to its output (a **residual** or skip connection: the sub-layer only learns a
*change*, and gradients reach early layers straight through the sums), and a
**layer norm** keeps the vectors at a steady scale.  Where the norm goes is
the one real choice, and both answers are in use:

.. math::

    \text{post-LN (the 2017 paper, BERT, BART):}\quad
    x \leftarrow \operatorname{LN}\big(x + \operatorname{Dropout}(\operatorname{Sublayer}(x))\big)

.. math::

    \text{pre-LN (the book, GPT-2):}\quad
    x \leftarrow x + \operatorname{Dropout}\big(\operatorname{Sublayer}(\operatorname{LN}(x))\big)

Post-LN normalises the residual stream itself after every sub-layer; pre-LN
normalises only what each sub-layer *reads* and leaves the stream untouched
(which is why a pre-LN stack usually ends with one final layer norm).

The Annotated Transformer wraps this in a ``SublayerConnection`` module, D2L
in ``AddNorm``; both cover one arrangement.  Here it is two small functions
that cover both, switched by ``norm_first`` (the name
:class:`torch.nn.TransformerEncoderLayer` uses), around a sub-layer call that
stays visible in each layer's ``forward``::

    attention = self.attention(sublayer_input(hidden_states, self.layer_norm_1, self.norm_first), ...)
    hidden_states = add_and_norm(hidden_states, attention.hidden_states, self.layer_norm_1, self.norm_first, self.dropout)

The layers keep their own layer-norm and dropout modules (so their parameter
names stay the book's ``layer_norm_1`` or BERT's ``LayerNorm``); these
functions only say how they are wired.

>>> import torch
>>> from torch import nn
>>> norm, x, change = nn.LayerNorm(4), torch.randn(2, 4), torch.randn(2, 4)
>>> torch.equal(add_and_norm(x, change, norm, norm_first=False), norm(x + change))
True
>>> torch.equal(add_and_norm(x, change, norm, norm_first=True), x + change)
True
"""

from __future__ import annotations

from torch import Tensor, nn

__all__ = ["sublayer_input", "add_and_norm"]


def sublayer_input(hidden_states: Tensor, layer_norm: nn.Module, norm_first: bool) -> Tensor:
    """What a sub-layer reads: ``LN(x)`` in pre-LN, ``x`` itself in post-LN.

    Args:
        hidden_states: The residual stream ``x``, ``(B, T, E)``.
        layer_norm: The sub-layer's layer norm.
        norm_first: ``True`` for pre-LN, ``False`` for post-LN.

    Returns:
        ``(B, T, E)``.
    """
    return layer_norm(hidden_states) if norm_first else hidden_states


def add_and_norm(
    hidden_states: Tensor,
    sublayer_output: Tensor,
    layer_norm: nn.Module,
    norm_first: bool,
    dropout: nn.Module | None = None,
) -> Tensor:
    """The residual sum ``x + Dropout(output)``, normalised afterwards in post-LN.

    Args:
        hidden_states: The sub-layer's residual input ``x``, ``(B, T, E)``.
        sublayer_output: What the sub-layer computed, ``(B, T, E)``.
        layer_norm: The sub-layer's layer norm (applied here only in post-LN).
        norm_first: ``True`` for pre-LN, ``False`` for post-LN.
        dropout: Dropout on the sub-layer's output, or ``None``.

    Returns:
        The new residual stream, ``(B, T, E)``.
    """
    if dropout is not None:
        sublayer_output = dropout(sublayer_output)
    hidden_states = hidden_states + sublayer_output
    return hidden_states if norm_first else layer_norm(hidden_states)
