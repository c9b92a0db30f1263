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

Relative positions: T5's bucketed attention bias
------------------------------------------------
Learned and sinusoidal positions are *absolute*: a vector per position,
added to the token vector before the first layer.  T5 adds nothing to the
tokens.  Instead every attention layer adds a learned number to each score,
chosen by how far the key is from the query,

.. math::

    \text{scores}_{h,i,j} = q_i \cdot k_j + b_h\big(\operatorname{bucket}(j - i)\big),

one table :math:`b` of ``num_buckets`` numbers per head, shared by all the
layers of a stack.  Nearby distances get a bucket each; farther ones share
buckets whose width grows logarithmically up to ``max_distance``, beyond
which all distances fall into the last bucket.  An encoder tells left from
right (half the buckets for keys before the query, half for keys after it);
a decoder only ever sees keys before the query, so all the buckets go to
those.  :func:`relative_position_bucket` computes the bucket line by line,
:class:`RelativePositionBias` the ``(1, H, T, S)`` bias, which any attention
layer of this package takes as an additive ``attention_mask``; tests prove
both equal to ``transformers``' ``T5Attention``.

Other families' embeddings
--------------------------
The same module, configured, embeds GPT-2's and BART's tokens (see
:class:`~literate_transformer.core.config.TransformerConfig`): without
segment embeddings (``type_vocab_size=0``), without the layer norm
(``embedding_layer_norm=False``, GPT-2), with token vectors scaled by
:math:`\sqrt{E}` (``scale_embedding``) and with BART's position table, whose
row :math:`p + 2` holds position :math:`p` (``position_offset=2``).

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
* GPT-2 calls the tables ``wte`` and ``wpe``; BART ``embed_tokens`` (one
  table, ``shared``, for encoder, decoder and output) and ``embed_positions``,
  with ``layernorm_embedding``; T5 ``relative_attention_bias``.  The key maps
  are in :mod:`~literate_transformer.interop`.

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

import math
from typing import Any

import torch
from torch import Tensor, nn

from ..core.config import as_config
from ..core.validation import (
    Arguments,
    check_hidden_states,
    check_positive_int,
    check_token_inputs,
    validate_with,
)

__all__ = ["Embeddings", "SinusoidalPositionalEncoding", "relative_position_bucket", "RelativePositionBias"]


def _check_embeddings_inputs(embeddings: Embeddings, args: Arguments) -> None:
    past_length = check_positive_int(args.past_length, "past_length", minimum=0)
    check_token_inputs(args, embeddings.config, past_length)


class Embeddings(nn.Module):
    """Token, position and token-type embeddings, summed, normalised and dropped out.

    Args:
        config: A :class:`~literate_transformer.core.config.TransformerConfig` or a
            ``transformers`` config; uses ``vocab_size``, ``hidden_size``,
            ``max_position_embeddings``, ``type_vocab_size``,
            ``pad_token_id``, ``layer_norm_eps`` and ``hidden_dropout_prob``,
            and the choices of other families: ``embedding_layer_norm``,
            ``position_offset`` and ``scale_embedding``.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        config = as_config(config)
        self.config = config
        #: One learned vector per vocabulary entry (V rows); the padding row
        #: starts at zero and gets no gradient, as in HuggingFace's BERT.
        self.token_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        #: :math:`\sqrt{E}` with ``config.scale_embedding`` (BART's option), else 1.
        self.embed_scale = math.sqrt(config.hidden_size) if config.scale_embedding else 1.0
        #: Rows of the position table before position 0 (BART's 2).
        self.position_offset = config.position_offset
        #: One learned vector per position, up to ``max_position_embeddings`` (after the offset rows).
        self.position_embeddings = nn.Embedding(
            config.max_position_embeddings + config.position_offset, config.hidden_size
        )
        #: One learned vector per segment (sentence A / sentence B); ``None`` when ``type_vocab_size`` is 0.
        self.token_type_embeddings = (
            nn.Embedding(config.type_vocab_size, config.hidden_size) if config.type_vocab_size else None
        )
        #: Layer norm over the features of the sum; ``None`` without ``embedding_layer_norm`` (GPT-2).
        self.layer_norm = (
            nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if config.embedding_layer_norm else None
        )
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
        # What each token is, W_tok[id] (times sqrt(E) where the family scales it).
        token_embeddings = self.token_embeddings(input_ids) * self.embed_scale  # (B, T, E)
        # Where each token is, W_pos[p + offset] (the offset is BART's; 0 elsewhere).
        position_embeddings = self.position_embeddings(position_ids.to(input_ids.device) + self.position_offset)
        # The sum; the position vectors broadcast over the batch when they are the same for every sequence.
        embeddings = token_embeddings + position_embeddings  # (B, T, E)
        if self.token_type_embeddings is not None:
            # Which segment each token belongs to, W_type[segment] (BERT).
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            embeddings = embeddings + self.token_type_embeddings(token_type_ids.to(input_ids.device))
        if self.layer_norm is not None:
            # Normalise each token vector to zero mean and unit variance, then scale and shift.
            embeddings = self.layer_norm(embeddings)
        # Dropout (training only).
        return self.dropout(embeddings)


def _check_sinusoidal_inputs(encoding: SinusoidalPositionalEncoding, args: Arguments) -> None:
    past_length = check_positive_int(args.past_length, "past_length", minimum=0)
    seq_length = check_hidden_states(args.hidden_states, encoding.hidden_size).shape[1]
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


# ---------------------------------------------------------------------------
# Relative positions: T5's bucketed attention bias
# ---------------------------------------------------------------------------
def relative_position_bucket(
    relative_position: Tensor, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> Tensor:
    r"""The bucket of each query-to-key distance, T5's way.

    With :math:`n` = ``num_buckets`` (halved when ``bidirectional``, the
    other half marking keys *after* the query), :math:`m` = ``max_distance``
    and :math:`d = |j - i|` (a decoder counts only keys before the query,
    :math:`d = \max(i - j, 0)`):

    .. math::

        \operatorname{bucket}(d) = \begin{cases}
        d & d < n/2 \quad\text{(one bucket per distance)} \\
        \min\!\Big(n - 1,\; \tfrac{n}{2} + \Big\lfloor
        \dfrac{\log(2d / n)}{\log(2m / n)} \cdot \dfrac{n}{2}\Big\rfloor\Big)
        & \text{otherwise (logarithmic bins)}
        \end{cases}

    Args:
        relative_position: Integer ``j - i`` for each (query ``i``, key ``j``), any shape.
        bidirectional: ``True`` in an encoder (left and right distances get
            their own buckets), ``False`` in a decoder.
        num_buckets: Number of buckets (T5's 32).
        max_distance: Distance from which on all keys share the last bucket (T5's 128).

    Returns:
        Bucket numbers in ``[0, num_buckets)``, shaped like ``relative_position``.

    >>> relative_position_bucket(torch.tensor([-3, -1, 0, 1, 3, 200]), num_buckets=8, max_distance=16)
    tensor([2, 1, 0, 5, 6, 7])
    >>> relative_position_bucket(torch.tensor([-200, -3, -1, 0, 1]), bidirectional=False, num_buckets=8, max_distance=16)
    tensor([7, 3, 1, 0, 0])
    """
    bucket = torch.zeros_like(relative_position)
    if bidirectional:
        # Half the buckets for keys after the query, which start at bucket n/2 ...
        num_buckets //= 2
        bucket = bucket + (relative_position > 0).long() * num_buckets
        # ... and from here on only the distance counts.
        distance = relative_position.abs()
    else:
        # A decoder sees only keys at or before the query: distance i - j, and 0 for (masked) later keys.
        distance = (-relative_position).clamp(min=0)
    # Half of the (remaining) buckets: one per distance 0, 1, ..., n/2 - 1.
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    # The other half: bins whose width grows logarithmically from n/2 to max_distance.
    # (distance 0 gives log(0) = -inf here, but is_small picks the exact bucket for it.)
    scaled = torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact)
    if_large = max_exact + (scaled * (num_buckets - max_exact)).long()
    # Everything at max_distance or beyond shares the last bucket.
    if_large = if_large.clamp(max=num_buckets - 1)
    return bucket + torch.where(is_small, distance, if_large)


def _check_relative_bias_inputs(bias: RelativePositionBias, args: Arguments) -> None:
    check_positive_int(args.query_length, "query_length")
    check_positive_int(args.key_length, "key_length")
    check_positive_int(args.past_length, "past_length", minimum=0)


class RelativePositionBias(nn.Module):
    r"""T5's relative attention bias: one learned number per head and distance bucket.

    .. math::

        M_{h,i,j} = b_h\big(\operatorname{bucket}(j - i)\big),

    an additive ``(1, H, T, S)`` mask for every attention layer of a stack
    (T5 computes it in the first layer and reuses it in the others).  Pass it
    as the ``attention_mask`` of
    :class:`~literate_transformer.book.attention.MultiHeadAttention` (which
    adds float masks to the scores), combined with a padding or causal mask
    by adding :func:`~literate_transformer.core.masks.to_additive` of it.
    (T5 also leaves the scores unscaled, folding :math:`1/\sqrt{D}` into its
    initialisation; the package's attention keeps the scaling.)

    Args:
        num_heads: ``H``.
        num_buckets: T5's ``relative_attention_num_buckets`` (32).
        max_distance: T5's ``relative_attention_max_distance`` (128).
        bidirectional: ``True`` for an encoder, ``False`` for a decoder.

    >>> bias = RelativePositionBias(num_heads=2, num_buckets=8, max_distance=16)
    >>> bias(query_length=3, key_length=5).shape
    torch.Size([1, 2, 3, 5])
    """

    def __init__(self, num_heads: int, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True):
        super().__init__()
        check_positive_int(num_heads, "num_heads")
        check_positive_int(num_buckets, "num_buckets", minimum=2)
        check_positive_int(max_distance, "max_distance", minimum=num_buckets // (2 if bidirectional else 1))
        if not isinstance(bidirectional, bool):
            raise TypeError(f"bidirectional must be a bool (True: encoder, False: decoder), got {bidirectional!r}")
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional
        #: The table :math:`b`: one row per bucket, one number per head (T5's name).
        self.relative_attention_bias = nn.Embedding(num_buckets, num_heads)

    @validate_with(_check_relative_bias_inputs)
    def forward(self, query_length: int, key_length: int, past_length: int = 0) -> Tensor:
        """The bias for ``query_length`` queries after ``past_length`` cached positions and ``key_length`` keys.

        Args:
            query_length: ``T``.
            key_length: ``S`` (cached positions included).
            past_length: Position of the first query (cached decoding).

        Returns:
            The additive bias ``(1, H, T, S)``.
        """
        device = self.relative_attention_bias.weight.device
        # Query i sits at position past_length + i, key j at position j.
        query_positions = torch.arange(query_length, device=device)[:, None] + past_length
        key_positions = torch.arange(key_length, device=device)[None, :]
        # How far each key is from each query, j - i: negative to the left.
        relative_position = key_positions - query_positions  # (T, S)
        buckets = relative_position_bucket(
            relative_position, self.bidirectional, self.num_buckets, self.max_distance
        )  # (T, S)
        # Each head's learned number for each bucket.
        values = self.relative_attention_bias(buckets)  # (T, S, H)
        # Heads first, and a batch dimension to broadcast over.
        bias = values.permute(2, 0, 1)[None]  # (1, H, T, S)
        return bias
