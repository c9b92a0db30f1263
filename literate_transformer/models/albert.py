r"""ALBERT: BERT with factorised embeddings and one set of layer weights shared across the depth.

ALBERT (Lan et al., 2020, "ALBERT: A Lite BERT for Self-supervised Learning
of Language Representations", ICLR, arXiv:1909.11942, section 3.1) keeps
BERT's layer and cuts its parameters twice:

* **factorised embeddings**: the token table has a small width
  :math:`W` (``embedding_size``, 128), and one linear layer,
  ``embedding_hidden_mapping_in``, lifts it to the layers' width :math:`E`;
  :math:`V \times E` parameters become :math:`V \times W + W \times E`;
* **cross-layer sharing**: the ``num_hidden_layers`` layers are not
  independent; they are ``num_hidden_groups`` groups of weights (one, in the
  released models), each a stack of ``inner_group_num`` layers, and the
  depth calls them in turn.  Layer :math:`\ell` of :math:`L` runs group
  :math:`\lfloor \ell / (L / G) \rfloor`, so with one group every layer is the
  same layer, called :math:`L` times:

.. math::

    h^{(0)} = \operatorname{LayerNorm}(\text{tables}(x))\, P + b, \qquad
    h^{(\ell)} = \operatorname{Layer}_{\lfloor \ell G / L \rfloor}\big(h^{(\ell - 1)}\big).

ALBERT-base has 12 layers of BERT-base's width and far fewer parameters
(chapter 13 counts them), and computes as much as BERT-base: sharing saves
memory, not time.  Its layer is BERT's post-LN layer under other names
(``attention.query``, ..., ``attention.dense``, ``attention.LayerNorm``,
``ffn``, ``ffn_output``, ``full_layer_layer_norm``) with ``gelu_new``, the
tanh approximation of GELU.  ALBERT also replaces next-sentence prediction
by *sentence-order prediction* (section 3.1): two consecutive segments, in
order or swapped, and the model says which; a harder task that needs
coherence rather than topic.  The pooler is a dense layer and a tanh, stored
as ``pooler`` and ``pooler_activation``.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ..core.activations import get_activation
from ..core.config import as_config
from ..core.outputs import LayerOutput
from ..core.residual import add_and_norm
from ..parts.feed_forward import feed_forward
from ..parts.norms import make_norm
from ..parts.stack import EncoderModel
from .bert import BertEmbeddings, BertSelfAttention
from .registry import ConvertsFromHF, register

__all__ = [
    "AlbertEmbeddings",
    "AlbertAttention",
    "AlbertLayer",
    "AlbertLayerGroup",
    "AlbertTransformer",
    "AlbertModel",
]


class AlbertEmbeddings(BertEmbeddings):
    """BERT's embeddings at ALBERT's ``embedding_size``: the same three tables, norm and forward, narrower (``W``).

    Args:
        config: A ``transformers`` :class:`~transformers.AlbertConfig`.
    """

    def __init__(self, config: Any) -> None:
        # BERT's tables and norm, built at the embedding width W (one head: no attention is built here).
        super().__init__(as_config(config).replace(hidden_size=config.embedding_size, num_attention_heads=1))


class AlbertAttention(BertSelfAttention):
    r"""BERT's self-attention with its output sub-layer inside: :math:`\operatorname{LN}(x + \operatorname{Attn}(x) W^O)`.

    BERT keeps :math:`W^O` and the norm in a second module (``attention.output``);
    ALBERT keeps them here, as ``dense`` and ``LayerNorm``.

    Args:
        config: A ``transformers`` :class:`~transformers.AlbertConfig`.
    """

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.output_dropout = nn.Dropout(self.config.hidden_dropout_prob)
        self.dense = nn.Linear(self.config.hidden_size, self.config.hidden_size)
        self.LayerNorm = make_norm(self.config.hidden_size, self.config.layer_norm_eps)

    def forward(
        self, hidden_states: Tensor, attention_mask: Tensor | None = None, output_attentions: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """``(B, T, E)`` to ``(output (B, T, E), probabilities or None)``."""
        # BERT's attention: the heads' outputs side by side, and their probabilities.
        context_layer, attention_probs = super().forward(hidden_states, attention_mask, None, None, output_attentions)
        # W^O, dropout, the residual, then the norm (post-LN).
        output = add_and_norm(
            hidden_states, self.dense(context_layer), self.LayerNorm, norm_first=False, dropout=self.output_dropout
        )
        return output, attention_probs


class AlbertLayer(nn.Module):
    """One post-LN layer: :class:`AlbertAttention`, then ``ffn`` and ``ffn_output`` and ``full_layer_layer_norm``.

    HuggingFace's ALBERT defines a dropout for the feed-forward output and never applies it; neither does this.

    Args:
        config: A ``transformers`` :class:`~transformers.AlbertConfig`.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.full_layer_layer_norm = make_norm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = AlbertAttention(config)
        self.ffn = nn.Linear(config.hidden_size, config.intermediate_size)
        self.ffn_output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.activation = get_activation(config.hidden_act)

    def forward(self, hidden_states: Tensor, attention_mask: Tensor | None, output_attentions: bool) -> LayerOutput:
        """``(B, T, E)`` and the additive mask to the layer's output."""
        attention_output, attention_probs = self.attention(hidden_states, attention_mask, output_attentions)
        # The feed-forward network, the residual, then the norm.
        ffn_output = feed_forward(attention_output, self.ffn, self.ffn_output, self.activation)  # (B, T, E)
        hidden_states = add_and_norm(attention_output, ffn_output, self.full_layer_layer_norm, norm_first=False)
        return LayerOutput(hidden_states, attention_probs)


class AlbertLayerGroup(nn.Module):
    """``inner_group_num`` layers with their own weights (``albert_layers``): what one step of the depth runs."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.albert_layers = nn.ModuleList(AlbertLayer(config) for _ in range(config.inner_group_num))


class AlbertTransformer(nn.Module):
    """``embedding_hidden_mapping_in`` (:math:`W \\to E`), then the groups, called in turn over the depth.

    Args:
        config: A ``transformers`` :class:`~transformers.AlbertConfig`.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
        self.embedding_hidden_mapping_in = nn.Linear(config.embedding_size, config.hidden_size)
        self.albert_layer_groups = nn.ModuleList(AlbertLayerGroup(config) for _ in range(config.num_hidden_groups))

    def layers(self) -> list[AlbertLayer]:
        """The layers the depth runs, in order: the same modules again and again."""
        depth, groups = self.config.num_hidden_layers, self.config.num_hidden_groups
        # Layer i of L runs group floor(i / (L / G)): with one group, the same group every time.
        group_of = [int(index / (depth / groups)) for index in range(depth)]
        return [layer for group in group_of for layer in self.albert_layer_groups[group].albert_layers]


class AlbertModel(ConvertsFromHF, EncoderModel):
    """ALBERT: :class:`AlbertEmbeddings`, :class:`AlbertTransformer` (``encoder``), and the tanh ``pooler``.

    Its ``forward`` is the encoder forward of BERT's family
    (:meth:`EncoderModel.forward <literate_transformer.parts.stack.EncoderModel.forward>`);
    ALBERT changes three of its steps: the embeddings are lifted from their width ``W`` to the layers'
    width ``E`` (:meth:`embed`), the same few layers run over the whole depth (:meth:`layers`), and the
    pooler is a dense layer and a tanh kept on the model (:meth:`pool`).  ``attentions`` and
    ``hidden_states`` hold one entry per layer *call* (``num_hidden_layers * inner_group_num`` of them).

    Args:
        config: A ``transformers`` :class:`~transformers.AlbertConfig`.
        add_pooling_layer: Build the ``pooler`` (as HuggingFace does by default).
    """

    #: Its names are HuggingFace's; a checkpoint may have the pooler or not.
    hf_pooler = "pooler."
    config_type, config_name, config_unsupported = "albert", "AlbertConfig", {"position_embedding_type": "absolute"}

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """Groups that fit the layers, and at least one layer in each."""
        if not 1 <= config.num_hidden_groups <= config.num_hidden_layers:
            raise ValueError(
                f"AlbertConfig.num_hidden_groups must be in [1, num_hidden_layers={config.num_hidden_layers}], "
                f"got {config.num_hidden_groups}"
            )
        if config.inner_group_num < 1:
            raise ValueError(f"AlbertConfig.inner_group_num must be at least 1, got {config.inner_group_num}")

    def __init__(self, config: Any, add_pooling_layer: bool = True) -> None:
        self.check_config(config)
        super().__init__()
        self.config = as_config(config)
        self.embeddings = AlbertEmbeddings(config)
        self.encoder = AlbertTransformer(config)
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size) if add_pooling_layer else None
        self.pooler_activation = nn.Tanh() if add_pooling_layer else None

    def embed(
        self, input_ids: Tensor, token_type_ids: Tensor | None, position_ids: Tensor | None, mask: Tensor | None
    ) -> Tensor:
        """Token ids to vectors of the embedding width ``W``, lifted to the layers' width ``E``."""
        embedding_output = self.embeddings(input_ids, token_type_ids, position_ids)  # (B, T, W)
        hidden_states = self.encoder.embedding_hidden_mapping_in(embedding_output)  # (B, T, E)
        return hidden_states

    def layers(self) -> list[AlbertLayer]:
        """The shared layers, called over the whole depth (:meth:`AlbertTransformer.layers`)."""
        return self.encoder.layers()

    def pool(self, last_hidden_state: Tensor) -> Tensor | None:
        """The ``[CLS]`` vector through a dense layer and a tanh; ``None`` without a pooler."""
        if self.pooler is None:
            return None
        pooler_output = self.pooler_activation(self.pooler(last_hidden_state[:, 0]))  # (B, E)
        return pooler_output


register(AlbertModel)
