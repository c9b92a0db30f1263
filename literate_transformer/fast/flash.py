r"""FlashAttention's online softmax, line by line: attention without the ``(B, H, T, S)`` scores.

The eager attention of :mod:`~literate_transformer.core.kernels` computes
every score :math:`s_{ij} = q_i \cdot k_j / \sqrt{D}` first, a
``(B, H, T, S)`` tensor, then softmaxes each row and multiplies by
:math:`V`.  For long sequences that tensor is the largest thing in memory,
and on a GPU reading and writing it is slower than the arithmetic itself.
The online softmax (Milakov and Gimelshein, 2018, "Online normalizer
calculation for softmax", arXiv:1805.02867), in the form FlashAttention-2
uses (Dao, 2023, arXiv:2307.08691, §3.1), never forms it: it reads the keys
and values in *tiles* and keeps, for every query, three running quantities,
and divides once, at the end.  (Both FlashAttention kernels also cut the
queries into blocks, each block's running values held in the GPU's on-chip
memory while the key tiles stream past: FlashAttention-2's outer loop.  This
loop takes every query at once and tiles only the keys.  The first
FlashAttention, Dao et al., 2022, arXiv:2205.14135, Algorithm 1, also
rescales its output at every tile instead of dividing once.)

The online softmax
------------------
A row's softmax-weighted sum is

.. math::

    o_i = \frac{\sum_j e^{s_{ij} - m} v_j}{\sum_j e^{s_{ij} - m}}

for *any* constant :math:`m`; subtracting the row's maximum keeps the
exponentials from overflowing.  The maximum is not known before every key
has been seen, but it need not be: after each tile keep the maximum so far
:math:`m`, the sum of weights so far :math:`\ell` and the weighted sum of
values so far :math:`a` (all relative to :math:`m`).  A new tile with scores
:math:`s_{ij}` and values :math:`v_j` updates them as

.. math::

    m' = \max\big(m, \max_j s_{ij}\big), \qquad
    c = e^{m - m'}, \qquad
    \ell' = c\,\ell + \sum_j e^{s_{ij} - m'}, \qquad
    a' = c\,a + \sum_j e^{s_{ij} - m'} v_j :

the correction :math:`c` rescales what was summed against the old maximum
to the new one.  After the last tile, :math:`o_i = a / \ell`, exactly the
softmax-weighted sum, in one pass over the keys.  The memory per query is a
running maximum, a running sum and one output vector; the scores exist one
tile at a time.  :func:`flash_attention` writes this in PyTorch (a GPU kernel
does the same loop with each tile in on-chip memory); a test proves it equal
to :func:`torch.nn.functional.scaled_dot_product_attention`, masks included.

Masks keep the package's rule (:mod:`~literate_transformer.core.masks`): a
hidden key's score is the most negative finite number, never :math:`-\infty`.
A tile whose keys are all hidden then has the maximum ``finfo.min`` and
weights :math:`e^0 = 1`, but the first visible score after it makes
:math:`c = e^{\text{finfo.min} - s} = 0` and wipes them out; a row with no
visible key at all ends uniform, as on the eager path.

Memory
------
:func:`attention_scores_bytes` counts what the scores would take, and
:func:`kv_cache_bytes` what a decoder's key/value cache takes, for
multi-head, grouped-query and multi-query attention (chapter 14 builds the
cache).

>>> q, k, v = torch.randn(3, 1, 2, 5, 4).unbind(0)               # (B, H, T, D)
>>> reference = torch.nn.functional.scaled_dot_product_attention(q, k, v)
>>> torch.allclose(flash_attention(q, k, v, block_size=2), reference, atol=1e-6)
True
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..core.masks import masked_fill_scores
from ..core.validation import Arguments, check_mask, check_positive_int, check_tensor, validate_with

__all__ = ["flash_attention", "attention_scores_bytes", "kv_cache_bytes"]


def _check_flash_inputs(args: Arguments) -> None:
    query = check_tensor(args.query, "query", ndim=4, dtypes=("float",))
    key = check_tensor(args.key, "key", ndim=4, dtypes=("float",))
    value = check_tensor(args.value, "value", ndim=4, dtypes=("float",))
    if key.shape != value.shape or key.shape[:2] != query.shape[:2] or key.shape[-1] != query.shape[-1]:
        raise ValueError(
            "query (B, H, T, D), key and value (B, H, S, D) must agree: got shapes "
            f"{tuple(query.shape)}, {tuple(key.shape)} and {tuple(value.shape)}"
        )
    if args.attention_mask is not None:
        check_mask(args.attention_mask, (*query.shape[:3], key.shape[2]))
    check_positive_int(args.block_size, "block_size")
    if args.history is not None and not isinstance(args.history, list):
        raise TypeError(
            f"history must be a list (each tile's (m, l, a) is appended to it) or None, got {args.history!r}"
        )


@validate_with(_check_flash_inputs)
def flash_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None = None,
    block_size: int = 64,
    history: list[tuple[Tensor, Tensor, Tensor]] | None = None,
) -> Tensor:
    r"""Attention over tiles of ``block_size`` keys with an online softmax (FlashAttention's forward).

    Args:
        query: ``(B, H, T, D)``.
        key: ``(B, H, S, D)``.
        value: ``(B, H, S, D)``.
        attention_mask: ``None``, boolean (``True`` = may attend) or additive, broadcastable to ``(B, H, T, S)``.
        block_size: Keys per tile.
        history: A list that receives, after each tile, what the loop keeps: ``(m, l, a)``, shapes
            ``(B, H, T, 1)``, ``(B, H, T, 1)`` and ``(B, H, T, D)`` (chapter 16 draws them); ``None`` keeps nothing.

    Returns:
        The context ``(B, H, T, D)``, equal to
        :math:`\operatorname{softmax}(QK^\top/\sqrt{D} + M)\,V`.
    """
    key_length = key.shape[2]
    scale = 1 / math.sqrt(query.shape[-1])
    lowest = torch.finfo(query.dtype).min
    # Per query: the largest score so far m, the sum of weights so far l, the weighted sum of values so far a.
    running_max = query.new_full((*query.shape[:-1], 1), lowest)  # (B, H, T, 1)
    running_sum = query.new_zeros(running_max.shape)  # (B, H, T, 1)
    accumulator = torch.zeros_like(query)  # (B, H, T, D)
    for start in range(0, key_length, block_size):
        tile = slice(start, start + block_size)
        # This tile's scores q . k / sqrt(D): at most block_size keys, never all S of them.
        scores = query @ key[:, :, tile].transpose(-2, -1) * scale
        if attention_mask is not None:
            # The mask's columns for these keys (a mask of one column broadcasts to every key).
            scores = masked_fill_scores(
                scores, attention_mask if attention_mask.shape[-1] == 1 else attention_mask[..., tile]
            )
        # m' = max(m, the tile's largest score), and c = exp(m - m') to rescale what was summed against m.
        new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))  # (B, H, T, 1)
        correction = torch.exp(running_max - new_max)  # (B, H, T, 1)
        # The tile's weights against the new maximum: exp(s - m'), at most 1.
        weights = torch.exp(scores - new_max)
        # l' = c l + sum of the new weights;  a' = c a + the new weights times the tile's values.
        running_sum = correction * running_sum + weights.sum(dim=-1, keepdim=True)  # (B, H, T, 1)
        accumulator = correction * accumulator + weights @ value[:, :, tile]  # (B, H, T, D)
        running_max = new_max
        if history is not None:
            history.append((running_max, running_sum, accumulator))
    # Divide once at the end: the softmax-weighted average of the values.
    return accumulator / running_sum


def attention_scores_bytes(
    batch_size: int, num_heads: int, query_length: int, key_length: int, dtype: torch.dtype = torch.float32
) -> int:
    """Bytes of the ``(B, H, T, S)`` scores (or probabilities) that eager attention holds per layer.

    >>> attention_scores_bytes(1, 12, 512, 512) / 2**20     # MiB: BERT-base's heads, 512 tokens, fp32
    12.0
    """
    return batch_size * num_heads * query_length * key_length * torch.finfo(dtype).bits // 8


def kv_cache_bytes(
    num_layers: int,
    num_key_value_heads: int,
    head_dim: int,
    length: int,
    batch_size: int = 1,
    dtype: torch.dtype = torch.float16,
) -> int:
    r"""Bytes of a decoder's key/value cache: :math:`2 \cdot L \cdot K \cdot D \cdot S \cdot B` numbers.

    Each layer keeps a key and a value vector of ``head_dim`` numbers per
    key/value head for every cached position.  Multi-head attention has as
    many key/value heads as query heads (``K = H``); grouped-query attention
    shares each between a group of query heads (``1 < K < H``); multi-query
    attention has one (``K = 1``).

    >>> kv_cache_bytes(num_layers=12, num_key_value_heads=12, head_dim=64, length=1024) / 2**20   # GPT-2, fp16
    36.0
    """
    bytes_per_number = torch.finfo(dtype).bits // 8 if dtype.is_floating_point else torch.iinfo(dtype).bits // 8
    return 2 * num_layers * num_key_value_heads * head_dim * length * batch_size * bytes_per_number
