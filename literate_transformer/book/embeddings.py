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

The 2017 paper instead used fixed sinusoids, and T5 adds no position vector
at all but a learned bias to every attention score: those schemes are parts
of their own (:mod:`~literate_transformer.parts.positions`), assembled by the
families that use them.

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
  HuggingFace's ``position_ids`` argument sets every token's position
  explicitly instead (generation with left-padded prompts needs it).
* GPT-2 calls the tables ``wte`` and ``wpe`` and has no layer norm on their
  sum; BART ``embed_tokens`` (one table, ``shared``, for encoder, decoder and
  output) and ``embed_positions``, with ``layernorm_embedding``.  Their
  modules, under those names, are in :mod:`literate_transformer.models`.

What the source notebooks got wrong
-----------------------------------
* ``self.dropout = nn.Dropout()`` drops with its default probability
  **0.5**, not BERT's 0.1: in training mode each entry of an embedding
  vector was zeroed with probability one half (and the others doubled).
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

from typing import Any

import torch
from torch import Tensor, nn

from ..core.config import as_config
from ..core.validation import Arguments, check_positive_int, check_token_inputs, validate_with
from ..parts.norms import make_norm

__all__ = ["Embeddings"]


def _check_embeddings_inputs(embeddings: Embeddings, args: Arguments) -> None:
    past_length = check_positive_int(args.past_length, "past_length", minimum=0)
    check_token_inputs(args, embeddings.config, past_length)


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
        #: One learned vector per segment (sentence A / sentence B); ``None`` when ``type_vocab_size`` is 0.
        self.token_type_embeddings = (
            nn.Embedding(config.type_vocab_size, config.hidden_size) if config.type_vocab_size else None
        )
        #: Layer norm over the features of the sum.
        self.layer_norm = make_norm(config.hidden_size, config.layer_norm_eps)
        #: Dropout with ``hidden_dropout_prob`` (``nn.Dropout()`` alone would drop half).
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    @validate_with(_check_embeddings_inputs)
    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        past_length: int = 0,
        position_ids: Tensor | None = None,
    ) -> Tensor:
        """Embed token ids.

        Args:
            input_ids: Integer token ids ``(B, T)``, each in ``[0, vocab_size)``.
            token_type_ids: Integer segment ids ``(B, T)`` in
                ``[0, type_vocab_size)``; ``None`` means all zeros (one sentence).
            past_length: Number of positions already processed (cached
                decoding): the tokens sit at positions ``past_length`` to
                ``past_length + T - 1``.
            position_ids: Every token's position, ``(B, T)`` or ``(1, T)``,
                instead of those ``past_length`` implies (a left-padded
                prompt's first real token sits at position 0).

        Returns:
            The token vectors ``(B, T, E)``.

        Raises:
            TypeError: if ``input_ids`` or ``token_type_ids`` is not an
                integer tensor.
            ValueError: for ids out of range, a sequence longer than
                ``max_position_embeddings``, a bad ``past_length`` or
                ``position_ids``, or ``token_type_ids`` for a model without them.
        """
        seq_length = input_ids.shape[1]
        if position_ids is None:
            # Positions p = past_length, ..., past_length + T - 1, on the input's device.
            position_ids = torch.arange(past_length, past_length + seq_length, device=input_ids.device)[None]  # (1, T)
        # What each token is, W_tok[id].
        token_embeddings = self.token_embeddings(input_ids)  # (B, T, E)
        # Where each token is, W_pos[p].
        position_embeddings = self.position_embeddings(position_ids.to(input_ids.device))
        # The sum; the position vectors broadcast over the batch when they are the same for every sequence.
        embeddings = token_embeddings + position_embeddings  # (B, T, E)
        if self.token_type_embeddings is not None:
            # Which segment each token belongs to, W_type[segment] (BERT).
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            embeddings = embeddings + self.token_type_embeddings(token_type_ids.to(input_ids.device))
        # Normalise each token vector to zero mean and unit variance, then scale and shift.
        embeddings = self.layer_norm(embeddings)
        # Dropout (training only).
        return self.dropout(embeddings)
