r"""The encoder: attention and feed-forward layers, stacked, with residuals and layer norm.

An encoder layer has two sub-layers, multi-head self-attention
(:mod:`~literate_transformer.book.attention`) and the position-wise feed-forward
network (:mod:`~literate_transformer.book.feed_forward`).  Each is wrapped in a
**residual connection** (its input is added to its output, so a layer only
has to learn a *change* and gradients have a direct path through a deep
stack) and a **layer norm** (each token vector is rescaled to zero mean and
unit variance, then scaled and shifted by learned weights).  There are two
ways to arrange the norm:

.. math::

    \text{post-LN (2017 paper, BERT):}\quad
    h = \operatorname{LN}_1\big(x + \operatorname{Attn}(x)\big), \qquad
    y = \operatorname{LN}_2\big(h + \operatorname{FFN}(h)\big)

.. math::

    \text{pre-LN (the book):}\quad
    h = x + \operatorname{Attn}\big(\operatorname{LN}_1(x)\big), \qquad
    y = h + \operatorname{FFN}\big(\operatorname{LN}_2(h)\big)

Post-LN normalises the residual stream after every sub-layer; it is what
"Attention Is All You Need" and BERT use.  Pre-LN normalises only the
*input* of each sub-layer and leaves the residual stream untouched; it is
what the book's ``TransformerEncoderLayer`` (and GPT-2) use.  Xiong et al.
(2020, "On Layer Normalization in the Transformer Architecture", ICML 2020,
arXiv:2002.04745) showed that at initialisation the gradients of a post-LN
transformer's parameters near the output are large, which is why post-LN
needs a learning rate that warms up slowly, while pre-LN's are
well-behaved and pre-LN trains without the warm-up; the site's chapter on
the encoder measures both on a small model.
:class:`TransformerEncoderLayer` does both: ``norm_first=True`` (the default,
the book) or ``norm_first=False`` (BERT, the 2017 paper), with the same
meaning as the argument of :class:`torch.nn.TransformerEncoderLayer`; the
wiring of both is written once, in :mod:`~literate_transformer.core.residual`.
Tests load our weights into PyTorch's layer and stack and get the same
outputs in both arrangements.

The encoder (:class:`TransformerEncoder`) embeds the token ids
(:mod:`~literate_transformer.book.embeddings`) and runs the stack of layers;
:mod:`~literate_transformer.book.classification` puts a classification head
on it.

How this maps to the book and to HuggingFace
--------------------------------------------
* The book's ``TransformerEncoderLayer`` has ``layer_norm_1``,
  ``layer_norm_2``, ``attention`` and ``feed_forward``; its
  ``TransformerEncoder`` has ``embeddings`` and ``layers``.  The names are
  kept.  The book's stack has no final layer
  norm after the last pre-LN layer, and neither has this one by default (nor
  :class:`torch.nn.TransformerEncoder` without its ``norm`` argument);
  ``final_layer_norm=True`` adds one, as :class:`torch.nn.Transformer`, GPT-2
  (``ln_f``) and T5 (``final_layer_norm``) have.  Without it, a pre-LN stack
  hands on a residual stream that no layer norm has touched since the
  embeddings.
* HuggingFace's ``BertLayer`` is post-LN and spreads one layer over
  ``BertAttention`` (``BertSelfAttention`` + ``BertSelfOutput``, whose
  ``dense``/``dropout``/``LayerNorm`` are our ``attention.output_linear``,
  ``dropout`` and ``layer_norm_1``) and ``BertIntermediate`` + ``BertOutput``
  (our ``feed_forward`` and ``layer_norm_2``).

What the source notebooks got wrong
-----------------------------------
* The first notebook's encoder layer is meant to be pre-LN, but its
  ``forward`` reads ``hidden_state = self.layer_norm_1(x)``,
  ``x = x + self.attention(hidden_state)``, ``x = self.layer_norm_2(x)``,
  ``x = self.feed_forward(x)``, ``return x``: it computes
  :math:`\operatorname{FFN}(\operatorname{LN}_2(h))` with
  :math:`h = x + \operatorname{Attn}(\operatorname{LN}_1(x))`, a correct pre-LN
  attention half followed by the feed-forward network with no residual
  connection around it, so the layer returns the feed-forward output alone
  (the pre-LN layer returns :math:`h + \operatorname{FFN}(\operatorname{LN}_2(h))`).
  Its ``__init__(self, conifg)`` also read a global ``config`` by accident
  of the typo.
* Its comments said BERT-base has 6 heads of size 128.  BERT-base has
  ``num_attention_heads = 12`` heads of ``hidden_size // num_attention_heads
  = 64`` features each.
* Pre-LN (book) and post-LN (BERT) were not told apart.

>>> import torch
>>> from literate_transformer import TransformerConfig
>>> config = TransformerConfig(
...     vocab_size=50, hidden_size=24, num_attention_heads=4, intermediate_size=40,
...     num_hidden_layers=2, max_position_embeddings=16)
>>> encoder = TransformerEncoder(config).eval()
>>> input_ids = torch.tensor([[2, 7, 11, 4], [3, 5, 0, 0]])
>>> attention_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
>>> encoder(input_ids, attention_mask).last_hidden_state.shape   # (B, T, E)
torch.Size([2, 4, 24])

BERT-base (the defaults of :class:`~literate_transformer.core.config.TransformerConfig`) has 12 heads of 64
features, not 6 of 128:

>>> bert_base = TransformerConfig()
>>> bert_base.num_attention_heads, bert_base.head_size
(12, 64)
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ..core.config import as_config
from ..core.masks import build_attention_mask
from ..core.outputs import LayerOutput, ModelOutput
from ..core.residual import add_and_norm, sublayer_input
from ..core.validation import (
    Arguments,
    check_hidden_states,
    check_mask,
    check_norm_first,
    check_token_inputs,
    validate_with,
)
from ..parts.norms import make_norm
from .attention import MultiHeadAttention
from .embeddings import Embeddings
from .feed_forward import FeedForward

__all__ = ["TransformerEncoderLayer", "TransformerEncoder", "final_norm"]


def final_norm(config: Any, final_layer_norm: bool) -> nn.Module | None:
    """The layer norm a stack applies after its last layer, or ``None`` (``final_layer_norm`` must be a bool)."""
    if not isinstance(final_layer_norm, bool):
        raise TypeError(f"final_layer_norm must be a bool, got {final_layer_norm!r}")
    return make_norm(config.hidden_size, config.layer_norm_eps) if final_layer_norm else None


def _check_layer_inputs(layer: TransformerEncoderLayer, args: Arguments) -> None:
    hidden_states = check_hidden_states(args.hidden_states, layer.hidden_size)
    if args.attention_mask is not None:
        batch_size, length, _ = hidden_states.shape
        check_mask(args.attention_mask, (batch_size, layer.attention.num_heads, length, length))


class TransformerEncoderLayer(nn.Module):
    r"""One encoder layer: self-attention and feed-forward, each with a residual and a layer norm.

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            ``transformers`` config.
        norm_first: ``True`` for pre-LN (the book), ``False`` for post-LN
            (BERT and the 2017 paper).
    """

    def __init__(self, config: Any, norm_first: bool = True) -> None:
        super().__init__()
        config = as_config(config)
        self.hidden_size = config.hidden_size
        #: Whether the layer norms come before the sub-layers (pre-LN) or after the residual sums (post-LN).
        self.norm_first = check_norm_first(norm_first)
        #: The layer norm of the attention sub-layer.
        self.layer_norm_1 = make_norm(config.hidden_size, config.layer_norm_eps)
        #: The layer norm of the feed-forward sub-layer.
        self.layer_norm_2 = make_norm(config.hidden_size, config.layer_norm_eps)
        #: Multi-head self-attention.
        self.attention = MultiHeadAttention(config)
        #: The position-wise feed-forward network (it has its own output dropout).
        self.feed_forward = FeedForward(config)
        #: Dropout on the attention sub-layer's output (``hidden_dropout_prob``).
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    @validate_with(_check_layer_inputs)
    def forward(
        self, hidden_states: Tensor, attention_mask: Tensor | None = None, output_attentions: bool = False
    ) -> LayerOutput:
        """Run the layer.

        Args:
            hidden_states: ``(B, T, E)``.
            attention_mask: Boolean (``True`` = may attend) or additive mask,
                broadcastable to ``(B, H, T, T)``, e.g. a ``(B, 1, 1, T)``
                :func:`~literate_transformer.core.masks.padding_mask`.
            output_attentions: Also return the attention probabilities.

        Returns:
            A :class:`~literate_transformer.core.outputs.LayerOutput`.
        """
        # 1) Self-attention reads LN_1(x) (pre-LN) or x itself (post-LN) ...
        attention_input = sublayer_input(hidden_states, self.layer_norm_1, self.norm_first)
        attention = self.attention(attention_input, attention_mask=attention_mask, output_attentions=output_attentions)
        # ... and its output joins the residual stream: x + Dropout(Attn(.)), normalised by LN_1 in post-LN.
        hidden_states = add_and_norm(
            hidden_states, attention.hidden_states, self.layer_norm_1, self.norm_first, self.dropout
        )
        # 2) The feed-forward network, the same way around LN_2 (it applies its own dropout).
        feed_forward_output = self.feed_forward(sublayer_input(hidden_states, self.layer_norm_2, self.norm_first))
        hidden_states = add_and_norm(hidden_states, feed_forward_output, self.layer_norm_2, self.norm_first)
        return LayerOutput(hidden_states, attention.attention_probs)


def _check_encoder_inputs(encoder: TransformerEncoder, args: Arguments) -> None:
    check_token_inputs(args, encoder.config)


class TransformerEncoder(nn.Module):
    """Embeddings followed by ``config.num_hidden_layers`` encoder layers.

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            ``transformers`` config.
        norm_first: Layer-norm arrangement of every layer (see
            :class:`TransformerEncoderLayer`).
        final_layer_norm: Normalise the last layer's output once more (the
            ``norm`` of :class:`torch.nn.TransformerEncoder`; usual after
            pre-LN layers).
    """

    def __init__(self, config: Any, norm_first: bool = True, final_layer_norm: bool = False) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        self.norm_first = check_norm_first(norm_first)
        #: Token, position and token-type embeddings.
        self.embeddings = Embeddings(config)
        #: The stack of :class:`TransformerEncoderLayer`.
        self.layers = nn.ModuleList(
            TransformerEncoderLayer(config, norm_first=norm_first) for _ in range(config.num_hidden_layers)
        )
        #: The layer norm after the last layer, or ``None``.
        self.final_layer_norm = final_norm(config, final_layer_norm)

    @validate_with(_check_encoder_inputs)
    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """Encode a batch of token ids.

        Args:
            input_ids: Integer token ids ``(B, T)``.
            attention_mask: The tokenizer's ``(B, T)`` mask, 1 (or ``True``)
                for real tokens and 0 for padding; ``None`` means no padding.
            token_type_ids: Segment ids ``(B, T)``; ``None`` means all zeros.
            output_attentions: Also return every layer's attention probabilities.
            output_hidden_states: Also return the embeddings and every layer's output.

        Returns:
            A :class:`~literate_transformer.core.outputs.ModelOutput` whose
            ``last_hidden_state`` holds the contextual token vectors ``(B, T, E)``.

        Raises:
            TypeError: for inputs of the wrong type.
            ValueError: for ids out of range, a sequence that is too long, or
                an ``attention_mask`` whose shape differs from ``input_ids``.
        """
        # Token ids to vectors.
        embedding_output = self.embeddings(input_ids, token_type_ids)  # (B, T, E)
        hidden_states = embedding_output
        # Padding keys are hidden from every query: a (B, 1, 1, T) mask, or none without padding, built once in
        # the additive form every layer adds to its scores.
        mask = build_attention_mask(
            attention_mask, query_length=input_ids.shape[1], device=input_ids.device, dtype=embedding_output.dtype
        )
        layer_outputs = []
        for layer in self.layers:
            layer_outputs.append(layer(hidden_states, mask, output_attentions))
            # Each layer's output is the next one's input.
            hidden_states = layer_outputs[-1].hidden_states
        if self.final_layer_norm is not None:
            # One more layer norm over the stack's output.
            hidden_states = self.final_layer_norm(hidden_states)
        # Per-layer tuples of what the layers returned; the last hidden state reported is the normalised one.
        return ModelOutput.from_layers(embedding_output, layer_outputs, hidden_states, output_hidden_states)
