r"""GPT-2: the book's decoder without its encoder, pre-LN, with a final layer norm and a tied head.

A *decoder-only* transformer reads one sequence and predicts, at every
position, the token after it.  Take the decoder of
:mod:`~literate_transformer.book.decoder`, drop the cross-attention sub-layer
(there is no encoder to read), and what is left is GPT-2 (Radford et al.,
2019): token and learned position embeddings, a stack of layers of causal
self-attention and a feed-forward network, and a language-model head.

.. math::

    h^{(0)} = W^{\text{tok}}[x] + W^{\text{pos}}[p], \qquad
    h^{(\ell)} = \operatorname{Block}_\ell\big(h^{(\ell-1)}\big), \qquad
    \text{logits} = \operatorname{LN}_f\big(h^{(L)}\big)\, (W^{\text{tok}})^\top .

This file holds GPT-2's modules under HuggingFace's names (``wte``, ``wpe``,
``h.0.ln_1``, ``h.0.attn.c_attn``, ``h.0.mlp.c_fc``, ``ln_f``), so that a
``transformers`` GPT-2's weights load by name, and writes only what GPT-2
changes; the rest are the package's parts:

=============================================  ==========================================================
GPT-2                                          here
=============================================  ==========================================================
pre-LN blocks (``ln_1``, ``ln_2``)             :func:`~literate_transformer.core.residual.sublayer_input`
                                               and :func:`~literate_transformer.core.residual.add_and_norm`
                                               with ``norm_first=True``
causal self-attention only                     the causal mask of :mod:`~literate_transformer.core.masks`
a final layer norm, ``ln_f``                   a pre-LN stack's output has not been normalised since the
                                               embeddings
no layer norm, no segments on the embeddings   ``wte`` + ``wpe``, summed
learned positions, ``wpe``                     :class:`~literate_transformer.parts.positions.LearnedPositionalEmbedding`
the tanh GELU, ``"gelu_new"``                  the activation registry (:mod:`~literate_transformer.core.activations`)
projections stored transposed, ``Conv1D``      :class:`Conv1D`, below
queries, keys and values in one ``c_attn``     one ``E -> 3E`` product, split in three
the LM head *is* ``wte``                       :func:`~literate_transformer.parts.heads.tie_weights`
=============================================  ==========================================================

The tied head is the same idea as "Attention Is All You Need" §3.4 (one
matrix for the input embeddings and the pre-softmax projection): a token's
score is the dot product of the last hidden state with that token's own
embedding, and the model stores the matrix once (``lm_head.weight is
transformer.wte.weight``).  Tests build random GPT-2s of unusual shapes with
``transformers`` and require their logits, hidden states and attention
probabilities to within ``1e-5`` in float32, with padding, and the exact
token ids of HuggingFace's greedy ``generate()``.

Conv1D is a transposed Linear
-----------------------------
GPT-2's projections are ``Conv1D`` modules, from the original TensorFlow
code, where a "1-D convolution with kernel size 1" is a matrix product: the
weight is stored ``(in_features, out_features)`` and the layer computes
:math:`x W + b`, where ``nn.Linear`` stores ``(out, in)`` and computes
:math:`x W^\top + b`.  Same function, transposed storage; keeping the module
keeps the checkpoint's tensors as they are.

Decoding with a padded batch
----------------------------
Prompts are padded on the left (see
:mod:`~literate_transformer.book.generation`).  Positions count the real
tokens before each one, by the package's one rule
(:func:`~literate_transformer.parts.positions.position_ids`): a left-padded
prompt starts at position 0, as HuggingFace's ``generate()`` numbers it, and
a right-padded batch has HuggingFace's positions ``0 .. T-1``.

>>> import torch
>>> from transformers import GPT2Config
>>> config = GPT2Config(vocab_size=40, n_embd=24, n_layer=2, n_head=3, n_positions=16)
>>> model = GPT2LMHeadModel(config).eval()
>>> model.lm_head.weight is model.transformer.wte.weight
True
>>> model(torch.tensor([[5, 6, 7]]), output_attentions=True).attentions[0].shape   # (B, H, T, S)
torch.Size([1, 3, 3, 3])
>>> model.generate(torch.tensor([[5, 6, 7]]), max_new_tokens=4).shape             # prompt + 4 new ids
torch.Size([1, 7])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from ..book.generation import greedy_generate
from ..core.activations import get_activation
from ..core.masks import build_attention_mask
from ..core.outputs import LayerCache, LayerOutput, ModelOutput
from ..core.residual import add_and_norm, sublayer_input
from ..core.validation import (
    Arguments,
    check_labels,
    check_past_key_values,
    check_tensor,
    check_token_inputs,
    validate_with,
)
from ..parts.attention import Attention
from ..parts.feed_forward import feed_forward
from ..parts.heads import causal_lm_loss, tie_weights
from ..parts.norms import make_norm
from ..parts.positions import LearnedPositionalEmbedding
from ..parts.positions import position_ids as positions_of
from ..parts.stack import run_layers
from .registry import map_state_dict, register

__all__ = [
    "check_gpt2_config",
    "Conv1D",
    "GPT2Attention",
    "GPT2MLP",
    "GPT2Block",
    "GPT2Model",
    "GPT2LMHeadModel",
    "map_gpt2_state_dict",
    "gpt2_from_hf",
]

#: GPT-2 options this package does not build, with the only value it accepts.
_UNSUPPORTED = {"add_cross_attention": False}


def check_gpt2_config(config: Any) -> Any:
    """A ``transformers`` :class:`~transformers.GPT2Config`, checked once, before anything is built.

    GPT-2's fields keep their own names (``n_embd``, ``n_head``,
    ``n_positions``, ``layer_norm_epsilon``, ...), and ``transformers`` lets
    every config answer to the standard ones too (``hidden_size``,
    ``num_attention_heads``, ``max_position_embeddings``), which this file
    reads.

    Raises:
        TypeError: for a config that is not GPT-2's.
        ValueError: for an option this package does not build (cross-attention),
            or a hidden size that the heads do not divide.
    """
    if getattr(config, "model_type", None) != "gpt2":
        raise TypeError(f"config must be a transformers GPT2Config, got {type(config).__name__}")
    for name, supported in _UNSUPPORTED.items():
        if getattr(config, name, supported) != supported:
            raise ValueError(f"GPT2Config.{name}={getattr(config, name)!r} is not supported (only {supported!r})")
    if config.hidden_size % config.num_attention_heads:
        raise ValueError(f"n_embd ({config.hidden_size}) must be divisible by n_head ({config.num_attention_heads})")
    return config


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


class GPT2Attention(Attention):
    r"""Causal self-attention with one fused projection for queries, keys and values.

    ``c_attn`` maps every position to :math:`3E` features, the queries, keys
    and values of all heads side by side; ``c_proj`` is :math:`W^O`.  The
    rest (heads, cache, the kernel) is the shared
    :class:`~literate_transformer.parts.attention.Attention`.

    Args:
        config: The GPT-2 config.
        layer_idx: The block's index (GPT-2's ``scale_attn_by_inverse_layer_idx`` divides the scores by it + 1).
    """

    def __init__(self, config: Any, layer_idx: int = 0) -> None:
        head_size = config.hidden_size // config.num_attention_heads
        # 1/sqrt(D), unless the config says otherwise (both options exist in GPT2Config).
        scale = head_size**-0.5 if config.scale_attn_weights else 1.0
        if config.scale_attn_by_inverse_layer_idx:
            scale /= layer_idx + 1
        super().__init__(config, config.num_attention_heads, head_size, dropout=config.attn_pdrop, scale=scale)
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


class GPT2MLP(nn.Module):
    """The feed-forward network, ``c_fc`` (E -> F), the activation, ``c_proj`` (F -> E), dropout.

    Args:
        intermediate_size: ``F`` (``n_inner``, by default :math:`4E`).
        config: The GPT-2 config.
    """

    def __init__(self, intermediate_size: int, config: Any) -> None:
        super().__init__()
        self.c_fc = Conv1D(intermediate_size, config.hidden_size)
        self.c_proj = Conv1D(config.hidden_size, intermediate_size)
        self.act = get_activation(config.activation_function)
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, hidden_states: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, E)``, the plain feed-forward network of :mod:`~literate_transformer.parts.feed_forward`."""
        return feed_forward(hidden_states, self.c_fc, self.c_proj, self.act, self.dropout)


class GPT2Block(nn.Module):
    r"""One pre-LN block: :math:`x + \operatorname{Attn}(\operatorname{LN}_1 x)`, then :math:`x + \operatorname{MLP}(\operatorname{LN}_2 x)`.

    Args:
        config: The GPT-2 config.
        layer_idx: The block's index.
    """

    #: The arrangement of its residual sub-layers (:mod:`~literate_transformer.core.residual`): pre-LN.
    norm_first = True

    def __init__(self, config: Any, layer_idx: int = 0) -> None:
        super().__init__()
        inner_dim = config.n_inner if config.n_inner is not None else 4 * config.hidden_size
        self.ln_1 = make_norm(config.hidden_size, config.layer_norm_epsilon)
        self.attn = GPT2Attention(config, layer_idx)
        self.ln_2 = make_norm(config.hidden_size, config.layer_norm_epsilon)
        self.mlp = GPT2MLP(inner_dim, config)

    def forward(
        self,
        hidden_states: Tensor,
        attention_mask: Tensor | None = None,
        *,
        past_key_value: LayerCache | None = None,
        use_cache: bool = False,
        output_attentions: bool = False,
    ) -> LayerOutput:
        """Run the block; arguments as in :meth:`~literate_transformer.parts.attention.Attention.forward` (the cache is the layer's ``LayerCache``)."""
        # 1) Causal self-attention reads LN_1(x); its output (dropped out inside) joins the residual stream.
        attention = self.attn(
            sublayer_input(hidden_states, self.ln_1, norm_first=self.norm_first),
            attention_mask=attention_mask,
            past_key_value=None if past_key_value is None else past_key_value.self_attention,
            use_cache=use_cache,
            output_attentions=output_attentions,
        )
        hidden_states = add_and_norm(hidden_states, attention.hidden_states, self.ln_1, norm_first=self.norm_first)
        # 2) The feed-forward network reads LN_2(x), the same way.
        feed_forward_output = self.mlp(sublayer_input(hidden_states, self.ln_2, norm_first=self.norm_first))
        hidden_states = add_and_norm(hidden_states, feed_forward_output, self.ln_2, norm_first=self.norm_first)
        cache = LayerCache(attention.past_key_value) if use_cache else None
        return LayerOutput(hidden_states, attention.attention_probs, None, cache)


def _check_model_inputs(model: GPT2Model, args: Arguments) -> None:
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


class GPT2Model(nn.Module):
    """GPT-2's stack: ``wte`` + ``wpe``, the blocks ``h``, and ``ln_f``.

    Its forward takes HuggingFace's arguments in HuggingFace's order as far
    as the package has them (``input_ids``, ``past_key_values``,
    ``attention_mask``); what follows in HuggingFace's signature
    (``token_type_ids``) the package does not have, so the rest go by name.

    Args:
        config: A ``transformers`` :class:`~transformers.GPT2Config`.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = check_gpt2_config(config)
        #: The token table (V x E).
        self.wte = nn.Embedding(config.vocab_size, config.hidden_size)
        #: The learned position table (positions x E).
        self.wpe = LearnedPositionalEmbedding(config.max_position_embeddings, config.hidden_size)
        self.drop = nn.Dropout(config.embd_pdrop)
        self.h = nn.ModuleList(GPT2Block(config, layer_idx=index) for index in range(config.num_hidden_layers))
        #: The final layer norm (a pre-LN stack's output has not been normalised since the embeddings).
        self.ln_f = make_norm(config.hidden_size, config.layer_norm_epsilon)

    @validate_with(_check_model_inputs)
    def forward(
        self,
        input_ids: Tensor,
        past_key_values: tuple[LayerCache, ...] | None = None,
        attention_mask: Tensor | None = None,
        *,
        position_ids: Tensor | None = None,
        use_cache: bool = False,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """Contextual vectors for every position.

        Args:
            input_ids: ``(B, T)`` token ids (with a cache, only the new ones).
            past_key_values: The cache returned by the previous call.
            attention_mask: ``(B, past + T)``, 1 for real tokens, 0 for padding.
            position_ids: ``(B, T)`` or ``(1, T)``; by default each real token's
                position counts the real tokens before it.
            use_cache: Return ``past_key_values``.
            output_attentions: Return every block's ``(B, H, T, S)`` probabilities.
            output_hidden_states: Return the embeddings and every block's output
                (the last one after ``ln_f``, as HuggingFace reports it).

        Returns:
            A :class:`~literate_transformer.core.outputs.ModelOutput`.

        Raises:
            ValueError: for ids outside the vocabulary, more positions than
                ``n_positions``, masks, positions or caches of the wrong shape.
            TypeError: for inputs of the wrong type.
        """
        past_length = 0 if past_key_values is None else past_key_values[0].self_attention[0].shape[2]
        length = input_ids.shape[1]
        if position_ids is None:
            position_ids = positions_of(attention_mask, length, past_length, device=input_ids.device)
        # What each token is, plus where it is; no layer norm on the sum.
        embedding_output = self.drop(self.wte(input_ids) + self.wpe(position_ids))  # (B, T, E)
        # The causal mask with the padding, built once, in the additive form every block adds to its scores.
        mask = build_attention_mask(
            attention_mask,
            query_length=length,
            causal=True,
            past_length=past_length,
            device=input_ids.device,
            dtype=embedding_output.dtype,
        )
        hidden_states, layer_outputs = run_layers(
            self.h,
            embedding_output,
            mask,
            past_key_values=past_key_values,
            use_cache=use_cache,
            output_attentions=output_attentions,
        )
        # The final layer norm.
        hidden_states = self.ln_f(hidden_states)
        return ModelOutput.from_layers(embedding_output, layer_outputs, hidden_states, output_hidden_states)


def _check_lm_inputs(model: GPT2LMHeadModel, args: Arguments) -> None:
    _check_model_inputs(model.transformer, args)
    if args.labels is not None:
        check_labels(args.labels, args.input_ids.shape, model.config.vocab_size)


class GPT2LMHeadModel(nn.Module):
    """GPT-2 with its language-model head, whose weight is the token table ``wte``.

    Args:
        config: A ``transformers`` :class:`~transformers.GPT2Config`.

    Attributes:
        transformer: The :class:`GPT2Model` (HuggingFace's name).
        lm_head: ``E -> V`` without bias; its weight *is* ``transformer.wte.weight``.
    """

    #: ``False``, a decoder-only model that continues its input (what generation asks a model).
    is_encoder_decoder = False

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.transformer = GPT2Model(config)
        self.config = self.transformer.config
        # Tied: the next token's scores are dot products with the token embeddings themselves.
        self.lm_head = tie_weights(nn.Linear(config.hidden_size, config.vocab_size, bias=False), self.transformer.wte)

    @validate_with(_check_lm_inputs)
    def forward(
        self,
        input_ids: Tensor,
        past_key_values: tuple[LayerCache, ...] | None = None,
        attention_mask: Tensor | None = None,
        *,
        labels: Tensor | None = None,
        position_ids: Tensor | None = None,
        use_cache: bool = False,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """Next-token scores for every position; the other arguments as in :meth:`GPT2Model.forward`.

        Args:
            labels: ``(B, T)`` token ids to score the next-token predictions
                against (usually ``input_ids``, ``-100`` on padding), as in
                :meth:`transformers.GPT2LMHeadModel.forward`.

        Returns:
            A :class:`~literate_transformer.core.outputs.ModelOutput` with
            ``logits`` ``(B, T, V)``, and ``loss`` with ``labels``
            (:func:`~literate_transformer.parts.heads.causal_lm_loss`).
        """
        output = self.transformer(
            input_ids,
            past_key_values,
            attention_mask,
            position_ids=position_ids,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        # Scores over the vocabulary: the last hidden state against every token's embedding.
        output.logits = self.lm_head(output.last_hidden_state)
        if labels is not None:
            # Each position's scores against the token after it.
            output.loss = causal_lm_loss(output.logits, labels)
        return output

    def generate(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, max_new_tokens: int = 20, use_cache: bool = True
    ) -> Tensor:
        """Greedy decoding with the key/value cache, as ``generate(do_sample=False, num_beams=1)``.

        Args:
            input_ids: The prompts ``(B, P)``, padded on the left.
            attention_mask: ``(B, P)``, 0 on the padding.
            max_new_tokens: How many tokens to write at most; a sequence stops
                at ``config.eos_token_id`` (and is padded after it).
            use_cache: Reuse the keys and values of earlier positions.

        Returns:
            The prompts followed by the new token ids, ``(B, P + N)``.
        """
        eos_token_id = self.config.eos_token_id
        if not isinstance(eos_token_id, int) or not 0 <= eos_token_id < self.config.vocab_size:
            # GPT2Config's default 50256 with a smaller vocabulary can never be written: never stop early.
            eos_token_id = None
        return greedy_generate(
            self,
            input_ids,
            max_new_tokens,
            eos_token_id=eos_token_id,
            attention_mask=attention_mask,
            use_cache=use_cache,
        ).sequences


# ---------------------------------------------------------------------------
# GPT-2's key map, and from_hf
# ---------------------------------------------------------------------------
#: Buffers of older GPT-2 checkpoints: a constant causal mask and the value that filled it, built per call here.
GPT2_DROPPED_BUFFERS = (".attn.bias", ".attn.masked_bias")


def map_gpt2_state_dict(state_dict: Mapping[str, Tensor], expected: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A GPT-2 checkpoint's tensors for this file's modules: they have the same names, but for two things.

    * Older checkpoints saved the constant causal-mask buffers ``attn.bias``
      and ``attn.masked_bias``: dropped (the mask is built per call).
    * ``lm_head.weight`` is ``wte.weight`` (tied): a checkpoint may list it,
      and it must then hold the same values.

    Raises:
        ValueError: listing every missing, unexpected and mis-shaped key, or
            naming an ``lm_head.weight`` that is not ``wte``'s (an untied head).
    """

    def key_map(key: str) -> str | None:
        return None if key.endswith(GPT2_DROPPED_BUFFERS) else key

    mapped = map_state_dict(state_dict, expected, key_map, "GPT-2")
    if "lm_head.weight" in state_dict and not torch.equal(
        state_dict["lm_head.weight"], mapped["transformer.wte.weight"]
    ):
        raise ValueError("lm_head.weight differs from wte.weight: this GPT-2's head is not tied, which GPT-2's is")
    return mapped


@register("GPT2Model", "GPT2LMHeadModel")
def gpt2_from_hf(hf_model: nn.Module) -> GPT2Model | GPT2LMHeadModel:
    """The package's GPT-2 with the config and weights of a ``transformers`` ``GPT2Model`` or ``GPT2LMHeadModel``.

    Returns:
        A :class:`GPT2LMHeadModel` for a model with a head, else a :class:`GPT2Model`, in evaluation mode.
    """
    cls = GPT2LMHeadModel if hasattr(hf_model, "lm_head") else GPT2Model
    model = cls(hf_model.config)
    model.load_state_dict(map_gpt2_state_dict(hf_model.state_dict(), model.state_dict()), strict=True)
    return model.eval()
