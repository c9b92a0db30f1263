r"""The feed-forward layer: each token thinks on its own.

After attention has mixed information between positions, every layer of a
transformer passes each token vector, *separately and identically*, through
a small two-layer network:

.. math::

    \operatorname{FFN}(x) = \operatorname{Dropout}\big(
    \operatorname{GELU}(x W_1 + b_1)\, W_2 + b_2\big),
    \qquad W_1 \in \mathbb{R}^{E \times F},\; W_2 \in \mathbb{R}^{F \times E}.

The hidden width :math:`F` (``intermediate_size``) is usually four times the
model width :math:`E`: 3072 for BERT-base's 768.  Because the same weights are
applied at every position, this is also called a *position-wise*
feed-forward layer (a 1-D convolution with kernel size 1).  Within a layer,
most of the parameters sit here (:math:`2EF`, twice the attention
sub-layer's :math:`4E^2` when :math:`F = 4E`), though in a small model with a
large vocabulary, such as the default checkpoint, the token embedding table
can outweigh all the feed-forward layers together; attention decides *where*
to look, the feed-forward layer what to *do* with what was found.

How this maps to the book and to HuggingFace
--------------------------------------------
* The book's ``FeedForward`` has ``linear_1``, a GELU, ``linear_2`` and a
  ``dropout``; :class:`FeedForward` keeps those names and takes the
  activation from ``config.hidden_act`` (BERT's ``"gelu"`` is the exact,
  erf-based GELU, :class:`torch.nn.GELU`).
* HuggingFace splits the same computation over two modules:
  ``BertIntermediate`` (``dense`` = our ``linear_1``, then the activation) and
  ``BertOutput`` (``dense`` = our ``linear_2``, then dropout, then the residual
  connection and ``LayerNorm``).  The residual and layer norm belong to the
  encoder layer here (:mod:`~literate_transformer.book.encoder`).
* :class:`torch.nn.TransformerEncoderLayer` calls them ``linear1`` and
  ``linear2`` and applies dropout *between* them as well as after.

What the source notebooks do
----------------------------
Two of them (the first, and the notes on the book) first try the
feed-forward layer as ``ff_outputs = feed_forward(attn_outputs)``, on the
output of the projection-free toy attention (``query = key = value`` = the
token embeddings): a ``(B, T, E)`` tensor, so the shapes fit, but not what
the layer reads in a transformer layer, and with no residual connection or
layer norm around it.  It is a demonstration of shapes, not a bug.  In a
transformer layer the feed-forward network reads the attention sub-layer's
output, normalised in pre-LN, a ``(B, T, E)`` tensor;
:meth:`FeedForward.forward` checks that its input has width ``hidden_size``
and says so otherwise.

>>> import torch
>>> from literate_transformer import TransformerConfig
>>> config = TransformerConfig(hidden_size=24, num_attention_heads=4, intermediate_size=40)
>>> feed_forward = FeedForward(config)
>>> feed_forward(torch.randn(2, 3, 24)).shape                # (B, T, E)
torch.Size([2, 3, 24])

BERT-base's widths (the defaults of :class:`~literate_transformer.core.config.TransformerConfig`):

>>> TransformerConfig().hidden_size, TransformerConfig().intermediate_size
(768, 3072)
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ..core.activations import get_activation
from ..core.config import as_config
from ..core.validation import Arguments, check_hidden_states, validate_with

__all__ = ["FeedForward"]


def _check_feed_forward_inputs(feed_forward: FeedForward, args: Arguments) -> None:
    check_hidden_states(args.hidden_states, feed_forward.hidden_size)


class FeedForward(nn.Module):
    r"""The position-wise feed-forward layer, :math:`\operatorname{GELU}(x W_1 + b_1) W_2 + b_2`.

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            ``transformers`` config; uses ``hidden_size``,
            ``intermediate_size``, ``hidden_act`` and ``hidden_dropout_prob``.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        config = as_config(config)
        self.hidden_size = config.hidden_size
        #: Expands each token vector, :math:`W_1` (E -> F).
        self.linear_1 = nn.Linear(config.hidden_size, config.intermediate_size)
        #: Projects back to the model width, :math:`W_2` (F -> E).
        self.linear_2 = nn.Linear(config.intermediate_size, config.hidden_size)
        #: The non-linearity named by ``config.hidden_act`` (see :mod:`~literate_transformer.core.activations`).
        self.activation = get_activation(config.hidden_act)
        #: Dropout on the output (``hidden_dropout_prob``).
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    @validate_with(_check_feed_forward_inputs)
    def forward(self, hidden_states: Tensor) -> Tensor:
        """Apply the two-layer network to every position separately.

        Args:
            hidden_states: ``(B, T, E)``, what the feed-forward sub-layer reads
                in a transformer layer (the attention sub-layer's output,
                normalised in pre-LN).

        Returns:
            ``(B, T, E)``.
        """
        # Widen every token vector, x W_1 + b_1.
        intermediate = self.linear_1(hidden_states)  # (B, T, F)
        # The non-linearity (GELU for BERT): without it the two layers would be one.
        intermediate = self.activation(intermediate)
        # Back to the model width, (.) W_2 + b_2.
        output = self.linear_2(intermediate)  # (B, T, E)
        # Dropout (active in training only).
        return self.dropout(output)
