r"""BART: the 2017 encoder-decoder, post-LN, with one embedding table and learned positions offset by two.

BART (Lewis et al., 2020) is a denoising autoencoder: its encoder reads a
corrupted text in both directions, its decoder writes the original text
left to right.  The architecture is the transformer of "Attention Is All You
Need" (:class:`~literate_transformer.book.decoder.EncoderDecoderTransformer`)
with a handful of choices.  This file holds BART's modules under
HuggingFace's names (``shared``, ``encoder.layers.0.self_attn.q_proj``,
``decoder.layers.0.encoder_attn_layer_norm``, ``final_logits_bias``), so
that a ``transformers`` BART's weights load by name, and writes only what
BART changes:

============================================  =========================================================
BART                                          here
============================================  =========================================================
post-LN layers                                :func:`~literate_transformer.core.residual.add_and_norm`
                                              with ``norm_first=False``
one table, ``shared``, for every token        the encoder's and decoder's ``embed_tokens`` *are*
                                              ``shared``, and ``lm_head.weight`` is its weight
``final_logits_bias``                         a buffer added to the logits (zeros, never trained)
``layernorm_embedding``                       a layer norm on the summed embeddings, as BERT's
learned positions, offset by 2                :class:`~literate_transformer.parts.positions.LearnedPositionalEmbedding`
                                              with ``offset=2``: position :math:`p` is row :math:`p + 2`
                                              (fairseq numbered positions after the padding index; the
                                              first two rows are never read)
``scale_embedding``                           token vectors times :math:`\sqrt{E}` (the 2017 paper's rule;
                                              ``False`` in HuggingFace's default config and in BART-base)
no segment embeddings                         token + position only
the exact GELU                                the activation registry's ``"gelu"``
targets start at ``decoder_start_token_id``   BART's is its ``eos_token_id``, 2
============================================  =========================================================

BART's configs allow encoder and decoder of different depths, head counts
and feed-forward widths (``encoder_layers``, ``decoder_layers``, ...).

BART is also a parent: M2M-100 (:mod:`~literate_transformer.models.m2m_100`)
and BigBird-Pegasus (:mod:`~literate_transformer.models.bigbird_pegasus`)
subclass its modules and change only what differs.  So each choice above is
made in one place they can override: a layer's ``norm_first`` (each
sub-layer reads :meth:`BartEncoderLayer.sublayer_input`, :math:`x` itself
in post-LN, :math:`\operatorname{LN}(x)` in pre-LN) and its
:meth:`~BartEncoderLayer.new_attention`; a stack's
:meth:`~BartStack.position_embedding`,
:meth:`~literate_transformer.parts.stack.DecoderStack.position_ids`,
:meth:`~BartStack.embed` and :meth:`~BartStack.final_norm` (what follows the
last layer); the model's ``check_config``, ``encoder_class`` and
``decoder_class``, and the head's ``model_class``.
Tests build random BARTs of unusual shapes with ``transformers`` and require
their logits, encoder output and decoder self- and cross-attention
probabilities to within ``1e-5`` in float32, with padded sources, and the
exact token ids of HuggingFace's greedy ``generate()``.

>>> import torch
>>> from transformers import BartConfig
>>> hf_config = BartConfig(vocab_size=40, d_model=24, encoder_layers=2, decoder_layers=1,
...                        encoder_attention_heads=3, decoder_attention_heads=2,
...                        encoder_ffn_dim=32, decoder_ffn_dim=40, max_position_embeddings=16)
>>> model = BartForConditionalGeneration(hf_config).eval()
>>> len(model.model.encoder.layers), len(model.model.decoder.layers)
(2, 1)
>>> model.lm_head.weight is model.model.shared.weight
True
>>> output = model(torch.tensor([[5, 6, 7, 2]]), decoder_input_ids=torch.tensor([[2, 5]]), output_attentions=True)
>>> output.logits.shape, output.cross_attentions[0].shape   # (B, T, V), (B, H, T, S)
(torch.Size([1, 2, 40]), torch.Size([1, 2, 2, 4]))
>>> model.generate(torch.tensor([[5, 6, 7, 2]]), max_new_tokens=3)[:, 0]   # every target starts at token 2
tensor([2])
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from ..book.decoder import PreTrainedEncoderDecoderModel, check_family_decoder_inputs
from ..core.activations import get_activation
from ..core.outputs import LayerCache, LayerOutput, ModelOutput
from ..core.residual import add_and_norm, sublayer_input
from ..core.validation import Arguments, check_token_inputs, validate_with
from ..parts.attention import Attention
from ..parts.feed_forward import feed_forward
from ..parts.heads import tie_weights
from ..parts.norms import make_norm
from ..parts.positions import LearnedPositionalEmbedding
from ..parts.stack import DecoderLayer, DecoderStack, Sublayer, run_layers
from .registry import ConvertsFromHF, register

__all__ = [
    "shift_tokens_right",
    "BartScaledWordEmbedding",
    "BartAttention",
    "BartEncoderLayer",
    "BartDecoderLayer",
    "BartEncoder",
    "BartDecoder",
    "BartStack",
    "BartPreTrainedModel",
    "BartModel",
    "BartForConditionalGeneration",
]

#: BART's learned position table has two rows before position 0.
BART_POSITION_OFFSET = 2
#: The epsilon of every layer norm of HuggingFace's BART (``nn.LayerNorm``'s default; not a config field).
BART_LAYER_NORM_EPS = 1e-5


def shift_tokens_right(input_ids: Tensor, pad_token_id: int, decoder_start_token_id: int) -> Tensor:
    """The targets BART makes from its source when none are given: one place to the right, a start token first.

    HuggingFace's ``BartModel`` does this when ``decoder_input_ids`` is
    ``None`` (the denoising objective reconstructs the source), and replaces
    ``-100`` (the loss's "ignore" label) by the padding id.

    >>> shift_tokens_right(torch.tensor([[5, 6, 7, 2]]), pad_token_id=1, decoder_start_token_id=2)
    tensor([[2, 5, 6, 7]])
    """
    shifted = input_ids.new_zeros(input_ids.shape)  # (B, S)
    shifted[:, 1:] = input_ids[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)


class BartScaledWordEmbedding(nn.Embedding):
    r"""The token table, its vectors multiplied by ``embed_scale`` (:math:`\sqrt{E}` with ``scale_embedding``, else 1)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None, embed_scale: float = 1.0):
        super().__init__(num_embeddings, embedding_dim, padding_idx)
        self.embed_scale = embed_scale

    def forward(self, input_ids: Tensor) -> Tensor:
        """``(B, T)`` ids to ``(B, T, E)`` vectors, scaled."""
        return super().forward(input_ids) * self.embed_scale


class BartAttention(Attention):
    """Multi-head attention with separate ``q_proj``, ``k_proj``, ``v_proj`` and ``out_proj``: self or cross.

    The rest (heads, cache, the kernel) is the shared
    :class:`~literate_transformer.parts.attention.Attention`.

    Args:
        config: The BART config (its attention implementation).
        embed_dim: ``E``.
        num_heads: ``H``.
        dropout: Dropout on the probabilities (``attention_dropout``).
        bias: Biases on the four projections (BART's have them; some of its descendants drop them).
    """

    projections = ("q_proj", "k_proj", "v_proj", "out_proj")

    def __init__(self, config: Any, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__(config, num_heads, embed_dim // num_heads, dropout=dropout)
        # The keys and values are the encoder's output's, in cross-attention.
        self.add_projections(embed_dim, bias=bias)


class BartEncoderLayer(nn.Module):
    r"""A post-LN encoder layer: :math:`\operatorname{LN}(x + \operatorname{Attn}(x))`, then :math:`\operatorname{LN}(x + \operatorname{FFN}(x))`.

    The arrangement is the class's ``norm_first`` (the descendants that
    normalise first, M2M-100 and BigBird-Pegasus, set it to ``True`` and
    change nothing else here).

    Args:
        config: The BART config.
        num_heads: The heads of its self-attention (``encoder_attention_heads`` by default).
        ffn_dim: Its feed-forward width (``encoder_ffn_dim`` by default).
    """

    #: The arrangement of its residual sub-layers (:mod:`~literate_transformer.core.residual`): post-LN.
    norm_first = False

    def __init__(self, config: Any, num_heads: int | None = None, ffn_dim: int | None = None) -> None:
        super().__init__()
        embed_dim = config.d_model
        num_heads = num_heads or config.encoder_attention_heads
        ffn_dim = ffn_dim or config.encoder_ffn_dim
        self.self_attn = self.new_attention(config, num_heads)
        self.self_attn_layer_norm = make_norm(embed_dim, BART_LAYER_NORM_EPS)
        self.activation_fn = get_activation(config.activation_function)
        self.fc1 = nn.Linear(embed_dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, embed_dim)
        # BART's name for the feed-forward sub-layer's norm, the layer's last (not a norm after the stack).
        self.final_layer_norm = make_norm(embed_dim, BART_LAYER_NORM_EPS)
        self.dropout = nn.Dropout(config.dropout)
        self.activation_dropout = nn.Dropout(config.activation_dropout)

    def new_attention(self, config: Any, num_heads: int) -> nn.Module:
        """An attention sub-layer of this layer (:class:`BartAttention`; a descendant may build its own)."""
        return BartAttention(config, config.d_model, num_heads, config.attention_dropout)

    def forward(self, hidden_states: Tensor, attention_mask: Tensor | None, output_attentions: bool = False):
        """``(B, S, E) -> (B, S, E)``; returns a :class:`~literate_transformer.core.outputs.LayerOutput`."""
        attention = self.self_attn(
            self.sublayer_input(hidden_states, self.self_attn_layer_norm),
            attention_mask=attention_mask,
            output_attentions=output_attentions,
        )
        # Post-LN: the residual sum first, then the norm.
        hidden_states = self.residual(hidden_states, attention.hidden_states, self.self_attn_layer_norm)
        return LayerOutput(self.feed_forward_sublayer(hidden_states), attention.attention_probs)

    def sublayer_input(self, hidden_states: Tensor, layer_norm: nn.Module) -> Tensor:
        """What a sub-layer reads: ``x`` itself (post-LN), or ``LN(x)`` in a layer that normalises first."""
        return sublayer_input(hidden_states, layer_norm, self.norm_first)

    def residual(self, hidden_states: Tensor, sublayer_output: Tensor, layer_norm: nn.Module) -> Tensor:
        """The residual sum of a sub-layer's (dropped-out) output, then its layer norm (post-LN)."""
        return add_and_norm(hidden_states, sublayer_output, layer_norm, self.norm_first, self.dropout)

    def feed_forward_network(self, hidden_states: Tensor) -> Tensor:
        """``fc1``, the activation, ``fc2``, with BART's dropouts (after the activation, and on the output)."""
        return feed_forward(
            hidden_states, self.fc1, self.fc2, self.activation_fn, self.dropout, self.activation_dropout
        )

    def feed_forward_sublayer(self, hidden_states: Tensor) -> Tensor:
        """The feed-forward network, then the residual sum and ``final_layer_norm`` (post-LN)."""
        feed_forward_output = self.feed_forward_network(self.sublayer_input(hidden_states, self.final_layer_norm))
        return add_and_norm(hidden_states, feed_forward_output, self.final_layer_norm, norm_first=self.norm_first)


class BartDecoderLayer(BartEncoderLayer, DecoderLayer):
    """A post-LN decoder layer: causal self-attention, cross-attention to the encoder (``encoder_attn``), feed-forward.

    It is the encoder layer with the decoder's sizes and one more sub-layer
    between the two.  Its forward is the decoder layer's of the shared parts
    (:meth:`~literate_transformer.parts.stack.DecoderLayer.forward`), which
    runs the three sub-layers named here, each with BART's norm around it
    (after the sum, ``norm_first=False``; before the sub-layer in BART's
    pre-LN descendants).
    """

    def __init__(self, config: Any) -> None:
        super().__init__(config, config.decoder_attention_heads, config.decoder_ffn_dim)
        self.encoder_attn = self.new_attention(config, config.decoder_attention_heads)
        self.encoder_attn_layer_norm = make_norm(config.d_model, BART_LAYER_NORM_EPS)

    # The encoder layer comes first in the bases (its norm_first, post-LN), but the forward is the decoder layer's.
    forward = DecoderLayer.forward

    def sublayers(self) -> tuple[Sublayer, Sublayer]:
        """The causal self-attention (``self_attn``) and the feed-forward network (``fc1``, ``fc2``)."""
        return (
            Sublayer(self.self_attn, self.self_attn_layer_norm, self.dropout),
            Sublayer(self.feed_forward_network, self.final_layer_norm),
        )

    def cross_attention_sublayer(self) -> Sublayer:
        """Cross-attention to the encoder's output, ``encoder_attn``: queries from the target, keys and values
        from the source."""
        return Sublayer(self.encoder_attn, self.encoder_attn_layer_norm, self.dropout)


class BartStack(DecoderStack, nn.Module):
    """What BART's encoder and decoder share: the token table (``shared``), their own position table and
    embedding layer norm, and their layers.

    Its methods are the decisions a decoder stack makes
    (:class:`~literate_transformer.parts.stack.DecoderStack`): how the
    tokens and positions enter (:meth:`embed`, and the package's one rule for
    positions, :meth:`~literate_transformer.parts.stack.DecoderStack.position_ids`)
    and what follows the last layer (:meth:`final_norm`); the decoder runs
    the shared forward with them, the encoder its own.

    Args:
        config: A ``transformers`` :class:`~transformers.BartConfig`.
        embed_tokens: The token table the two stacks share.
    """

    #: The layer class, and the config field with the number of layers (each stack's own).
    layer_class: type[nn.Module]
    num_layers: str

    def __init__(self, config: Any, embed_tokens: nn.Embedding) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = embed_tokens
        self.embed_positions = self.position_embedding(config)
        self.layers = nn.ModuleList(self.layer_class(config) for _ in range(getattr(config, self.num_layers)))
        #: BART's layer norm on the summed embeddings.
        self.layernorm_embedding = make_norm(config.d_model, BART_LAYER_NORM_EPS)
        self.dropout = nn.Dropout(config.dropout)

    def position_embedding(self, config: Any) -> nn.Module:
        """BART's learned positions: position :math:`p` in row :math:`p + 2` of the table."""
        return LearnedPositionalEmbedding(config.max_position_embeddings, config.d_model, BART_POSITION_OFFSET)

    def embed(self, input_ids: Tensor, position_ids: Tensor) -> Tensor:
        """Token vectors (scaled) plus positions, then the layer norm on the sum and dropout: ``(B, T, E)``."""
        embeddings = self.embed_tokens(input_ids) + self.embed_positions(position_ids)  # (B, T, E)
        return self.dropout(self.layernorm_embedding(embeddings))

    def final_norm(self, hidden_states: Tensor) -> Tensor:
        """What follows the last layer: nothing in BART (a post-LN layer's output is normalised already)."""
        return hidden_states


def _check_encoder_inputs(encoder: BartEncoder, args: Arguments) -> None:
    check_token_inputs(args, encoder.config)


class BartEncoder(BartStack):
    """BART's encoder: the embeddings of :class:`BartStack`, then ``encoder_layers`` post-LN layers."""

    layer_class, num_layers = BartEncoderLayer, "encoder_layers"
    #: The encoder's queries see every real token, before and after them (the mask hook's padding mask alone).
    causal = False

    @validate_with(_check_encoder_inputs)
    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, output_attentions: bool = False
    ) -> ModelOutput:
        """Encode the source ``(B, S)``: contextual vectors ``(B, S, E)``."""
        length = input_ids.shape[1]
        # The source's positions are 0 .. S-1, padding or not (as HuggingFace's BartEncoder numbers them).
        embedding_output = self.embed(input_ids, self.position_ids(input_ids, None))
        mask = self.attention_masks(attention_mask, length, 0, embedding_output.dtype, input_ids.device)["full"]
        hidden_states, layer_outputs = run_layers(
            self.layers, embedding_output, mask, output_attentions=output_attentions
        )
        hidden_states = self.final_norm(hidden_states)
        return ModelOutput.from_layers(embedding_output, layer_outputs, hidden_states, output_hidden_states=False)


def _check_decoder_inputs(decoder: BartDecoder, args: Arguments) -> None:
    config = decoder.config
    heads = config.decoder_attention_heads
    check_family_decoder_inputs(
        args, config, config.decoder_layers, heads, config.d_model // heads, config.max_position_embeddings
    )


class BartDecoder(BartStack):
    """BART's decoder: embeddings like the encoder's (its own position table), then ``decoder_layers`` layers."""

    layer_class, num_layers = BartDecoderLayer, "decoder_layers"

    @validate_with(_check_decoder_inputs)
    def forward(
        self,
        input_ids: Tensor,
        encoder_hidden_states: Tensor,
        attention_mask: Tensor | None = None,
        encoder_attention_mask: Tensor | None = None,
        *,
        past_key_values: tuple[LayerCache, ...] | None = None,
        use_cache: bool = False,
        output_attentions: bool = False,
    ) -> ModelOutput:
        """Decode the target ``(B, T)`` against the encoder's ``(B, S, E)``; arguments as in
        :meth:`~literate_transformer.book.decoder.TransformerDecoder.forward`."""
        # The decoder stack's forward (parts.stack.DecoderStack.run_stack), its layers reading the source too.
        return self.run_stack(
            self.layers,
            input_ids,
            attention_mask,
            None,
            past_key_values,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=False,
            encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask,
        )


class BartPreTrainedModel(ConvertsFromHF, PreTrainedEncoderDecoderModel):
    """What BART's two classes share (HuggingFace's name for it): the book's encode, decode, ``forward`` and
    ``generate`` in HuggingFace's order (:class:`~literate_transformer.book.decoder.PreTrainedEncoderDecoderModel`).

    Each class has ``config``, ``encoder``, ``decoder`` and a ``head``
    (next-token scores, or ``None`` without a language-model head).
    """

    # How the class checks its config before building anything (core.config.ChecksConfig; a descendant names its
    # own config, and adds its own checks).
    config_type, config_name = "bart", "BartConfig"
    #: The names of the one token table (a checkpoint of either class, with or without ``model.``).
    hf_shared = ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight")

    @classmethod
    def map_hf_state_dict(
        cls, state_dict: Mapping[str, Tensor], expected: Mapping[str, Tensor], tied: bool = False
    ) -> dict[str, Tensor]:
        """By name, as every family's (:meth:`~literate_transformer.models.registry.ConvertsFromHF.map_hf_state_dict`),
        and one check of BART's own: ``shared``, ``encoder.embed_tokens``, ``decoder.embed_tokens`` and ``lm_head``
        are one tensor, so a checkpoint may list any of them, and every copy must hold the same values.

        Raises:
            ValueError: listing every missing, unexpected and mis-shaped key, or naming a copy of the embedding
                table that differs from the others.
        """
        copies = [key for key in state_dict if key.removeprefix("model.") in cls.hf_shared]
        for key in copies[1:]:
            if not torch.equal(state_dict[key], state_dict[copies[0]]):
                raise ValueError(
                    f"{key} differs from {copies[0]}: {cls.declared('hf_name')} has one embedding table, "
                    "shared by all four names"
                )
        return super().map_hf_state_dict(state_dict, expected, tied)

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """A ``d_model`` that each stack's heads divide."""
        for name in ("encoder_attention_heads", "decoder_attention_heads"):
            if config.d_model % getattr(config, name):
                raise ValueError(f"d_model ({config.d_model}) must be divisible by {name} ({getattr(config, name)})")

    def default_decoder_input_ids(self, input_ids: Tensor) -> Tensor:
        """Without a target: ``input_ids`` shifted one place right (:func:`shift_tokens_right`), as HuggingFace's
        ``BartModel`` does."""
        start = self.decoder_start_token_id
        if start is None:
            raise ValueError("decoder_input_ids is None and config.decoder_start_token_id is not set")
        return shift_tokens_right(input_ids, self.config.pad_token_id, start)


class BartModel(BartPreTrainedModel):
    """BART's encoder and decoder around one token table, ``shared``; no language-model head.

    Args:
        config: A ``transformers`` :class:`~transformers.BartConfig`.
    """

    # Fairseq-era checkpoints have encoder.version and decoder.version entries, which hold no weights: dropped
    # when converting (models.registry.ConvertsFromHF).
    hf_name = "BART"
    hf_dropped = ("encoder.version", "decoder.version")

    #: The stacks' classes (a descendant names its own).
    encoder_class: type[BartEncoder] = BartEncoder
    decoder_class: type[BartDecoder] = BartDecoder

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = self.check_config(config)
        embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        #: One token table for the encoder, the decoder (and the head of :class:`BartForConditionalGeneration`).
        self.shared = BartScaledWordEmbedding(config.vocab_size, config.d_model, config.pad_token_id, embed_scale)
        self.encoder = self.encoder_class(config, self.shared)
        self.decoder = self.decoder_class(config, self.shared)


class BartForConditionalGeneration(BartPreTrainedModel):
    """BART with its language-model head: ``lm_head`` (the shared table) plus ``final_logits_bias``.

    HuggingFace nests the encoder-decoder under ``model`` (``model.shared``,
    ``model.encoder``, ...); so does this class, so that the names match.

    Args:
        config: A ``transformers`` :class:`~transformers.BartConfig`.

    Attributes:
        model: The :class:`BartModel`.
        lm_head: ``E -> V`` without bias; its weight *is* ``model.shared.weight``.
        final_logits_bias: ``(1, V)``, added to the logits (a buffer: zeros, never trained).
    """

    #: The encoder-decoder it puts a head on (a descendant names its own).
    model_class: type[BartModel] = BartModel

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.model = self.model_class(config)
        self.config = self.model.config
        self.lm_head = tie_weights(nn.Linear(config.d_model, config.vocab_size, bias=False), self.model.shared)
        self.register_buffer("final_logits_bias", torch.zeros(1, config.vocab_size))

    @property
    def encoder(self) -> BartEncoder:
        """The encoder (``model.encoder``)."""
        return self.model.encoder

    @property
    def decoder(self) -> BartDecoder:
        """The decoder (``model.decoder``)."""
        return self.model.decoder

    def head(self, hidden_states: Tensor) -> Tensor:
        """Next-token scores ``(B, T, V)``: the decoder's states against the shared table, plus the bias."""
        return self.lm_head(hidden_states) + self.final_logits_bias


register(BartModel, BartForConditionalGeneration)


#: The checks of a BART config, by the name they had before they were declared (:class:`BartPreTrainedModel`).
check_bart_config = BartPreTrainedModel.check_config
