r"""Scaled dot-product attention: the equation written out, or PyTorch's fused kernel.

Self-attention replaces each token vector by a weighted average of the
vectors of all tokens in the sequence, with weights that depend on how well
the tokens "match".  It is the one operation in a transformer that mixes
information *between* positions; everything else (the feed-forward layer,
layer norm) acts on each position separately.

The equation
------------
Each token vector is projected three times, into a **query** (what am I
looking for?), a **key** (what do I contain?) and a **value** (what do I
hand over if chosen?).  With the queries of :math:`T` positions stacked into
:math:`Q \in \mathbb{R}^{T \times D}` and the keys and values of :math:`S`
positions into :math:`K \in \mathbb{R}^{S \times D}` and
:math:`V \in \mathbb{R}^{S \times D_v}`,

.. math::

    \operatorname{Attention}(Q, K, V) =
    \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{D}} + M\right) V .

:math:`Q K^\top` holds one similarity score per (query, key) pair; dividing by
:math:`\sqrt{D}` keeps the scores' variance near 1 whatever the head size, so
the softmax does not saturate; :math:`M` is the mask (0 where a query may
look, a very negative number where it may not, see
:mod:`~literate_transformer.core.masks`); the softmax turns each row of scores
into weights that sum to 1; and multiplying by :math:`V` averages the values
with those weights.  :func:`scaled_dot_product_attention` is this equation,
one line per term, and a test shows it equals PyTorch's fused
:func:`torch.nn.functional.scaled_dot_product_attention`.  (Two families
leave the scores unscaled, T5 and GPT-Neo: ``scale=1.0``.  Gemma 2 bounds
them before the mask, :math:`c \tanh(s / c)` with ``softcap`` :math:`c`,
which the fused kernel cannot do: :func:`attend` then runs the eager code.)

Two ways to run it
------------------
Every attention layer in this package computes the equation in one of two
ways, chosen by the model's attention implementation as HuggingFace's models
choose it (``attn_implementation``):

``"eager"``
    the steps written out one per line, so that they can be read, printed and
    checked: :func:`scaled_dot_product_attention`, and the eager path of
    BERT's :meth:`~literate_transformer.models.bert.BertSelfAttention.forward`.
    That code *is* the lesson, and stays where the pages show it.
``"sdpa"``
    :func:`torch.nn.functional.scaled_dot_product_attention`, which fuses the
    steps into one kernel (flash or memory-efficient attention on a GPU) and
    never materialises the ``(B, H, T, S)`` probabilities.

Three decisions around that choice are made here, once for every model:

* **When the fused kernel may run** (:func:`use_fused_attention`): only when
  the model asks for it *and* nothing needs the probabilities themselves
  (``output_attentions``) or changes them (BERT's ``head_mask``); otherwise
  the call falls back to the eager code.
* **How the fused kernel is masked** (:func:`fused_attention`): with the same
  rule as the eager path, masked scores being the most negative finite
  numbers (see :mod:`~literate_transformer.core.masks`), so that a fully
  masked row is finite on both paths.  Tests check that both paths give the
  same outputs, padded rows included.
* **Which of the two runs** (:func:`attend`): the one call the model
  families make, with their heads already split.

What the source notebooks got wrong
-----------------------------------
The masked attention filled forbidden scores with ``-inf``.  A row whose
keys are *all* masked (a padding query, or an example that is all padding)
becomes :math:`0/0 =` NaN after the softmax, and NaN spreads everywhere.
Here masking goes through
:func:`~literate_transformer.core.masks.masked_fill_scores`, which uses the
most negative *finite* number of the dtype: such a row gets uniform weights
and no NaN appears, in fp32, fp16 and bf16.

>>> import torch
>>> q = k = v = torch.randn(1, 2, 3, 4)                       # (B, H, T, D)
>>> mask = torch.tensor([[True, True, False]])                # (T, S) broadcast: the last key is padding
>>> fused = fused_attention(q, k, v, mask)
>>> eager, _ = scaled_dot_product_attention(q, k, v, mask)
>>> torch.allclose(fused, eager, atol=1e-6)
True
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from .masks import grouped_mask, masked_fill_scores, to_fused_kernel_mask
from .validation import Arguments, check_mask, check_tensor, validate_with

__all__ = [
    "scaled_dot_product_attention",
    "implementation_of",
    "use_fused_attention",
    "fused_attention",
    "attend",
    "grouped_attention",
]

#: The attention implementations, the manual, commented ``"eager"`` path and
#: the fused :func:`torch.nn.functional.scaled_dot_product_attention` (``"sdpa"``).
ATTENTION_IMPLEMENTATIONS = ("eager", "sdpa")


def _check_attention_inputs(args: Arguments) -> None:
    """query (..., T, D), key (..., S, D) and value (..., S, Dv) whose sizes agree; a mask that fits them."""
    query = check_tensor(args.query, "query", dtypes=("float",))
    key = check_tensor(args.key, "key", dtypes=("float",))
    value = check_tensor(args.value, "value", dtypes=("float",))
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if tensor.dim() < 2:
            raise ValueError(
                f"{name} must have at least 2 dimensions (..., length, features), got shape {tuple(tensor.shape)}"
            )
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must have the same head size D (last dimension): "
            f"query has shape {tuple(query.shape)}, key has shape {tuple(key.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same length S (second-to-last dimension): "
            f"key has shape {tuple(key.shape)}, value has shape {tuple(value.shape)}"
        )
    try:
        leading = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except RuntimeError:
        raise ValueError(
            "query, key and value must have matching (broadcastable) leading dimensions: got shapes "
            f"{tuple(query.shape)}, {tuple(key.shape)} and {tuple(value.shape)}"
        ) from None
    if not query.dtype == key.dtype == value.dtype:
        raise TypeError(f"query, key and value must share a dtype, got {query.dtype}, {key.dtype} and {value.dtype}")
    if args.attention_mask is not None:
        check_mask(args.attention_mask, (*leading, query.shape[-2], key.shape[-2]))
    dropout = args.dropout
    if dropout is not None and not callable(dropout) and not isinstance(dropout, float):
        raise TypeError(
            f"dropout must be a module (e.g. torch.nn.Dropout), a float probability or None, got {dropout!r}"
        )
    if args.scale is not None and (not isinstance(args.scale, (int, float)) or isinstance(args.scale, bool)):
        raise TypeError(f"scale must be a number (1/sqrt(D) when None), got {args.scale!r}")
    if args.softcap is not None:
        if not isinstance(args.softcap, (int, float)) or isinstance(args.softcap, bool):
            raise TypeError(f"softcap must be a number (the bound on the scores) or None, got {args.softcap!r}")
        if args.softcap <= 0:
            raise ValueError(f"softcap must be positive (the bound on the scores), got {args.softcap!r}")


@validate_with(_check_attention_inputs)
def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None = None,
    dropout: Callable[[Tensor], Tensor] | float | None = None,
    scale: float | None = None,
    softcap: float | None = None,
) -> tuple[Tensor, Tensor]:
    r"""Scaled dot-product attention, :math:`\operatorname{softmax}(QK^\top/\sqrt{D} + M)\,V`.

    Works on any number of leading (batch, head) dimensions: a single head
    passes ``(B, T, D)`` tensors, :class:`~literate_transformer.book.attention.MultiHeadAttention`
    passes all heads at once as ``(B, H, T, D)``.

    Args:
        query: Queries ``(..., T, D)``.
        key: Keys ``(..., S, D)``.
        value: Values ``(..., S, Dv)``.
        attention_mask: ``None``, a boolean mask (``True`` = may attend) or
            an additive float mask (0 = may attend, very negative = may not),
            broadcastable to ``(..., T, S)``.
        dropout: Dropout applied to the attention weights before they
            average the values: a module such as :class:`torch.nn.Dropout`
            (which is active only in training mode), a probability (applied
            always, like the ``dropout_p`` of
            :func:`torch.nn.functional.scaled_dot_product_attention`), or
            ``None``.
        scale: The factor on the scores; ``None`` for :math:`1/\sqrt{D}`
            (the ``scale`` of PyTorch's function).
        softcap: Bound the scaled scores to :math:`(-c, c)` with
            :math:`c \tanh(s / c)` before the mask (Gemma 2's
            ``attn_logit_softcapping``); ``None`` leaves them as they are.

    Returns:
        ``(context, attention_probs)``: the attended values ``(..., T, Dv)``
        and the weights ``(..., T, S)`` (before dropout).

    Raises:
        TypeError: if an input is not a floating-point tensor, or the mask
            is neither boolean nor floating point.
        ValueError: if the sizes of ``query``, ``key`` and ``value`` disagree
            or ``attention_mask`` does not broadcast to ``(..., T, S)``.

    >>> q = k = v = torch.eye(2)[None]  # two orthogonal tokens; the first may not see the second
    >>> context, weights = scaled_dot_product_attention(q, k, v, torch.tensor([[True, False], [True, True]]))
    >>> context
    tensor([[[1.0000, 0.0000],
             [0.3302, 0.6698]]])
    """
    if scale is None:
        scale = 1 / math.sqrt(query.shape[-1])
    # One similarity score per (query, key) pair, Q K^T / sqrt(D).
    scores = query @ key.transpose(-2, -1) * scale  # (..., T, S)
    if softcap is not None:
        # Soft-capping: c tanh(s / c) is about s where |s| << c, and never goes past +-c.  Before the mask, so
        # forbidden pairs still get the most negative score.
        scores = softcap * torch.tanh(scores / softcap)
    # Forbidden pairs get the most negative finite score (not -inf: no NaN).
    scores = masked_fill_scores(scores, attention_mask)
    # Each query's scores become weights over the keys that sum to 1.
    attention_probs = torch.softmax(scores, dim=-1)
    # Dropout on the weights (HuggingFace's BERT does it too), training only.
    if dropout is None:
        dropped = attention_probs
    elif isinstance(dropout, float):
        dropped = F.dropout(attention_probs, dropout)
    else:
        dropped = dropout(attention_probs)
    # Each query's output is the weighted average of the values.
    context = dropped @ value  # (..., T, Dv)
    return context, attention_probs


def implementation_of(config: object) -> str:
    """The attention implementation a config asks for: ``"eager"`` or ``"sdpa"``.

    The package's :class:`~literate_transformer.core.config.TransformerConfig`
    says it in ``attn_implementation``; a ``transformers`` config keeps it in
    ``_attn_implementation`` (``None`` until a model is built from it, or one
    of HuggingFace's other kernels).  Anything but ``"sdpa"`` runs the eager,
    commented code, which every attention module of the package has.
    """
    implementation = getattr(config, "attn_implementation", None)
    if implementation not in ATTENTION_IMPLEMENTATIONS:
        implementation = getattr(config, "_attn_implementation", None)
    return implementation if implementation in ATTENTION_IMPLEMENTATIONS else "eager"


def use_fused_attention(implementation: str, output_attentions: bool = False, head_mask: Tensor | None = None) -> bool:
    """Whether an attention call runs PyTorch's fused kernel rather than the eager code.

    Args:
        implementation: The model's attention implementation, ``"eager"`` or ``"sdpa"``.
        output_attentions: The caller wants the probabilities, which the fused
            kernel never forms.
        head_mask: BERT's per-head factors on the probabilities, which the
            fused kernel cannot apply.

    Returns:
        ``True`` for the fused kernel.
    """
    return implementation == "sdpa" and not output_attentions and head_mask is None


def fused_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    scale: float | None = None,
) -> Tensor:
    r"""``softmax(Q K^T / sqrt(D) + M) V`` in one fused kernel, masked as the eager path masks.

    Args:
        query: ``(B, H, T, D)``.
        key: ``(B, H, S, D)``.
        value: ``(B, H, S, D)``.
        attention_mask: ``None``, boolean (``True`` = may attend) or additive,
            broadcastable to ``(B, H, T, S)``.
        dropout_p: Dropout on the probabilities (pass 0 in evaluation).
        scale: The factor on the scores; ``None`` for :math:`1/\sqrt{D}`.

    Returns:
        The context ``(B, H, T, D)``.
    """
    if attention_mask is not None:
        # Finite masked scores, with headroom for the scores they are added to: no $-\infty$, no NaN.
        attention_mask = to_fused_kernel_mask(attention_mask, query.dtype)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout_p, scale=scale)


def attend(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    config: object,
    dropout: torch.nn.Dropout,
    output_attentions: bool = False,
    scale: float | None = None,
    softcap: float | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Attention over split heads, by the eager code or the fused kernel: the one call every family makes.

    Args:
        query: ``(B, H, T, D)``.
        key: ``(B, H, S, D)``.
        value: ``(B, H, S, D)``.
        attention_mask: A ready mask (boolean or additive) that broadcasts to ``(B, H, T, S)``, or ``None``.
        config: The model's config, whose attention implementation chooses the kernel (:func:`implementation_of`).
        dropout: The dropout on the probabilities (active in training mode only).
        output_attentions: Return the probabilities (forces the eager code).
        scale: The factor on the scores; ``None`` for :math:`1/\\sqrt{D}`.
        softcap: Bound the scores with :math:`c \\tanh(s / c)` (:func:`scaled_dot_product_attention`); the fused
            kernel has no such step, so the eager code runs whenever it is set.

    Returns:
        ``(context (B, H, T, D), probabilities (B, H, T, S) or None)``.
    """
    if softcap is None and use_fused_attention(implementation_of(config), output_attentions):
        dropout_p = dropout.p if dropout.training else 0.0
        return fused_attention(query, key, value, attention_mask, dropout_p, scale), None
    context, attention_probs = scaled_dot_product_attention(query, key, value, attention_mask, dropout, scale, softcap)
    return context, attention_probs if output_attentions else None


def grouped_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    scale: float | None = None,
    softcap: float | None = None,
) -> Tensor:
    """The attention of ``H`` query heads over ``K`` key/value heads, each key/value head read once by its group.

    Query head ``h`` reads key/value head ``h // (H / K)`` (HuggingFace's
    order), so the ``H / K`` heads of a group are neighbours: viewed as
    ``(B, K, H T / K, D)``, the queries of a group are rows of one head, and
    one attention call over the ``(B, K, S, D)`` keys gives every head's
    scores, the same as the keys repeated for each head of its group
    (:func:`~literate_transformer.parts.heads.repeat_kv`) would give, without
    the copies.  The fused kernel computes it; a bound on the scores
    (``softcap``, which the fused kernel has not) runs the eager code.

    Args:
        query: ``(B, H, T, D)``.
        key: ``(B, K, S, D)``.
        value: ``(B, K, S, D)``.
        attention_mask: A ready mask ``(B, 1, T, S)`` (or one that broadcasts to it), or ``None``.
        scale: The factor on the scores; ``None`` for :math:`1/\\sqrt{D}`.
        softcap: Bound the scores with :math:`c \\tanh(s / c)`, or ``None``.

    Returns:
        The context ``(B, H, T, D)``.

    >>> query, key, value = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    >>> repeated = fused_attention(query, key.repeat_interleave(2, 1), value.repeat_interleave(2, 1))
    >>> torch.allclose(grouped_attention(query, key, value, None), repeated, atol=1e-6)
    True
    """
    size, heads, length, head_size = query.shape
    kv_heads = key.shape[1]
    groups = heads // kv_heads
    grouped = query.reshape(size, kv_heads, groups * length, head_size)  # (B, K, H T / K, D)
    mask = grouped_mask(attention_mask, groups)
    if softcap is None:
        context = fused_attention(grouped, key, value, mask, 0.0, scale)
    else:
        context, _ = scaled_dot_product_attention(grouped, key, value, mask, None, scale, softcap)
    return context.reshape(size, heads, length, head_size)
