r"""GPT: the first decoder-only transformer, post-LN, with learned positions and a head that is the token table.

"Improving Language Understanding by Generative Pre-Training" (Radford et
al., 2018) trained the decoder of the 2017 transformer alone, without an
encoder and so without cross-attention, as a language model: every position
predicts the token after it.  Each block is the book's post-LN decoder layer
minus its middle sub-layer,

.. math::

    h \leftarrow \operatorname{LN}_1\big(h + \operatorname{Attn}(h, M_\text{causal})\big), \qquad
    h \leftarrow \operatorname{LN}_2\big(h + \operatorname{MLP}(h)\big),

on top of token plus learned position embeddings, and the language-model
head scores every token of the vocabulary with the token table itself,
:math:`\text{logits} = h^{(L)} (W^\text{tok})^\top`.  There is no final
layer norm: in a post-LN stack the last block's output has just been
normalised.

This file holds GPT's modules under HuggingFace's names (``tokens_embed``,
``positions_embed``, ``h.0.attn.c_attn``, ``h.0.ln_1``, ``h.0.mlp.c_fc``,
``lm_head``), so that a ``transformers`` ``OpenAIGPTLMHeadModel``'s weights
load by name, and it is the root of this package's GPT branch: GPT-2
(:mod:`~literate_transformer.models.gpt2`) and the families after it
subclass these classes and write only what they change.  What they change
goes through four small methods of :class:`OpenAIGPTModel`, one per
decision a decoder-only stack makes: what the first block reads
(:meth:`~OpenAIGPTModel.embed`), which keys each query may see
(:meth:`~OpenAIGPTModel.attention_masks`), what every block reads besides
(:meth:`~OpenAIGPTModel.layer_inputs`: rotary angles, in GPT-J) and what
happens after the last block (:meth:`~OpenAIGPTModel.final_norm`).

=============================================  ==========================================================
GPT                                            here
=============================================  ==========================================================
post-LN blocks (``ln_1``, ``ln_2``)            :func:`~literate_transformer.core.residual.add_and_norm`
                                               with ``norm_first=False``
causal self-attention only                     the causal mask of :mod:`~literate_transformer.core.masks`
learned positions, ``positions_embed``         :class:`~literate_transformer.parts.positions.LearnedPositionalEmbedding`
projections stored transposed, ``Conv1D``      :class:`Conv1D`, below
queries, keys and values in one ``c_attn``     one ``E -> 3E`` product, split in three
its own activation table, ``afn``              ``"gelu"`` is the tanh approximation (:data:`GPT_ACTIVATIONS`)
the LM head *is* ``tokens_embed``              :func:`~literate_transformer.parts.heads.tie_weights`,
                                               as ``tie_word_embeddings`` says
=============================================  ==========================================================

Two things differ from ``transformers``' GPT, and neither changes a number
the tests compare: the package's blocks keep a key/value cache, which
HuggingFace's GPT does not (its ``generate()`` recomputes every position at
every step; the ids are the same), and a future key is hidden with the
most negative float rather than HuggingFace's :math:`-10^4` (both give it
weight 0 after the softmax in float32).

Conv1D is a transposed Linear
-----------------------------
GPT's projections are ``Conv1D`` modules, from the original TensorFlow
code, where a "1-D convolution with kernel size 1" is a matrix product: the
weight is stored ``(in_features, out_features)`` and the layer computes
:math:`x W + b`, where ``nn.Linear`` stores ``(out, in)`` and computes
:math:`x W^\top + b`.  Same function, transposed storage; keeping the module
keeps the checkpoint's tensors as they are.

>>> import torch
>>> from transformers import OpenAIGPTConfig
>>> config = OpenAIGPTConfig(vocab_size=40, n_embd=24, n_layer=2, n_head=3, n_positions=16)
>>> model = OpenAIGPTLMHeadModel(config).eval()
>>> model.lm_head.weight is model.transformer.tokens_embed.weight
True
>>> model(torch.tensor([[5, 6, 7]])).logits.shape                     # (B, T, V)
torch.Size([1, 3, 40])
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ..book.decoding import GenerationMixin
from ..core.activations import get_activation
from ..core.outputs import LayerCache, ModelOutput
from ..core.validation import (
    Arguments,
    check_past_key_values,
    check_tensor,
    check_token_inputs,
    validate_with,
)
from ..parts.attention import Attention
from ..parts.feed_forward import feed_forward
from ..parts.heads import LanguageModelHead
from ..parts.norms import make_norm
from ..parts.positions import LearnedPositionalEmbedding
from ..parts.stack import DecoderLayer, DecoderStack, Sublayer
from .registry import ConvertsFromHF, register

__all__ = [
    "GPT_ACTIVATIONS",
    "Conv1D",
    "OpenAIGPTAttention",
    "OpenAIGPTMLP",
    "OpenAIGPTBlock",
    "OpenAIGPTModel",
    "OpenAIGPTLMHeadModel",
]

#: GPT's own activation table (``afn``), and the package's name for each: GPT's ``"gelu"`` is the tanh
#: approximation (``transformers``' ``gelu_new``), where BERT's ``"gelu"`` is the exact one.
GPT_ACTIVATIONS = {"relu": "relu", "silu": "silu", "gelu": "gelu_new", "swish": "silu"}


class Conv1D(nn.Module):
    r"""GPT's "1-D convolution": :math:`x W + b` with the weight stored ``(in_features, out_features)``.

    Args:
        nf: Output features.
        nx: Input features.
    """

    def __init__(self, nf: int, nx: int) -> None:
        super().__init__()
        self.nf = nf
        #: :math:`W`, ``(nx, nf)``: the transpose of an ``nn.Linear(nx, nf)``'s weight.
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x: Tensor) -> Tensor:
        """``(..., nx) -> (..., nf)``."""
        # x W + b, the weight used as stored (no transpose).
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(*x.shape[:-1], self.nf)


class OpenAIGPTAttention(Attention):
    r"""Causal self-attention with one fused projection for queries, keys and values, scaled by :math:`1/\sqrt{D}`.

    ``c_attn`` maps every position to :math:`3E` features, the queries, keys
    and values of all heads side by side; ``c_proj`` is :math:`W^O`.  The
    rest (heads, cache, the kernel) is the shared
    :class:`~literate_transformer.parts.attention.Attention`.

    Args:
        config: The GPT config.
        layer_idx: The block's index.
    """

    def __init__(self, config: Any, layer_idx: int = 0) -> None:
        heads = config.num_attention_heads
        super().__init__(config, heads, config.hidden_size // heads, dropout=config.attn_pdrop)
        self.split_size = config.hidden_size
        self.c_attn = Conv1D(3 * config.hidden_size, config.hidden_size)
        self.c_proj = Conv1D(config.hidden_size, config.hidden_size)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)

    def project(self, hidden_states: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One product gives every head's queries, keys and values: ``(B, T, 3E)``, cut into three ``(B, T, E)``."""
        return self.c_attn(hidden_states).split(self.split_size, dim=2)

    def output(self, context: Tensor) -> Tensor:
        """:math:`W^O` (``c_proj``), then dropout."""
        return self.resid_dropout(self.c_proj(context))


class OpenAIGPTMLP(nn.Module):
    """The feed-forward network, ``c_fc`` (E -> F), the activation, ``c_proj`` (F -> E), dropout.

    Args:
        intermediate_size: ``F`` (GPT's is :math:`4E`).
        config: The GPT config.
    """

    def __init__(self, intermediate_size: int, config: Any) -> None:
        super().__init__()
        self.c_fc = self.projection(config.hidden_size, intermediate_size)
        self.c_proj = self.projection(intermediate_size, config.hidden_size)
        self.act = get_activation(self.activation_name(config))
        self.dropout = nn.Dropout(self.dropout_probability(config))

    # -- what a family changes: the layer type, the activation's and the dropout's fields ---------------------
    @staticmethod
    def projection(in_features: int, out_features: int) -> nn.Module:
        """A linear map under GPT's storage, :class:`Conv1D` (GPT-Neo's is an ``nn.Linear``)."""
        return Conv1D(out_features, in_features)

    @staticmethod
    def activation_name(config: Any) -> str:
        """The activation, from GPT's own table (``afn``)."""
        return GPT_ACTIVATIONS[config.afn]

    @staticmethod
    def dropout_probability(config: Any) -> float:
        """The dropout on the network's output, ``resid_pdrop``."""
        return config.resid_pdrop

    def forward(self, hidden_states: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, E)``, the plain feed-forward network of :mod:`~literate_transformer.parts.feed_forward`."""
        return feed_forward(hidden_states, self.c_fc, self.c_proj, self.act, self.dropout)


class OpenAIGPTBlock(DecoderLayer):
    r"""One post-LN block: :math:`h \leftarrow \operatorname{LN}_1(h + \operatorname{Attn}(h))`, then the MLP the same way.

    Its forward is every decoder-only layer's
    (:meth:`~literate_transformer.parts.stack.DecoderLayer.forward`): the
    block names its two sub-layers and says where the norms sit.

    Args:
        config: The GPT config.
        layer_idx: The block's index.
    """

    #: The arrangement of its residual sub-layers (:mod:`~literate_transformer.core.residual`): post-LN.
    norm_first = False
    # The classes it builds (parts.stack.DecoderLayer); the MLP from (F, config).
    attention_class, mlp_class = OpenAIGPTAttention, OpenAIGPTMLP

    def __init__(self, config: Any, layer_idx: int = 0) -> None:
        super().__init__()
        self.attn = self.attention_class(config, layer_idx)
        self.ln_1 = make_norm(config.hidden_size, config.layer_norm_epsilon)
        self.mlp = self.mlp_class(self.intermediate_size(config), config)
        self.ln_2 = make_norm(config.hidden_size, config.layer_norm_epsilon)

    #: The config's field for the feed-forward network's width ``F``, where it has one (GPT's is always :math:`4E`).
    intermediate_field: str | None = None

    def intermediate_size(self, config: Any) -> int:
        """``F``: the config's :attr:`intermediate_field`, or :math:`4E` when it is ``None`` or not set."""
        size = getattr(config, self.intermediate_field) if self.intermediate_field else None
        return 4 * config.hidden_size if size is None else size

    def sublayers(self) -> tuple[Sublayer, Sublayer]:
        """Causal self-attention ``attn`` with ``ln_1``, the MLP with ``ln_2`` (each drops out its own output)."""
        return Sublayer(self.attn, self.ln_1), Sublayer(self.mlp, self.ln_2)


def check_decoder_inputs(model: OpenAIGPTModel, args: Arguments) -> None:
    """A decoder-only stack's inputs: ids of the vocabulary that fit its positions, a cache of its shape, masks."""
    config = model.config
    input_ids = check_tensor(args.input_ids, "input_ids", ndim=2, dtypes=("int",), shape=(None, None))
    past_length = check_past_key_values(
        args.past_key_values,
        num_layers=len(model.h),
        batch_size=input_ids.shape[0],
        num_heads=config.num_attention_heads,
        head_size=config.hidden_size // config.num_attention_heads,
    )
    check_token_inputs(args, config, past_length)


class OpenAIGPTModel(ConvertsFromHF, DecoderStack, nn.Module):
    """GPT's stack: ``tokens_embed`` + ``positions_embed``, the blocks ``h``; the shape of every stack of this branch.

    Its forward takes HuggingFace's ``input_ids`` and ``attention_mask``
    first; the other arguments go by name.

    Args:
        config: A ``transformers`` :class:`~transformers.OpenAIGPTConfig`.
    """

    # The config it checks (core.config.ChecksConfig): GPT's own table of activations, heads dividing n_embd.
    config_type, config_name = "openai-gpt", "OpenAIGPTConfig"
    config_heads, config_activation, config_activations = ("n_embd", "n_head"), "afn", GPT_ACTIVATIONS
    # What converting a transformers GPT reads (models.registry.ConvertsFromHF): older releases saved a constant
    # causal mask and the position index, which this stack builds per call.
    hf_name = "GPT"
    hf_dropped = (".attn.bias", ".position_ids")
    #: The block a family's stack builds, from ``(config, layer_idx)`` (a descendant names its own).
    block_class: type[nn.Module] = OpenAIGPTBlock

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = self.check_config(config)
        self.build_embeddings(config)
        self.h = nn.ModuleList(self.block_class(config, index) for index in range(config.num_hidden_layers))
        self.build_final_norm(config)

    # -- what a family builds under its own names: the embeddings, the final norm ---------------------------
    def build_embeddings(self, config: Any) -> None:
        """The tables and the dropout that :meth:`embed` reads: ``tokens_embed``, ``positions_embed``, ``drop``."""
        #: The token table (V x E).
        self.tokens_embed = nn.Embedding(config.vocab_size, config.hidden_size)
        #: The learned position table (positions x E).
        self.positions_embed = LearnedPositionalEmbedding(config.max_position_embeddings, config.hidden_size)
        self.drop = nn.Dropout(config.embd_pdrop)

    def build_final_norm(self, config: Any) -> None:
        """None: a post-LN stack's last block has normalised its output (a pre-LN family builds one here)."""

    def get_input_embeddings(self) -> nn.Embedding:
        """The token table, ``tokens_embed``, by HuggingFace's accessor (a tied head reads it)."""
        return self.tokens_embed

    # -- the four decisions a family changes ------------------------------------------------------------------
    def embed(self, input_ids: Tensor, position_ids: Tensor) -> Tensor:
        """The first block's input: what each token is plus where it is, summed (no layer norm), dropped out."""
        return self.drop(self.tokens_embed(input_ids) + self.positions_embed(position_ids))

    #: The causal mask with the padding, built once for every block
    #: (:meth:`~literate_transformer.core.masks.MaskHook.attention_masks`), listed so that GPT's page documents it.
    attention_masks = DecoderStack.attention_masks

    def layer_inputs(self, position_ids: Tensor) -> dict[str, Any]:
        """What every block reads besides its input and mask (nothing here; GPT-J's rotary angles)."""
        return {}

    def final_norm(self, hidden_states: Tensor) -> Tensor:
        """After the last block: nothing (a post-LN block's output is normalised already)."""
        return hidden_states

    # -- the forward every stack of the branch shares (parts.stack.DecoderStack.run_stack, Llama's too) -----------
    @validate_with(check_decoder_inputs)
    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        *,
        position_ids: Tensor | None = None,
        past_key_values: tuple[LayerCache, ...] | None = None,
        use_cache: bool = False,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """Contextual vectors for every position.

        Args:
            input_ids: ``(B, T)`` token ids (with a cache, only the new ones).
            attention_mask: ``(B, past + T)``, 1 for real tokens, 0 for padding.
            position_ids: ``(B, T)`` or ``(1, T)``; by default each real token's
                position counts the real tokens before it.
            past_key_values: The cache returned by the previous call.
            use_cache: Return ``past_key_values``.
            output_attentions: Return every block's ``(B, H, T, S)`` probabilities.
            output_hidden_states: Return the embeddings and every block's output
                (the last one after the final norm, where there is one).

        Returns:
            A :class:`~literate_transformer.core.outputs.ModelOutput`.

        Raises:
            ValueError: for ids outside the vocabulary, more positions than
                ``max_position_embeddings``, masks, positions or caches of the wrong shape.
            TypeError: for inputs of the wrong type.
        """
        # The blocks ``h`` over the cache (parts.stack.DecoderStack.run_stack: embeddings, mask, blocks, final norm).
        return self.run_stack(
            self.h,
            input_ids,
            attention_mask,
            position_ids,
            past_key_values,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )


class OpenAIGPTLMHeadModel(ConvertsFromHF, LanguageModelHead, GenerationMixin, nn.Module):
    """GPT with its language-model head, whose weight is the token table ``tokens_embed`` (as the config ties it).

    ``generate()`` (:class:`~literate_transformer.book.decoding.GenerationMixin`)
    continues a prompt greedily, by sampling or by beam search; the head, its
    scores and its loss are every decoder's
    (:class:`~literate_transformer.parts.heads.LanguageModelHead`).

    Args:
        config: A ``transformers`` :class:`~transformers.OpenAIGPTConfig`.

    Attributes:
        transformer: The :class:`OpenAIGPTModel` (HuggingFace's name).
        lm_head: ``E -> V`` without bias; with ``tie_word_embeddings`` (GPT's default) its weight *is*
            ``transformer.tokens_embed.weight``.
    """

    #: The stack a family's language model builds (a descendant names its own).
    model_class: type[nn.Module] = OpenAIGPTModel
    stack_name = "transformer"
    #: The head and the token table it is when the config ties them (checked when converting).
    hf_ties = (("lm_head.weight", "transformer.tokens_embed.weight"),)


register(OpenAIGPTModel, OpenAIGPTLMHeadModel)


#: The checks of a GPT config, by the name they had before they were declared (:class:`OpenAIGPTModel`).
check_openai_gpt_config = OpenAIGPTModel.check_config
