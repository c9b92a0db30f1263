r"""T5: an encoder-decoder whose positions live in the attention scores, with RMS norms and no biases.

T5 (Raffel et al., 2020, *Exploring the Limits of Transfer Learning with a
Unified Text-to-Text Transformer*) casts every task as text in, text out,
and trains one encoder-decoder for all of them.  Its §3.1.1 ("Model") says
how its transformer departs from the 2017 one; the code of Mesh TensorFlow
and of HuggingFace's ``modeling_t5.py`` says the rest.  Each change is one
of the package's parts:

======================================  =============================================================
T5                                      here
======================================  =============================================================
RMS norm: rescale only, no mean         :class:`~literate_transformer.parts.norms.RMSNorm`
subtracted, no bias (§3.1.1)            (``make_norm(kind="rms_norm")``; HuggingFace's ``T5LayerNorm``)
pre-LN sub-layers, a final norm         :func:`~literate_transformer.core.residual.sublayer_input` with
after each stack (§3.1.1)               ``norm_first=True``; ``final_layer_norm``
no bias in any linear layer             ``nn.Linear(..., bias=False)`` throughout (the state dict has no
                                        ``.bias``)
scores not divided by :math:`\sqrt{D}`  :func:`~literate_transformer.core.kernels.attend` with ``scale=1.0``;
                                        the factor is folded into the initialisation of ``q``
no position vectors: a learned bias     :func:`~literate_transformer.parts.positions.relative_position_bias`
per head and distance bucket, added     on the first layer's table ``relative_attention_bias``, computed
to the scores (§3.1.1)                  once per stack and added to every layer's self-attention mask
cross-attention without the bias        the source's padding mask only
ReLU feed-forward (T5 v1.0) or          :func:`~literate_transformer.parts.feed_forward.feed_forward`
gated GELU (v1.1,                       (``wi``, ``wo``) or
``feed_forward_proj="gated-gelu"``)     :func:`~literate_transformer.parts.feed_forward.gated_feed_forward`
                                        (``wi_0``, ``wi_1``, ``wo``)
one table ``shared``, not scaled        the encoder's and decoder's ``embed_tokens`` *are* ``shared``
LM head tied (v1.0) or not (v1.1)       tied: the decoder's output times :math:`d_\text{model}^{-1/2}`,
                                        then the table; untied: its own ``lm_head``, no rescale
targets start with the padding token    ``decoder_start_token_id`` (0, the hub configs' value), else
                                        ``pad_token_id``
======================================  =============================================================

The relative bias is the paper's "simplified form of position embeddings":
one scalar per head and distance bucket, added to the attention logits,
its parameters "shared across all layers" (§3.1.1).  HuggingFace keeps the
table in the first block's self-attention
(``block.0.layer.0.SelfAttention.relative_attention_bias``) and hands the
bias it computes to the other blocks; so does :class:`T5Stack`, which
computes it once per call, adds the padding (and causal) mask to it, and
gives the sum to every layer as its mask.  An encoder's buckets tell left
from right, a decoder's count only the keys before the query
(:func:`~literate_transformer.parts.positions.relative_position_bucket`).

Unscaled scores: T5's attention computes :math:`\operatorname{softmax}(Q
K^\top + M)\,V`.  The :math:`1/\sqrt{D}` of the 2017 paper is not lost, it
is moved into the initialisation: HuggingFace's ``_init_weights`` draws
``q`` with standard deviation :math:`(d_\text{model} D)^{-1/2}` and ``k``
with :math:`d_\text{model}^{-1/2}`, a factor :math:`D^{-1/2}` apart.

T5 v1.0 and v1.1 differ in the feed-forward network and the head.  In
``transformers`` 4.x ``tie_word_embeddings=False`` (v1.1's configs) unties
the head and drops the rescale; ``transformers`` 5 always ties the module
and keeps the switch as ``config.scale_decoder_outputs``.  This file reads
whichever the config has (:func:`t5_ties_its_head`): tied and rescaled, or
untied and not.

Tests build random T5s of both feed-forward kinds, tied and untied, with
encoder and decoder of different depths and a head size that does not
divide ``d_model``, and require their logits, encoder output and attention
probabilities to within ``1e-5`` in float32 with padded sources, and the
exact token ids of HuggingFace's greedy ``generate()``.

>>> import torch
>>> from transformers import T5Config
>>> config = T5Config(vocab_size=40, d_model=24, d_kv=5, d_ff=32, num_layers=2, num_decoder_layers=1,
...                   num_heads=3, decoder_start_token_id=0)
>>> model = T5ForConditionalGeneration(config).eval()
>>> model.lm_head.weight is model.shared.weight, model.encoder.block[0].layer[0].SelfAttention.q.bias
(True, None)
>>> output = model(torch.tensor([[5, 6, 7, 1]]), decoder_input_ids=torch.tensor([[0, 5]]), output_attentions=True)
>>> output.logits.shape, output.decoder_attentions[0].shape   # (B, T, V), (B, H, T, S)
(torch.Size([1, 2, 40]), torch.Size([1, 3, 2, 2]))
>>> model.generate(torch.tensor([[5, 6, 7, 1]]), max_new_tokens=3)[:, 0]   # every target starts at the pad token
tensor([0])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from ..book.decoder import PreTrainedEncoderDecoderModel, check_family_decoder_inputs
from ..core.activations import ACTIVATIONS, get_activation
from ..core.masks import MaskHook, build_attention_mask
from ..core.outputs import LayerCache, ModelOutput
from ..core.validation import Arguments, validate_with
from ..parts.attention import Attention
from ..parts.feed_forward import feed_forward, gated_feed_forward
from ..parts.heads import tie_weights
from ..parts.norms import make_norm
from ..parts.positions import relative_position_bias
from ..parts.stack import DecoderLayer, Sublayer, run_layers
from .registry import ConvertsFromHF, register

__all__ = [
    "t5_ties_its_head",
    "T5DenseActDense",
    "T5DenseGatedActDense",
    "T5LayerFF",
    "T5Attention",
    "T5LayerAttention",
    "T5LayerSelfAttention",
    "T5LayerCrossAttention",
    "T5Block",
    "T5Stack",
    "T5PreTrainedModel",
    "T5Model",
    "T5ForConditionalGeneration",
]


def t5_ties_its_head(config: Any) -> bool:
    """T5's rule for its head: tied to the token table, with the decoder's output rescaled (v1.0), or neither (v1.1).

    ``transformers`` 5 keeps the rule in ``config.scale_decoder_outputs`` (its
    ``tie_word_embeddings`` is always ``True``); 4.x in ``tie_word_embeddings``.
    """
    return bool(getattr(config, "scale_decoder_outputs", config.tie_word_embeddings))


class T5DenseActDense(nn.Module):
    """T5 v1.0's feed-forward network: ``wi`` (E -> F), the activation (ReLU), dropout, ``wo`` (F -> E); no biases.

    Args:
        config: The T5 config (``d_model``, ``d_ff``, ``dense_act_fn``, ``dropout_rate``).
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.wi = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wo = nn.Linear(config.d_ff, config.d_model, bias=False)
        self.dropout = nn.Dropout(config.dropout_rate)
        self.act = get_activation(config.dense_act_fn)

    def forward(self, hidden_states: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, E)``, the plain network of :mod:`~literate_transformer.parts.feed_forward`."""
        return feed_forward(hidden_states, self.wi, self.wo, self.act, activation_dropout=self.dropout)


class T5DenseGatedActDense(nn.Module):
    """T5 v1.1's gated feed-forward network: ``act(x wi_0) * (x wi_1)``, dropout, ``wo``; no biases.

    ``feed_forward_proj="gated-gelu"`` gives GEGLU (Shazeer, 2020, *GLU Variants
    Improve Transformer*) with the tanh GELU, ``"gelu_new"``.

    Args:
        config: The T5 config.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.wi_0 = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wi_1 = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.wo = nn.Linear(config.d_ff, config.d_model, bias=False)
        self.dropout = nn.Dropout(config.dropout_rate)
        self.act = get_activation(config.dense_act_fn)

    def forward(self, hidden_states: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, E)``, the gated network of :mod:`~literate_transformer.parts.feed_forward`."""
        return gated_feed_forward(hidden_states, self.wi_0, self.wi_1, self.wo, self.act, self.dropout)


class T5LayerFF(nn.Module):
    r"""The feed-forward sub-layer, pre-LN: :math:`x + \operatorname{Dropout}(\operatorname{FFN}(\operatorname{RMSNorm}(x)))`.

    Args:
        config: The T5 config (``is_gated_act`` chooses the network).
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        network = T5DenseGatedActDense if config.is_gated_act else T5DenseActDense
        # HuggingFace's name for the network, whichever it is.
        self.DenseReluDense = network(config)
        self.layer_norm = make_norm(config.d_model, config.layer_norm_epsilon, kind="rms_norm")
        self.dropout = nn.Dropout(config.dropout_rate)

    def sublayer(self) -> Sublayer:
        """The network, its RMS norm and the dropout on its output, as :class:`T5Block` runs them."""
        return Sublayer(self.DenseReluDense, self.layer_norm, self.dropout)


class T5Attention(Attention):
    r"""T5's attention: ``q``, ``k``, ``v``, ``o`` without biases, unscaled scores, and (first layer) the bias table.

    The scores are :math:`Q K^\top + M`, not divided by :math:`\sqrt{D}`
    (``scale=1.0``).  The heads' width ``H * D`` (``num_heads * d_kv``) need
    not be ``d_model``.  The first self-attention layer of each stack also
    owns T5's relative bias table, ``relative_attention_bias``
    (:meth:`compute_bias`).

    Args:
        config: The T5 config.
        has_relative_attention_bias: Own the table (the first layer's self-attention).
        is_decoder: A decoder's bias counts only the keys before the query.
    """

    projections = ("q", "k", "v", "o")

    def __init__(self, config: Any, has_relative_attention_bias: bool = False, is_decoder: bool = False) -> None:
        # T5 does not divide the scores by sqrt(D): scale 1.
        super().__init__(config, config.num_heads, config.d_kv, dropout=config.dropout_rate, scale=1.0)
        self.is_decoder = is_decoder
        self.has_relative_attention_bias = has_relative_attention_bias
        # d_model -> H D (not necessarily d_model) and back, without biases.
        self.add_projections(config.d_model, bias=False)
        if has_relative_attention_bias:
            self.relative_attention_max_distance = config.relative_attention_max_distance
            #: The relative bias table, one number per distance bucket and head, for the whole stack.
            self.relative_attention_bias = nn.Embedding(config.relative_attention_num_buckets, config.num_heads)

    def compute_bias(self, query_length: int, key_length: int, past_length: int = 0) -> Tensor:
        """The stack's relative bias ``(1, H, T, S)`` for queries after ``past_length`` cached positions."""
        return relative_position_bias(
            self.relative_attention_bias,
            query_length,
            key_length,
            past_length,
            bidirectional=not self.is_decoder,
            max_distance=self.relative_attention_max_distance,
        )


class T5LayerAttention(nn.Module):
    r"""An attention sub-layer, pre-LN: :math:`x + \operatorname{Dropout}(\operatorname{Attn}(\operatorname{RMSNorm}(x), z))`.

    :math:`z` is the encoder's output (cross-attention) or the normalised
    :math:`x` itself (self-attention).  HuggingFace writes the two as
    :class:`T5LayerSelfAttention` and :class:`T5LayerCrossAttention`; each
    builds its attention under its own name (a checkpoint's key), and
    :class:`T5Block` runs either.
    """

    #: The subclass's layer norm and dropout (its ``attention`` names its own ``SelfAttention`` or ``EncDecAttention``).
    layer_norm: nn.Module
    dropout: nn.Dropout
    attention: T5Attention

    def sublayer(self) -> Sublayer:
        """The attention, its RMS norm and the dropout on its output, as :class:`T5Block` runs them."""
        return Sublayer(self.attention, self.layer_norm, self.dropout)


class T5LayerSelfAttention(T5LayerAttention):
    """The self-attention sub-layer: :class:`T5LayerAttention` reading no encoder; its mask holds the relative bias.

    Args:
        config: The T5 config.
        has_relative_attention_bias: Its attention owns the bias table (the first layer).
        is_decoder: Its stack is the decoder.
    """

    def __init__(self, config: Any, has_relative_attention_bias: bool = False, is_decoder: bool = False) -> None:
        super().__init__()
        self.SelfAttention = T5Attention(config, has_relative_attention_bias, is_decoder)
        self.layer_norm = make_norm(config.d_model, config.layer_norm_epsilon, kind="rms_norm")
        self.dropout = nn.Dropout(config.dropout_rate)

    @property
    def attention(self) -> T5Attention:
        """The attention, ``SelfAttention`` (HuggingFace's name)."""
        return self.SelfAttention


class T5LayerCrossAttention(T5LayerAttention):
    """The cross-attention sub-layer: queries from the target, keys and values from the encoder; no bias.

    Args:
        config: The T5 config.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.EncDecAttention = T5Attention(config, has_relative_attention_bias=False, is_decoder=True)
        self.layer_norm = make_norm(config.d_model, config.layer_norm_epsilon, kind="rms_norm")
        self.dropout = nn.Dropout(config.dropout_rate)

    @property
    def attention(self) -> T5Attention:
        """The attention, ``EncDecAttention`` (HuggingFace's name)."""
        return self.EncDecAttention


class T5Block(DecoderLayer):
    """One layer: its sub-layers in ``layer`` (HuggingFace's list): self-attention, cross-attention (decoder), FFN.

    Its forward is the decoder layer's of the shared parts
    (:meth:`~literate_transformer.parts.stack.DecoderLayer.forward`), pre-LN;
    an encoder block is the same layer without cross-attention, under a mask
    that is not causal.  Every block's self-attention mask already holds the
    stack's relative bias.

    Args:
        config: The T5 config.
        has_relative_attention_bias: The block owns the stack's bias table (the first block).
        is_decoder: A decoder block, with cross-attention.
    """

    #: The arrangement of T5's residual sub-layers (:mod:`~literate_transformer.core.residual`): pre-LN.
    norm_first = True

    def __init__(self, config: Any, has_relative_attention_bias: bool = False, is_decoder: bool = False) -> None:
        super().__init__()
        self.is_decoder = is_decoder
        self.layer = nn.ModuleList([T5LayerSelfAttention(config, has_relative_attention_bias, is_decoder)])
        if is_decoder:
            self.layer.append(T5LayerCrossAttention(config))
        self.layer.append(T5LayerFF(config))

    def sublayers(self) -> tuple[Sublayer, Sublayer]:
        """Self-attention, whose mask is the relative bias plus the padding (and causal) mask, and the network."""
        return self.layer[0].sublayer(), self.layer[-1].sublayer()

    def cross_attention_sublayer(self) -> Sublayer | None:
        """In a decoder block, cross-attention to the encoder's output: no relative bias, only the source's
        padding."""
        return self.layer[1].sublayer() if self.is_decoder else None


def _check_stack_inputs(stack: T5Stack, args: Arguments) -> None:
    if not stack.is_decoder and any(value is not None for value in (args.encoder_hidden_states, args.past_key_values)):
        raise ValueError("T5's encoder reads no encoder_hidden_states and keeps no past_key_values")
    config = stack.config
    # No position table, so no length limit: the relative bias covers any distance.
    check_family_decoder_inputs(args, config, len(stack.block), config.num_heads, config.d_kv, None, stack.is_decoder)


class T5Stack(MaskHook, nn.Module):
    """T5's encoder or decoder: the shared token table, ``block``, ``final_layer_norm``; no position vectors.

    Args:
        config: A ``transformers`` :class:`~transformers.T5Config`.
        embed_tokens: The token table the two stacks share.
        is_decoder: The decoder (``num_decoder_layers`` causal blocks with cross-attention), or the encoder.
    """

    def __init__(self, config: Any, embed_tokens: nn.Embedding, is_decoder: bool = False) -> None:
        super().__init__()
        self.config = config
        self.is_decoder = is_decoder
        self.embed_tokens = embed_tokens
        num_layers = config.num_decoder_layers if is_decoder else config.num_layers
        # Only the first block owns the relative bias table; the others read the bias it computes.
        self.block = nn.ModuleList(
            T5Block(config, has_relative_attention_bias=index == 0, is_decoder=is_decoder)
            for index in range(num_layers)
        )
        self.final_layer_norm = make_norm(config.d_model, config.layer_norm_epsilon, kind="rms_norm")
        self.dropout = nn.Dropout(config.dropout_rate)

    @property
    def causal(self) -> bool:
        """Whether the mask hook hides the future (in the decoder)."""
        return self.is_decoder

    @validate_with(_check_stack_inputs)
    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        encoder_hidden_states: Tensor | None = None,
        encoder_attention_mask: Tensor | None = None,
        *,
        past_key_values: tuple[LayerCache, ...] | None = None,
        use_cache: bool = False,
        output_attentions: bool = False,
    ) -> ModelOutput:
        """Encode ``(B, S)`` or decode ``(B, T)`` ids, in HuggingFace's argument order.

        Args:
            input_ids: Token ids (with a cache, only the new ones).
            attention_mask: ``(B, past + T)`` padding mask, 1 for real tokens.
            encoder_hidden_states: The encoder's output ``(B, S, E)`` (decoder only).
            encoder_attention_mask: The source's ``(B, S)`` padding mask (decoder only).
            past_key_values: The decoder's cache returned by the previous step.
            use_cache: Return the updated cache (decoder only).
            output_attentions: Return every layer's attention probabilities.

        Returns:
            A :class:`~literate_transformer.core.outputs.ModelOutput`.

        Raises:
            ValueError: for ids outside the vocabulary, masks, encoder states
                or caches of the wrong shape, or decoder inputs given to the encoder.
            TypeError: for inputs of the wrong type.
        """
        past_length = 0 if past_key_values is None else past_key_values[0].self_attention[0].shape[2]
        length = input_ids.shape[1]
        # The token vectors alone: no positions added, no scaling.
        embedding_output = self.dropout(self.embed_tokens(input_ids))  # (B, T, E)
        masks = dict(device=input_ids.device, dtype=embedding_output.dtype)
        mask = self.attention_masks(attention_mask, length, past_length, **masks)["full"]
        # Where the tokens are: the first block's relative bias, one number per head and (query, key) pair ...
        position_bias = self.block[0].layer[0].SelfAttention.compute_bias(length, past_length + length, past_length)
        # ... added to the padding (and causal) mask once; every block adds the sum to its self-attention scores.
        self_attention_mask = position_bias if mask is None else position_bias + mask
        source_mask = build_attention_mask(encoder_attention_mask, query_length=length, **masks)
        hidden_states, layer_outputs = run_layers(
            self.block,
            embedding_output,
            self_attention_mask,
            encoder_hidden_states,
            source_mask,
            past_key_values=past_key_values,
            use_cache=use_cache,
            output_attentions=output_attentions,
        )
        # Pre-LN leaves the residual stream unnormalised: one RMS norm at the end, then dropout.
        hidden_states = self.dropout(self.final_layer_norm(hidden_states))
        return ModelOutput.from_layers(embedding_output, layer_outputs, hidden_states, output_hidden_states=False)


class T5PreTrainedModel(ConvertsFromHF, PreTrainedEncoderDecoderModel):
    """What T5's two classes share: the book's encode and decode, ``forward`` in HuggingFace's order and
    ``generate`` (:class:`~literate_transformer.book.decoder.PreTrainedEncoderDecoderModel`); T5's start token."""

    # What converting reads (models.registry.ConvertsFromHF): older checkpoints saved a relative bias table for the
    # decoder's first cross-attention, which never uses one (HuggingFace ignores it on loading): dropped.
    hf_name = "T5"
    hf_dropped = ("decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight",)
    #: T5's names for its one token table (and, tied, the head's).
    hf_shared = ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")

    @classmethod
    def head_is_tied(cls, config: Any) -> bool:
        """Whether the head is the table: :func:`t5_ties_its_head`."""
        return t5_ties_its_head(config)

    @classmethod
    def map_hf_state_dict(
        cls, state_dict: Mapping[str, Tensor], expected: Mapping[str, Tensor], tied: bool = True
    ) -> dict[str, Tensor]:
        """By name, as every family's, and T5's one table: ``shared``, ``encoder.embed_tokens``,
        ``decoder.embed_tokens`` (and, with a tied head, ``lm_head``) are one tensor, so a checkpoint may list any of
        them, or only ``shared.weight``; every copy it lists must hold the same values.

        Raises:
            ValueError: listing every missing, unexpected and mis-shaped key, or naming a copy of the table that
                differs from ``shared.weight``.
        """
        names = cls.hf_shared + (("lm_head.weight",) if tied and "lm_head.weight" in expected else ())
        state_dict = dict(state_dict)
        if "shared.weight" in state_dict:
            for name in names[1:]:
                if name not in state_dict:
                    state_dict[name] = state_dict["shared.weight"]
                elif not torch.equal(state_dict[name], state_dict["shared.weight"]):
                    raise ValueError(f"{name} differs from shared.weight: T5 has one token table, shared by {names}")
        return super().map_hf_state_dict(state_dict, expected, tied)

    @property
    def decoder_start_token_id(self) -> int:
        """The token every target starts with, ``config.decoder_start_token_id`` (0 in the hub's configs), else the
        padding token."""
        start = super().decoder_start_token_id
        return self.config.pad_token_id if start is None else start

    def check_inputs(self, args: Arguments) -> None:
        """What ``forward`` refuses: a missing target (T5 makes none of its own but from labels), then what the
        book's model does."""
        if args.decoder_input_ids is None and args.labels is None:
            raise ValueError(
                "decoder_input_ids is required: T5's targets are the labels shifted right, "
                "model._shift_right(labels), starting with the padding token (or pass labels=, which does that)"
            )
        super().check_inputs(args)

    def _shift_right(self, labels: Tensor) -> Tensor:
        """The decoder's input for ``labels``: the start token, then the labels but the last (HuggingFace's name).

        >>> from transformers import T5Config
        >>> T5Model(T5Config(vocab_size=10, d_model=8, d_kv=4, num_heads=2))._shift_right(torch.tensor([[5, -100]]))
        tensor([[0, 5]])
        """
        return self.shift_labels_right(labels)


class T5Model(T5PreTrainedModel):
    """T5's encoder and decoder around one token table, ``shared``; no language-model head.

    Args:
        config: A ``transformers`` :class:`~transformers.T5Config`.
    """

    config_type, config_name = "t5", "T5Config"

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """Relative-position buckets whose logarithmic bins are defined, and an activation the package has.

        The decoder gives distances below ``buckets // 2`` a bucket each, and bins the rest logarithmically up to
        ``relative_attention_max_distance``: with a max distance of at most ``buckets // 2`` the bins divide by
        log(1) or less (``transformers`` then computes negative buckets, or garbage).  An encoder halves the
        buckets again, so 4 is the fewest.
        """
        buckets, distance = config.relative_attention_num_buckets, config.relative_attention_max_distance
        if buckets < 4 or distance <= buckets // 2:
            raise ValueError(
                f"T5Config.relative_attention_num_buckets={buckets} and relative_attention_max_distance={distance}: "
                "need at least 4 buckets and a max_distance above num_buckets // 2"
            )
        if config.dense_act_fn not in ACTIVATIONS:
            raise ValueError(
                f"T5Config.feed_forward_proj={config.feed_forward_proj!r} asks for the activation "
                f"{config.dense_act_fn!r}, which is not one of {sorted(ACTIVATIONS)}"
            )

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = self.check_config(config)
        #: One token table for both stacks (and, tied, the head); its vectors are not scaled.
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder = T5Stack(config, self.shared)
        self.decoder = T5Stack(config, self.shared, is_decoder=True)


class T5ForConditionalGeneration(T5Model):
    """T5 with its language-model head: tied to ``shared`` and reading a rescaled output (v1.0), or its own (v1.1).

    HuggingFace keeps ``shared``, ``encoder``, ``decoder`` and ``lm_head`` at
    the top (no ``model.`` prefix, unlike BART); so does this class.

    Args:
        config: A ``transformers`` :class:`~transformers.T5Config`.

    Attributes:
        lm_head: ``E -> V`` without bias; tied, its weight *is* ``shared.weight``.
        tie_word_embeddings: :func:`t5_ties_its_head` of the config.
    """

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.model_dim = config.d_model
        self.tie_word_embeddings = t5_ties_its_head(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if self.tie_word_embeddings:
            tie_weights(self.lm_head, self.shared)

    def head(self, hidden_states: Tensor) -> Tensor:
        """Next-token scores ``(B, T, V)``."""
        if self.tie_word_embeddings:
            # The tied table meets the decoder's output scaled by d_model^(-1/2) (Mesh TensorFlow's rule).
            hidden_states = hidden_states * self.model_dim**-0.5
        return self.lm_head(hidden_states)


register(T5Model, T5ForConditionalGeneration)


#: The checks of a T5 config, by the name they had before they were declared (:class:`T5Model`).
check_t5_config = T5Model.check_config
