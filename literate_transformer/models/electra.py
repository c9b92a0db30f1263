r"""ELECTRA: BERT's layers with narrower embeddings, trained to spot replaced tokens.

ELECTRA (Clark et al., 2020, "ELECTRA: Pre-training Text Encoders as
Discriminators Rather Than Generators", ICLR, arXiv:2003.10555, section 2)
trains two BERT-style encoders together.  A small *generator* is trained
with masked language modelling and fills the masked positions with tokens
it samples; the *discriminator*, the model that is kept, reads the result
and predicts, for **every** token, whether it is the original or a
replacement (*replaced-token detection*).  Every position teaches the
discriminator something, where masked language modelling learns from the
15% it masked.

The discriminator is BERT's encoder, name for name
(:mod:`~literate_transformer.models.bert`), with one change in the model:
its token vectors may be narrower than its layers.  ``embedding_size``
(:math:`W`) is the width of the three tables and their layer norm
(the generator and the discriminator share them, section 3.2); when it
differs from ``hidden_size`` (:math:`E`) a linear layer,
``embeddings_project``, maps :math:`W \to E` before the first layer:

.. math::

    h^{(0)} = \operatorname{LayerNorm}\big(W^{\text{word}}_{x} + W^{\text{pos}}_{t}
    + W^{\text{type}}_{s}\big)\, P + b, \qquad P \in \mathbb{R}^{W \times E}.

ELECTRA-small has :math:`W = 128`, :math:`E = 256`.  It has no pooler.
:class:`ElectraForPreTraining` adds the discriminator's head: a dense layer,
the activation, and one score per token, :math:`\sigma(\text{score}) =
P(\text{replaced})`, trained with a binary cross-entropy over the real tokens.
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from ..core.activations import get_activation
from ..core.validation import check_tensor, checks_values, value_error
from .albert import AlbertEmbeddings
from .bert import BertModel, BertWithTokenHead
from .registry import register

__all__ = [
    "ElectraEmbeddings",
    "ElectraModel",
    "ElectraDiscriminatorPredictions",
    "ElectraForPreTraining",
]


class ElectraEmbeddings(AlbertEmbeddings):
    """ALBERT's embeddings under ELECTRA's name: BERT's three tables and norm at ``embedding_size`` (``W``).

    ELECTRA takes ALBERT's narrower embeddings and nothing else of ALBERT's (its layers are BERT's, unshared);
    the projection up to ``E`` is :class:`ElectraModel`'s ``embeddings_project``.

    Args:
        config: A ``transformers`` :class:`~transformers.ElectraConfig`.
    """


class ElectraModel(BertModel):
    """ELECTRA's encoder: :class:`ElectraEmbeddings`, ``embeddings_project`` (when :math:`W \\ne E`), BERT's layers.

    ``forward`` is :meth:`BertModel.forward <literate_transformer.models.bert.BertModel.forward>`:
    only its first step, :meth:`embed`, changes.  There is no pooler.

    Args:
        config: A ``transformers`` :class:`~transformers.ElectraConfig`.
    """

    # Converting reads BERT's declarations (models.registry.ConvertsFromHF) under ELECTRA's names; it has no pooler.
    config_type, config_name = "electra", "ElectraConfig"
    hf_prefix = "electra."
    hf_heads = ("discriminator_predictions.", "generator_")
    hf_pooler = None

    def __init__(self, config: Any) -> None:
        self.check_config(config)
        super().__init__(config, add_pooling_layer=False)
        self.embeddings = ElectraEmbeddings(config)
        if config.embedding_size != config.hidden_size:
            #: :math:`W \to E`, from the embedding width to the layers'.
            self.embeddings_project = nn.Linear(config.embedding_size, config.hidden_size)

    def embed(self, input_ids: Tensor, token_type_ids: Tensor | None, position_ids: Tensor | None) -> Tensor:
        """BERT's step 1 at the embedding width ``W``, then projected to the layers' width ``E``, ``(B, T, E)``."""
        # Token ids -> vectors of the embedding width W ...
        embedding_output = self.embeddings(input_ids, token_type_ids, position_ids)  # (B, T, W)
        # ... projected to the layers' width E, where the two differ.
        if hasattr(self, "embeddings_project"):
            embedding_output = self.embeddings_project(embedding_output)  # (B, T, E)
        return embedding_output


class ElectraDiscriminatorPredictions(nn.Module):
    """Replaced-token detection: a dense layer, the activation, then one score per token (``dense_prediction``).

    Args:
        config: A ``transformers`` :class:`~transformers.ElectraConfig`.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = get_activation(config.hidden_act)
        self.dense_prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, discriminator_hidden_states: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T)``: the logit of "this token was replaced"."""
        hidden_states = self.activation(self.dense(discriminator_hidden_states))  # (B, T, E)
        # One score per token; the last dimension, of size 1, dropped.
        return self.dense_prediction(hidden_states).squeeze(-1)


class ElectraForPreTraining(BertWithTokenHead):
    """ELECTRA's discriminator with its head: is each token the original (0) or a replacement (1)?

    ``forward`` is BERT's pretraining models' :meth:`~literate_transformer.models.bert.BertWithTokenHead.forward`
    on ``electra``: ``logits`` ``(B, T)``, and with ``labels`` (``(B, T)``, 1 where a token was replaced, 0
    where it is the original) the ``loss``.

    Args:
        config: A ``transformers`` :class:`~transformers.ElectraConfig`.
    """

    #: The attribute that holds the encoder, as in ``transformers``.
    base_model_prefix = "electra"

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.electra = ElectraModel(config)
        self.config = self.electra.config
        self.discriminator_predictions = ElectraDiscriminatorPredictions(config)

    def score(self, sequence_output: Tensor) -> Tensor:
        """A replaced-token logit for every token, ``(B, T)``."""
        logits = self.discriminator_predictions(sequence_output)  # (B, T)
        return logits

    def loss(self, logits: Tensor, labels: Tensor, attention_mask: Tensor | None) -> Tensor:
        """The mean binary cross-entropy over the real tokens (all tokens without ``attention_mask``), as ``transformers`` computes it."""
        # Replaced-token detection: a yes/no question at every real token, padding left out.
        real = slice(None) if attention_mask is None else attention_mask.bool()
        return F.binary_cross_entropy_with_logits(logits[real], labels[real].float())

    def validate_labels(self, labels: Tensor, input_ids: Tensor) -> None:
        """Zeros and ones, one per input token."""
        labels = check_tensor(labels, "labels", dtypes=("int", "bool"), shape=tuple(input_ids.shape))
        if labels.numel() and checks_values(labels) and not bool(((labels == 0) | (labels == 1)).all()):
            raise value_error("labels must be 1 where a token was replaced and 0 where it is the original")


register(ElectraModel, ElectraForPreTraining)
