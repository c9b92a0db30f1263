r"""DeBERTa v2/v3: BERT's layer with disentangled attention, content and relative position scored apart.

DeBERTa (He et al., 2021, "DeBERTa: Decoding-enhanced BERT with
Disentangled Attention", ICLR, arXiv:2006.03654, section 3.1) keeps BERT's
post-LN layer and changes what an attention score is made of.  BERT adds a
position vector to each token vector once, at the bottom, and from then on
content and position are mixed in one vector.  DeBERTa keeps a separate set
of vectors for *relative* positions, one per distance, shared by every layer
(``encoder.rel_embeddings``), and scores each pair of tokens :math:`(i, j)`
by three terms:

.. math::

    \tilde A_{ij} = \underbrace{Q^c_i \cdot K^c_j}_{\text{content to content}}
    + \underbrace{Q^c_i \cdot K^r_{\delta(i,j)}}_{\text{content to position}}
    + \underbrace{K^c_j \cdot Q^r_{\delta(i,j)}}_{\text{position to content}},
    \qquad A = \operatorname{softmax}\Big(\frac{\tilde A}{\sqrt{3D}}\Big),

where :math:`Q^c = H W^Q`, :math:`K^c = H W^K` are BERT's queries and
keys of the tokens, :math:`Q^r = P W^{Q}_r` and :math:`K^r = P W^{K}_r` are
queries and keys made from the relative-position table :math:`P`, and
:math:`\delta(i, j)` is the row of :math:`P` for the distance :math:`i - j`.
The first term asks "does this word fit that word", the second "does this
word look for something at that distance", the third "is that word the kind
that is looked for from this distance".  Three terms of similar size add
up to about three times the variance of one, so the scores are scaled by :math:`\sqrt{3D}`
instead of :math:`\sqrt{D}`: in general by :math:`\sqrt{(1 + n)D}` for the
:math:`n` position terms a config turns on (``pos_att_type``).

What v2 and v3 add (the configurations of ``microsoft/deberta-v2-*`` and
``deberta-v3-*`` on the hub), each read from the config here:

* **log-bucketed distances** (``position_buckets``, 256): distances below
  half the buckets keep their own row; farther ones share rows whose span
  grows logarithmically up to ``max_relative_positions``
  (:func:`make_log_bucket_position`);
* **shared position projections** (``share_att_key``): :math:`W^Q_r = W^Q`
  and :math:`W^K_r = W^K`, the token projections applied to the position
  table, instead of separate ``pos_query_proj`` and ``pos_key_proj``;
* a **layer norm on the position table** (``norm_rel_ebd="layer_norm"``);
* **no absolute positions** at the bottom (``position_biased_input=False``):
  order enters only through the relative terms;
* ``type_vocab_size=0``: no segment table.

The padding mask is also DeBERTa's own: a pair may attend only when the
query *and* the key are real tokens, so a padding query's row is masked
everywhere (its probabilities come out uniform), and the embeddings of the
padding are zeroed.  ``transformers``' default :class:`~transformers.DebertaV2Config`
turns the relative attention off (an absolute-position BERT without
segments); every option above is built, and those this file does not build
(``conv_kernel_size``, the convolution v2-xlarge adds to the first layer,
and a ``pos_att_type`` other than ``c2p`` and ``p2c``) are refused by name.
Unlike ``transformers``, the model refuses sequences longer than
``max_position_embeddings`` even without absolute positions (those it was
trained on).

>>> import torch
>>> make_log_bucket_position(torch.tensor([-100, -9, -3, 0, 3, 9, 100]), bucket_size=8, max_position=64)
tensor([-8., -5., -3.,  0.,  3.,  5.,  8.])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.masks import build_attention_mask, combine_masks, masked_fill_scores
from ..core.outputs import LayerOutput
from ..parts.heads import merge_heads, split_heads
from ..parts.norms import make_norm
from ..parts.stack import EncoderModel
from .bert import BertAttention, BertLayer
from .registry import ConvertsFromHF, register

__all__ = [
    "make_log_bucket_position",
    "build_relative_position",
    "DebertaV2Embeddings",
    "DisentangledSelfAttention",
    "DebertaV2Attention",
    "DebertaV2Layer",
    "DebertaV2Encoder",
    "DebertaV2Model",
]

#: The position terms disentangled attention can add to the content term.
POSITION_TERMS = ("c2p", "p2c")


# ---------------------------------------------------------------------------
# Relative positions, log-bucketed
# ---------------------------------------------------------------------------
def make_log_bucket_position(relative_pos: Tensor, bucket_size: int, max_position: int) -> Tensor:
    r"""The row of each distance: itself when near, a logarithmic bucket when far (sign kept).

    With :math:`m` = ``bucket_size // 2`` and :math:`d` a distance,

    .. math::

        \operatorname{bucket}(d) = \begin{cases}
        d & |d| \le m \\
        \operatorname{sign}(d)\Big(m + \Big\lceil
        \dfrac{\log(|d| / m)}{\log((\text{max\_position} - 1) / m)} (m - 1) \Big\rceil\Big) & \text{otherwise}
        \end{cases}

    so distances from :math:`m` to ``max_position - 1`` share the
    :math:`m - 1` buckets after :math:`m`, each wider than the last.  Unlike
    T5's (:func:`~literate_transformer.parts.positions.relative_position_bucket`)
    the result keeps its sign and the far buckets are not capped: a distance
    beyond ``max_position`` gets a bucket beyond the table, which the
    attention clamps to its last row.

    Args:
        relative_pos: Integer distances, any shape.
        bucket_size: The number of rows on each side (``position_buckets``).
        max_position: The distance the buckets are spread up to (``max_relative_positions``).

    Returns:
        The buckets, a float tensor of ``relative_pos``'s shape (as ``transformers`` returns them).
    """
    sign = torch.sign(relative_pos)
    mid = bucket_size // 2
    # Near distances get any value below mid here (mid - 1); the line at the end keeps them as they are.
    abs_pos = torch.where(
        (relative_pos < mid) & (relative_pos > -mid), torch.tensor(mid - 1).type_as(relative_pos), relative_pos.abs()
    )
    # Far distances: mid plus the log of the distance in units of mid, scaled to the mid - 1 buckets left.
    log_pos = torch.ceil(torch.log(abs_pos / mid) / torch.log(torch.tensor((max_position - 1) / mid)) * (mid - 1)) + mid
    return torch.where(abs_pos <= mid, relative_pos.type_as(log_pos), log_pos * sign)


def build_relative_position(
    query_size: int, key_size: int, bucket_size: int = -1, max_position: int = -1, device: torch.device | None = None
) -> Tensor:
    """The (bucketed) distance :math:`i - j` from each query to each key, ``(T, S)``.

    Args:
        query_size: ``T``.
        key_size: ``S``.
        bucket_size: ``position_buckets``; with ``max_position``, both positive, the distances are log-bucketed.
        max_position: ``max_relative_positions``.
        device: Where to build them.

    Returns:
        A long tensor ``(T, S)``.
    """
    q_ids = torch.arange(query_size, device=device)
    k_ids = torch.arange(key_size, device=device)
    # How far before the query each key is: positive to the left, negative to the right.
    rel_pos_ids = q_ids[:, None] - k_ids[None, :]  # (T, S)
    if bucket_size > 0 and max_position > 0:
        rel_pos_ids = make_log_bucket_position(rel_pos_ids, bucket_size, max_position)
    return rel_pos_ids.long()


# ---------------------------------------------------------------------------
# Embeddings
# ---------------------------------------------------------------------------
class DebertaV2Embeddings(nn.Module):
    r"""BERT's embeddings, each table optional: words, then absolute positions and segments if the config has them.

    .. math:: h^{(0)}_t = \operatorname{LayerNorm}\big((W^{\text{word}}_{x_t} [+ W^{\text{pos}}_t]
              [+ W^{\text{type}}_{s_t}])\,[P]\big) \cdot m_t

    ``position_biased_input=False`` (v3) drops the absolute positions,
    ``type_vocab_size=0`` the segments; ``embedding_size`` other than
    ``hidden_size`` adds ``embed_proj`` (no bias); :math:`m_t` zeroes the padding.

    Args:
        config: A ``transformers`` :class:`~transformers.DebertaV2Config`.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        embedding_size = getattr(config, "embedding_size", config.hidden_size)
        self.word_embeddings = nn.Embedding(config.vocab_size, embedding_size, padding_idx=config.pad_token_id)
        self.position_biased_input = getattr(config, "position_biased_input", True)
        self.position_embeddings = (
            nn.Embedding(config.max_position_embeddings, embedding_size) if self.position_biased_input else None
        )
        self.token_type_embeddings = (
            nn.Embedding(config.type_vocab_size, embedding_size) if config.type_vocab_size > 0 else None
        )
        self.embed_proj = (
            nn.Linear(embedding_size, config.hidden_size, bias=False) if embedding_size != config.hidden_size else None
        )
        self.LayerNorm = make_norm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self, input_ids: Tensor, token_type_ids: Tensor | None, position_ids: Tensor, mask: Tensor | None
    ) -> Tensor:
        """``(B, T)`` ids to ``(B, T, E)`` vectors; ``mask`` ``(B, T)``, 0 on padding, zeroes its vectors."""
        embeddings = self.word_embeddings(input_ids)
        if self.position_embeddings is not None:
            embeddings = embeddings + self.position_embeddings(position_ids)
        if self.token_type_embeddings is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            embeddings = embeddings + self.token_type_embeddings(token_type_ids)
        if self.embed_proj is not None:
            embeddings = self.embed_proj(embeddings)
        embeddings = self.LayerNorm(embeddings)  # (B, T, E)
        if mask is not None:
            # The padding's vectors set to zero.
            embeddings = embeddings * mask.unsqueeze(-1).to(embeddings.dtype)
        return self.dropout(embeddings)


# ---------------------------------------------------------------------------
# Disentangled attention
# ---------------------------------------------------------------------------
class DisentangledSelfAttention(nn.Module):
    r"""Self-attention scored as content-to-content plus content-to-position plus position-to-content.

    The projections keep HuggingFace's names: ``query_proj``, ``key_proj``,
    ``value_proj`` for the tokens, and, unless ``share_att_key``,
    ``pos_key_proj`` (for the content-to-position term) and
    ``pos_query_proj`` (for position-to-content) for the position table.
    :math:`W^O` is in :class:`~literate_transformer.models.bert.BertSelfOutput`,
    as in BERT.

    Args:
        config: A ``transformers`` :class:`~transformers.DebertaV2Config`.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.num_attention_heads = config.num_attention_heads  # H
        self.attention_head_size = config.hidden_size // config.num_attention_heads  # D
        all_head_size = self.num_attention_heads * self.attention_head_size
        self.query_proj = nn.Linear(config.hidden_size, all_head_size)
        self.key_proj = nn.Linear(config.hidden_size, all_head_size)
        self.value_proj = nn.Linear(config.hidden_size, all_head_size)
        self.share_att_key = getattr(config, "share_att_key", False)
        self.pos_att_type = list(config.pos_att_type or [])
        self.relative_attention = getattr(config, "relative_attention", False)
        if self.relative_attention:
            self.position_buckets = getattr(config, "position_buckets", -1)
            self.max_relative_positions = getattr(config, "max_relative_positions", -1)
            if self.max_relative_positions < 1:
                self.max_relative_positions = config.max_position_embeddings
            #: :math:`k`: rows of the position table on each side of distance 0.
            self.pos_ebd_size = self.position_buckets if self.position_buckets > 0 else self.max_relative_positions
            self.pos_dropout = nn.Dropout(config.hidden_dropout_prob)
            if not self.share_att_key:
                if "c2p" in self.pos_att_type:
                    self.pos_key_proj = nn.Linear(config.hidden_size, all_head_size)
                if "p2c" in self.pos_att_type:
                    self.pos_query_proj = nn.Linear(config.hidden_size, all_head_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(
        self,
        hidden_states: Tensor,
        attention_mask: Tensor | None,
        output_attentions: bool = False,
        query_states: Tensor | None = None,
        relative_pos: Tensor | None = None,
        rel_embeddings: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend; returns ``(context (B, T, E), probabilities (B, H, T, T) or None)``.

        The arguments are in ``transformers``' order.

        Args:
            hidden_states: ``(B, T, E)``.
            attention_mask: Boolean ``(B, 1, T, T)``, true where query and key are both real; or ``None``.
            output_attentions: Return the probabilities.
            query_states: ``(B, T, E)`` to project the queries from instead of ``hidden_states`` (the
                enhanced mask decoder's input); ``None``: the queries come from ``hidden_states``.
            relative_pos: The bucketed distances ``(T, T)`` (:func:`build_relative_position`).
            rel_embeddings: The position table ``(2k, E)`` (:meth:`DebertaV2Encoder.get_rel_embedding`).
        """
        heads = self.num_attention_heads
        if query_states is None:
            query_states = hidden_states
        # BERT's projections of the tokens, split into heads: Q^c, K^c and V.
        query_layer = split_heads(self.query_proj(query_states), heads)  # (B, H, T, D)
        key_layer = split_heads(self.key_proj(hidden_states), heads)  # (B, H, T, D)
        value_layer = split_heads(self.value_proj(hidden_states), heads)  # (B, H, T, D)
        # One content term plus one per position term: the variance of the sum grows with their number,
        # so the scores are divided by sqrt(D * (1 + terms)), sqrt(3D) with both.
        scale_factor = 1 + len(self.pos_att_type)
        scale = math.sqrt(self.attention_head_size * scale_factor)
        # Content to content, Q^c K^c^T: BERT's scores.
        attention_scores = query_layer @ key_layer.transpose(-1, -2) / scale  # (B, H, T, T)
        if self.relative_attention:
            rel_embeddings = self.pos_dropout(rel_embeddings)
            # Plus the position terms.
            attention_scores = attention_scores + self.disentangled_attention_bias(
                query_layer, key_layer, relative_pos, rel_embeddings, scale
            )
        # A pair is hidden unless query and key are both real tokens.
        attention_scores = masked_fill_scores(attention_scores, attention_mask)
        attention_probs = F.softmax(attention_scores, dim=-1)
        # The weighted average of the values, heads side by side again.
        context_layer = self.dropout(attention_probs) @ value_layer  # (B, H, T, D)
        context_layer = merge_heads(context_layer)  # (B, T, E)
        return context_layer, attention_probs if output_attentions else None

    def disentangled_attention_bias(
        self, query_layer: Tensor, key_layer: Tensor, relative_pos: Tensor, rel_embeddings: Tensor, scale: float
    ) -> Tensor:
        r"""The position terms, :math:`(Q^c_i \cdot K^r_{\delta(i,j)} + K^c_j \cdot Q^r_{\delta(i,j)}) / \text{scale}`.

        Args:
            query_layer: :math:`Q^c`, ``(B, H, T, D)``.
            key_layer: :math:`K^c`, ``(B, H, T, D)``.
            relative_pos: The bucketed distances :math:`i - j`, ``(T, T)``.
            rel_embeddings: The position table :math:`P`, ``(2k, E)``: row :math:`k + d` is distance :math:`d`.
            scale: :math:`\sqrt{D (1 + \text{terms})}`.

        Returns:
            ``(B, H, T, T)``, to add to the content scores.
        """
        batch_size, heads, length, _ = query_layer.shape
        att_span = self.pos_ebd_size
        # The 2k rows of P as a batch of one sequence: distances -k .. k - 1.
        rel_embeddings = rel_embeddings[: att_span * 2][None]  # (1, A, E)
        # Queries and keys *of the positions*: with share_att_key the tokens' own projections, else their own.
        if self.share_att_key:
            pos_query_layer = split_heads(self.query_proj(rel_embeddings), heads)  # (1, H, A, D)
            pos_key_layer = split_heads(self.key_proj(rel_embeddings), heads)  # (1, H, A, D)
        else:
            if "c2p" in self.pos_att_type:
                pos_key_layer = split_heads(self.pos_key_proj(rel_embeddings), heads)  # (1, H, A, D)
            if "p2c" in self.pos_att_type:
                pos_query_layer = split_heads(self.pos_query_proj(rel_embeddings), heads)  # (1, H, A, D)
        # The row of P each pair (i, j) reads: k + bucket(i - j), clamped into the table.
        c2p_pos = torch.clamp(relative_pos + att_span, 0, att_span * 2 - 1)  # (T, T)
        score = torch.zeros((), dtype=query_layer.dtype, device=query_layer.device)
        if "c2p" in self.pos_att_type:
            # Content to position: each query Q^c_i against the key of every distance ...
            c2p_att = query_layer @ pos_key_layer.transpose(-1, -2)  # (B, H, T, A)
            # ... and for each key j, the one of the pair's distance: Q^c_i . K^r_{delta(i,j)}.
            index = c2p_pos.expand(batch_size, heads, length, length)  # (B, H, T, T)
            score = score + torch.gather(c2p_att, dim=-1, index=index) / scale
        if "p2c" in self.pos_att_type:
            # Position to content: each key K^c_j against the query of every distance ...
            p2c_att = key_layer @ pos_query_layer.transpose(-1, -2)  # (B, H, T, A)
            # ... key j's row for query i is k - bucket(j - i) = k + bucket(i - j) (buckets keep their sign):
            # gathered per key (rows j, columns i), then turned to (query, key) like every score.
            p2c_pos = torch.clamp(-relative_pos + att_span, 0, att_span * 2 - 1)  # (T, T)
            index = p2c_pos.expand(batch_size, heads, length, length)
            p2c_att = torch.gather(p2c_att, dim=-1, index=index).transpose(-1, -2)  # (B, H, T, T)
            score = score + p2c_att / scale
        return score


class DebertaV2Attention(BertAttention):
    """BERT's attention sub-layer with :class:`DisentangledSelfAttention` as its ``self``.

    ``output`` is BERT's :class:`~literate_transformer.models.bert.BertSelfOutput`
    (:math:`W^O`, dropout, residual, post-LN).

    Args:
        config: A ``transformers`` :class:`~transformers.DebertaV2Config`.
    """

    self_attention_class = DisentangledSelfAttention

    def forward(
        self,
        hidden_states: Tensor,
        attention_mask: Tensor | None,
        output_attentions: bool = False,
        query_states: Tensor | None = None,
        relative_pos: Tensor | None = None,
        rel_embeddings: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """See :meth:`DisentangledSelfAttention.forward`; returns ``(output (B, T, E), probabilities or None)``."""
        context_layer, attention_probs = self.self(
            hidden_states, attention_mask, output_attentions, query_states, relative_pos, rel_embeddings
        )
        # The residual is the queries' input.
        residual = hidden_states if query_states is None else query_states
        return self.output(context_layer, residual), attention_probs


class DebertaV2Layer(BertLayer):
    """BERT's layer with :class:`DebertaV2Attention`: the feed-forward sub-layer is BERT's, name for name.

    Args:
        config: A ``transformers`` :class:`~transformers.DebertaV2Config`.
    """

    attention_class = DebertaV2Attention

    def forward(
        self,
        hidden_states: Tensor,
        attention_mask: Tensor | None,
        query_states: Tensor | None = None,
        relative_pos: Tensor | None = None,
        rel_embeddings: Tensor | None = None,
        output_attentions: bool = False,
    ) -> LayerOutput:
        """``(B, T, E)`` to the layer's output; the other arguments as in :meth:`DisentangledSelfAttention.forward`
        (here in ``transformers``' order for the layer, ``output_attentions`` last)."""
        attention_output, attention_probs = self.attention(
            hidden_states, attention_mask, output_attentions, query_states, relative_pos, rel_embeddings
        )
        intermediate_output = self.intermediate(attention_output)  # (B, T, F)
        return LayerOutput(self.output(intermediate_output, attention_output), attention_probs)


class DebertaV2Encoder(nn.Module):
    """The layers, and what they share: the relative-position table ``rel_embeddings`` and its ``LayerNorm``.

    Args:
        config: A ``transformers`` :class:`~transformers.DebertaV2Config`.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.layer = nn.ModuleList(DebertaV2Layer(config) for _ in range(config.num_hidden_layers))
        self.relative_attention = getattr(config, "relative_attention", False)
        if self.relative_attention:
            self.max_relative_positions = getattr(config, "max_relative_positions", -1)
            if self.max_relative_positions < 1:
                self.max_relative_positions = config.max_position_embeddings
            self.position_buckets = getattr(config, "position_buckets", -1)
            span = self.position_buckets if self.position_buckets > 0 else self.max_relative_positions
            #: :math:`P`: one vector per distance, ``2k`` rows, shared by every layer.
            self.rel_embeddings = nn.Embedding(2 * span, config.hidden_size)
        self.norm_rel_ebd = [name.strip() for name in getattr(config, "norm_rel_ebd", "none").lower().split("|")]
        if "layer_norm" in self.norm_rel_ebd:
            self.LayerNorm = make_norm(config.hidden_size, eps=config.layer_norm_eps)

    def get_rel_embedding(self) -> Tensor | None:
        """The position table every layer reads, layer-normed if the config says so; ``None`` without one."""
        if not self.relative_attention:
            return None
        rel_embeddings = self.rel_embeddings.weight
        return self.LayerNorm(rel_embeddings) if "layer_norm" in self.norm_rel_ebd else rel_embeddings

    def get_rel_pos(self, length: int, device: torch.device) -> Tensor | None:
        """The bucketed distances of a sequence of ``length``, ``(T, T)``; ``None`` without relative attention."""
        if not self.relative_attention:
            return None
        return build_relative_position(length, length, self.position_buckets, self.max_relative_positions, device)


class DebertaV2Model(ConvertsFromHF, EncoderModel):
    """DeBERTa v2/v3: :class:`DebertaV2Embeddings` and :class:`DebertaV2Encoder`; no pooler.

    Its ``forward`` is the encoder forward of BERT's family
    (:meth:`EncoderModel.forward <literate_transformer.parts.stack.EncoderModel.forward>`), two of whose
    arguments are read only where the config has their table: ``token_type_ids`` with
    ``type_vocab_size > 0``, ``position_ids`` with ``position_biased_input``.  DeBERTa changes what the
    layers read: a mask over pairs of tokens (:meth:`attention_masks`), and the distances and the position
    table every layer's disentangled attention reads (:meth:`layer_inputs`).

    Args:
        config: A ``transformers`` :class:`~transformers.DebertaV2Config`.
    """

    @classmethod
    def map_hf_state_dict(
        cls, state_dict: Mapping[str, Tensor], expected: Mapping[str, Tensor], tied: bool = False
    ) -> dict[str, Tensor]:
        """The names are HuggingFace's, but for one thing: ``embeddings.position_embeddings.weight`` in a
        checkpoint of a model without absolute positions (v3's ``position_biased_input=False``) is dropped, as
        the model never reads it (``transformers`` ignores it too).

        Raises:
            ValueError: listing every missing, unexpected and mis-shaped key.
        """
        unused = "embeddings.position_embeddings.weight"
        if unused not in expected:
            state_dict = {key: tensor for key, tensor in state_dict.items() if key != unused}
        return super().map_hf_state_dict(state_dict, expected, tied)

    # Its config's checks (core.config.ChecksConfig), and its own below.
    config_type, config_name = "deberta-v2", "DebertaV2Config"
    config_heads, config_activation = ("hidden_size", "num_attention_heads"), "hidden_act"

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """No convolution layer, known position terms and norms of the position table, and BERT's head size."""
        if getattr(config, "conv_kernel_size", 0) > 0:
            raise ValueError(f"DebertaV2Config.conv_kernel_size={config.conv_kernel_size} is not supported (only 0)")
        unknown = [term for term in config.pos_att_type or [] if term not in POSITION_TERMS]
        if unknown:
            raise ValueError(f"DebertaV2Config.pos_att_type may hold {POSITION_TERMS}, got {config.pos_att_type!r}")
        norms = [name.strip() for name in getattr(config, "norm_rel_ebd", "none").lower().split("|")]
        if not set(norms) <= {"none", "layer_norm"}:
            raise ValueError(
                f"DebertaV2Config.norm_rel_ebd must be 'none' or 'layer_norm', got {config.norm_rel_ebd!r}"
            )
        head_size = config.hidden_size // config.num_attention_heads
        if getattr(config, "attention_head_size", head_size) != head_size:
            raise ValueError(
                f"DebertaV2Config.attention_head_size must be hidden_size // num_attention_heads = {head_size}"
            )

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = self.check_config(config)
        self.embeddings = DebertaV2Embeddings(config)
        self.encoder = DebertaV2Encoder(config)

    def embed(
        self, input_ids: Tensor, token_type_ids: Tensor | None, position_ids: Tensor | None, mask: Tensor | None
    ) -> Tensor:
        """DeBERTa's embeddings, ``(B, T, E)``; they zero the padding's vectors, where ``mask`` is 0."""
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[1], device=input_ids.device)[None]  # (1, T)
        embedding_output = self.embeddings(input_ids, token_type_ids, position_ids, mask)  # (B, T, E)
        return embedding_output

    def attention_masks(
        self,
        attention_mask: Tensor | None,
        length: int,
        past_length: int = 0,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> dict[str, Tensor | None]:
        """DeBERTa's mask, in the boolean form its layers read: pair (i, j) is visible when token i and token j
        are both real, ``(B, 1, T, T)``."""
        if attention_mask is None:
            return {"full": None}
        keys = build_attention_mask(attention_mask, query_length=length, device=device)  # (B, 1, 1, T)
        pairs = combine_masks(keys, keys.transpose(-1, -2))  # (B, 1, T, T)
        return {"full": pairs}

    def layers(self) -> Sequence[DebertaV2Layer]:
        """The encoder's layers."""
        return self.encoder.layer

    def layer_inputs(self, length: int, device: torch.device) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        """No separate queries, then the distances and the position table, computed once and shared by every layer."""
        return None, self.encoder.get_rel_pos(length, device), self.encoder.get_rel_embedding()


register(DebertaV2Model)
