r"""Masks: which keys each query may look at.

Attention lets every query position mix information from every key position.
Two things restrict that:

*Padding.*  Sentences in a batch have different lengths, so the short ones are
padded with ``[PAD]`` tokens.  No query should attend to a padding key; the
tokenizer's ``attention_mask`` (1 for real tokens, 0 for padding) says which
keys are real.

*Causality.*  A decoder predicts token :math:`t+1` from tokens :math:`\le t`;
during training it sees the whole target sequence at once, so query
:math:`i` must not look at keys :math:`j > i`.  This is the look-ahead (causal)
mask, a lower-triangular matrix.

Two ways to write a mask
------------------------
PyTorch's modules take a **boolean** mask.  This package uses ``True`` for
"may attend" (as :func:`torch.nn.functional.scaled_dot_product_attention`
does; :class:`torch.nn.MultiheadAttention`'s ``key_padding_mask`` uses the
opposite convention, ``True`` for *ignore*).

BERT (HuggingFace's ``modeling_bert.py``) uses an **additive** mask: a float
tensor that is ``0`` where attention is allowed and a very negative number
where it is not, *added* to the attention scores before the softmax:

.. math::

    \operatorname{softmax}(s_j + m_j) = \frac{e^{s_j} e^{m_j}}{\sum_k e^{s_k} e^{m_k}},
    \qquad e^{m_j} \approx 0 \text{ when } m_j \ll 0 .

:func:`to_additive` and :func:`to_boolean` convert between the two.

Why not :math:`-\infty`?
------------------------
Filling masked scores with ``-inf`` is exact for a row with at least one
visible key, but a row whose keys are *all* masked (a padding query, or a
fully padded example) becomes :math:`\operatorname{softmax}(-\infty, \dots) =
0/0 =` NaN, and NaN spreads through every later layer and gradient.  Some
versions of this material do exactly that.  Here masked scores are set to
the most negative *finite* value of the dtype, ``torch.finfo(dtype).min``:
a fully masked row then gets (nearly) uniform weights, and no NaN appears in
fp32, fp16 or bf16.  That row's output is meaningless, and it is harmless
only because nothing reads it: a padding query's output is never used for a
real token (and a fully padded example is ignored as a whole).
:func:`masked_fill_scores` also clamps additive masks in float16, where
``score + finfo.min`` can overflow to ``-inf``.

One rule, both kernels
----------------------
The eager path (the commented code) masks with :func:`masked_fill_scores`.
The fused kernel, :func:`torch.nn.functional.scaled_dot_product_attention`,
adds the mask to the scores itself; :func:`to_fused_kernel_mask` hands it an
additive mask whose masked entries are finite and leave room below them for
the scores they are added to, so that the same rule holds there: masked
scores are the most negative finite numbers, never :math:`-\infty`.

Building the mask once
----------------------
Every model in this package turns the tokenizer's ``attention_mask`` (and, in
a decoder, causality) into the masks its layers apply in one place, at its
entry point, through one hook, :meth:`MaskHook.attention_masks`, which calls
:func:`build_attention_mask`; the layers receive them ready made.  A family
whose layers see other keys (a band, pairs of real tokens) overrides that
one method.  The mask's values are checked once, by the model's entry, and only
where reading them costs nothing (on the CPU; see
:mod:`~literate_transformer.core.validation`); building it reads no value
back to the host, so that on a GPU the forward never waits for one.

>>> causal_mask(3)
tensor([[ True, False, False],
        [ True,  True, False],
        [ True,  True,  True]])
>>> padding_mask(torch.tensor([[1, 1, 0]])).shape
torch.Size([1, 1, 1, 3])
>>> to_additive(torch.tensor([True, False]))
tensor([ 0.0000e+00, -3.4028e+38])
"""

from __future__ import annotations

import torch
from torch import Tensor

from .validation import Arguments, check_attention_mask, validate_with

__all__ = [
    "MaskHook",
    "padding_mask",
    "causal_mask",
    "combine_masks",
    "build_attention_mask",
    "to_additive",
    "to_boolean",
    "masked_fill_scores",
    "to_fused_kernel_mask",
    "grouped_mask",
]


def _check_padding_mask_inputs(args: Arguments) -> None:
    check_attention_mask(args.attention_mask, None, None)


@validate_with(_check_padding_mask_inputs)
def padding_mask(attention_mask: Tensor) -> Tensor:
    """Turn a tokenizer's ``attention_mask`` into a boolean key mask.

    Args:
        attention_mask: ``(B, S)``, 1 (or ``True``) for real tokens and 0 for padding.

    Returns:
        A boolean ``(B, 1, 1, S)`` mask, ``True`` where a key may be attended
        to; it broadcasts over heads ``H`` and queries ``T``.

    Raises:
        TypeError: if ``attention_mask`` is not a tensor.
        ValueError: if it is not 2-D or holds values other than 0 and 1
            (checked when called from outside the package; a model checks
            its mask once, at its entry).
    """
    return attention_mask.bool()[:, None, None, :]


def causal_mask(
    query_length: int,
    key_length: int | None = None,
    device: torch.device | str | None = None,
    window: int | None = None,
) -> Tensor:
    """The look-ahead mask: query ``i`` may see keys ``j <= i`` (and, with a ``window``, only ``i - j < window``).

    With a key/value cache the queries are the *last* ``query_length`` of
    ``key_length`` positions, so query ``i`` sits at absolute position
    ``key_length - query_length + i`` and may see every key up to it.

    A ``window`` makes the mask a band: query ``i`` sees its own key and the
    ``window - 1`` keys before it, no older one.  GPT-Neo's local layers,
    the locally banded layers of GPT-3 and Mistral's sliding-window
    attention are this band (counted over the positions of the sequence,
    padding included, as their ``transformers`` implementations count them).

    Args:
        query_length: Number of queries ``T``.
        key_length: Number of keys ``S`` (defaults to ``T``); at least ``T``.
        device: Where to build the mask.
        window: How many keys (its own included) a query sees at most; ``None`` for all earlier ones.

    Returns:
        A boolean ``(T, S)`` mask.

    Raises:
        ValueError: for non-positive lengths or windows, or ``key_length < query_length``.

    >>> causal_mask(1, 3)  # one new token after two cached ones sees all three
    tensor([[True, True, True]])
    >>> causal_mask(4, window=2).int()  # a band: itself and one key before it
    tensor([[1, 0, 0, 0],
            [1, 1, 0, 0],
            [0, 1, 1, 0],
            [0, 0, 1, 1]], dtype=torch.int32)
    """
    if key_length is None:
        key_length = query_length
    for name, value in (("query_length", query_length), ("key_length", key_length)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if window is not None and (not isinstance(window, int) or isinstance(window, bool) or window < 1):
        raise ValueError(f"window must be a positive int (keys a query sees, its own included) or None, got {window!r}")
    if key_length < query_length:
        raise ValueError(
            f"key_length ({key_length}) must be at least query_length ({query_length}): "
            "queries are the last positions of the keys"
        )
    offset = key_length - query_length
    query_positions = torch.arange(query_length, device=device)[:, None] + offset  # (T, 1)
    key_positions = torch.arange(key_length, device=device)[None, :]  # (1, S)
    allowed = key_positions <= query_positions
    if window is not None:
        # The band: keys less than `window` positions before the query.
        allowed = allowed & (query_positions - key_positions < window)
    return allowed


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of boolean masks (broadcasting), skipping ``None``.

    >>> combine_masks(causal_mask(2), None, torch.tensor([True, False])).tolist()
    [[True, False], [True, False]]
    """
    present = [mask for mask in masks if mask is not None]
    if not present:
        return None
    combined = present[0].bool()
    for mask in present[1:]:
        combined = combined & mask.bool()
    return combined


def build_attention_mask(
    attention_mask: Tensor | None,
    *,
    query_length: int,
    causal: bool = False,
    past_length: int = 0,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    window: int | None = None,
) -> Tensor | None:
    """The mask a model's attention layers apply, built once at the model's entry.

    Args:
        attention_mask: The tokenizer's ``(B, S)`` mask over every key
            position (cached ones included), 1 for real tokens and 0 for
            padding; ``None`` for no padding.
        query_length: Number of queries ``T`` (the new positions).
        causal: Hide future keys (a decoder's self-attention).
        past_length: Number of cached positions before the queries
            (``S = past_length + T`` when ``attention_mask`` is ``None``).
        device: Where to build the mask (default: the ``attention_mask``'s device).
        dtype: Give the mask in the additive form of this dtype (:func:`to_additive`), the form every
            layer then adds to its scores without converting it again; ``None`` for the boolean form.
        window: With ``causal``, a query sees at most this many keys, its own included (a band, see
            :func:`causal_mask`); ``None`` for every earlier key.

    Returns:
        ``None`` when nothing is hidden (no ``attention_mask``, not causal),
        so that no pass over the scores is spent adding zeros; else a
        boolean mask, ``True`` = may attend: ``(B, 1, 1, S)`` for padding,
        ``(T, S)`` for causality, ``(B, 1, T, S)`` for both.  A mask of
        ones is kept as it is: finding out that it hides nothing would read
        its values back to the host.

    >>> build_attention_mask(torch.tensor([[1, 1, 0]]), query_length=3, causal=True).int()
    tensor([[[[1, 0, 0],
              [1, 1, 0],
              [1, 1, 0]]]], dtype=torch.int32)
    >>> build_attention_mask(None, query_length=3) is None
    True
    >>> build_attention_mask(None, query_length=2, causal=True, dtype=torch.float32)
    tensor([[ 0.0000e+00, -3.4028e+38],
            [ 0.0000e+00,  0.0000e+00]])
    """
    if attention_mask is not None and device is not None:
        attention_mask = attention_mask.to(device)
    padding = None
    if attention_mask is not None:
        # padding_mask's view, without its check: the model's entry has checked the mask once already.
        padding = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, S)
    future = None
    if causal:
        key_length = past_length + query_length if attention_mask is None else attention_mask.shape[-1]
        device = device if device is not None else (attention_mask.device if attention_mask is not None else None)
        future = causal_mask(query_length, key_length, device=device, window=window)  # (T, S)
    mask = combine_masks(future, padding)
    return mask if mask is None or dtype is None else to_additive(mask, dtype)


def to_additive(mask: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """Boolean mask (``True`` = attend) to BERT's additive form.

    Returns ``0.0`` where ``mask`` is ``True`` and ``torch.finfo(dtype).min``
    where it is ``False``.
    """
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a boolean tensor (True = may attend), got dtype {mask.dtype}")
    additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return additive.masked_fill(~mask, torch.finfo(dtype).min)


def to_boolean(additive_mask: Tensor) -> Tensor:
    """BERT's additive mask back to a boolean one (``True`` = attend).

    A position counts as masked when its value is below half the dtype's
    most negative value, so the conversion is robust to ``-inf`` and to the
    rounding of ``finfo.min`` after arithmetic.
    """
    if not additive_mask.is_floating_point():
        raise TypeError(f"additive_mask must be a floating-point tensor, got dtype {additive_mask.dtype}")
    return additive_mask > torch.finfo(additive_mask.dtype).min / 2


def masked_fill_scores(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Apply a boolean or additive mask to attention scores, NaN-free.

    Args:
        scores: Attention scores ``(..., T, S)``.
        mask: ``None``, a boolean mask (``True`` = attend) or an additive
            float mask, broadcastable to ``scores``.

    Returns:
        Scores where masked positions hold ``torch.finfo(scores.dtype).min``
        (boolean masks) or ``scores + mask``, never below that value (additive
        masks): finite everywhere, so a fully masked row softmaxes to uniform
        weights rather than NaN.

    >>> s = torch.zeros(1, 2)
    >>> torch.softmax(masked_fill_scores(s, torch.tensor([[False, False]])), dim=-1)
    tensor([[0.5000, 0.5000]])
    """
    if mask is None:
        return scores
    lowest = torch.finfo(scores.dtype).min
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, lowest)
    if not mask.is_floating_point():
        raise TypeError(f"mask must be boolean or floating point, got dtype {mask.dtype}")
    scores = scores + mask.to(scores.dtype)
    # In fp16, finfo.min plus a negative score overflows to -inf: clamp.  In
    # fp32 and bf16 the sum rounds back to finfo.min (the score is far below
    # the spacing of floats that large), so the extra pass is skipped there.
    if scores.dtype == torch.float16:
        scores = scores.clamp(min=lowest)
    return scores


def to_fused_kernel_mask(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """A boolean or additive mask in the form the fused kernel adds to its scores.

    :func:`torch.nn.functional.scaled_dot_product_attention` adds a float
    mask to the scores inside the kernel.  Masked entries must be finite, so
    that a fully masked row stays finite as on the eager path, and leave
    room below them for the score they are added to.  A boolean mask
    becomes an additive one whose masked entries are ``finfo(dtype).min /
    2``.  An additive mask (a model makes its mask additive once, at its
    entry, with :func:`to_additive`) is handed on untouched in float32 and
    bfloat16, where a score added to ``finfo.min`` rounds back to
    ``finfo.min`` (the score is far below the spacing of floats that large);
    in float16 ``finfo.min`` plus a negative score overflows to ``-inf`` (and
    a row of ``-inf`` is NaN), so it is clamped at ``finfo.min / 2``.

    Args:
        mask: ``True`` = may attend, or additive (0 = may attend).
        dtype: The dtype of the queries.

    Returns:
        An additive mask of ``dtype``.

    >>> to_fused_kernel_mask(torch.tensor([True, False]), torch.float16)
    tensor([     0., -32752.], dtype=torch.float16)
    >>> additive = to_additive(torch.tensor([True, False]))
    >>> to_fused_kernel_mask(additive, torch.float32) is additive   # made once, at the model's entry
    True
    """
    if mask.dtype == torch.bool:
        return to_additive(mask, dtype).clamp(min=torch.finfo(dtype).min / 2)
    if not mask.is_floating_point():
        raise TypeError(f"mask must be boolean or floating point, got dtype {mask.dtype}")
    mask = mask.to(dtype)
    return mask.clamp(min=torch.finfo(dtype).min / 2) if dtype == torch.float16 else mask


def grouped_mask(mask: Tensor | None, groups: int) -> Tensor | None:
    """A ``(B, 1, T, S)`` mask for the scores of grouped queries, ``(B, K, G T, S)`` with ``G = groups``: row
    ``g T + t`` is query ``t``'s row, for each of the ``G`` query heads of a group
    (:func:`~literate_transformer.core.kernels.grouped_attention`).

    >>> mask = causal_mask(2)[None, None]                      # (1, 1, 2, 2)
    >>> grouped_mask(mask, 3).int()[0, 0]                      # 3 heads of a group, 2 queries each
    tensor([[1, 0],
            [1, 1],
            [1, 0],
            [1, 1],
            [1, 0],
            [1, 1]], dtype=torch.int32)
    """
    if mask is None or mask.shape[-2] == 1 or groups == 1:
        return mask  # one query per head (or one head per group): its row broadcasts over the group
    size, _, length, keys = mask.shape
    return mask[:, :, None].expand(size, 1, groups, length, keys).reshape(size, 1, groups * length, keys)


class MaskHook:
    """The one hook through which a model builds its layers' attention masks: :meth:`attention_masks`.

    Every model of the package mixes it in (an encoder, a decoder stack, BERT's
    model) and calls :meth:`attention_masks` once at its entry; a family whose
    layers see other keys overrides that method alone, as Mistral (a band),
    Gemma 2 and GPT-3 (banded layers between dense ones) and DeBERTa (pairs of
    real tokens) do.  The static cache calls it too, once for every position it
    holds.
    """

    #: Whether a query is kept from the keys after it (``True`` in a decoder's self-attention).
    causal: bool = False

    def attention_masks(
        self,
        attention_mask: Tensor | None,
        length: int,
        past_length: int = 0,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> dict[str, Tensor | None]:
        """The masks, built once, each in the additive form its layers add to their scores, by the kind of layer
        that reads it (a layer's ``attention_type``): here one, ``"full"``, the padding (and, with
        :attr:`causal`, the future) of :func:`build_attention_mask`.

        Args:
            attention_mask: The tokenizer's ``(B, S)`` mask over every key (cached ones included); ``None``
                for no padding.
            length: The number of queries ``T``.
            past_length: The cached positions before them.
            dtype: The scores' dtype (``None``: the boolean form).
            device: Where to build the masks.
        """
        return {
            "full": build_attention_mask(
                attention_mask,
                query_length=length,
                causal=self.causal,
                past_length=past_length,
                device=device,
                dtype=dtype,
            )
        }
