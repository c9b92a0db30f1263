r"""M2M-100: BART's encoder-decoder made pre-LN, with fixed sinusoidal positions and one table for 100 languages.

M2M-100 (Fan et al., 2021, *Beyond English-Centric Multilingual Machine
Translation*, JMLR 22) translates directly between any two of 100
languages with one model.  Its architecture is fairseq's transformer, the
family BART comes from; HuggingFace's ``modeling_m2m_100.py`` copies BART's
attention and MBart's layers.  This file subclasses BART's modules
(:mod:`~literate_transformer.models.bart`) and writes only what M2M-100
changes:

=========================================  ===========================================================
M2M-100                                    here
=========================================  ===========================================================
pre-LN layers                              ``norm_first = True`` on BART's layers: each sub-layer reads
                                           :math:`\operatorname{LN}(x)`
a layer norm after each stack,             :meth:`M2M100Stack.final_norm`; BART's stacks end with their
``layer_norm``                             last layer
no layer norm on the embeddings            :meth:`M2M100Stack.embed` sums tokens and positions only
fixed sinusoids, not a learned table       :class:`M2M100SinusoidalPositionalEmbedding` (no parameters)
positions counted from the ids             :meth:`M2M100Stack.position_ids`: a token that *is* the
                                           padding token reads the padding row, zeros
token vectors times :math:`\sqrt{E}`       ``scale_embedding=True`` (BART's default is ``False``)
no ``final_logits_bias``                   :meth:`M2M100ForConditionalGeneration.head`
ReLU                                       ``activation_function="relu"`` (BART's default is GELU)
the target language forced first           ``generate(..., forced_bos_token_id=<language id>)``
=========================================  ===========================================================

One vocabulary (128,112 entries in ``facebook/m2m100_418M``) covers the
100 languages; a language is a token of it (``__fr__``), and the tokenizer
puts the source language's token before the source.  The target language
is not read from the source: ``generate`` is *told* it, and writes it as
the first token after the start token, whatever the scores say
(HuggingFace's ``forced_bos_token_id``; the decoder then reads it like any
other token).

Sinusoids, fairseq's way
------------------------
The 2017 paper interleaves sines and cosines,
:math:`PE_{p,2i} = \sin(p / 10000^{2i/E})`,
:math:`PE_{p,2i+1} = \cos(p / 10000^{2i/E})`
(:class:`~literate_transformer.parts.positions.SinusoidalPositionalEncoding`).
fairseq (tensor2tensor's variant, HuggingFace's
``M2M100SinusoidalPositionalEmbedding``) puts all the sines first, then all
the cosines, with :math:`E/2` frequencies spread from 1 to
:math:`10000^{-1}`:

.. math::

    PE_{r} = \big[\sin(r\,\omega_0), \dots, \sin(r\,\omega_{E/2-1}),\;
    \cos(r\,\omega_0), \dots, \cos(r\,\omega_{E/2-1})\big],
    \qquad \omega_i = 10000^{-i/(E/2 - 1)},

(a zero appended when :math:`E` is odd).  :math:`r` is a *row*, not a
position: fairseq numbers the real tokens after the padding index, so the
first real token reads row ``pad_token_id + 1`` (row 2: HuggingFace sizes
its table ``max_position_embeddings + 2``), and a padding token reads row
``pad_token_id``, which is zeros.  A token counts as padding when it is the
padding token; the attention mask is not read for positions.  In a cached
decoding step the new token's row continues after all the cached positions.
HuggingFace's table grows on demand past ``max_position_embeddings``; the
package computes the rows it is asked for, and refuses inputs longer than
``max_position_embeddings``, as it does for every family with a position
table.

Tests build random M2M-100s of unusual shapes (odd ``d_model`` included)
and require their logits, encoder output and attention probabilities to
within ``1e-5`` in float32 with padded sources, and the exact token ids of
HuggingFace's ``generate()`` with a forced target language.

>>> import torch
>>> from transformers import M2M100Config
>>> config = M2M100Config(vocab_size=40, d_model=24, encoder_layers=2, decoder_layers=1, encoder_attention_heads=3,
...                       decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=40, max_position_embeddings=16)
>>> model = M2M100ForConditionalGeneration(config).eval()
>>> model.encoder.layers[0].norm_first, hasattr(model, "final_logits_bias")
(True, False)
>>> model.encoder.position_ids(torch.tensor([[7, 8, 9, 1, 1]]), None)   # pad_token_id=1: the padding reads row 1
tensor([[2, 3, 4, 1, 1]])
>>> model.generate(torch.tensor([[5, 6, 7, 2]]), max_new_tokens=3, forced_bos_token_id=30)[:, :2]
tensor([[ 2, 30]])
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from ..parts.norms import make_norm
from . import bart
from .registry import register

__all__ = [
    "M2M100SinusoidalPositionalEmbedding",
    "M2M100EncoderLayer",
    "M2M100DecoderLayer",
    "M2M100Stack",
    "M2M100Encoder",
    "M2M100Decoder",
    "M2M100Model",
    "M2M100ForConditionalGeneration",
]


class M2M100SinusoidalPositionalEmbedding(nn.Module):
    r"""fairseq's sinusoids: sines then cosines of row :math:`r` at :math:`E/2` frequencies; the padding row is zeros.

    Fixed, not learned: the module has no parameters (HuggingFace's caches
    the values in a buffer that is not saved; here they are computed for
    the rows asked for).

    Args:
        embedding_dim: ``E``.
        padding_idx: The padding token's id, whose row is zeros.
    """

    def __init__(self, embedding_dim: int, padding_idx: int) -> None:
        super().__init__()
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        half = embedding_dim // 2
        # omega_i = 10000^(-i / (E/2 - 1)), i = 0 .. E/2 - 1: from 1 down to 1/10000.
        frequencies = torch.exp(torch.arange(half).float() * -(math.log(10000.0) / (half - 1)))
        self.register_buffer("frequencies", frequencies, persistent=False)

    def forward(self, position_ids: Tensor) -> Tensor:
        """``(B, T)`` rows to ``(B, T, E)`` vectors."""
        # r * omega_i for every row and frequency.
        angles = position_ids.float()[..., None] * self.frequencies
        # All the sines, then all the cosines (and a zero feature when E is odd).
        embeddings = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)
        if self.embedding_dim % 2:
            embeddings = nn.functional.pad(embeddings, (0, 1))
        # The padding row is zeros: a padding token gets no position.
        is_padding = (position_ids == self.padding_idx)[..., None]
        embeddings = embeddings.masked_fill(is_padding, 0.0)  # (B, T, E)
        return embeddings


class M2M100EncoderLayer(bart.BartEncoderLayer):
    """BART's encoder layer, pre-LN: each sub-layer reads :math:`\\operatorname{LN}(x)` and adds to :math:`x`."""

    norm_first = True


class M2M100DecoderLayer(bart.BartDecoderLayer):
    """BART's decoder layer, pre-LN."""

    norm_first = True


class M2M100Stack(bart.BartStack):
    """What M2M-100 changes in both of BART's stacks: positions, the embeddings' sum, and a norm at the end."""

    def __init__(self, config: Any, embed_tokens: nn.Embedding) -> None:
        super().__init__(config, embed_tokens)
        # No layer norm on the embeddings; pre-LN, the stack's output is normalised once, at the end.
        del self.layernorm_embedding
        self.layer_norm = make_norm(config.d_model, bart.BART_LAYER_NORM_EPS)

    def position_embedding(self, config: Any) -> nn.Module:
        """Fixed sinusoids (:class:`M2M100SinusoidalPositionalEmbedding`), not a learned table."""
        return M2M100SinusoidalPositionalEmbedding(config.d_model, config.pad_token_id)

    def position_ids(self, input_ids: Tensor, attention_mask: Tensor | None, past_length: int = 0) -> Tensor:
        """fairseq's rows: ``pad + 1 + past + (real tokens before it)`` for a real token, ``pad`` for a padding token.

        The attention mask is not read: a token is padding when it is the padding token.
        """
        padding_idx = self.config.pad_token_id
        is_token = input_ids.ne(padding_idx).int()  # (B, T)
        # Count the real tokens up to each one, after the cached positions; padding tokens get 0 ...
        counted = (torch.cumsum(is_token, dim=1) + past_length) * is_token  # (B, T)
        # ... and the rows start after the padding index.
        return counted + padding_idx

    def embed(self, input_ids: Tensor, position_ids: Tensor) -> Tensor:
        """Token vectors (times :math:`\\sqrt{E}`) plus sinusoids, then dropout; no layer norm: ``(B, T, E)``."""
        embeddings = self.embed_tokens(input_ids) + self.embed_positions(position_ids)  # (B, T, E)
        return self.dropout(embeddings)

    def final_norm(self, hidden_states: Tensor) -> Tensor:
        """The layer norm after the last layer (a pre-LN stack's residual stream is never normalised on the way)."""
        return self.layer_norm(hidden_states)


class M2M100Encoder(M2M100Stack, bart.BartEncoder):
    """M2M-100's encoder: BART's, with :class:`M2M100Stack`'s changes and pre-LN layers."""

    layer_class, num_layers = M2M100EncoderLayer, "encoder_layers"


class M2M100Decoder(M2M100Stack, bart.BartDecoder):
    """M2M-100's decoder: BART's, with :class:`M2M100Stack`'s changes and pre-LN layers."""

    layer_class, num_layers = M2M100DecoderLayer, "decoder_layers"


class M2M100Model(bart.BartModel):
    """M2M-100's encoder and decoder around one token table, ``shared``; no language-model head.

    Args:
        config: A ``transformers`` :class:`~transformers.M2M100Config`.
    """

    config_type, config_name = "m2m_100", "M2M100Config"
    encoder_class, decoder_class = M2M100Encoder, M2M100Decoder
    # BART's dropped keys, and the sinusoid tables, which are computed, never loaded.
    hf_name = "M2M-100"
    hf_dropped = (*bart.BartModel.hf_dropped, "encoder.embed_positions.weights", "decoder.embed_positions.weights")

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """BART's, a ``d_model`` wide enough for two sinusoid frequencies, and a ``pad_token_id`` (positions are
        counted from it)."""
        super().check_own_config(config)
        if config.d_model < 4:
            raise ValueError(f"d_model must be at least 4 (two sine and two cosine frequencies), got {config.d_model}")
        if not isinstance(config.pad_token_id, int):
            raise ValueError(
                f"pad_token_id must be a token id (M2M-100 counts positions after it), got {config.pad_token_id!r}"
            )


class M2M100ForConditionalGeneration(bart.BartForConditionalGeneration):
    """M2M-100 with its language-model head, the shared table (no ``final_logits_bias``).

    :meth:`~literate_transformer.book.decoder.PreTrainedEncoderDecoderModel.generate`
    takes the target language as ``forced_bos_token_id``.

    Args:
        config: A ``transformers`` :class:`~transformers.M2M100Config`.
    """

    model_class = M2M100Model

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        # M2M-100's head adds no bias to the scores.
        del self.final_logits_bias

    def head(self, hidden_states: Tensor) -> Tensor:
        """Next-token scores ``(B, T, V)``: the decoder's states against the shared table."""
        return self.lm_head(hidden_states)


register(M2M100Model, M2M100ForConditionalGeneration)


#: The checks of an M2M-100 config, by the name they had before they were declared (:class:`M2M100Model`).
check_m2m_100_config = M2M100Model.check_config
