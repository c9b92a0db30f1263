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
"Attention Is All You Need" and BERT use, and it needs a learning-rate warm-up
to train stably.  Pre-LN normalises only the *input* of each sub-layer and
leaves the residual stream untouched; it trains more stably and is what the
book's ``TransformerEncoderLayer`` (and GPT-2 and most recent models) use.
:class:`TransformerEncoderLayer` does both: ``norm_first=True`` (the default,
the book) or ``norm_first=False`` (BERT, the 2017 paper), with the same
meaning as the argument of :class:`torch.nn.TransformerEncoderLayer`.  Tests
load our weights into PyTorch's layer and stack and get the same outputs in
both arrangements.

The encoder (:class:`TransformerEncoder`) embeds the token ids
(:mod:`~literate_transformer.book.embeddings`) and runs the stack of layers; a
classification head (:class:`TransformerForSequenceClassification`) reads the
final hidden state of the first token, ``[CLS]``, and maps it to one score
per label.

How this maps to the book and to HuggingFace
--------------------------------------------
* The book's ``TransformerEncoderLayer`` has ``layer_norm_1``,
  ``layer_norm_2``, ``attention`` and ``feed_forward``; its
  ``TransformerEncoder`` has ``embeddings`` and ``layers``; its
  ``TransformerForSequenceClassification`` has ``encoder``, ``dropout`` and
  ``classifier``.  The names are kept.  The book's stack has no final layer
  norm after the last pre-LN layer, and neither has this one (nor
  :class:`torch.nn.TransformerEncoder` without its ``norm`` argument).
* HuggingFace's ``BertLayer`` is post-LN and spreads one layer over
  ``BertAttention`` (``BertSelfAttention`` + ``BertSelfOutput``, whose
  ``dense``/``dropout``/``LayerNorm`` are our ``attention.output_linear``,
  ``dropout`` and ``layer_norm_1``) and ``BertIntermediate`` + ``BertOutput``
  (our ``feed_forward`` and ``layer_norm_2``).  BERT's classifier reads
  ``[CLS]`` through an extra ``pooler`` (a dense layer and tanh), which the
  book leaves out.

What the source notebooks got wrong
-----------------------------------
* One notebook's encoder layer dropped the residual connection around the
  feed-forward sub-layer and applied the second layer norm *outside* it, so
  the layer computed :math:`\operatorname{LN}_2(\operatorname{FFN}(h))`
  instead of either arrangement above.  Its ``__init__(self, conifg)`` also
  read a global ``config`` by accident of the typo.
* Its comments said BERT-base has 6 heads of size 128.  BERT-base has
  ``num_attention_heads = 12`` heads of ``hidden_size // num_attention_heads
  = 64`` features each.
* The notebooks read the "[CLS]" hidden state of inputs tokenized with
  ``add_special_tokens=False``, where position 0 is simply the first word.
  The tokenizer must add ``[CLS]`` (its default) for position 0 to be the
  token the classifier was trained on.
* Pre-LN (book) and post-LN (BERT) were not told apart.

>>> import torch
>>> from literate_transformer import TransformerConfig
>>> config = TransformerConfig(
...     vocab_size=50, hidden_size=24, num_attention_heads=4, intermediate_size=40,
...     num_hidden_layers=2, max_position_embeddings=16, num_labels=3)
>>> encoder = TransformerEncoder(config).eval()
>>> input_ids = torch.tensor([[2, 7, 11, 4], [3, 5, 0, 0]])
>>> attention_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
>>> encoder(input_ids, attention_mask).shape                # (B, T, E)
torch.Size([2, 4, 24])
>>> TransformerForSequenceClassification(config)(input_ids, attention_mask).shape   # (B, C)
torch.Size([2, 3])

BERT-base (the defaults of :class:`~literate_transformer.core.config.TransformerConfig`) has 12 heads of 64
features, not 6 of 128:

>>> bert_base = TransformerConfig()
>>> bert_base.num_attention_heads, bert_base.head_size
(12, 64)
"""

from __future__ import annotations

from typing import Any, NamedTuple

from torch import Tensor, nn

from ..core.config import as_config
from ..core.masks import padding_mask
from ..core.validation import check_attention_mask, check_hidden_states
from .attention import MultiHeadAttention
from .embeddings import Embeddings
from .feed_forward import FeedForward

__all__ = [
    "TransformerEncoderLayer",
    "TransformerEncoder",
    "TransformerForSequenceClassification",
    "EncoderLayerOutput",
    "EncoderOutput",
]


class EncoderLayerOutput(NamedTuple):
    """What :meth:`TransformerEncoderLayer.forward` returns with ``return_weights=True``."""

    #: The layer's output ``(B, T, E)``.
    hidden_state: Tensor
    #: The self-attention weights ``(B, H, T, T)``.
    weights: Tensor


class EncoderOutput(NamedTuple):
    """What :meth:`TransformerEncoder.forward` returns with ``return_weights=True``."""

    #: The last layer's output ``(B, T, E)``.
    last_hidden_state: Tensor
    #: One ``(B, H, T, T)`` tensor of attention weights per layer.
    attentions: tuple[Tensor, ...]


def _check_norm_first(norm_first: object) -> bool:
    if not isinstance(norm_first, bool):
        raise TypeError(f"norm_first must be a bool (True: pre-LN, the book; False: post-LN, BERT), got {norm_first!r}")
    return norm_first


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
        self.norm_first = _check_norm_first(norm_first)
        #: The layer norm of the attention sub-layer.
        self.layer_norm_1 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        #: The layer norm of the feed-forward sub-layer.
        self.layer_norm_2 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        #: Multi-head self-attention.
        self.attention = MultiHeadAttention(config)
        #: The position-wise feed-forward network (it has its own output dropout).
        self.feed_forward = FeedForward(config)
        #: Dropout on the attention sub-layer's output (``hidden_dropout_prob``).
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self, hidden_state: Tensor, mask: Tensor | None = None, return_weights: bool = False
    ) -> Tensor | EncoderLayerOutput:
        """Run the layer.

        Args:
            hidden_state: ``(B, T, E)``.
            mask: Boolean (``True`` = may attend) or additive mask,
                broadcastable to ``(B, H, T, T)``, e.g. a ``(B, 1, 1, T)``
                :func:`~literate_transformer.core.masks.padding_mask`.
            return_weights: Also return the attention weights.

        Returns:
            ``(B, T, E)``, or an :class:`EncoderLayerOutput` with the weights.
        """
        check_hidden_states(hidden_state, self.hidden_size, "hidden_state")
        if self.norm_first:
            # Pre-LN: attend over the normalised input, LN_1(x).
            attention_input = self.layer_norm_1(hidden_state)  # (B, T, E)
        else:
            # Post-LN: attend over the input itself.
            attention_input = hidden_state  # (B, T, E)
        attention = self.attention(attention_input, mask=mask, return_weights=return_weights)
        attention_output = attention.output if return_weights else attention  # (B, T, E)
        # Residual connection around attention, x + Dropout(Attn(.)).
        hidden_state = hidden_state + self.dropout(attention_output)  # (B, T, E)
        if self.norm_first:
            # Pre-LN: residual around the feed-forward of the normalised stream, h + FFN(LN_2(h)).
            hidden_state = hidden_state + self.feed_forward(self.layer_norm_2(hidden_state))  # (B, T, E)
        else:
            # Post-LN: normalise the first residual sum, h = LN_1(x + Attn(x)) ...
            hidden_state = self.layer_norm_1(hidden_state)  # (B, T, E)
            # ... then y = LN_2(h + FFN(h)).
            hidden_state = self.layer_norm_2(hidden_state + self.feed_forward(hidden_state))  # (B, T, E)
        if return_weights:
            return EncoderLayerOutput(hidden_state, attention.weights)
        return hidden_state


class TransformerEncoder(nn.Module):
    """Embeddings followed by ``config.num_hidden_layers`` encoder layers.

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            ``transformers`` config.
        norm_first: Layer-norm arrangement of every layer (see
            :class:`TransformerEncoderLayer`).
    """

    def __init__(self, config: Any, norm_first: bool = True) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        #: Token, position and token-type embeddings.
        self.embeddings = Embeddings(config)
        #: The stack of :class:`TransformerEncoderLayer`.
        self.layers = nn.ModuleList(
            TransformerEncoderLayer(config, norm_first=norm_first) for _ in range(config.num_hidden_layers)
        )

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        return_weights: bool = False,
    ) -> Tensor | EncoderOutput:
        """Encode a batch of token ids.

        Args:
            input_ids: Integer token ids ``(B, T)``.
            attention_mask: The tokenizer's ``(B, T)`` mask, 1 (or ``True``)
                for real tokens and 0 for padding; ``None`` means no padding.
            token_type_ids: Segment ids ``(B, T)``; ``None`` means all zeros.
            return_weights: Also return every layer's attention weights.

        Returns:
            The contextual token vectors ``(B, T, E)``, or an
            :class:`EncoderOutput` with the weights.

        Raises:
            TypeError: for inputs of the wrong type.
            ValueError: for ids out of range, a sequence that is too long, or
                an ``attention_mask`` whose shape differs from ``input_ids``.
        """
        # Token ids to vectors (this also validates input_ids and token_type_ids).
        hidden_state = self.embeddings(input_ids, token_type_ids)  # (B, T, E)
        mask = None
        if attention_mask is not None:
            check_attention_mask(attention_mask, input_ids.shape[0], input_ids.shape[1])
            # Padding keys are hidden from every query: a (B, 1, 1, T) boolean mask.
            mask = padding_mask(attention_mask.to(input_ids.device))  # (B, 1, 1, T)
        attentions = []
        for layer in self.layers:
            if return_weights:
                hidden_state, weights = layer(hidden_state, mask=mask, return_weights=True)
                attentions.append(weights)
            else:
                hidden_state = layer(hidden_state, mask=mask)  # (B, T, E)
        if return_weights:
            return EncoderOutput(hidden_state, tuple(attentions))
        return hidden_state


class TransformerForSequenceClassification(nn.Module):
    """An encoder with a linear classifier on the first token (``[CLS]``).

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            ``transformers`` config; ``num_labels`` sets the number of
            classes and ``classifier_dropout`` (or, when it is ``None``,
            ``hidden_dropout_prob``) the dropout before the classifier.
        norm_first: Layer-norm arrangement of the encoder.
    """

    def __init__(self, config: Any, norm_first: bool = True) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        #: The :class:`TransformerEncoder`.
        self.encoder = TransformerEncoder(config, norm_first=norm_first)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        #: Dropout on the ``[CLS]`` vector.
        self.dropout = nn.Dropout(dropout)
        #: One score per label from the ``[CLS]`` vector (E -> C).
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> Tensor:
        """Classify each sequence.

        Args:
            input_ids: Integer token ids ``(B, T)`` whose first token is
                ``[CLS]`` (tokenize with ``add_special_tokens=True``, the
                default).
            attention_mask: The tokenizer's ``(B, T)`` padding mask.
            token_type_ids: Segment ids ``(B, T)``.

        Returns:
            Logits ``(B, C)``, one unnormalised score per label.
        """
        # Contextual vectors of every token.
        hidden_state = self.encoder(input_ids, attention_mask, token_type_ids)  # (B, T, E)
        # The first token's vector, [CLS], stands for the whole sequence.
        cls_state = hidden_state[:, 0, :]  # (B, E)
        # Dropout (training only), then one score per label.
        logits = self.classifier(self.dropout(cls_state))  # (B, C)
        return logits
