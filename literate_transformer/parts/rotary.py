r"""Rotary position embeddings (RoPE): positions told to attention by turning queries and keys.

Learned and sinusoidal positions (:mod:`~literate_transformer.parts.positions`)
*add* a vector to each token before the first layer.  Rotary embeddings
(Su et al., 2021, "RoFormer: Enhanced Transformer with Rotary Position
Embedding", arXiv:2104.09864, §3.2) add nothing.  Inside every attention
layer, after the projections, they cut each head's query and key into pairs
of features and turn each pair, as a point of the plane, by an angle that
grows with the token's position :math:`m`:

.. math::

    \begin{pmatrix} q'_{a} \\ q'_{b} \end{pmatrix} =
    \begin{pmatrix} \cos m\theta_i & -\sin m\theta_i \\ \sin m\theta_i & \cos m\theta_i \end{pmatrix}
    \begin{pmatrix} q_{a} \\ q_{b} \end{pmatrix},
    \qquad \theta_i = \text{base}^{-2i/R},\quad i = 0, \dots, R/2 - 1,

one frequency :math:`\theta_i` per pair (``base`` is 10000 in the paper,
``rope_theta`` in a config; :math:`R` is the number of features rotated, a
head's :math:`D` in Llama, ``rotary_dim`` in GPT-J).  The values are never
turned, and nothing is learned.

Why a rotation: the score depends on the offset only
------------------------------------------------------
Turning two vectors of the plane by angles :math:`\alpha` and :math:`\beta`
leaves their dot product a function of :math:`\alpha - \beta` alone.  A
query at position :math:`m` and a key at position :math:`n` are turned by
:math:`m\theta_i` and :math:`n\theta_i`, pair by pair, so

.. math::

    \langle R_m q, R_n k \rangle = \langle q, R_{n-m} k \rangle
    = \sum_i \big[(q_a k_a + q_b k_b)\cos (m-n)\theta_i + (q_a k_b - q_b k_a)\sin (m-n)\theta_i\big]:

the score sees *how far apart* the two tokens are, never where they are: a
relative position method, like T5's bias (:mod:`~literate_transformer.parts.positions`),
with no table to learn and no longest position built in.  Tests shift both
positions by the same amount and find the same scores, to float32
rounding.

Which features make a pair
--------------------------
The paper pairs neighbours, :math:`(x_{2i}, x_{2i+1})`, as GPT-J does
(``rotate_every_two`` in ``transformers``' GPT-J; :func:`rotate_every_two`
here).  Llama pairs feature :math:`i` with feature :math:`i + R/2`, the first
half of the head with the second (``rotate_half``; :func:`rotate_half`).
Both are the same rotation of differently ordered features: permute a
head's features (evens first, then odds) and one becomes the other, which
is how ``transformers`` converts Meta's Llama weights (it permutes the rows
of ``q_proj`` and ``k_proj`` once).  Either way each feature is

.. math::

    x' = x \odot \cos(m\theta) + \operatorname{rotate}(x) \odot \sin(m\theta),

with :math:`\operatorname{rotate}` the pair's partner, negated for the first
of the two: :func:`apply_rotary`.

Llama 3's longer context
------------------------
Llama 3.1 stretches the slow frequencies (wavelengths longer than
``original_max_position_embeddings / low_freq_factor``) by ``factor``,
keeps the fast ones (wavelengths shorter than ``... / high_freq_factor``),
and blends in between (``rope_type: "llama3"`` in a config's
``rope_scaling``): :func:`llama3_inverse_frequencies`, line for line
``transformers``' ``_compute_llama3_parameters``.

>>> rotary = RotaryEmbedding(dim=4)
>>> cos, sin = rotary(torch.tensor([[0, 1, 2]]))       # positions of one sequence
>>> cos.shape                                           # (B, T, R)
torch.Size([1, 3, 4])
>>> q, k = torch.randn(1, 1, 1, 4), torch.randn(1, 1, 1, 4)
>>> def score(m, n):
...     cos, sin = rotary(torch.tensor([[m, n]]))
...     return (apply_rotary(q, cos[:, None, :1], sin[:, None, :1])
...             * apply_rotary(k, cos[:, None, 1:], sin[:, None, 1:])).sum()
>>> torch.allclose(score(5, 2), score(9, 6))             # the same offset, m - n = 3
True
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..core.validation import check_positive_int

__all__ = [
    "inverse_frequencies",
    "llama3_inverse_frequencies",
    "rotate_half",
    "rotate_every_two",
    "apply_rotary",
    "rotate_queries_and_keys",
    "RotaryEmbedding",
]


def inverse_frequencies(dim: int, base: float = 10000.0) -> Tensor:
    r"""The frequency of each pair, :math:`\theta_i = \text{base}^{-2i/R}` for :math:`i = 0, \dots, R/2 - 1`.

    The first pair turns by one radian per position, the last by about
    :math:`1/\text{base}`: wavelengths from :math:`2\pi` positions to
    :math:`2\pi \cdot \text{base}`.

    Args:
        dim: ``R``, the number of features rotated (even).
        base: ``rope_theta`` (10000 in the paper; Llama 3 uses 500000).

    Returns:
        ``(R / 2,)`` float32 frequencies.

    >>> inverse_frequencies(4)
    tensor([1.0000, 0.0100])
    """
    if check_positive_int(dim, "dim") % 2:
        raise ValueError(f"dim must be even (features are rotated in pairs), got {dim}")
    # 2i / R for each pair, then base^(-2i/R), computed in float32 as transformers computes it.
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    return 1.0 / (base**exponents)


def llama3_inverse_frequencies(
    inv_freq: Tensor,
    factor: float,
    low_freq_factor: float,
    high_freq_factor: float,
    original_max_position_embeddings: int,
) -> Tensor:
    r"""Llama 3.1's frequencies: the slow ones divided by ``factor``, the fast ones kept, a blend between.

    A pair whose wavelength :math:`2\pi/\theta_i` is longer than
    :math:`L / \text{low\_freq\_factor}` (with :math:`L` the original context)
    turns ``factor`` times slower; one shorter than
    :math:`L / \text{high\_freq\_factor}` is unchanged; in between, with
    :math:`s = (L \theta_i / 2\pi - \text{low}) / (\text{high} - \text{low})`,

    .. math::

        \theta'_i = (1 - s)\, \theta_i / \text{factor} + s\, \theta_i .

    Args:
        inv_freq: The plain frequencies (:func:`inverse_frequencies`).
        factor: ``rope_scaling["factor"]`` (8 in Llama 3.1).
        low_freq_factor: ``rope_scaling["low_freq_factor"]`` (1).
        high_freq_factor: ``rope_scaling["high_freq_factor"]`` (4).
        original_max_position_embeddings: ``rope_scaling["original_max_position_embeddings"]`` (8192).

    Returns:
        The scaled frequencies, shaped like ``inv_freq``.
    """
    low_freq_wavelen = original_max_position_embeddings / low_freq_factor
    high_freq_wavelen = original_max_position_embeddings / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    # Slow pairs (long wavelengths) turn `factor` times slower; the others keep their frequency, for now.
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    # Between the two wavelengths: a blend of the slowed and the original frequency.
    smooth_factor = (original_max_position_embeddings / wavelen - low_freq_factor) / (
        high_freq_factor - low_freq_factor
    )
    smoothed = (1 - smooth_factor) * scaled / factor + smooth_factor * scaled
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


def rotate_half(x: Tensor) -> Tensor:
    r"""Llama's partner of each feature: :math:`(x_1, x_2) \mapsto (-x_2, x_1)` for the two halves of the last dimension.

    Feature :math:`i` and feature :math:`i + R/2` form a pair.
    """
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    return torch.cat((-second, first), dim=-1)


def rotate_every_two(x: Tensor) -> Tensor:
    r"""GPT-J's (and the paper's) partner of each feature: :math:`(x_{2i}, x_{2i+1}) \mapsto (-x_{2i+1}, x_{2i})`.

    Neighbouring features form a pair.
    """
    even, odd = x[..., ::2], x[..., 1::2]
    # (-odd, even) for each pair, interleaved back into one dimension.
    return torch.stack((-odd, even), dim=-1).flatten(-2)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool = False) -> Tensor:
    r"""Turn every pair of features of ``x`` by its angle: :math:`x \odot \cos + \operatorname{rotate}(x) \odot \sin`.

    Args:
        x: Queries or keys, ``(..., R)``.
        cos: The cosines of the angles, broadcastable to ``x`` (the same angle for both features of a pair).
        sin: Their sines.
        interleaved: Neighbours are pairs (GPT-J); ``False``: the two halves are (Llama).

    Returns:
        The turned features, shaped like ``x``.
    """
    rotated = rotate_every_two(x) if interleaved else rotate_half(x)
    return (x * cos) + (rotated * sin)


def rotate_queries_and_keys(
    query: Tensor,
    key: Tensor,
    position_embeddings: tuple[Tensor, Tensor],
    interleaved: bool = False,
) -> tuple[Tensor, Tensor]:
    """Turn the first ``R`` features of every head's queries and keys; the others pass unchanged.

    Llama turns all of a head's features (``R = D``); GPT-J only the first
    ``rotary_dim`` of each head, the rest carrying no position at all.

    Args:
        query: ``(B, H, T, D)``.
        key: ``(B, K, T, D)``.
        position_embeddings: ``(cos, sin)`` of the tokens' angles, each ``(B, T, R)`` (:class:`RotaryEmbedding`).
        interleaved: GPT-J's pairs of neighbours (``True``) or Llama's halves.

    Returns:
        ``(query, key)``, shaped as given.
    """
    cos, sin = position_embeddings
    # The same angles for every head: a head dimension to broadcast over (in the queries' dtype).
    cos, sin = cos[:, None].to(query.dtype), sin[:, None].to(query.dtype)
    rotary_dim = cos.shape[-1]

    def turn(states: Tensor) -> Tensor:
        if rotary_dim == states.shape[-1]:
            return apply_rotary(states, cos, sin, interleaved)
        turned = apply_rotary(states[..., :rotary_dim], cos, sin, interleaved)
        return torch.cat([turned, states[..., rotary_dim:]], dim=-1)

    return turn(query), turn(key)


class RotaryEmbedding(nn.Module):
    r"""The angles :math:`m\theta_i` of every token, as ``(cos, sin)``: computed once per forward, used by every layer.

    Nothing here is learned: the frequencies are a buffer that is not saved
    with the weights (``transformers`` does not save them either).

    Args:
        dim: ``R``, the features turned per head.
        base: ``rope_theta``.
        interleaved: Lay each angle out for pairs of neighbours (GPT-J), or for the two halves (Llama).
        inv_freq: Frequencies to use instead of :func:`inverse_frequencies` (Llama 3's, say).
    """

    def __init__(
        self, dim: int, base: float = 10000.0, interleaved: bool = False, inv_freq: Tensor | None = None
    ) -> None:
        super().__init__()
        inv_freq = inverse_frequencies(dim, base) if inv_freq is None else inv_freq
        #: :math:`\theta_i`, ``(R / 2,)``.
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.interleaved = interleaved

    def forward(self, position_ids: Tensor) -> tuple[Tensor, Tensor]:
        """The cosines and sines of every token's angles.

        Args:
            position_ids: ``(B, T)`` or ``(1, T)`` positions.

        Returns:
            ``(cos, sin)``, each ``(B, T, R)`` in float32: the angle of each pair, once for each of its two features.
        """
        # Each position times each frequency: the angle of every pair, m * theta_i.
        angles = position_ids[..., None].float() * self.inv_freq.float()
        # One angle per feature: a pair's two features share it (side by side, or one in each half).
        if self.interleaved:
            angles = angles.repeat_interleave(2, dim=-1)  # (B, T, R)
        else:
            angles = torch.cat((angles, angles), dim=-1)  # (B, T, R)
        return angles.cos(), angles.sin()

    def extra_repr(self) -> str:
        return f"dim={2 * self.inv_freq.shape[0]}, interleaved={self.interleaved}"
