r"""Norms: layer norm, RMS norm, and the one factory every model builds them with.

A transformer normalises each token vector on its own, over its :math:`E`
features, so that its scale stays steady however many layers have added to
it.  Two norms are in use, each with a learned gain :math:`\gamma`:

.. math::

    \operatorname{LayerNorm}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta,
    \qquad \mu = \tfrac{1}{E}\textstyle\sum_i x_i,\quad \sigma^2 = \tfrac{1}{E}\sum_i (x_i - \mu)^2,

.. math::

    \operatorname{RMSNorm}(x) = \gamma \odot \frac{x}{\sqrt{\tfrac{1}{E}\sum_i x_i^2 + \epsilon}} .

Layer norm (Ba et al., 2016) centres and rescales, and shifts by a learned
bias :math:`\beta`: BERT, GPT-2, BART and the book use it
(:class:`torch.nn.LayerNorm`).  RMS norm (Zhang and Sennrich, 2019,
arXiv:1910.07467) drops the mean and the bias and divides by the root mean
square alone, one reduction instead of two: T5 uses it (``T5LayerNorm``), and
Llama and its descendants (``LlamaRMSNorm``).  Both compute their statistics
in float32 whatever the input's dtype, as HuggingFace's do.

Every norm of the package is built by :func:`make_norm`, the way every
activation comes from :func:`~literate_transformer.core.activations.get_activation`,
so that a family that changes its norm changes one word.

>>> import torch
>>> x = torch.tensor([[1.0, 2.0, 3.0, 6.0]])
>>> make_norm(4, eps=0.0, kind="rms_norm")(x)      # x / sqrt(mean(x^2)) = x / sqrt(12.5)
tensor([[0.2828, 0.5657, 0.8485, 1.6971]], grad_fn=<MulBackward0>)
>>> type(make_norm(4, eps=1e-5)).__name__            # layer norm by default
'LayerNorm'
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..core.validation import Arguments, check_positive_int, check_tensor, validate_with

__all__ = ["RMSNorm", "NORMS", "make_norm"]


def _check_rms_norm_inputs(norm: RMSNorm, args: Arguments) -> None:
    hidden_states = check_tensor(args.hidden_states, "hidden_states", dtypes=("float",))
    width = norm.weight.shape[0]
    if hidden_states.dim() == 0 or hidden_states.shape[-1] != width:
        raise ValueError(f"hidden_states must have shape (..., {width}), got {tuple(hidden_states.shape)}")


class RMSNorm(nn.Module):
    r"""Root-mean-square norm: :math:`\gamma \odot x / \sqrt{\operatorname{mean}(x^2) + \epsilon}`, no bias.

    HuggingFace's ``LlamaRMSNorm``, ``Qwen3RMSNorm``, ``MistralRMSNorm`` and
    ``T5LayerNorm`` all compute this, under the parameter name ``weight``.

    Args:
        hidden_size: The number of features :math:`E`.
        eps: Added to the mean square before the root.
    """

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        check_positive_int(hidden_size, "hidden_size")
        if not isinstance(eps, (int, float)) or isinstance(eps, bool) or eps < 0:
            raise ValueError(f"eps must be a non-negative number, got {eps!r}")
        #: The gain :math:`\gamma`, one per feature, starting at 1.
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    @validate_with(_check_rms_norm_inputs)
    def forward(self, hidden_states: Tensor) -> Tensor:
        """Normalise the last dimension.

        Args:
            hidden_states: ``(..., E)``.

        Returns:
            ``(..., E)``, in the input's dtype.
        """
        dtype = hidden_states.dtype
        # The mean of the squares over the features, in float32 whatever the input's dtype.
        variance = hidden_states.float().pow(2).mean(-1, keepdim=True)
        # Divide by the root mean square (no mean subtracted, no bias added) ...
        normalised = hidden_states.float() * torch.rsqrt(variance + self.eps)
        # ... and scale each feature by its learned gain.
        return self.weight * normalised.to(dtype)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


#: The norms by the names :func:`make_norm` takes.
NORMS = {"layer_norm": nn.LayerNorm, "rms_norm": RMSNorm}


def make_norm(hidden_size: int, eps: float, kind: str = "layer_norm", bias: bool = True) -> nn.Module:
    """A new norm over ``hidden_size`` features: the one place every model builds its norms.

    Args:
        hidden_size: The number of features :math:`E`.
        eps: The epsilon (``config.layer_norm_eps``, ``rms_norm_eps``, ...).
        kind: ``"layer_norm"`` or ``"rms_norm"`` (a key of :data:`NORMS`).
        bias: A layer norm's shift :math:`\\beta` (some families drop it); an RMS norm has none.

    Returns:
        The module.

    Raises:
        ValueError: for an unknown ``kind``, listing the known ones.
    """
    if kind not in NORMS:
        raise ValueError(f"kind must be one of {sorted(NORMS)}, got {kind!r}")
    if kind == "rms_norm":
        return RMSNorm(hidden_size, eps)
    return nn.LayerNorm(hidden_size, eps=eps, bias=bias)
