r"""Attention kernels: the commented code, or PyTorch's fused kernel, and when each runs.

Every attention layer in this package computes

.. math::

    \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{D}} + M\right) V

in one of two ways, chosen by ``config.attn_implementation`` as HuggingFace's
models choose it:

``"eager"``
    the steps written out one per line, so that they can be read, printed and
    checked: the book's
    :func:`~literate_transformer.book.attention.scaled_dot_product_attention`,
    and the eager path of BERT's
    :meth:`~literate_transformer.models.bert.BertSelfAttention.forward`.
    That code *is* the lesson, and stays where the pages show it.
``"sdpa"``
    :func:`torch.nn.functional.scaled_dot_product_attention`, which fuses the
    steps into one kernel (flash or memory-efficient attention on a GPU) and
    never materialises the ``(B, H, T, S)`` probabilities.

Two decisions around that choice are made here, once for every model:

* **When the fused kernel may run** (:func:`use_fused_attention`): only when
  the configuration asks for it *and* nothing needs the probabilities
  themselves (``output_attentions``) or changes them (BERT's ``head_mask``);
  otherwise the call falls back to the eager code.
* **How the fused kernel is masked** (:func:`fused_attention`): with the same
  rule as the eager path, masked scores being the most negative finite
  numbers (see :mod:`~literate_transformer.core.masks`), so that a fully
  masked row is finite on both paths.  Tests check that both paths give the
  same outputs, padded rows included.

>>> import torch
>>> q = k = v = torch.randn(1, 2, 3, 4)                       # (B, H, T, D)
>>> mask = torch.tensor([[True, True, False]])                # (T, S) broadcast: the last key is padding
>>> fused = fused_attention(q, k, v, mask)
>>> from literate_transformer.book.attention import scaled_dot_product_attention
>>> eager, _ = scaled_dot_product_attention(q, k, v, mask)
>>> torch.allclose(fused, eager, atol=1e-6)
True
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import Tensor

from .masks import to_fused_kernel_mask

__all__ = ["use_fused_attention", "fused_attention"]


def use_fused_attention(config: Any, output_attentions: bool = False, head_mask: Tensor | None = None) -> bool:
    """Whether an attention call runs PyTorch's fused kernel rather than the eager code.

    Args:
        config: The model's config; its ``attn_implementation`` is
            ``"eager"`` or ``"sdpa"``.
        output_attentions: The caller wants the probabilities, which the fused
            kernel never forms.
        head_mask: BERT's per-head factors on the probabilities, which the
            fused kernel cannot apply.

    Returns:
        ``True`` for the fused kernel.
    """
    return config.attn_implementation == "sdpa" and not output_attentions and head_mask is None


def fused_attention(
    query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None = None, dropout_p: float = 0.0
) -> Tensor:
    r"""``softmax(Q K^T / sqrt(D) + M) V`` in one fused kernel, masked as the eager path masks.

    Args:
        query: ``(B, H, T, D)``.
        key: ``(B, H, S, D)``.
        value: ``(B, H, S, D)``.
        attention_mask: ``None``, boolean (``True`` = may attend) or additive,
            broadcastable to ``(B, H, T, S)``.
        dropout_p: Dropout on the probabilities (pass 0 in evaluation).

    Returns:
        The context ``(B, H, T, D)``.
    """
    if attention_mask is not None:
        # Finite masked scores, with headroom for the scores they are added to: no $-\infty$, no NaN.
        attention_mask = to_fused_kernel_mask(attention_mask, query.dtype)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout_p)
