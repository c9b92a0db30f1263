r"""Qwen3: Llama with an RMS norm on every head's queries and keys.

Qwen3 (Qwen Team, 2025, "Qwen3 Technical Report", arXiv:2505.09388, §2) is
Llama (:mod:`~literate_transformer.models.llama`): RMS norms, rotary
positions, SwiGLU, grouped-query attention.  It changes one thing in
attention: after the projections and before the rotation, each head's
queries and each head's keys are RMS-normalised over their :math:`D`
features, with a learned gain per feature (``q_norm``, ``k_norm``, shared by
the heads of a layer),

.. math::

    q_h \leftarrow \operatorname{RMS}_q(q_h), \quad k_h \leftarrow \operatorname{RMS}_k(k_h), \qquad
    \text{score}_{ij} = \frac{\langle R_i\, q_i, R_j\, k_j \rangle}{\sqrt{D}} ,

so that a score's size is set by the norms' learned gains however large the
projections' weights become (the report names this *QK-Norm*, replacing the
biases on the projections of Qwen2, and gives stable training as its
reason).  This file is that difference, and the names of
the classes it swaps into Llama's (``attention_class``, ``layer_class``,
``model_class``).  Qwen3's config has no ``mlp_bias``, so its feed-forward
network, Llama's :class:`~literate_transformer.models.llama.LlamaMLP`
(``transformers``' ``Qwen3MLP``), never has biases.

``transformers`` 4.41 has no Qwen3 (its tests skip there, saying so).  Qwen3's
configs may also ask for sliding-window attention in their upper layers
(``use_sliding_window``); Qwen3's released models do not, and this file
refuses it.

Qwen3's attention reads Llama's fields; on queries and keys however large,
each head comes out of its norm with a root mean square of 1 (its gains
start at 1):

>>> import torch
>>> from transformers import LlamaConfig
>>> attention = Qwen3Attention(LlamaConfig(hidden_size=24, num_attention_heads=4, num_key_value_heads=2,
...                                        head_dim=8, rms_norm_eps=1e-6))
>>> query, key = 50 * torch.randn(1, 4, 3, 8), 50 * torch.randn(1, 2, 3, 8)   # (B, H, T, D), (B, K, T, D)
>>> no_turn = (torch.ones(1, 3, 8), torch.zeros(1, 3, 8))                       # cos 1, sin 0: angle 0
>>> normalised, _ = attention.position(query, key, no_turn)
>>> normalised.detach().pow(2).mean(-1).sqrt().round(decimals=3).unique()
tensor([1.])
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from ..parts.norms import make_norm
from .llama import (
    LlamaAttention,
    LlamaDecoderLayer,
    LlamaForCausalLM,
    LlamaModel,
    head_dim_of,
)
from .registry import register

__all__ = [
    "QWEN3_UNSUPPORTED",
    "Qwen3Attention",
    "Qwen3DecoderLayer",
    "Qwen3Model",
    "Qwen3ForCausalLM",
]


#: Qwen3 options this package does not build, each with the only value it accepts (sliding-window attention in the
#: upper layers, ``use_sliding_window``, which none of Qwen3's released models uses).
QWEN3_UNSUPPORTED = {"use_sliding_window": False}


class Qwen3Attention(LlamaAttention):
    """Llama's attention, with each head's queries and keys RMS-normalised before they are turned.

    Args:
        config: The Qwen3 config.
        layer_idx: The layer's index.
    """

    def __init__(self, config: Any, layer_idx: int = 0) -> None:
        super().__init__(config, layer_idx)
        #: The queries' norm over a head's D features (one gain per feature, shared by the heads).
        self.q_norm = make_norm(head_dim_of(config), config.rms_norm_eps, kind="rms_norm")
        #: The keys' norm, the same way.
        self.k_norm = make_norm(head_dim_of(config), config.rms_norm_eps, kind="rms_norm")

    def position(self, query: Tensor, key: Tensor, position_embeddings: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        """RMS-normalise each head's queries and keys, then turn them as Llama does."""
        return super().position(self.q_norm(query), self.k_norm(key), position_embeddings)


class Qwen3DecoderLayer(LlamaDecoderLayer):
    """Llama's layer with Qwen3's attention."""

    attention_class = Qwen3Attention


class Qwen3Model(LlamaModel):
    """Llama's stack with Qwen3's layers.

    Args:
        config: A ``transformers`` ``Qwen3Config``.
    """

    hf_name = "Qwen3"
    config_type, config_name, config_unsupported = "qwen3", "Qwen3Config", QWEN3_UNSUPPORTED
    layer_class = Qwen3DecoderLayer


#: The checks of a Qwen3 config, by the name they had before they were declared (:class:`Qwen3Model`).
check_qwen3_config = Qwen3Model.check_config


class Qwen3ForCausalLM(LlamaForCausalLM):
    """Qwen3 with its language-model head (tied to ``embed_tokens`` when the config says so, as in its small models).

    Args:
        config: A ``transformers`` ``Qwen3Config``.
    """

    model_class = Qwen3Model


register(Qwen3Model, Qwen3ForCausalLM)
