r"""DistilBERT: BERT with half the layers, no segments and no pooler, trained to imitate BERT.

DistilBERT (Sanh et al., 2019, "DistilBERT, a distilled version of BERT:
smaller, faster, cheaper and lighter", arXiv:1910.01108, section 3) keeps
BERT's layer and removes what it could: the token-type embeddings and the
pooler go, and every second layer (6 of BERT-base's 12, initialised from
the teacher's layers).  It is trained by *knowledge distillation*: besides
the masked-LM loss, the student matches the teacher's softened output
distribution and the direction of its hidden states.  The architecture is
otherwise BERT's, post-LN:

.. math::

    h^{(0)}_t = \operatorname{LayerNorm}\big(W^{\text{word}}_{x_t} + W^{\text{pos}}_{t}\big), \qquad
    a = \operatorname{LN}_{sa}\big(h + \operatorname{MultiHead}(h)\big), \qquad
    h' = \operatorname{LN}_{out}\big(a + \operatorname{FFN}(a)\big).

What changes is the names: HuggingFace's DistilBERT is the original
release's code, whose modules are named ``q_lin``/``k_lin``/``v_lin``/``out_lin``
(attention), ``sa_layer_norm``, ``ffn.lin1``/``ffn.lin2`` and
``output_layer_norm``, in ``transformer.layer.N``.  This file builds the
layer from the package's parts under those names, so the weights load by
name:

============================================  ======================================================================================
DistilBERT                                    here
============================================  ======================================================================================
``q_lin``, ``k_lin``, ``v_lin``, ``out_lin``  :class:`~literate_transformer.parts.attention.Attention`'s projections and :math:`W^O`
``sa_layer_norm``, ``output_layer_norm``      :func:`~literate_transformer.core.residual.add_and_norm`, post-LN
``ffn.lin1``, ``ffn.lin2``                    :func:`~literate_transformer.parts.feed_forward.feed_forward`
layer norms of epsilon ``1e-12``              fixed in HuggingFace's code, whatever the config says
``sinusoidal_pos_embds``                      the position table filled with the 2017 sinusoids (and frozen)
============================================  ======================================================================================

The config keeps DistilBERT's own field names (``dim``, ``n_heads``,
``n_layers``, ``hidden_dim``, ``activation``, ``dropout``,
``attention_dropout``).

>>> import torch
>>> from transformers import DistilBertConfig
>>> model = DistilBertModel(DistilBertConfig(vocab_size=40, dim=12, n_heads=3, n_layers=2, hidden_dim=20)).eval()
>>> model(torch.tensor([[5, 6, 7]])).last_hidden_state.shape
torch.Size([1, 3, 12])
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ..core.activations import get_activation
from ..core.masks import MaskHook
from ..core.outputs import LayerOutput, ModelOutput
from ..core.residual import add_and_norm
from ..core.validation import Arguments, check_token_inputs, validate_with
from ..parts.attention import Attention
from ..parts.feed_forward import feed_forward
from ..parts.norms import make_norm
from ..parts.positions import LearnedPositionalEmbedding
from ..parts.stack import run_layers
from .registry import ConvertsFromHF, register

__all__ = [
    "DistilBertEmbeddings",
    "DistilBertSelfAttention",
    "DistilBertFFN",
    "DistilBertTransformerBlock",
    "DistilBertTransformer",
    "DistilBertModel",
]

#: DistilBERT's layer norms: HuggingFace fixes their epsilon in the code (the config has no field for it).
LAYER_NORM_EPS = 1e-12


class DistilBertEmbeddings(nn.Module):
    r"""BERT's embeddings without the segments: :math:`\operatorname{LayerNorm}(W^{\text{word}}_{x_t} + W^{\text{pos}}_t)`.

    With ``sinusoidal_pos_embds`` the position table starts as the 2017
    sinusoids (:class:`~literate_transformer.parts.positions.SinusoidalPositionalEncoding`)
    and is not trained; it is still a weight of the checkpoint.

    Args:
        config: The DistilBERT config.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.dim, padding_idx=config.pad_token_id)
        self.position_embeddings = LearnedPositionalEmbedding(config.max_position_embeddings, config.dim)
        if config.sinusoidal_pos_embds:
            # The 2017 sinusoids, frozen: still a weight of the checkpoint, never trained.
            self.position_embeddings.freeze_to_sinusoids()
        self.LayerNorm = make_norm(config.dim, eps=LAYER_NORM_EPS)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, input_ids: Tensor, position_ids: Tensor) -> Tensor:
        """``(B, T)`` ids and positions to ``(B, T, E)`` vectors."""
        # What each token is, plus where it is: no third lookup, DistilBERT has no segments.
        embeddings = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)  # (B, T, E)
        return self.dropout(self.LayerNorm(embeddings))


class DistilBertSelfAttention(Attention):
    """Multi-head self-attention under DistilBERT's names: ``q_lin``, ``k_lin``, ``v_lin`` and ``out_lin``.

    The heads, the kernel and the probabilities are the shared
    :class:`~literate_transformer.parts.attention.Attention`, the four
    layers' names XLM's (Facebook's XLM code named them so, and DistilBERT
    kept them); :math:`W^O` (``out_lin``) sits in this module, where BERT
    keeps it in ``attention.output.dense``.

    Args:
        config: The DistilBERT config.
    """

    projections = ("q_lin", "k_lin", "v_lin", "out_lin")

    def __init__(self, config: Any) -> None:
        super().__init__(config, config.n_heads, config.dim // config.n_heads, dropout=config.attention_dropout)
        self.add_projections(config.dim)


class DistilBertFFN(nn.Module):
    """The feed-forward network, ``lin1`` (E -> F), the activation, ``lin2`` (F -> E), dropout (HuggingFace's ``FFN``).

    Args:
        config: The DistilBERT config (``hidden_dim`` is ``F``).
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.dropout = nn.Dropout(config.dropout)
        self.lin1 = nn.Linear(config.dim, config.hidden_dim)
        self.lin2 = nn.Linear(config.hidden_dim, config.dim)
        self.activation = get_activation(config.activation)

    def forward(self, hidden_states: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, E)``."""
        return feed_forward(hidden_states, self.lin1, self.lin2, self.activation, self.dropout)


class DistilBertTransformerBlock(nn.Module):
    """One post-LN layer: attention, then ``sa_layer_norm``; the network, then ``output_layer_norm`` (``TransformerBlock``).

    Args:
        config: The DistilBERT config.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.attention = DistilBertSelfAttention(config)
        self.sa_layer_norm = make_norm(config.dim, eps=LAYER_NORM_EPS)
        self.ffn = DistilBertFFN(config)
        self.output_layer_norm = make_norm(config.dim, eps=LAYER_NORM_EPS)

    def forward(self, hidden_states: Tensor, attention_mask: Tensor | None, output_attentions: bool) -> LayerOutput:
        """``(B, T, E)`` and the additive mask to the layer's output; with the probabilities if asked."""
        # Sub-layer 1: attention, the residual sum, then the norm (post-LN, as BERT).
        attention = self.attention(hidden_states, attention_mask=attention_mask, output_attentions=output_attentions)
        attention_output = add_and_norm(hidden_states, attention.hidden_states, self.sa_layer_norm, norm_first=False)
        # Sub-layer 2: the feed-forward network, the same way.
        ffn_output = self.ffn(attention_output)  # (B, T, E)
        hidden_states = add_and_norm(attention_output, ffn_output, self.output_layer_norm, norm_first=False)
        return LayerOutput(hidden_states, attention.attention_probs)


class DistilBertTransformer(nn.Module):
    """The stack of ``n_layers`` blocks, ``layer`` (HuggingFace's ``Transformer``)."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.layer = nn.ModuleList(DistilBertTransformerBlock(config) for _ in range(config.n_layers))


def _check_model_inputs(model: DistilBertModel, args: Arguments) -> None:
    check_token_inputs(args, model.config)


class DistilBertModel(ConvertsFromHF, MaskHook, nn.Module):
    """DistilBERT: ``embeddings`` and the ``transformer`` stack; no pooler.

    Args:
        config: A ``transformers`` :class:`~transformers.DistilBertConfig`.
    """

    # Its config's checks (core.config.ChecksConfig): the heads divide dim, a known activation; and its own.
    config_type, config_name = "distilbert", "DistilBertConfig"
    config_heads, config_activation = ("dim", "n_heads"), "activation"

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """Sinusoids of an even width (sines and cosines in pairs)."""
        if config.sinusoidal_pos_embds and config.dim % 2:
            raise ValueError(
                f"DistilBertConfig.sinusoidal_pos_embds needs an even dim (sin and cos pairs), got {config.dim}"
            )

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = self.check_config(config)
        self.embeddings = DistilBertEmbeddings(config)
        self.transformer = DistilBertTransformer(config)

    @validate_with(_check_model_inputs)
    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        *,
        position_ids: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """Contextual vectors for every token.

        The arguments are :meth:`BertModel.forward <literate_transformer.models.bert.BertModel.forward>`'s,
        less the segments: DistilBERT has no segment table.

        Returns:
            A :class:`~literate_transformer.core.outputs.ModelOutput` (no ``pooler_output``: no pooler).

        Raises:
            ValueError: for ids outside the vocabulary, sequences longer than
                ``max_position_embeddings``, or a mask of the wrong shape.
        """
        length = input_ids.shape[1]
        if position_ids is None:
            position_ids = torch.arange(length, device=input_ids.device)[None]  # (1, T)
        embedding_output = self.embeddings(input_ids, position_ids)  # (B, T, E)
        # The padding hidden from every query, built once in the additive form.
        mask = self.attention_masks(attention_mask, length, 0, embedding_output.dtype, input_ids.device)["full"]
        hidden_states, layer_outputs = run_layers(
            self.transformer.layer, embedding_output, mask, output_attentions=output_attentions
        )
        return ModelOutput.from_layers(embedding_output, layer_outputs, hidden_states, output_hidden_states)


register(DistilBertModel)
