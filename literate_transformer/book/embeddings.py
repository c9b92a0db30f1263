r"""Embeddings: from token ids to vectors that know where they are.

Attention by itself is blind to order: permute the tokens of a sentence and
every output is permuted the same way, nothing else changes.  So before the
first layer, each token id becomes a vector that encodes both *what* the
token is and *where* it sits.  BERT adds three learned vectors and
normalises the sum:

.. math::

    x_t = \operatorname{LayerNorm}\big(W^{\text{tok}}[\text{id}_t]
    + W^{\text{pos}}[t] + W^{\text{type}}[\text{segment}_t]\big),

then applies dropout.  :math:`W^{\text{tok}}` has one row per vocabulary entry
(``vocab_size`` rows), :math:`W^{\text{pos}}` one row per position up to
``max_position_embeddings`` (positions are *learned*, like any other weight),
and :math:`W^{\text{type}}` one row per segment: BERT reads sentence pairs
(question and passage, premise and hypothesis) and marks the tokens of the
first sentence with type 0 and those of the second with type 1.

The 2017 paper instead used fixed sinusoids,

.. math::

    PE_{(p,\,2i)} = \sin\!\left(p / 10000^{2i/E}\right), \qquad
    PE_{(p,\,2i+1)} = \cos\!\left(p / 10000^{2i/E}\right),

one frequency per pair of features, so that the encoding of position
:math:`p + k` is a linear function of that of :math:`p`;
:class:`SinusoidalPositionalEncoding` computes them.

How this maps to the book and to HuggingFace
--------------------------------------------
* The book's ``Embeddings`` has ``token_embeddings``,
  ``position_embeddings``, ``layer_norm`` and ``dropout``; :class:`Embeddings`
  keeps them and adds ``token_type_embeddings``, which BERT has and the book
  leaves out.
* HuggingFace's ``BertEmbeddings`` is the same computation with the names
  ``word_embeddings``, ``position_embeddings``, ``token_type_embeddings``,
  ``LayerNorm`` and ``dropout`` (a test loads its weights into ours and gets
  the same output).
* With a key/value cache the decoder embeds one new token at a time;
  ``past_length`` tells :meth:`Embeddings.forward` at which position it sits.

What the source notebooks got wrong
-----------------------------------
* ``nn.Dropout()`` without an argument drops with probability **0.5**, not
  BERT's 0.1: in training mode half of every embedding vector was zeroed.
  The probability here is ``config.hidden_dropout_prob``.
* The position ids were built with ``torch.arange(seq_length)``, which lives
  on the CPU: with the model on a GPU the lookup fails.  They are built on
  the device of ``input_ids`` here.
* There were no token-type (segment) embeddings, so a sentence pair could not
  be represented the way BERT was trained to see it.

>>> import torch
>>> from literate_transformer import TransformerConfig
>>> config = TransformerConfig(vocab_size=50, hidden_size=24, num_attention_heads=4, max_position_embeddings=16)
>>> embeddings = Embeddings(config)
>>> embeddings.dropout.p                                     # config.hidden_dropout_prob, not 0.5
0.1
>>> embeddings(torch.tensor([[2, 7, 11], [3, 5, 0]])).shape   # (B, T, E)
torch.Size([2, 3, 24])
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from ..core.config import as_config
from ..core.validation import (
    check_hidden_states,
    check_input_ids,
    check_positive_int,
    check_token_type_ids,
    validate_with,
)

__all__ = ["Embeddings", "SinusoidalPositionalEncoding"]


def _check_embeddings_inputs(
    embeddings: Embeddings, input_ids: object, token_type_ids: object = None, past_length: object = 0
) -> None:
    past_length = check_positive_int(past_length, "past_length", minimum=0)
    config = embeddings.config
    input_ids = check_input_ids(input_ids, config.vocab_size, config.max_position_embeddings, past_length=past_length)
    if token_type_ids is not None:
        check_token_type_ids(token_type_ids, input_ids.shape, config.type_vocab_size)


class Embeddings(nn.Module):
    """Token, position and token-type embeddings, summed, normalised and dropped out.

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            ``transformers`` config; uses ``vocab_size``, ``hidden_size``,
            ``max_position_embeddings``, ``type_vocab_size``,
            ``pad_token_id``, ``layer_norm_eps`` and ``hidden_dropout_prob``.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        #: One learned vector per vocabulary entry (V rows); the padding row
        #: starts at zero and gets no gradient, as in HuggingFace's BERT.
        self.token_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        #: One learned vector per position, up to ``max_position_embeddings``.
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        #: One learned vector per segment (sentence A / sentence B).
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        #: Layer norm over the features of the sum.
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        #: Dropout with ``hidden_dropout_prob`` (``nn.Dropout()`` alone would drop half).
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    @validate_with(_check_embeddings_inputs)
    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None, past_length: int = 0) -> Tensor:
        """Embed token ids.

        Args:
            input_ids: Integer token ids ``(B, T)``, each in ``[0, vocab_size)``.
            token_type_ids: Integer segment ids ``(B, T)`` in
                ``[0, type_vocab_size)``; ``None`` means all zeros (one sentence).
            past_length: Number of positions already processed (cached
                decoding): the tokens sit at positions ``past_length`` to
                ``past_length + T - 1``.

        Returns:
            The token vectors ``(B, T, E)``.

        Raises:
            TypeError: if ``input_ids`` or ``token_type_ids`` is not an
                integer tensor.
            ValueError: for ids out of range, a sequence longer than
                ``max_position_embeddings`` or a bad ``past_length``.
        """
        seq_length = input_ids.shape[1]
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        # Positions p = past_length, ..., past_length + T - 1, on the input's device.
        position_ids = torch.arange(past_length, past_length + seq_length, device=input_ids.device)  # (T)
        # What each token is, W_tok[id].
        token_embeddings = self.token_embeddings(input_ids)  # (B, T, E)
        # Where each token is, W_pos[p] (the same for every sequence of the batch).
        position_embeddings = self.position_embeddings(position_ids)  # (T, E)
        # Which segment each token belongs to, W_type[segment].
        token_type_embeddings = self.token_type_embeddings(token_type_ids.to(input_ids.device))
        # The sum; the position vectors broadcast over the batch.
        embeddings = token_embeddings + position_embeddings + token_type_embeddings  # (B, T, E)
        # Normalise each token vector to zero mean and unit variance, then scale and shift.
        embeddings = self.layer_norm(embeddings)
        # Dropout (training only).
        return self.dropout(embeddings)


def _check_sinusoidal_inputs(
    encoding: SinusoidalPositionalEncoding, hidden_states: object, past_length: object = 0
) -> None:
    past_length = check_positive_int(past_length, "past_length", minimum=0)
    seq_length = check_hidden_states(hidden_states, encoding.hidden_size).shape[1]
    if past_length + seq_length > encoding.max_length:
        raise ValueError(
            f"hidden_states has {seq_length} positions"
            + (f" after {past_length} cached ones" if past_length else "")
            + f", more than max_length={encoding.max_length}"
        )


class SinusoidalPositionalEncoding(nn.Module):
    r"""The fixed sinusoidal position encoding of "Attention Is All You Need".

    .. math::

        PE_{(p,\,2i)} = \sin\!\left(p / 10000^{2i/E}\right), \qquad
        PE_{(p,\,2i+1)} = \cos\!\left(p / 10000^{2i/E}\right).

    The table is computed once and stored in the buffer ``encoding``
    ``(max_length, E)``; it has no trainable parameters and is not part of
    the state dict.

    Args:
        hidden_size: The width ``E`` of the token vectors (even).
        max_length: The number of positions to tabulate.

    Raises:
        ValueError: if ``hidden_size`` is not a positive even int or
            ``max_length`` is not positive.

    >>> encoding = SinusoidalPositionalEncoding(hidden_size=4, max_length=8)
    >>> encoding.encoding[1]                                  # sin(1), cos(1), sin(1/100), cos(1/100)
    tensor([0.8415, 0.5403, 0.0100, 0.9999])
    """

    def __init__(self, hidden_size: int, max_length: int) -> None:
        super().__init__()
        if check_positive_int(hidden_size, "hidden_size") % 2:
            raise ValueError(f"hidden_size must be a positive even int (sin and cos pairs), got {hidden_size!r}")
        check_positive_int(max_length, "max_length")
        self.hidden_size = hidden_size
        self.max_length = max_length
        positions = torch.arange(max_length, dtype=torch.float32)[:, None]
        # 1 / 10000^(2i/E) for i = 0, ..., E/2 - 1: one frequency per (sin, cos) pair.
        frequencies = torch.exp(
            torch.arange(0, hidden_size, 2, dtype=torch.float32) * (-math.log(10000.0) / hidden_size)
        )
        encoding = torch.zeros(max_length, hidden_size)
        encoding[:, 0::2] = torch.sin(positions * frequencies)
        encoding[:, 1::2] = torch.cos(positions * frequencies)
        # The table PE, (max_length, hidden_size): a buffer moves with .to(device) but is not trained.
        self.register_buffer("encoding", encoding, persistent=False)

    @validate_with(_check_sinusoidal_inputs)
    def forward(self, hidden_states: Tensor, past_length: int = 0) -> Tensor:
        """Add the encodings of positions ``past_length, ..., past_length + T - 1``.

        Args:
            hidden_states: Token vectors ``(B, T, E)`` (e.g. scaled token embeddings).
            past_length: Position of the first token (for cached decoding).

        Returns:
            ``hidden_states + PE[past_length : past_length + T]``, ``(B, T, E)``.
        """
        seq_length = hidden_states.shape[1]
        # The rows of PE for these positions.
        encoding = self.encoding[past_length : past_length + seq_length].to(hidden_states.dtype)  # (T, E)
        # Added to every sequence of the batch.
        return hidden_states + encoding
