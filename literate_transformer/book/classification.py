r"""A classification head: one score per label, read from the first token.

An encoder turns a sentence into one contextual vector per token.  To
classify the whole sentence (sentiment, topic, entailment of a pair) one
vector has to stand for all of them.  BERT's answer is a token that stands
for nothing else: the tokenizer puts ``[CLS]`` in front of every input, and
because attention lets it read every other position, its final hidden state
can summarise the sequence.  The head is then as small as it gets:

.. math::

    \text{logits} = \operatorname{Dropout}\big(h^{(L)}_{\texttt{[CLS]}}\big)\, W^{\top} + b,
    \qquad W \in \mathbb{R}^{C \times E},

one unnormalised score per label (``C = num_labels``), trained with the
cross-entropy loss.

How this maps to the book and to HuggingFace
--------------------------------------------
* The book's ``TransformerForSequenceClassification`` has ``encoder``,
  ``dropout`` and ``classifier``; :class:`TransformerForSequenceClassification`
  keeps the names and runs the book's pre-LN
  :class:`~literate_transformer.book.encoder.TransformerEncoder` by default
  (``norm_first=False`` builds BERT's post-LN arrangement).
* HuggingFace's ``BertForSequenceClassification`` reads ``[CLS]`` through
  BERT's ``pooler`` (a dense layer and tanh; in ``bert-base``'s pre-training,
  the pooler was trained on next-sentence prediction) before its dropout and
  ``classifier``; the book leaves the pooler out.  The default checkpoint of
  this package was fine-tuned to be read by mean pooling instead
  (:func:`~literate_transformer.models.bert.sentence_embeddings`), and a
  pretrained BERT only computes BERT in the post-LN encoder
  (``norm_first=False``).

>>> import torch
>>> from literate_transformer import TransformerConfig
>>> config = TransformerConfig(
...     vocab_size=50, hidden_size=24, num_attention_heads=4, intermediate_size=40,
...     num_hidden_layers=2, max_position_embeddings=16, num_labels=3)
>>> input_ids = torch.tensor([[2, 7, 11, 4], [3, 5, 0, 0]])
>>> attention_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
>>> TransformerForSequenceClassification(config)(input_ids, attention_mask).shape   # (B, C)
torch.Size([2, 3])
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ..core.config import as_config
from ..core.validation import check_norm_first
from .encoder import TransformerEncoder

__all__ = ["TransformerForSequenceClassification"]


class TransformerForSequenceClassification(nn.Module):
    """An encoder with a linear classifier on the first token (``[CLS]``).

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            ``transformers`` config; ``num_labels`` sets the number of
            classes and ``classifier_dropout`` (or, when it is ``None``,
            ``hidden_dropout_prob``) the dropout before the classifier.
        norm_first: Layer-norm arrangement of the encoder: ``True`` (the
            default) for the book's pre-LN, ``False`` for BERT's post-LN.
    """

    def __init__(self, config: Any, norm_first: bool = True) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        #: The :class:`~literate_transformer.book.encoder.TransformerEncoder`.
        self.encoder = TransformerEncoder(config, norm_first=check_norm_first(norm_first))
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

        Raises:
            TypeError: for inputs of the wrong type.
            ValueError: for inputs the encoder refuses (it checks them).
        """
        # Contextual vectors of every token (the encoder checks the inputs).
        hidden_states = self.encoder(input_ids, attention_mask, token_type_ids).last_hidden_state  # (B, T, E)
        # The first token's vector, [CLS], stands for the whole sequence.
        cls_state = hidden_states[:, 0, :]  # (B, E)
        # Dropout (training only), then one score per label.
        logits = self.classifier(self.dropout(cls_state))  # (B, C)
        return logits
