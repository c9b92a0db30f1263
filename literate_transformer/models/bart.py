r"""BART: the 2017 encoder-decoder, post-LN, with one embedding table and BART's embeddings.

BART (Lewis et al., 2020) is a denoising autoencoder: its encoder reads a
corrupted text in both directions, its decoder writes the original text
left to right.  The architecture is the transformer of "Attention Is All You
Need" (:class:`~literate_transformer.book.decoder.EncoderDecoderTransformer`)
with a handful of choices, each a switch of the shared parts:

============================================  =========================================================
BART                                          here
============================================  =========================================================
post-LN layers                                ``norm_first=False`` (:mod:`~literate_transformer.core.residual`)
one table, ``shared``, for every token        ``tie_word_embeddings=True``: the decoder embeds with the
                                              encoder's ``token_embeddings``, and ``lm_head.weight`` is
                                              its weight
``final_logits_bias``                         ``lm_head.bias``, kept at its loaded value (HuggingFace keeps
                                              it in a buffer, which training never changes; here the
                                              parameter is frozen)
``layernorm_embedding``                       ``embedding_layer_norm=True``, as BERT's embeddings
learned positions, offset by 2                ``position_offset=2``: position :math:`p` is row :math:`p + 2`
                                              of ``embed_positions`` (fairseq numbered positions after the
                                              padding index; the first two rows are never read)
``scale_embedding``                           ``scale_embedding``: token vectors times :math:`\sqrt{E}`
                                              (the 2017 paper's rule; an option in BART's configs)
no segment embeddings                         ``type_vocab_size=0``
the exact GELU                                ``hidden_act="gelu"``
targets start at ``decoder_start_token_id``   the config's ``decoder_start_token_id`` (BART's is its
                                              ``eos_token_id``, 2)
============================================  =========================================================

BART's configs allow encoder and decoder of different depths, head counts
and feed-forward widths (``encoder_layers``, ``decoder_layers``, ...):
:func:`bart_config` returns one config for each stack.  The key map,
:func:`~literate_transformer.interop.map_bart_state_dict`, splits the
fused ``q_proj``/``k_proj``/``v_proj`` into the book's heads and sends
every other tensor to its place.  Tests load random BART weights of unusual
shapes through it and require HuggingFace's logits, encoder output and
decoder self- and cross-attention probabilities to within ``1e-5`` in
float32, with padded sources, and the exact token ids of HuggingFace's
greedy ``generate()``.

>>> import torch
>>> from transformers import BartConfig
>>> hf_config = BartConfig(vocab_size=40, d_model=24, encoder_layers=2, decoder_layers=1,
...                        encoder_attention_heads=3, decoder_attention_heads=2,
...                        encoder_ffn_dim=32, decoder_ffn_dim=40, max_position_embeddings=16)
>>> model = BartForConditionalGeneration(hf_config).eval()
>>> len(model.encoder.layers), len(model.decoder.layers)
(2, 1)
>>> model.lm_head.weight is model.decoder.embeddings.token_embeddings.weight
True
>>> output = model(torch.tensor([[5, 6, 7, 2]]), decoder_input_ids=torch.tensor([[2, 5]]), output_attentions=True)
>>> output.logits.shape, output.cross_attentions[0].shape   # (B, T, V), (B, H, T, S)
(torch.Size([1, 2, 40]), torch.Size([1, 2, 2, 4]))
>>> model.generate(torch.tensor([[5, 6, 7, 2]]), max_new_tokens=3)[:, 0]   # every target starts at token 2
tensor([2])
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..book.decoder import EncoderDecoderTransformer
from ..book.generation import greedy_generate
from ..core.config import TransformerConfig, as_config, converted_fields
from ..core.outputs import Seq2SeqOutput

__all__ = ["bart_config", "shift_tokens_right", "BartModel", "BartForConditionalGeneration"]

#: BART's learned position table has two rows before position 0.
BART_POSITION_OFFSET = 2
#: The epsilon of every layer norm of HuggingFace's BART (``nn.LayerNorm``'s default; not a config field).
BART_LAYER_NORM_EPS = 1e-5


def bart_config(hf_config: Any) -> tuple[TransformerConfig, TransformerConfig]:
    """The package's configs, encoder's and decoder's, for a :class:`transformers.BartConfig`.

    ====================================================  ===========================================
    ``BartConfig``                                        :class:`~literate_transformer.core.config.TransformerConfig`
    ====================================================  ===========================================
    ``d_model``                                           ``hidden_size``
    ``encoder_layers`` / ``decoder_layers``               ``num_hidden_layers`` of each config
    ``encoder_attention_heads`` / ``decoder_...``         ``num_attention_heads`` of each config
    ``encoder_ffn_dim`` / ``decoder_ffn_dim``             ``intermediate_size`` of each config
    ``activation_function``                               ``hidden_act``
    ``dropout``, ``attention_dropout``                    ``hidden_dropout_prob``, ``attention_probs_dropout_prob``
    ``init_std``                                          ``initializer_range``
    ``max_position_embeddings``, ``scale_embedding``      the same names
    ====================================================  ===========================================

    plus BART's fixed choices: ``position_offset=2``, ``type_vocab_size=0``
    and layer norms with epsilon ``1e-5``.  Three training-time options have
    no counterpart here and are kept in ``extra``: ``activation_dropout``
    (dropout inside the feed-forward network) and the two LayerDrop rates;
    they change nothing in evaluation mode.

    Args:
        hf_config: A ``transformers`` BART config.

    Returns:
        ``(encoder_config, decoder_config)``.

    Raises:
        TypeError: for a config that is not BART's.
    """
    if getattr(hf_config, "model_type", None) != "bart":
        raise TypeError(f"hf_config must be a transformers BartConfig, got {type(hf_config).__name__}")
    shared = dict(
        converted_fields(hf_config, "activation_dropout", "encoder_layerdrop", "decoder_layerdrop"),
        hidden_dropout_prob=hf_config.dropout,
        attention_probs_dropout_prob=hf_config.attention_dropout,
        initializer_range=hf_config.init_std,
        layer_norm_eps=BART_LAYER_NORM_EPS,
        position_offset=BART_POSITION_OFFSET,
        scale_embedding=bool(hf_config.scale_embedding),
        decoder_start_token_id=hf_config.decoder_start_token_id,
    )
    encoder = TransformerConfig(
        **shared,
        num_hidden_layers=hf_config.encoder_layers,
        num_attention_heads=hf_config.encoder_attention_heads,
        intermediate_size=hf_config.encoder_ffn_dim,
    )
    decoder = TransformerConfig(
        **shared,
        num_hidden_layers=hf_config.decoder_layers,
        num_attention_heads=hf_config.decoder_attention_heads,
        intermediate_size=hf_config.decoder_ffn_dim,
    )
    return encoder, decoder


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


def _as_bart_configs(config: Any, decoder_config: Any) -> tuple[TransformerConfig, TransformerConfig]:
    if getattr(config, "model_type", None) == "bart":
        if decoder_config is not None:
            raise ValueError("decoder_config must be None with a BartConfig, which describes both stacks")
        return bart_config(config)
    config = as_config(config)
    return config, config if decoder_config is None else as_config(decoder_config)


class BartModel(EncoderDecoderTransformer):
    """BART's encoder and decoder, without the LM head: the book's encoder-decoder, post-LN, one embedding table.

    Its modules are those of
    :class:`~literate_transformer.book.decoder.EncoderDecoderTransformer`
    (``encoder``, ``decoder``); only the argument order of :meth:`forward`
    is HuggingFace's.

    Args:
        config: A :class:`transformers.BartConfig` (converted by
            :func:`bart_config`) or the encoder's
            :class:`~literate_transformer.core.config.TransformerConfig`.
        decoder_config: With a ``TransformerConfig``, the decoder's, when it
            differs (``None``: the same).
    """

    #: Whether the model has its language-model head (``BartModel`` has none).
    has_lm_head = False

    def __init__(self, config: Any, decoder_config: Any = None) -> None:
        encoder_config, decoder_config = _as_bart_configs(config, decoder_config)
        super().__init__(
            encoder_config,
            norm_first=False,
            decoder_config=decoder_config,
            tie_word_embeddings=True,
            add_lm_head=self.has_lm_head,
        )

    def forward(  # type: ignore[override]
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        decoder_input_ids: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
        output_attentions: bool = False,
    ) -> Seq2SeqOutput:
        """Encode the source, decode the target, with the arguments of :meth:`transformers.BartModel.forward`.

        Args:
            input_ids: Source ids ``(B, S)``.
            attention_mask: The source's ``(B, S)`` padding mask.
            decoder_input_ids: Target ids ``(B, T)``, starting with
                ``decoder_start_token_id``; ``None``: ``input_ids`` shifted
                one place right (:func:`shift_tokens_right`), as HuggingFace's
                ``BartModel`` does.
            decoder_attention_mask: The target's ``(B, T)`` padding mask.
            output_attentions: Also return ``encoder_attentions``,
                ``decoder_attentions`` and ``cross_attentions``.

        Returns:
            A :class:`~literate_transformer.core.outputs.Seq2SeqOutput`
            (``logits`` is ``None`` in :class:`BartModel`).

        Raises:
            ValueError: for ids out of range or too long, masks shaped unlike
                their ids, or source and target batches of different sizes.
            TypeError: for inputs of the wrong type.
        """
        if decoder_input_ids is None and isinstance(input_ids, Tensor) and input_ids.dim() == 2:
            start = self.config.decoder_start_token_id
            if start is None:
                raise ValueError("decoder_input_ids is None and config.decoder_start_token_id is not set")
            decoder_input_ids = shift_tokens_right(input_ids, self.config.pad_token_id, start)
        return super().forward(input_ids, decoder_input_ids, attention_mask, decoder_attention_mask, output_attentions)


class BartForConditionalGeneration(BartModel):
    """BART with its language-model head: the shared embedding table, and ``final_logits_bias`` as its bias.

    Attributes:
        lm_head: ``E -> V``; its weight *is* the shared token-embedding
            table, its bias HuggingFace's ``final_logits_bias`` (zero at
            initialisation and not trained, as there).
    """

    has_lm_head = True

    def __init__(self, config: Any, decoder_config: Any = None) -> None:
        super().__init__(config, decoder_config)
        # HuggingFace's final_logits_bias is a buffer: zeros, and no optimiser ever changes it.
        torch.nn.init.zeros_(self.lm_head.bias)
        self.lm_head.bias.requires_grad_(False)

    def generate(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, max_new_tokens: int = 20, use_cache: bool = True
    ) -> Tensor:
        """Greedy decoding with the key/value cache, as ``generate(do_sample=False, num_beams=1)``.

        Args:
            input_ids: Source ids ``(B, S)``.
            attention_mask: The source's ``(B, S)`` padding mask.
            max_new_tokens: How many tokens to write at most; a target stops
                at ``config.eos_token_id`` (and is padded after it).
            use_cache: Reuse the keys and values of earlier positions.

        Returns:
            ``(B, 1 + N)``: ``decoder_start_token_id``, then the new token ids.

        Raises:
            ValueError: if ``max_new_tokens`` is not positive or runs past
                ``max_position_embeddings``, the inputs are out of range or
                misshaped, or the config has no ``decoder_start_token_id``.
        """
        return greedy_generate(
            self,
            input_ids,
            max_new_tokens,
            bos_token_id=self.config.decoder_start_token_id,
            eos_token_id=self.config.eos_token_id,
            attention_mask=attention_mask,
            use_cache=use_cache,
        ).sequences
