r"""GPT-2: GPT with the layer norms moved first, a final layer norm, and HuggingFace's argument order.

GPT-2 (Radford et al., 2019, §2.3) keeps GPT's decoder
(:mod:`~literate_transformer.models.openai_gpt`) and changes where the
layer norms sit: each sub-layer now reads a normalised copy of the residual
stream, which itself is never normalised (*pre-LN*), and one more layer norm,
``ln_f``, follows the last block:

.. math::

    h \leftarrow h + \operatorname{Attn}\big(\operatorname{LN}_1 h\big), \qquad
    h \leftarrow h + \operatorname{MLP}\big(\operatorname{LN}_2 h\big), \qquad
    \text{logits} = \operatorname{LN}_f\big(h^{(L)}\big)\, (W^{\text{tok}})^\top .

It is also the book's decoder (:mod:`~literate_transformer.book.decoder`)
without its cross-attention: token and learned position embeddings, causal
self-attention and a feed-forward network per block, a head tied to the
token table.  This file holds only what GPT-2 changes from GPT, under
HuggingFace's names (``wte``, ``wpe``, ``h.0.ln_1``, ``h.0.attn.c_attn``,
``h.0.mlp.c_fc``, ``ln_f``), so that a ``transformers`` GPT-2's weights load
by name:

=================================================  ==========================================================
GPT-2 changes                                      here
=================================================  ==========================================================
pre-LN blocks (``ln_1``, ``ln_2``)                 ``norm_first = True`` on :class:`GPT2Block`, GPT's forward
a final layer norm, ``ln_f``                       :meth:`GPT2Model.final_norm`
the tables' names, ``wte`` and ``wpe``             :meth:`GPT2Model.embed`
the feed-forward width ``n_inner``                 :class:`GPT2Block`
the activation by name, ``activation_function``    :meth:`GPT2MLP.activation_name` (``"gelu_new"`` by default)
two options for the scale of the scores            :class:`GPT2Attention`
``past_key_values`` second, as in HF               :meth:`GPT2Model.forward`
=================================================  ==========================================================

The rest is GPT's: ``Conv1D`` projections stored transposed, queries, keys
and values of all heads in one ``c_attn``, learned positions, and a head
that *is* the token table when the config ties them (GPT-2's default; "Attention
Is All You Need" §3.4: a token's score is the dot product of the last hidden
state with that token's own embedding).  Tests build random GPT-2s of
unusual shapes with ``transformers`` and require their logits, hidden
states and attention probabilities to within ``1e-5`` in float32, with
padding, and the exact token ids of HuggingFace's ``generate()``.

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
>>> prompts = torch.tensor([[0, 5, 6, 7], [8, 9, 10, 11]])      # the first prompt padded on the left
>>> mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])
>>> model(prompts, attention_mask=mask, output_attentions=True).attentions[0].shape   # (B, H, T, S)
torch.Size([2, 3, 4, 4])
>>> model.generate(prompts, attention_mask=mask, max_new_tokens=4).shape             # prompt + 4 new ids
torch.Size([2, 8])
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ..book.decoding import GenerationMixin
from ..core.outputs import LayerCache, ModelOutput
from ..core.validation import validate_with
from ..parts.norms import make_norm
from ..parts.positions import LearnedPositionalEmbedding
from .openai_gpt import (
    Conv1D,  # noqa: F401 (GPT-2's projections are GPT's Conv1D; importable from here too, as in transformers)
    OpenAIGPTAttention,
    OpenAIGPTBlock,
    OpenAIGPTLMHeadModel,
    OpenAIGPTMLP,
    OpenAIGPTModel,
    check_decoder_inputs,
)
from .registry import register

__all__ = [
    "GPT2Attention",
    "GPT2MLP",
    "GPT2Block",
    "GPT2Model",
    "GPT2LMHeadModel",
]


class GPT2Attention(OpenAIGPTAttention):
    r"""GPT's attention, with GPT-2's two options for the scale of the scores.

    Args:
        config: The GPT-2 config.
        layer_idx: The block's index (``scale_attn_by_inverse_layer_idx`` divides the scores by it + 1).
    """

    def __init__(self, config: Any, layer_idx: int = 0) -> None:
        super().__init__(config, layer_idx)
        # 1/sqrt(D), unless the config says otherwise (both options exist in GPT2Config).
        self.scale = self.head_size**-0.5 if config.scale_attn_weights else 1.0
        if config.scale_attn_by_inverse_layer_idx:
            self.scale /= layer_idx + 1


class GPT2MLP(OpenAIGPTMLP):
    """GPT's feed-forward network, its activation named by ``activation_function``."""

    @staticmethod
    def activation_name(config: Any) -> str:
        """The activation, by its ``transformers`` name (``"gelu_new"``, GPT-2's default, is GPT's ``"gelu"``)."""
        return config.activation_function


class GPT2Block(OpenAIGPTBlock):
    r"""One pre-LN block: :math:`x + \operatorname{Attn}(\operatorname{LN}_1 x)`, then :math:`x + \operatorname{MLP}(\operatorname{LN}_2 x)`.

    GPT's block and forward, with the layer norms first and the feed-forward width ``n_inner``.

    Args:
        config: The GPT-2 config.
        layer_idx: The block's index.
    """

    #: The arrangement of its residual sub-layers (:mod:`~literate_transformer.core.residual`): pre-LN.
    norm_first = True
    attention_class = GPT2Attention
    mlp_class = GPT2MLP
    intermediate_field = "n_inner"


class GPT2Model(OpenAIGPTModel):
    """GPT-2's stack: ``wte`` + ``wpe``, the blocks ``h``, and ``ln_f``; GPT's forward.

    Its forward takes HuggingFace's arguments in HuggingFace's order as far
    as the package has them (``input_ids``, ``past_key_values``,
    ``attention_mask``); what follows in HuggingFace's signature
    (``token_type_ids``) the package does not have, so the rest go by name.

    Args:
        config: A ``transformers`` :class:`~transformers.GPT2Config`.
    """

    # Its config's checks: GPT's, with the activation under GPT-2's name and no cross-attention.
    config_type, config_name, config_unsupported = "gpt2", "GPT2Config", {"add_cross_attention": False}
    config_activation, config_activations = "activation_function", None
    #: The block a family's stack builds (a descendant names its own).
    block_class: type[nn.Module] = GPT2Block
    # Older checkpoints saved the constant causal-mask buffers attn.bias and attn.masked_bias: the conversion drops
    # them (the mask is built per call).
    hf_name = "GPT-2"
    hf_dropped = (".attn.bias", ".attn.masked_bias")

    def build_embeddings(self, config: Any) -> None:
        """GPT's tables under GPT-2's names: ``wte``, ``wpe``, and ``drop``."""
        #: The token table (V x E).
        self.wte = nn.Embedding(config.vocab_size, config.hidden_size)
        #: The learned position table (positions x E).
        self.wpe = LearnedPositionalEmbedding(config.max_position_embeddings, config.hidden_size)
        self.drop = nn.Dropout(config.embd_pdrop)

    def build_final_norm(self, config: Any) -> None:
        """``ln_f``: a pre-LN stack's output has not been normalised since the embeddings."""
        self.ln_f = make_norm(config.hidden_size, config.layer_norm_epsilon)

    def get_input_embeddings(self) -> nn.Embedding:
        """The token table, ``wte``."""
        return self.wte

    def embed(self, input_ids: Tensor, position_ids: Tensor) -> Tensor:
        """The first block's input: ``wte`` + ``wpe``, summed (no layer norm), dropped out."""
        return self.drop(self.wte(input_ids) + self.wpe(position_ids))

    def final_norm(self, hidden_states: Tensor) -> Tensor:
        """``ln_f``: a pre-LN stack's residual stream is normalised once, at the end."""
        return self.ln_f(hidden_states)

    @validate_with(check_decoder_inputs)
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
        """GPT's forward (:meth:`~literate_transformer.models.openai_gpt.OpenAIGPTModel.forward`), in HuggingFace's order for GPT-2."""
        return super().forward(
            input_ids,
            attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )


class GPT2LMHeadModel(OpenAIGPTLMHeadModel):
    """GPT-2 with its language-model head, whose weight is the token table ``wte`` (as the config ties it).

    Args:
        config: A ``transformers`` :class:`~transformers.GPT2Config`.

    Attributes:
        transformer: The :class:`GPT2Model` (HuggingFace's name).
        lm_head: ``E -> V`` without bias; with ``tie_word_embeddings`` (GPT-2's default) its weight *is*
            ``transformer.wte.weight``.
    """

    #: The stack it builds.
    model_class = GPT2Model
    #: The head and the token table it is when the config ties them (checked when converting).
    hf_ties = (("lm_head.weight", "transformer.wte.weight"),)

    #: Greedy decoding, sampling or beam search (:class:`~literate_transformer.book.decoding.GenerationMixin`),
    #: listed here so that GPT-2's own page documents it.
    generate = GenerationMixin.generate


register(GPT2Model, GPT2LMHeadModel)


#: The checks of a GPT-2 config, by the name they had before they were declared (:class:`GPT2Model`).
check_gpt2_config = GPT2Model.check_config
