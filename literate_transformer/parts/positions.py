r"""Positions: where each token sits, told to a model that cannot see order.

Attention by itself is blind to order: permute the tokens of a sentence and
every output is permuted the same way, nothing else changes.  Every
transformer therefore tells its layers where each token sits, in one of a few
ways, each written once here and assembled by the models:

* **learned absolute positions**, one trained vector per position, added to
  the token vectors (BERT, GPT-2, BART):
  :class:`LearnedPositionalEmbedding`, whose table may start a few rows
  before position 0 (BART's offset of 2);
* **sinusoidal absolute positions**, fixed sines and cosines of the position
  at geometrically spaced frequencies ("Attention Is All You Need"):
  :class:`SinusoidalPositionalEncoding`;
* **relative positions**, a learned number added to each attention score by
  how far the key is from the query (T5): :func:`relative_position_bucket`
  and :class:`RelativePositionBias`.

Which position a token has is decided by one rule, :func:`position_ids`,
for every model that writes text: a token's position counts the real tokens
before it, so that a prompt padded on the left starts at position 0 like an
unpadded one, and a cached step continues where the cache ends.

Learned and sinusoidal positions
--------------------------------
The 2017 paper used fixed sinusoids,

.. math::

    PE_{(p,\,2i)} = \sin\!\left(p / 10000^{2i/E}\right), \qquad
    PE_{(p,\,2i+1)} = \cos\!\left(p / 10000^{2i/E}\right),

one frequency per pair of features, so that the encoding of position
:math:`p + k` is a linear function of that of :math:`p`.  BERT and GPT-2
learn their table instead, like any other weight.

Relative positions: T5's bucketed attention bias
------------------------------------------------
Learned and sinusoidal positions are *absolute*: a vector per position,
added to the token vector before the first layer.  T5 adds nothing to the
tokens.  Instead its self-attention adds a learned number to each score,
chosen by how far the key is from the query,

.. math::

    \text{scores}_{h,i,j} = q_i \cdot k_j + b_h\big(\operatorname{bucket}(j - i)\big),

one table :math:`b` of ``num_buckets`` numbers per head.  T5 computes it in
the first layer of a stack and shares it with every other layer of that
stack; its cross-attention gets none.  Nearby distances get a bucket each;
farther ones share buckets whose width grows logarithmically up to
``max_distance``, beyond which all distances fall into the last bucket.  An
encoder tells left from right (half the buckets for keys before the query,
half for keys after it); a decoder only ever sees keys before the query, so
all the buckets go to those.  :func:`relative_position_bucket` computes the
bucket line by line, :func:`relative_position_bias` the ``(1, H, T, S)``
bias from a table of one number per bucket and head (T5 keeps the table in
its first layer, :mod:`~literate_transformer.models.t5`), and
:class:`RelativePositionBias` is table and function in one module.  Any
attention layer of this package takes the bias as an additive
``attention_mask``; tests prove both equal to ``transformers``' ``T5Attention``.

>>> position_ids(torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]]), length=4)
tensor([[0, 1, 0, 1],
        [0, 1, 2, 3]])
>>> position_ids(None, length=2, past_length=5)   # two new tokens after five cached ones
tensor([[5, 6]])
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..core.validation import Arguments, check_hidden_states, check_positive_int, validate_with

__all__ = [
    "position_ids",
    "LearnedPositionalEmbedding",
    "SinusoidalPositionalEncoding",
    "relative_position_bucket",
    "relative_position_bias",
    "RelativePositionBias",
]


def position_ids(
    attention_mask: Tensor | None, length: int, past_length: int = 0, device: torch.device | str | None = None
) -> Tensor:
    """The positions of the last ``length`` tokens: one rule for every model that writes text.

    A real token's position is the number of real tokens before it, cached
    ones included; a padding token keeps its index (no real token reads it).
    So a prompt padded on the left starts at position 0 like an unpadded
    one, as HuggingFace's ``generate()`` numbers it, and a batch padded on
    the right has the positions ``0, 1, 2, ...`` that HuggingFace's models
    give it without a mask.

    Args:
        attention_mask: ``(B, past_length + length)``, 1 for real tokens and
            0 for padding; ``None`` when nothing is padded.
        length: The number of new tokens ``T``.
        past_length: The number of cached positions before them.
        device: Where to build the positions without a mask (default: the mask's device).

    Returns:
        ``(B, T)`` positions, or ``(1, T)`` without a mask.
    """
    if attention_mask is not None:
        device = attention_mask.device
    # Without padding: past_length, ..., past_length + T - 1.
    index = torch.arange(past_length, past_length + length, device=device)[None]  # (1, T)
    if attention_mask is None:
        return index
    # With padding: how many real tokens come before each one (counting itself, minus one) ...
    counted = attention_mask.long().cumsum(-1)[:, -length:] - 1  # (B, T)
    # ... for the real tokens; a padding token keeps its index.
    return torch.where(attention_mask[:, -length:].bool(), counted, index)


class LearnedPositionalEmbedding(nn.Embedding):
    r"""A learned table of position vectors, in which position :math:`p` reads row :math:`p + \text{offset}`.

    BERT and GPT-2 read position :math:`p` from row :math:`p` (``offset=0``).
    BART's table has two more rows, and reads position :math:`p` from row
    :math:`p + 2` (a leftover of fairseq, which numbered positions after the
    padding index; the first two rows are never read).  The table is an
    :class:`torch.nn.Embedding`, so its parameter is ``weight`` under the
    name of the module that holds it (``wpe``, ``embed_positions``, ...).

    Args:
        num_positions: The number of positions ``max_position_embeddings``.
        embedding_dim: The width ``E``.
        offset: Rows before position 0.

    >>> table = LearnedPositionalEmbedding(16, 4, offset=2)
    >>> table.weight.shape
    torch.Size([18, 4])
    >>> torch.equal(table(torch.tensor([[0]])), table.weight[2:3][None])
    True
    """

    def __init__(self, num_positions: int, embedding_dim: int, offset: int = 0) -> None:
        check_positive_int(num_positions, "num_positions")
        check_positive_int(offset, "offset", minimum=0)
        super().__init__(num_positions + offset, embedding_dim)
        #: Rows of the table before position 0.
        self.offset = offset

    def forward(self, position_ids: Tensor) -> Tensor:
        """``(B, T)`` positions to ``(B, T, E)`` vectors: row ``p + offset`` for position ``p``."""
        return super().forward(position_ids + self.offset)

    def freeze_to_sinusoids(self) -> None:
        """Fill the table with the 2017 sinusoids and stop training it (XLM's and DistilBERT's sinusoidal option).

        The rows stay a weight of the checkpoint (``...position_embeddings.weight``); only their values are
        fixed, to those of :class:`SinusoidalPositionalEncoding`.

        >>> table = LearnedPositionalEmbedding(8, 4)
        >>> table.freeze_to_sinusoids()
        >>> torch.equal(table.weight, SinusoidalPositionalEncoding(4, 8).encoding), table.weight.requires_grad
        (True, False)
        """
        sinusoids = SinusoidalPositionalEncoding(self.embedding_dim, self.num_embeddings - self.offset).encoding
        with torch.no_grad():
            self.weight[self.offset :].copy_(sinusoids)
        self.weight.requires_grad_(False)


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


def relative_position_bias(
    relative_attention_bias: nn.Embedding,
    query_length: int,
    key_length: int,
    past_length: int = 0,
    *,
    bidirectional: bool = True,
    max_distance: int = 128,
) -> Tensor:
    r"""The bias :math:`M_{h,i,j} = b_h(\operatorname{bucket}(j - i))` read from a table of ``num_buckets x H`` numbers.

    The computation of :class:`RelativePositionBias`, on a table a model
    keeps under its own name (T5's first self-attention layer holds it as
    ``relative_attention_bias``).

    Args:
        relative_attention_bias: The table :math:`b`, one row per bucket, one column per head.
        query_length: ``T``.
        key_length: ``S`` (cached positions included).
        past_length: Position of the first query (cached decoding).
        bidirectional: ``True`` for an encoder, ``False`` for a decoder.
        max_distance: Distance from which on all keys share the last bucket.

    Returns:
        The additive bias ``(1, H, T, S)``.
    """
    device = relative_attention_bias.weight.device
    # Query i sits at position past_length + i, key j at position j.
    query_positions = torch.arange(query_length, device=device)[:, None] + past_length
    key_positions = torch.arange(key_length, device=device)[None, :]
    # How far each key is from each query, j - i: negative to the left.
    relative_position = key_positions - query_positions  # (T, S)
    buckets = relative_position_bucket(
        relative_position, bidirectional, relative_attention_bias.num_embeddings, max_distance
    )  # (T, S)
    # Each head's learned number for each bucket.
    values = relative_attention_bias(buckets)  # (T, S, H)
    # Heads first, and a batch dimension to broadcast over.
    bias = values.permute(2, 0, 1)[None]  # (1, H, T, S)
    return bias


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
        return relative_position_bias(
            self.relative_attention_bias,
            query_length,
            key_length,
            past_length,
            bidirectional=self.bidirectional,
            max_distance=self.max_distance,
        )
