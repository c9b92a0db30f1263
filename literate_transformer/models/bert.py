r"""BERT, line by line: HuggingFace's ``modeling_bert.py`` without the machinery.

This module rebuilds :class:`transformers.BertModel` with **the same module
and parameter names** (``embeddings.word_embeddings``,
``encoder.layer.0.attention.self.query``, ``...output.LayerNorm``, ``pooler.dense``),
so that a pretrained checkpoint loads into it with a plain
:meth:`~torch.nn.Module.load_state_dict` (see
:mod:`~literate_transformer.core.checkpoints`, :meth:`BertModel.from_pretrained`
and what BERT declares for the one conversion, :class:`~literate_transformer.models.registry.ConvertsFromHF`),
and the tests can prove, number by number, that it computes what HuggingFace
computes.  What it drops is the production machinery: key/value caches,
head pruning, feed-forward chunking, gradient checkpointing, ``return_dict``
and tuple outputs.

The shape legend of the whole package: ``B`` batch, ``T`` query (target)
length, ``S`` key/value (source) length, ``H`` heads, ``D`` head size,
``E`` hidden size, ``F`` intermediate size.  Every tensor-producing line of a
``forward`` below ends with its shape, and a test runs the code and checks
each of those comments.

The model
---------
A token sequence :math:`x_1 \dots x_T` (with segment ids :math:`s_t`) becomes
vectors in three lookups and a layer norm (:class:`BertEmbeddings`),

.. math::

    h^{(0)}_t = \operatorname{LayerNorm}\big(W^{\text{word}}_{x_t} + W^{\text{pos}}_{t} + W^{\text{type}}_{s_t}\big),

then passes through ``num_hidden_layers`` identical layers (:class:`BertLayer`),
each made of two sub-layers with a residual connection and a layer norm
*after* the sum (BERT is **post**-LN, like the 2017 paper):

.. math::

    a = \operatorname{LayerNorm}\big(h + \operatorname{MultiHead}(h)\,W^O\big), \qquad
    h' = \operatorname{LayerNorm}\big(a + \operatorname{act}(a W_1 + b_1) W_2 + b_2\big).

The book *Natural Language Processing with Transformers* builds its encoder
**pre**-LN instead (:math:`h + \operatorname{MultiHead}(\operatorname{LayerNorm}(h))`),
which trains without a learning-rate warm-up (Xiong et al., 2020, "On Layer
Normalization in the Transformer Architecture", ICML 2020, arXiv:2002.04745);
the two arrangements are not interchangeable, and
pretrained BERT weights only reproduce BERT in the post-LN one written here.
Finally :class:`BertPooler` passes the ``[CLS]`` vector through a dense layer
and a tanh, :math:`\tanh(W h_{\text{CLS}} + b)`.  In ``bert-base`` that is a
sentence vector trained by next-sentence prediction; the default checkpoint,
``all-MiniLM-L6-v2``, was fine-tuned to be read by mean pooling over the
tokens instead, a fine-tuning that read neither its ``[CLS]`` vector alone
nor its pooler: read it with :func:`sentence_embeddings`.

A decoder (``config.is_decoder``) differs only in its masks: its
self-attention may not look ahead, and with ``config.add_cross_attention``
each layer also reads an encoder's output (see "Cross-attention" below).
As in HuggingFace (``get_extended_attention_mask`` in ``transformers`` 4,
``create_bidirectional_mask`` and ``create_causal_mask`` of ``masking_utils.py``
in ``transformers`` 5), the mask is built once, padding and causality together,
here by the package's one mask hook
(:meth:`~literate_transformer.core.masks.MaskHook.attention_masks`), and every
layer adds it.

Self-attention, step by step
----------------------------
:meth:`BertSelfAttention.forward` is the heart of the model, and the part the
source notebooks annotate.  For hidden states :math:`X` of shape ``(B, T, E)``:

1. **Project.**  Three linear layers ``query``, ``key`` and ``value``, each
   ``E -> E``, give :math:`Q = X W^Q`, :math:`K = X W^K`, :math:`V = X W^V`.
   For cross-attention (a decoder reading an encoder), :math:`K` and
   :math:`V` come from ``encoder_hidden_states`` (``(B, S, E)``) instead.
2. **Split into heads** (``transpose_for_scores``): the last dimension
   ``E`` is viewed as ``H`` heads of ``D = E / H`` features, and the heads are
   moved before the sequence: ``(B, T, E) -> (B, T, H, D) -> (B, H, T, D)``.
   BERT-base has 12 heads of 64 features (hidden size 768); the default
   checkpoint here, MiniLM-L6, has 12 heads of 32 (hidden size 384):

   >>> from literate_transformer import TransformerConfig
   >>> base = TransformerConfig()  # the defaults are bert-base-uncased's
   >>> base.num_attention_heads, base.head_size, base.hidden_size
   (12, 64, 768)
   >>> checkpoint = TransformerConfig.from_pretrained()
   >>> checkpoint.num_attention_heads, checkpoint.head_size, checkpoint.hidden_size
   (12, 32, 384)

3. **Score** every query against every key (``attention_scores``), scaled
   by :math:`\sqrt{D}` so that the dot products do not grow with the head size
   and saturate the softmax:

   .. math::

       \text{scores} = \frac{Q K^\top}{\sqrt{D}} \in \mathbb{R}^{B \times H \times T \times S}.

4. **Mask** (additively, as BERT does): padding keys get
   ``torch.finfo(dtype).min`` added to their scores, so that the softmax gives
   them (numerically) zero weight.  A decoder's self-attention also hides
   future keys (the causal mask).  Masked scores are the most negative
   *finite* number, never :math:`-\infty`: a row whose keys are all masked
   still softmaxes to finite weights instead of NaN (see
   :mod:`~literate_transformer.core.masks`).
5. **Normalise** each row with a softmax over the keys (``attention_probs``),
   then apply dropout to those probabilities (active in training only), and
   optionally ``head_mask``, a per-head factor (0 switches a head off).
6. **Mix** the values: ``context_layer`` :math:`= \operatorname{softmax}(\cdot) V`,
   ``(B, H, T, D)``, and merge the heads back, ``(B, T, H, D) -> (B, T, E)``.

Together:
:math:`\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\big(QK^\top / \sqrt{D} + M\big)\,V`.
:class:`BertSelfOutput` then applies the output projection :math:`W^O`
(``dense``), dropout, the residual and the layer norm.

Fused projections versus one module per head
--------------------------------------------
The book writes multi-head attention as a list of ``AttentionHead`` modules,
each with its own ``q``, ``k``, ``v`` layers of size ``E -> D``, whose outputs
are concatenated and fed to ``output_linear``.  HuggingFace fuses the ``H``
per-head projections into one ``E -> E`` layer each: rows
``h*D:(h+1)*D`` of ``query.weight`` *are* head ``h``'s query projection, and
``transpose_for_scores`` is what separates them.  The two are the same
function with the weights arranged differently;
:func:`~literate_transformer.interop.bert_attention_to_book` converts one into
the other, and a test proves them equal on the pretrained checkpoint.

Eager and SDPA
--------------
``config.attn_implementation`` chooses how steps 3 to 6 run.  ``"eager"``
(the default) is the commented code above.  ``"sdpa"`` calls
:func:`torch.nn.functional.scaled_dot_product_attention`, which fuses them
into one kernel (flash or memory-efficient attention on a GPU) and never
materialises the ``(B, H, T, S)`` probabilities.  So when
``output_attentions=True`` (or a ``head_mask`` is given), that call falls
back to the eager path; the tests show both paths agree.  That decision, and
how the fused kernel is masked, are shared by every model of the package
(:mod:`~literate_transformer.core.kernels`).

Then and now: ``output_attentions``
-----------------------------------
Older ``transformers`` releases (those the source notebook on
``BertSelfAttention`` was written against) read ``config.output_attentions``
and returned tuples such as ``(context_layer, attention_probs)``.  Today
``output_attentions`` is an argument of ``forward``, outputs are dataclasses,
and attention probabilities are only returned by the eager implementation:
a model loaded with the default SDPA attention returns none.  This module
follows today's API with the package's
:class:`~literate_transformer.core.outputs.ModelOutput` dataclass.
Those releases also had ``BertSelfAttention`` itself switch to
``encoder_hidden_states`` for cross-attention, as here; today's
``transformers`` has a separate ``BertCrossAttention`` class with the same
parameter names, so the weights load either way.

What the source notebooks got wrong
-----------------------------------
* One says BERT has 6 heads of size 128.  It has 12 heads of 64 (see above):
  the head size is ``hidden_size // num_attention_heads``.
* Their masked attention fills with ``-inf``; a query whose keys are all
  masked then gets NaN weights.  Here masked scores are ``finfo.min`` and the
  sum with the additive mask is clamped, so even scores that would overflow in
  float16 stay finite (a test checks fp32, fp16 and bf16, on both paths).
* Their ``Embeddings`` build ``position_ids`` on the CPU; here they are built
  on the input's device.
* They build the encoder pre-LN, the book's way, from BERT's config, without
  saying that BERT itself is post-LN (:class:`BertSelfOutput`,
  :class:`BertOutput`): pretrained BERT weights only reproduce BERT in the
  post-LN arrangement.

>>> import torch
>>> config = TransformerConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
...                            num_attention_heads=4, intermediate_size=32, max_position_embeddings=20)
>>> model = BertModel(config).eval()
>>> input_ids = torch.tensor([[2, 7, 9, 3], [2, 5, 3, 0]])
>>> out = model(input_ids, attention_mask=torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]), output_attentions=True)
>>> out.last_hidden_state.shape, out.pooler_output.shape
(torch.Size([2, 4, 16]), torch.Size([2, 16]))
>>> len(out.attentions), out.attentions[0].shape  # one (B, H, T, T) tensor per layer
(2, torch.Size([2, 4, 4, 4]))
>>> out.attentions[0][1, :, :, 3].max().item() < 1e-6  # nobody attends to the padding key
True
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.activations import get_activation
from ..core.checkpoints import read_state_dict, resolve_checkpoint
from ..core.config import TransformerConfig, as_config
from ..core.kernels import fused_attention, use_fused_attention
from ..core.masks import MaskHook, build_attention_mask, masked_fill_scores
from ..core.outputs import LayerOutput, ModelOutput
from ..core.residual import add_and_norm
from ..core.validation import (
    Arguments,
    check_attention_mask,
    check_hidden_states,
    check_labels,
    check_mask,
    check_tensor,
    check_token_inputs,
    validate_with,
)
from ..parts.heads import tie_weights
from ..parts.norms import make_norm
from ..pretraining.masked_lm import masked_lm_loss
from .registry import ConvertsFromHF, register

__all__ = [
    "BertEmbeddings",
    "BertSelfAttention",
    "BertSelfOutput",
    "BertAttention",
    "BertIntermediate",
    "BertOutput",
    "BertLayer",
    "BertEncoder",
    "BertPooler",
    "BertModel",
    "mean_pooling",
    "sentence_embeddings",
    "BertPredictionHeadTransform",
    "BertLMPredictionHead",
    "BertOnlyMLMHead",
    "BertWithTokenHead",
    "BertForMaskedLM",
]


# ---------------------------------------------------------------------------
# Embeddings
# ---------------------------------------------------------------------------
def _check_embeddings_inputs(embeddings: BertEmbeddings, args: Arguments) -> None:
    check_token_inputs(args, embeddings.config)


class BertEmbeddings(nn.Module):
    r"""Token, position and segment embeddings, summed and normalised.

    .. math::

        h^{(0)}_t = \operatorname{Dropout}\Big(\operatorname{LayerNorm}\big(W^{\text{word}}_{x_t}
        + W^{\text{pos}}_{p_t} + W^{\text{type}}_{s_t}\big)\Big)

    The book's :class:`~literate_transformer.book.embeddings.Embeddings`
    computes the same thing under the book's names.  The positions are
    *learned* (one trained vector per position up to
    ``max_position_embeddings``), not the 2017 paper's sinusoids.  The
    position ids are built on the input's device at each call (HuggingFace
    keeps them in a buffer; some source notebooks built them on the CPU
    whatever the input's device).

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            ``transformers`` config.
    """

    def __init__(self, config: TransformerConfig | Any) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        #: One vector per vocabulary entry (``V x E``); the padding token's row starts at zero.
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        #: One learned vector per position (``max_position_embeddings x E``).
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        #: One vector per segment (sentence A / sentence B).
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        # The capitalised name breaks PEP 8 on purpose: it is the name of the
        # parameters in every BERT checkpoint (it comes from the original
        # TensorFlow code), so keeping it lets the weights load 1:1.
        self.LayerNorm = make_norm(config.hidden_size, config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    @validate_with(_check_embeddings_inputs)
    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
    ) -> Tensor:
        """Embed token ids.

        Args:
            input_ids: ``(B, T)`` token ids.
            token_type_ids: ``(B, T)`` segment ids; all zeros when omitted.
            position_ids: ``(B, T)`` or ``(1, T)`` positions; ``0 .. T-1`` when omitted.

        Returns:
            The embeddings, ``(B, T, E)``.
        """
        # Positions 0, 1, ..., T-1, made where the input lives; every token in segment 0 by default.
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[1], device=input_ids.device)[None, :]  # (1, T)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        # Three lookups, summed in HuggingFace's order (for bit-for-bit closeness):
        # what the token is, which sentence it belongs to, where it is.  Each
        # vector is as wide as the tables: E here, (B, T, E); ALBERT builds
        # these tables narrower, at its embedding width W.
        embeddings = (
            self.word_embeddings(input_ids)
            + self.token_type_embeddings(token_type_ids)
            + self.position_embeddings(position_ids)
        )
        # Normalise each token vector, then dropout (active in training only).
        return self.dropout(self.LayerNorm(embeddings))


# ---------------------------------------------------------------------------
# Attention
# ---------------------------------------------------------------------------
def _check_self_attention_inputs(attention: BertSelfAttention, args: Arguments) -> None:
    config = attention.config
    hidden_states = check_hidden_states(args.hidden_states, config.hidden_size)
    batch_size, query_length, _ = hidden_states.shape
    key_length = query_length
    if attention.is_cross_attention:
        if args.encoder_hidden_states is None:
            raise ValueError("encoder_hidden_states is required: this is a cross-attention layer")
        states = check_hidden_states(args.encoder_hidden_states, config.hidden_size, "encoder_hidden_states")
        key_length = states.shape[1]
    if args.attention_mask is not None:
        check_mask(args.attention_mask, (batch_size, attention.num_attention_heads, query_length, key_length))
    if args.head_mask is not None:
        check_tensor(
            args.head_mask, "head_mask", dtypes=("float", "int", "bool"), shape=(attention.num_attention_heads,)
        )


class BertSelfAttention(nn.Module):
    r"""Multi-head scaled dot-product attention with fused projections.

    .. math::

        \operatorname{head}_h = \operatorname{softmax}\Big(\frac{Q_h K_h^\top}{\sqrt{D}} + M\Big) V_h,
        \qquad \text{context} = [\operatorname{head}_1; \dots; \operatorname{head}_H]

    The output projection :math:`W^O` is not here but in
    :class:`BertSelfOutput` (``dense``), as in HuggingFace.

    Args:
        config: The model config.
        is_cross_attention: Take keys and values from ``encoder_hidden_states``
            (a decoder's attention over the encoder output).
    """

    def __init__(self, config: TransformerConfig | Any, is_cross_attention: bool = False) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        self.num_attention_heads = config.num_attention_heads  # H
        self.attention_head_size = config.head_size  # D = E / H
        self.all_head_size = self.num_attention_heads * self.attention_head_size  # H * D = E
        self.is_cross_attention = is_cross_attention
        # The H heads' projections, side by side in one E -> E layer each.
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def transpose_for_scores(self, x: Tensor) -> Tensor:
        """Split the last dimension into heads: ``(B, L, E) -> (B, H, L, D)``."""
        batch_size, length, _ = x.shape
        # View the E features as H heads of D: (B, L, E) -> (B, L, H, D) ...
        x = x.view(batch_size, length, self.num_attention_heads, self.attention_head_size)
        # ... and put the heads before the positions: (B, H, L, D).
        return x.permute(0, 2, 1, 3)

    @validate_with(_check_self_attention_inputs)
    def forward(
        self,
        hidden_states: Tensor,
        attention_mask: Tensor | None = None,
        head_mask: Tensor | None = None,
        encoder_hidden_states: Tensor | None = None,
        output_attentions: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``hidden_states`` to itself (or to ``encoder_hidden_states``).

        Args:
            hidden_states: The queries' input, ``(B, T, E)``.
            attention_mask: ``None``, or a mask broadcastable to ``(B, H, T, S)``:
                additive (``0`` keep, ``finfo.min`` hide; what :class:`BertModel`
                passes, causality included in a decoder) or boolean (``True`` =
                may attend).
            head_mask: ``(H,)`` factors multiplying each head's probabilities.
            encoder_hidden_states: ``(B, S, E)``, the keys' and values' input
                for cross-attention.
            output_attentions: Also return the probabilities (forces the eager path).

        Returns:
            ``(context_layer, attention_probs)``: ``(B, T, E)`` and
            ``(B, H, T, S)`` or ``None``, as HuggingFace's module returns them.
        """
        batch_size, query_length, _ = hidden_states.shape
        # 1) Queries from the tokens themselves; keys and values from the same
        #    tokens (self-attention) or from the encoder's output (cross-attention).
        key_value_states = encoder_hidden_states if self.is_cross_attention else hidden_states
        mixed_query_layer = self.query(hidden_states)  # (B, T, E)
        # 2) Split E into H heads of D features and put the heads first.
        query_layer = self.transpose_for_scores(mixed_query_layer)  # (B, H, T, D)
        key_layer = self.transpose_for_scores(self.key(key_value_states))  # (B, H, S, D)
        value_layer = self.transpose_for_scores(self.value(key_value_states))

        attention_probs = None
        if use_fused_attention(self.config.attn_implementation, output_attentions, head_mask):
            # The fused kernel does steps 3-6 at once.
            dropout_p = self.dropout.p if self.training else 0.0
            context_layer = fused_attention(query_layer, key_layer, value_layer, attention_mask, dropout_p)
        else:
            # 3) Scores $Q K^\top / \sqrt{D}$: one per (query, key) pair in every head,
            #    scaled so their spread does not grow with the head size.  Scaling
            #    the queries first is the same number, $(Q / \sqrt{D})\, K^\top$, computed
            #    on $T \times D$ values instead of $T \times S$ (HuggingFace scales the scores).
            scaled_query = query_layer / math.sqrt(self.attention_head_size)
            attention_scores = torch.matmul(scaled_query, key_layer.transpose(-1, -2))  # (B, H, T, S)
            # 4) Add the mask: `finfo.min` on hidden keys (padding, and the future
            #    in a decoder), never $-\infty$.
            attention_scores = masked_fill_scores(attention_scores, attention_mask)
            # 5) Softmax over the keys: each query's weights sum to 1.
            attention_probs = F.softmax(attention_scores, dim=-1)
            # Dropout on the weights (training only): it zeroes individual
            # weights and scales the others up by $1 / (1 - p)$.
            dropped_probs = self.dropout(attention_probs)
            # head_mask scales (0 disables) whole heads.
            if head_mask is not None:
                dropped_probs = dropped_probs * head_mask.to(dropped_probs.dtype).view(1, -1, 1, 1)
            # 6) Weighted average of the values.
            context_layer = torch.matmul(dropped_probs, value_layer)  # (B, H, T, D)
        # Merge the heads back: (B, H, T, D) -> (B, T, H, D) -> (B, T, E).
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()  # (B, T, H, D)
        context_layer = context_layer.view(batch_size, query_length, self.all_head_size)  # (B, T, E)
        return context_layer, (attention_probs if output_attentions else None)


class BertSelfOutput(nn.Module):
    r"""The attention sub-layer's output projection, residual and post-layer norm.

    .. math:: \operatorname{LayerNorm}\big(x + \operatorname{Dropout}(\text{context}\, W^O + b^O)\big)

    Args:
        config: The model config.
        input_size: Width of what ``dense`` reads (``hidden_size``; :class:`BertOutput` reads
            ``intermediate_size``).
    """

    def __init__(self, config: TransformerConfig | Any, input_size: int | None = None) -> None:
        super().__init__()
        config = as_config(config)
        #: :math:`W^O`, mixing the heads' concatenated outputs.
        self.dense = nn.Linear(input_size or config.hidden_size, config.hidden_size)
        # Capitalised as in the checkpoints, so the weights load by name.
        self.LayerNorm = make_norm(config.hidden_size, config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: Tensor, input_tensor: Tensor) -> Tensor:
        """``hidden_states``: what the sub-layer computed; ``input_tensor``: its input ``(B, T, E)``."""
        # Project back to E features, then the residual sum and LayerNorm *after* it: BERT is post-LN
        # (the book's pre-LN normalises the sub-layer's input instead; see core.residual).
        return add_and_norm(
            input_tensor, self.dense(hidden_states), self.LayerNorm, norm_first=False, dropout=self.dropout
        )


class BertAttention(nn.Module):
    """One attention sub-layer: :class:`BertSelfAttention` (``self``) + :class:`BertSelfOutput` (``output``).

    Args:
        config: The model config.
        is_cross_attention: Passed to :class:`BertSelfAttention`.
    """

    #: The attention itself, built from ``(config)`` (and ``is_cross_attention=True`` for a cross-attention): a
    #: family swaps it for its own (DeBERTa's disentangled attention).
    self_attention_class: type[nn.Module] = BertSelfAttention

    def __init__(self, config: TransformerConfig | Any, is_cross_attention: bool = False) -> None:
        super().__init__()
        # `self` is an odd attribute name in Python, but it is the checkpoints'
        # (attention.self.query.weight, ...), so it stays.
        cross = {"is_cross_attention": True} if is_cross_attention else {}
        self.self = self.self_attention_class(config, **cross)
        self.output = BertSelfOutput(config)

    def forward(
        self,
        hidden_states: Tensor,
        attention_mask: Tensor | None = None,
        head_mask: Tensor | None = None,
        encoder_hidden_states: Tensor | None = None,
        output_attentions: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """See :meth:`BertSelfAttention.forward`; returns ``(output (B, T, E), probabilities or None)``."""
        # Attention, then projection + residual + LayerNorm.
        context_layer, attention_probs = self.self(
            hidden_states, attention_mask, head_mask, encoder_hidden_states, output_attentions
        )
        return self.output(context_layer, hidden_states), attention_probs


class BertIntermediate(nn.Module):
    r"""The first half of the feed-forward sub-layer: :math:`\operatorname{act}(a W_1 + b_1)`, ``E -> F``."""

    def __init__(self, config: TransformerConfig | Any) -> None:
        super().__init__()
        config = as_config(config)
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        # The activation registry's module for config.hidden_act (GELU for BERT).
        self.intermediate_act_fn = get_activation(config.hidden_act)

    def forward(self, hidden_states: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, F)``."""
        # Widen each token vector to $F$ features ($F = 4E$ in BERT) and apply the non-linearity, token by token.
        hidden_states = self.intermediate_act_fn(self.dense(hidden_states))  # (B, T, F)
        return hidden_states


class BertOutput(BertSelfOutput):
    r"""The second half of the feed-forward sub-layer, with residual and post-layer norm.

    .. math:: \operatorname{LayerNorm}\big(a + \operatorname{Dropout}(u W_2 + b_2)\big)

    The same computation as :class:`BertSelfOutput`, reading the ``F``
    features of :class:`BertIntermediate`.
    """

    def __init__(self, config: TransformerConfig | Any) -> None:
        config = as_config(config)
        super().__init__(config, input_size=config.intermediate_size)


def _check_layer_inputs(layer: BertLayer, args: Arguments) -> None:
    config = layer.attention.self.config
    hidden_states = check_hidden_states(args.hidden_states, config.hidden_size)
    batch_size, length, _ = hidden_states.shape
    heads = config.num_attention_heads
    if args.attention_mask is not None:
        check_mask(args.attention_mask, (batch_size, heads, length, length))
    if args.head_mask is not None:
        check_tensor(args.head_mask, "head_mask", dtypes=("float", "int", "bool"), shape=(heads,))
    if layer.add_cross_attention and args.encoder_hidden_states is None:
        raise ValueError(
            "encoder_hidden_states is required: this layer has cross-attention (config.add_cross_attention)"
        )
    if not layer.add_cross_attention and args.encoder_hidden_states is not None:
        raise ValueError(
            "encoder_hidden_states was given, but this layer has no cross-attention "
            "(build it with is_decoder=True and add_cross_attention=True)"
        )
    if args.encoder_hidden_states is not None:
        source_length = check_hidden_states(
            args.encoder_hidden_states, config.hidden_size, "encoder_hidden_states"
        ).shape[1]
        if args.encoder_attention_mask is not None:
            check_mask(
                args.encoder_attention_mask, (batch_size, heads, length, source_length), "encoder_attention_mask"
            )


class BertLayer(nn.Module):
    """One transformer layer: self-attention, (cross-attention,) feed-forward.

    With ``config.is_decoder`` the self-attention is causal (through the
    mask :class:`BertModel` builds); with ``config.add_cross_attention`` (a
    decoder only) a ``crossattention`` sub-layer between the two attends to
    the encoder's output.

    Args:
        config: The model config.

    Raises:
        ValueError: for ``add_cross_attention`` without ``is_decoder``.
    """

    #: The attention sub-layer, built from ``(config)``: a family swaps it for its own (DeBERTa's).
    attention_class: type[nn.Module] = BertAttention

    def __init__(self, config: TransformerConfig | Any) -> None:
        super().__init__()
        # The attention gets the config as given: a family's reads its own fields (DeBERTa's position buckets).
        self.attention = self.attention_class(config)
        config = as_config(config)
        self.is_decoder = config.is_decoder
        self.add_cross_attention = config.add_cross_attention
        if config.add_cross_attention:
            if not config.is_decoder:
                raise ValueError("add_cross_attention=True needs is_decoder=True: only a decoder reads an encoder")
            self.crossattention = BertAttention(config, is_cross_attention=True)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    @validate_with(_check_layer_inputs)
    def forward(
        self,
        hidden_states: Tensor,
        attention_mask: Tensor | None = None,
        head_mask: Tensor | None = None,
        encoder_hidden_states: Tensor | None = None,
        encoder_attention_mask: Tensor | None = None,
        output_attentions: bool = False,
    ) -> LayerOutput:
        """Run the layer.

        Args:
            hidden_states: ``(B, T, E)``.
            attention_mask: Self-attention mask, see :meth:`BertSelfAttention.forward`.
            head_mask: ``(H,)`` head factors, applied to both attentions.
            encoder_hidden_states: ``(B, S, E)``; required with cross-attention.
            encoder_attention_mask: Cross-attention mask, broadcastable to ``(B, H, T, S)``.
            output_attentions: Also return the attention probabilities.

        Returns:
            A :class:`~literate_transformer.core.outputs.LayerOutput`.
        """
        # Sub-layer 1: (masked) self-attention + residual + LayerNorm.
        attention_output, self_attention_probs = self.attention(
            hidden_states, attention_mask, head_mask, None, output_attentions
        )
        cross_attention_probs = None
        # Sub-layer 2 (decoders that read an encoder): queries from the decoder, keys/values from the encoder.
        if self.add_cross_attention:
            attention_output, cross_attention_probs = self.crossattention(
                attention_output, encoder_attention_mask, head_mask, encoder_hidden_states, output_attentions
            )
        # Last sub-layer: position-wise feed-forward + residual + LayerNorm.
        intermediate_output = self.intermediate(attention_output)  # (B, T, F)
        layer_output = self.output(intermediate_output, attention_output)  # (B, T, E)
        return LayerOutput(layer_output, self_attention_probs, cross_attention_probs)


class BertEncoder(nn.Module):
    """The stack of ``num_hidden_layers`` :class:`BertLayer` modules (``layer``)."""

    def __init__(self, config: TransformerConfig | Any) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        # A list, not a loop over one module: each layer has its own weights (layer.0, layer.1, ...).
        self.layer = nn.ModuleList([BertLayer(config) for _ in range(config.num_hidden_layers)])

    def forward(
        self,
        hidden_states: Tensor,
        attention_mask: Tensor | None = None,
        head_mask: Tensor | None = None,
        encoder_hidden_states: Tensor | None = None,
        encoder_attention_mask: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """Run every layer in turn (each layer checks its inputs when called on its own).

        Args:
            hidden_states: The embeddings, ``(B, T, E)``.
            attention_mask: See :meth:`BertSelfAttention.forward`.
            head_mask: ``(L, H)`` factors, one row per layer, or ``None``.
            encoder_hidden_states: ``(B, S, E)`` for cross-attention.
            encoder_attention_mask: Cross-attention mask.
            output_attentions: Collect every layer's attention probabilities.
            output_hidden_states: Collect the input and every layer's output.

        Returns:
            A :class:`~literate_transformer.core.outputs.ModelOutput` (without ``pooler_output``).
        """
        embedding_output, layer_outputs = hidden_states, []
        for index, layer_module in enumerate(self.layer):
            layer_outputs.append(
                layer_module(
                    hidden_states,
                    attention_mask,
                    head_mask[index] if head_mask is not None else None,
                    encoder_hidden_states,
                    encoder_attention_mask,
                    output_attentions,
                )
            )
            # Each layer's output is the next one's input.
            hidden_states = layer_outputs[-1].hidden_states
        # Per-layer tuples of what the layers returned (tuples, where HuggingFace builds them up one by one).
        return ModelOutput.from_layers(embedding_output, layer_outputs, hidden_states, output_hidden_states)


class BertPooler(nn.Module):
    r"""The sentence vector: :math:`\tanh(W h_{\text{CLS}} + b)` from the first token's hidden state.

    BERT's pre-training trains it on next-sentence prediction; a
    classification head usually reads it (or the raw ``[CLS]`` state).
    """

    def __init__(self, config: TransformerConfig | Any) -> None:
        super().__init__()
        config = as_config(config)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = get_activation("tanh")

    def forward(self, hidden_states: Tensor) -> Tensor:
        """``(B, T, E) -> (B, E)``."""
        # The [CLS] token sits at position 0 of every sequence.
        first_token_tensor = hidden_states[:, 0]  # (B, E)
        return self.activation(self.dense(first_token_tensor))


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------
def _check_model_inputs(model: BertModel, args: Arguments) -> None:
    config = model.config
    batch_size = model.check_token_inputs(args).shape[0]
    if args.head_mask is not None:
        head_mask = check_tensor(args.head_mask, "head_mask", dtypes=("float", "int", "bool"))
        heads, layers = config.num_attention_heads, config.num_hidden_layers
        if head_mask.shape not in ((heads,), (layers, heads)):
            raise ValueError(
                f"head_mask must have shape (H,) = ({heads},) or (L, H) = ({layers}, {heads}), "
                f"got {tuple(head_mask.shape)}"
            )
    if args.encoder_hidden_states is not None:
        if not config.add_cross_attention:
            raise ValueError(
                "encoder_hidden_states was given, but the model has no cross-attention "
                "(config.is_decoder and config.add_cross_attention must be True)"
            )
        encoder_hidden_states = check_hidden_states(
            args.encoder_hidden_states, config.hidden_size, "encoder_hidden_states"
        )
        if encoder_hidden_states.shape[0] != batch_size:
            raise ValueError(
                f"encoder_hidden_states has batch size {encoder_hidden_states.shape[0]}, but input_ids has {batch_size}"
            )
        if args.encoder_attention_mask is not None:
            check_attention_mask(
                args.encoder_attention_mask, batch_size, encoder_hidden_states.shape[1], "encoder_attention_mask"
            )
    elif config.add_cross_attention:
        raise ValueError("encoder_hidden_states is required: the model has cross-attention layers")
    elif args.encoder_attention_mask is not None:
        raise ValueError("encoder_attention_mask was given without encoder_hidden_states")


class BertModel(ConvertsFromHF, MaskHook, nn.Module):
    """BERT: :class:`BertEmbeddings`, :class:`BertEncoder` and :class:`BertPooler`.

    Module and parameter names are HuggingFace's, so
    ``BertModel.from_pretrained()`` loads a checkpoint by name, and
    ``model.state_dict()`` has exactly the keys of
    the ``state_dict()`` of :class:`transformers.BertModel` (whose
    position and token-type buffers are not saved either).

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            :class:`transformers.BertConfig`.
        add_pooling_layer: Build the ``pooler`` (as HuggingFace does by default).
    """

    def __init__(self, config: TransformerConfig | Any, add_pooling_layer: bool = True) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None

    @classmethod
    def from_pretrained(cls, path_or_name: str | os.PathLike[str] | None = None, **config_changes: Any) -> BertModel:
        """Build the model of a checkpoint and load its weights (in evaluation mode).

        Args:
            path_or_name: A checkpoint folder or hub name; by default the
                offline, SHA-256-verified checkpoint (see
                :func:`~literate_transformer.core.checkpoints.resolve_checkpoint`).
            **config_changes: Config fields to override, e.g.
                ``attn_implementation="sdpa"``.

        Raises:
            FileNotFoundError: when the checkpoint cannot be found, saying what to do.
            ValueError: for a checkpoint that is not BERT, or whose tensors do
                not match the model (listing the missing, unexpected and
                mis-shaped keys).
        """
        checkpoint = resolve_checkpoint(path_or_name)
        config = TransformerConfig.from_dict(checkpoint.config)
        if config_changes:
            config = config.replace(**config_changes)
        model = cls(config)
        state_dict = cls.map_hf_state_dict(read_state_dict(checkpoint.weights_file), model.state_dict())
        model.load_state_dict(state_dict, strict=True)
        return model.eval()

    # -- what converting a transformers BERT reads (models.registry.ConvertsFromHF) ---------------------------
    # A checkpoint of BERT may hold more than this model's tensors, under older names: checkpoints of models with
    # heads prefix every key with "bert." and carry the pretraining heads ("cls."); older ones saved two constant
    # buffers, which the embeddings build per call; TensorFlow-era ones name the layer norms' parameters gamma
    # and beta.  Each is renamed or dropped; every other tensor must fit a parameter of the same name and shape.
    hf_prefix = "bert."
    hf_heads = ("cls.",)
    hf_dropped = ("embeddings.position_ids", "embeddings.token_type_ids")
    hf_renames = {"gamma": "weight", "beta": "bias"}

    hf_pooler = "pooler."
    #: The ``model_type`` of the ``transformers`` configs this class converts (and a descendant's reads).
    config_type, config_name = "bert", "BertConfig"
    #: Options of BERT's config that its descendants here (RoBERTa, ELECTRA) do not build, and the only value each
    #: accepts.  BERT itself reads its config through :func:`~literate_transformer.core.config.as_config`, and
    #: builds a decoder and cross-attention.
    config_unsupported = {"is_decoder": False, "add_cross_attention": False, "position_embedding_type": "absolute"}

    @classmethod
    def hf_config(cls, hf_model: nn.Module, **config_changes: Any) -> Any:
        """A ``transformers`` BERT's config; with changes (``attn_implementation="sdpa"``), the package's, changed.

        ``BertForPreTraining``-style models convert too (their ``bert.`` prefix is stripped, their ``cls.*`` heads
        dropped).

        Raises:
            ValueError: for a model whose config is not of this family (``config_type``).
        """
        config = getattr(hf_model, "config", None)
        if getattr(config, "model_type", None) != cls.config_type:
            raise ValueError(
                f"hf_model must be a transformers model of {cls.__name__}'s family (config.model_type "
                f"{cls.config_type!r}), got {type(hf_model).__name__}"
            )
        return as_config(config).replace(**config_changes) if config_changes else config

    def check_token_inputs(self, args: Arguments) -> Tensor:
        """The ids, mask, segments and positions of a call, checked as the embeddings read them; returns the ids.

        A family whose embeddings read other positions (RoBERTa's, counted
        after the padding index) changes this check and keeps BERT's ``forward``.
        """
        return check_token_inputs(args, self.config)

    def embed(self, input_ids: Tensor, token_type_ids: Tensor | None, position_ids: Tensor | None) -> Tensor:
        """Step 1 of :meth:`forward`: token ids to the vectors the first layer reads, ``(B, T, E)``.

        BERT's are its embeddings' output.  A family whose embeddings are
        narrower than its layers (ELECTRA's) projects them here and keeps
        BERT's ``forward``.
        """
        return self.embeddings(input_ids, token_type_ids, position_ids)

    @property
    def causal(self) -> bool:
        """Whether the mask hook hides the future, as in a decoder (``config.is_decoder``)."""
        return bool(self.config.is_decoder)

    @validate_with(_check_model_inputs)
    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        head_mask: Tensor | None = None,
        encoder_hidden_states: Tensor | None = None,
        encoder_attention_mask: Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """Encode a batch of token sequences.

        Args:
            input_ids: ``(B, T)`` token ids.
            attention_mask: ``(B, T)``, 1 for real tokens and 0 for padding.
            token_type_ids: ``(B, T)`` segment ids (0 for sentence A, 1 for B).
            position_ids: ``(B, T)`` or ``(1, T)``; ``0 .. T-1`` by default.
            head_mask: ``(H,)`` or ``(L, H)`` factors on the attention
                probabilities (0 switches a head off); forces the eager path.
            encoder_hidden_states: ``(B, S, E)``, required by (and only by) a
                model with cross-attention.
            encoder_attention_mask: ``(B, S)``, the padding of the encoder's output.
            output_attentions: Return every layer's attention probabilities
                (forces the eager path for this call).
            output_hidden_states: Return the embeddings and every layer's output.

        Returns:
            A :class:`~literate_transformer.core.outputs.ModelOutput` with
            ``last_hidden_state`` and ``pooler_output``.

        Raises:
            TypeError: for inputs of the wrong type or dtype.
            ValueError: for out-of-range ids, too long sequences, masks of the
                wrong shape or values, and encoder states that do not fit.
        """
        if head_mask is not None and head_mask.dim() == 1:
            head_mask = head_mask.expand(self.config.num_hidden_layers, -1)  # (L, H)
        # 1) Token ids -> vectors.
        embedding_output = self.embed(input_ids, token_type_ids, position_ids)  # (B, T, E)
        # 2) Additive masks for self-attention (causal in a decoder) and cross-attention, built once.
        length, dtype = input_ids.shape[1], embedding_output.dtype
        device = input_ids.device
        extended_attention_mask = self.attention_masks(attention_mask, length, 0, dtype, device)["full"]
        encoder_extended_attention_mask = build_attention_mask(
            encoder_attention_mask, query_length=length, device=device, dtype=dtype
        )
        # 3) The layers.
        encoder_outputs = self.encoder(
            embedding_output,
            attention_mask=extended_attention_mask,
            head_mask=head_mask,
            encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_extended_attention_mask,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        # 4) The [CLS] sentence vector.
        sequence_output = encoder_outputs.last_hidden_state
        encoder_outputs.pooler_output = self.pooler(sequence_output) if self.pooler is not None else None
        return encoder_outputs


# ---------------------------------------------------------------------------
# Sentence embeddings: what the default checkpoint was trained to produce
# ---------------------------------------------------------------------------
def _check_pooling_inputs(args: Arguments) -> None:
    last_hidden_state = check_tensor(args.last_hidden_state, "last_hidden_state", ndim=3, dtypes=("float",))
    if args.attention_mask is not None:
        check_attention_mask(args.attention_mask, *last_hidden_state.shape[:2])


@validate_with(_check_pooling_inputs)
def mean_pooling(last_hidden_state: Tensor, attention_mask: Tensor | None = None) -> Tensor:
    r"""The average of each sequence's token vectors, over its real tokens only.

    .. math::

        s_b = \frac{\sum_t m_{bt}\, y_{bt}}{\sum_t m_{bt}},

    with :math:`y_{bt}` the final hidden state of token :math:`t` and
    :math:`m_{bt}` the tokenizer's ``attention_mask`` (1 for a real token,
    ``[CLS]`` and ``[SEP]`` included; 0 for padding, which must not count).
    This is the pooling that ``sentence-transformers/all-MiniLM-L6-v2`` (the
    default checkpoint) was fine-tuned with, as its ``1_Pooling/config.json``
    says (``"pooling_mode_mean_tokens": true``); the denominator is clamped
    at ``1e-9`` as sentence-transformers clamps it, so that a row without
    real tokens gives zeros instead of NaN.

    Args:
        last_hidden_state: ``(B, T, E)``.
        attention_mask: ``(B, T)``, 1 for real tokens and 0 for padding;
            ``None`` averages over every position.

    Returns:
        ``(B, E)``.
    """
    if attention_mask is None:
        attention_mask = torch.ones(last_hidden_state.shape[:2], device=last_hidden_state.device)
    # The mask as a weight per token, in the hidden states' dtype.
    weights = attention_mask.to(last_hidden_state.dtype).unsqueeze(-1)  # (B, T, 1)
    # Sum of the real tokens' vectors ...
    summed = (last_hidden_state * weights).sum(dim=1)  # (B, E)
    # ... divided by how many there are.
    counts = weights.sum(dim=1).clamp(min=1e-9)  # (B, 1)
    return summed / counts


def sentence_embeddings(last_hidden_state: Tensor, attention_mask: Tensor | None = None) -> Tensor:
    """Mean pooling, then L2 normalisation: the default checkpoint's sentence vectors.

    ``sentence_transformers.SentenceTransformer`` runs exactly these two
    steps after the BERT encoder for ``all-MiniLM-L6-v2`` (its ``modules.json``
    lists ``Transformer``, ``Pooling`` and ``Normalize``); a test proves the
    result equal to ``SentenceTransformer(path).encode(...)``.  Vectors of
    length 1 make the dot product of two of them their cosine similarity.

    Args:
        last_hidden_state: ``(B, T, E)``.
        attention_mask: ``(B, T)``, 1 for real tokens and 0 for padding.

    Returns:
        ``(B, E)``, each row of Euclidean norm 1.
    """
    return F.normalize(mean_pooling(last_hidden_state, attention_mask), p=2, dim=-1)


# ---------------------------------------------------------------------------
# The masked-language-model head: BERT's pretraining objective
# ---------------------------------------------------------------------------
class BertPredictionHeadTransform(nn.Module):
    r"""One more dense layer, activation and layer norm on every token vector before it is scored.

    .. math:: u_t = \operatorname{LayerNorm}\big(\operatorname{act}(W h_t + b)\big)
    """

    def __init__(self, config: TransformerConfig | Any) -> None:
        super().__init__()
        config = as_config(config)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_act_fn = get_activation(config.hidden_act)
        self.LayerNorm = make_norm(config.hidden_size, config.layer_norm_eps)

    def forward(self, hidden_states: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, E)``."""
        return self.LayerNorm(self.transform_act_fn(self.dense(hidden_states)))


class BertLMPredictionHead(nn.Module):
    r"""Scores over the vocabulary: the transformed vector against every token's embedding, plus a bias.

    .. math:: \text{logits}_t = u_t\, (W^{\text{word}})^\top + b

    ``decoder`` is tied to the word embeddings (:func:`~literate_transformer.parts.heads.tie_weights`), as
    in every BERT checkpoint, and its bias *is* ``bias`` (HuggingFace lists the tensor under both names).
    """

    def __init__(self, config: TransformerConfig | Any) -> None:
        super().__init__()
        config = as_config(config)
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        #: One score offset per vocabulary entry (``V``): the same tensor as ``decoder.bias``.
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.bias = self.bias

    def forward(self, hidden_states: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, V)``."""
        return self.decoder(self.transform(hidden_states))


class BertOnlyMLMHead(nn.Module):
    """The pretraining heads of ``BertForMaskedLM``: only the masked-LM one (``predictions``)."""

    def __init__(self, config: TransformerConfig | Any) -> None:
        super().__init__()
        self.predictions = BertLMPredictionHead(config)

    def forward(self, sequence_output: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, V)``."""
        return self.predictions(sequence_output)


def _check_token_head_inputs(model: BertWithTokenHead, args: Arguments) -> None:
    # The encoder's own check, on the arguments handed on to it, then the labels.
    encoder = getattr(model, model.base_model_prefix)
    type(encoder).forward.check_call(encoder, args.input_ids, args.attention_mask, *args.args, **args.kwargs)
    if args.labels is not None:
        model.validate_labels(args.labels, args.input_ids)


class BertWithTokenHead(ConvertsFromHF, nn.Module):
    """A BERT encoder with a head that scores every token: what a pretraining model adds to the encoder.

    :class:`BertForMaskedLM` scores every vocabulary entry at each position
    and :class:`~literate_transformer.models.electra.ElectraForPreTraining`
    says whether each token was replaced; both run the same three steps,
    written once in :meth:`forward`.  A subclass builds the encoder under
    the attribute :attr:`base_model_prefix` names (HuggingFace's name for it,
    ``bert``, ``electra``) and its head, and writes the three things that
    differ: :meth:`score`, :meth:`loss` and :meth:`validate_labels`.
    """

    #: The attribute that holds the encoder, as in ``transformers``.
    base_model_prefix = "bert"

    def score(self, sequence_output: Tensor) -> Tensor:
        """The head: every token's scores from the encoder's last hidden state ``(B, T, E)``."""
        raise NotImplementedError

    def loss(self, logits: Tensor, labels: Tensor, attention_mask: Tensor | None) -> Tensor:
        """The pretraining loss of the scores against the labels."""
        raise NotImplementedError

    def validate_labels(self, labels: Tensor, input_ids: Tensor) -> None:
        """Refuse labels the loss cannot read (checked before anything runs)."""
        raise NotImplementedError

    @validate_with(_check_token_head_inputs)
    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        *args: Any,
        labels: Tensor | None = None,
        **kwargs: Any,
    ) -> ModelOutput:
        """Scores for every token: the encoder's forward on its own arguments, then the head.

        Args:
            input_ids: ``(B, T)`` token ids.
            attention_mask: ``(B, T)``, 1 for real tokens and 0 for padding (the loss skips the padding too).
            *args: The encoder's other arguments, in :meth:`BertModel.forward`'s order (``token_type_ids``,
                ``position_ids``, ...).
            labels: ``(B, T)``, what the head should predict at each position (see the subclass).
            **kwargs: The encoder's arguments by name (``output_attentions``, ...).

        Returns:
            The encoder's :class:`~literate_transformer.core.outputs.ModelOutput` with ``logits``,
            and ``loss`` with ``labels``.
        """
        # 1) The encoder, under its family's name (self.bert, self.electra).
        output = getattr(self, self.base_model_prefix)(input_ids, attention_mask, *args, **kwargs)
        # 2) The head, at every token.
        output.logits = self.score(output.last_hidden_state)
        # 3) With labels, the pretraining loss.
        if labels is not None:
            output.loss = self.loss(output.logits, labels, attention_mask)
        return output


class BertForMaskedLM(BertWithTokenHead):
    """BERT with its masked-language-model head: a score for every vocabulary entry at every position.

    The encoder is ``bert`` (a :class:`BertModel` without pooler, as
    HuggingFace builds it), the head ``cls`` (:class:`BertOnlyMLMHead`);
    the head's ``decoder`` is the word-embedding table, so a token's score is
    the dot product of the transformed vector with that token's own
    embedding.  The data it learns from is made by
    :func:`~literate_transformer.pretraining.masked_lm.mask_tokens`;
    ``forward`` is :meth:`BertWithTokenHead.forward`, whose ``labels`` here
    are the original token at the chosen positions and ``-100`` elsewhere.

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            :class:`transformers.BertConfig`.
    """

    #: Its head's decoder *is* the word table, and its bias the head's: a checkpoint's copies must hold the same.
    hf_ties = (
        ("cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight"),
        ("cls.predictions.decoder.bias", "cls.predictions.bias"),
    )

    def __init__(self, config: TransformerConfig | Any) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        self.bert = BertModel(config, add_pooling_layer=False)
        self.cls = BertOnlyMLMHead(config)
        tie_weights(self.cls.predictions.decoder, self.bert.embeddings.word_embeddings)

    @classmethod
    def head_is_tied(cls, config: Any) -> bool:
        """Always: this model's head is its word table, whatever the config says."""
        return True

    def score(self, sequence_output: Tensor) -> Tensor:
        """Every position scored against every token of the vocabulary: ``logits`` ``(B, T, V)``."""
        logits = self.cls(sequence_output)  # (B, T, V)
        return logits

    def loss(self, logits: Tensor, labels: Tensor, attention_mask: Tensor | None) -> Tensor:
        """:func:`~literate_transformer.pretraining.masked_lm.masked_lm_loss`: only the chosen positions count.

        Nothing is shifted (position t predicts the token at t); the mask is
        not read, the labels say which positions count.
        """
        return masked_lm_loss(logits, labels)

    def validate_labels(self, labels: Tensor, input_ids: Tensor) -> None:
        """Token ids of the vocabulary, or ``-100``, one per input token."""
        check_labels(labels, input_ids.shape, self.config.vocab_size)


register(BertModel, BertForMaskedLM)
