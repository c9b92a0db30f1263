r"""GPT-2: the book's decoder without its encoder, pre-LN, with a final layer norm and a tied head.

A *decoder-only* transformer reads one sequence and predicts, at every
position, the token after it.  Take the decoder of
:mod:`~literate_transformer.book.decoder`, drop the cross-attention sub-layer
(there is no encoder to read), and what is left is GPT-2 (Radford et al.,
2019): token and learned position embeddings, a stack of layers of causal
self-attention and a feed-forward network, and a language-model head.

.. math::

    h^{(0)} = W^{\text{tok}}[x] + W^{\text{pos}}[p], \qquad
    h^{(\ell)} = \operatorname{Layer}_\ell\big(h^{(\ell-1)}\big), \qquad
    \text{logits} = \operatorname{LN}_f\big(h^{(L)}\big)\, (W^{\text{tok}})^\top .

What GPT-2 chooses, each a switch of the shared parts rather than new code:

=============================================  ==========================================================
GPT-2                                          here
=============================================  ==========================================================
pre-LN layers (``ln_1``, ``ln_2``)             ``norm_first=True`` (:mod:`~literate_transformer.core.residual`)
causal self-attention only                     :class:`~literate_transformer.book.decoder.TransformerDecoder`
                                               with ``add_cross_attention=False``
a final layer norm, ``ln_f``                   ``final_layer_norm=True``: a pre-LN stack's output has not
                                               been normalised since the embeddings
no layer norm, no segments on the embeddings   ``embedding_layer_norm=False``, ``type_vocab_size=0``
learned positions, ``wpe``                     the book's ``position_embeddings``
the tanh GELU, ``"gelu_new"``                  the activation registry (:mod:`~literate_transformer.core.activations`)
the LM head *is* ``wte``                       ``lm_head.weight`` and the token embeddings are one tensor
=============================================  ==========================================================

The tied head is the same idea as "Attention Is All You Need" §3.4 (one
matrix for the input embeddings and the pre-softmax projection): a token's
score is the dot product of the last hidden state with that token's own
embedding.  GPT-2's checkpoint stores the matrix once (``wte``); the
package's model holds it once too (``lm_head.weight is
transformer.embeddings.token_embeddings.weight``).

HuggingFace's GPT-2 stores its projections as ``Conv1D`` modules, whose
weights are the *transpose* of ``nn.Linear``'s, and fuses the query, key
and value projections of all heads into one ``c_attn``;
:func:`~literate_transformer.interop.map_gpt2_state_dict` explains and
undoes both.  Tests load random GPT-2 weights of unusual shapes through it
and require HuggingFace's logits, hidden states and attention probabilities
to within ``1e-5`` in float32, with padding, and the exact token ids of
HuggingFace's greedy ``generate()``.

Decoding with a padded batch
----------------------------
Prompts are padded on the left (see
:mod:`~literate_transformer.book.generation`), which HuggingFace's GPT-2
does not do for you either: its ``forward`` numbers positions ``0 .. T-1``
whatever the mask says, and ``generate()`` passes ``position_ids`` counted
over the real tokens.  This model does the same: ``forward`` takes
HuggingFace's ``position_ids``, and :meth:`GPT2LMHeadModel.generate` passes them.

>>> import torch
>>> from transformers import GPT2Config
>>> config = gpt2_config(GPT2Config(vocab_size=40, n_embd=24, n_layer=2, n_head=3, n_positions=16))
>>> model = GPT2LMHeadModel(config).eval()
>>> model.lm_head.weight is model.transformer.embeddings.token_embeddings.weight
True
>>> model(torch.tensor([[5, 6, 7]]), output_attentions=True).attentions[0].shape   # (B, H, T, S)
torch.Size([1, 3, 3, 3])
>>> model.generate(torch.tensor([[5, 6, 7]]), max_new_tokens=4).shape             # prompt + 4 new ids
torch.Size([1, 7])
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ..book.decoder import TransformerDecoder
from ..book.generation import greedy_generate
from ..core.config import TransformerConfig, as_config, converted_fields
from ..core.outputs import LayerCache, ModelOutput

__all__ = ["gpt2_config", "GPT2Model", "GPT2LMHeadModel"]

#: GPT-2 options this package does not implement, with the only value it accepts.
_UNSUPPORTED = {"scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "add_cross_attention": False}


def gpt2_config(hf_config: Any) -> TransformerConfig:
    """The package's config for a :class:`transformers.GPT2Config`: GPT-2's names translated.

    ====================================  ===============================================
    ``GPT2Config``                        :class:`~literate_transformer.core.config.TransformerConfig`
    ====================================  ===============================================
    ``n_embd``                            ``hidden_size``
    ``n_layer``, ``n_head``               ``num_hidden_layers``, ``num_attention_heads``
    ``n_inner`` (``None``: 4 ``n_embd``)  ``intermediate_size``
    ``activation_function``               ``hidden_act``
    ``n_positions``                       ``max_position_embeddings``
    ``layer_norm_epsilon``                ``layer_norm_eps``
    ``resid_pdrop``, ``attn_pdrop``       ``hidden_dropout_prob``, ``attention_probs_dropout_prob``
    ====================================  ===============================================

    plus what GPT-2 does not have: segment embeddings (``type_vocab_size=0``)
    and an embedding layer norm (``embedding_layer_norm=False``).  GPT-2's
    separate embedding dropout ``embd_pdrop`` (equal to ``resid_pdrop`` in
    every released model) is kept in ``extra``; the embeddings here drop out
    with ``hidden_dropout_prob``, which matters in training only.  A special
    token id outside the vocabulary (``GPT2Config``'s default 50256 with a
    smaller ``vocab_size``) can never be read or written, so it becomes
    ``None``: generation then never stops early, as HuggingFace's does not.
    ``reorder_and_upcast_attn`` (scores computed in float32 under mixed
    precision) is accepted and changes nothing in float32.

    Args:
        hf_config: A ``transformers`` GPT-2 config.

    Returns:
        A validated :class:`~literate_transformer.core.config.TransformerConfig`.

    Raises:
        TypeError: for a config that is not GPT-2's.
        ValueError: for GPT-2 options this package does not implement
            (unscaled attention, scaling by the layer index, cross-attention).
    """
    if getattr(hf_config, "model_type", None) != "gpt2":
        raise TypeError(f"hf_config must be a transformers GPT2Config, got {type(hf_config).__name__}")
    for name, supported in _UNSUPPORTED.items():
        if getattr(hf_config, name, supported) != supported:
            raise ValueError(f"GPT2Config.{name}={getattr(hf_config, name)!r} is not supported (only {supported!r})")
    return TransformerConfig(
        **converted_fields(hf_config, "embd_pdrop"),
        num_hidden_layers=hf_config.n_layer,
        num_attention_heads=hf_config.n_head,
        intermediate_size=hf_config.n_inner if hf_config.n_inner is not None else 4 * hf_config.n_embd,
        hidden_dropout_prob=hf_config.resid_pdrop,
        attention_probs_dropout_prob=hf_config.attn_pdrop,
        initializer_range=hf_config.initializer_range,
        layer_norm_eps=hf_config.layer_norm_epsilon,
        embedding_layer_norm=False,
    )


def _as_gpt2_config(config: Any) -> TransformerConfig:
    return gpt2_config(config) if getattr(config, "model_type", None) == "gpt2" else as_config(config)


class GPT2Model(TransformerDecoder):
    """GPT-2's stack: the book's decoder, pre-LN, without cross-attention, with a final layer norm.

    Its modules (``embeddings``, ``layers``, ``final_layer_norm``) are the
    book decoder's, and so is its forward
    (:meth:`~literate_transformer.book.decoder.TransformerDecoder.forward`),
    called with HuggingFace's argument names: ``model(input_ids,
    attention_mask=mask, past_key_values=cache, use_cache=True)`` as with
    :class:`transformers.GPT2Model`.  Names, not positions: after
    ``input_ids``, HuggingFace's positions hold arguments this package does
    not have (``token_type_ids`` comes fourth), so only a keyword means the
    same thing in both.

    Args:
        config: A :class:`transformers.GPT2Config` (converted by
            :func:`gpt2_config`) or a
            :class:`~literate_transformer.core.config.TransformerConfig`.
    """

    def __init__(self, config: Any) -> None:
        super().__init__(_as_gpt2_config(config), norm_first=True, add_cross_attention=False, final_layer_norm=True)


class GPT2LMHeadModel(nn.Module):
    """GPT-2 with its language-model head, whose weight is the token-embedding table.

    Args:
        config: A :class:`transformers.GPT2Config` or a
            :class:`~literate_transformer.core.config.TransformerConfig`.

    Attributes:
        transformer: The :class:`GPT2Model` (HuggingFace's name).
        lm_head: ``E -> V`` without bias; its weight *is*
            ``transformer.embeddings.token_embeddings.weight``.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.transformer = GPT2Model(config)
        self.config = self.transformer.config
        self.lm_head = nn.Linear(self.config.hidden_size, self.config.vocab_size, bias=False)
        # Tied: the scores of the next token are dot products with the token embeddings themselves.
        self.lm_head.weight = self.transformer.embeddings.token_embeddings.weight

    def forward(
        self,
        input_ids: Tensor,
        *,
        past_key_values: tuple[LayerCache, ...] | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        use_cache: bool = False,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """Next-token scores for every position, with :meth:`transformers.GPT2LMHeadModel.forward`'s argument names.

        Args:
            input_ids: ``(B, T)`` token ids (with a cache, only the new ones).
            past_key_values: The cache returned by the previous call.
            attention_mask: ``(B, past + T)``, 1 for real tokens, 0 for padding.
            position_ids: ``(B, T)`` or ``(1, T)``; by default ``past .. past + T - 1``.
            use_cache: Return ``past_key_values``.
            output_attentions: Return every layer's ``(B, H, T, S)`` attention probabilities.
            output_hidden_states: Return the embeddings and every layer's output
                (the last one after ``final_layer_norm``, as HuggingFace reports it).

        Returns:
            A :class:`~literate_transformer.core.outputs.ModelOutput` with
            ``logits`` ``(B, T, V)``.

        Raises:
            ValueError: for ids outside the vocabulary, more positions than
                ``max_position_embeddings``, masks or positions of the wrong shape.
            TypeError: for inputs of the wrong type, or arguments after
                ``input_ids`` given by position.
        """
        output = self.transformer(
            input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        # Scores over the vocabulary: the last hidden state against every token's embedding.
        output.logits = self.lm_head(output.last_hidden_state)
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

        Raises:
            ValueError: if ``max_new_tokens`` is not positive or the prompt
                and the new tokens need more than ``max_position_embeddings``
                positions, or the inputs are out of range or misshaped.
        """
        eos_token_id = self.config.eos_token_id
        return greedy_generate(
            self,
            input_ids,
            max_new_tokens,
            eos_token_id=eos_token_id,
            attention_mask=attention_mask,
            use_cache=use_cache,
        ).sequences
