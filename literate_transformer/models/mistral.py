r"""Mistral: Llama with sliding-window attention, and no biases anywhere.

Mistral 7B (Jiang et al., 2023, "Mistral 7B", arXiv:2310.06825, §2) is
Llama's architecture (:mod:`~literate_transformer.models.llama`) with
grouped-query attention in every layer and one change to what a query
sees: in every layer, the last ``sliding_window`` tokens, its own included,
and none before them (*sliding-window attention*; that is ``transformers``'
rule, which this file builds, where the paper's §2 lets position :math:`i`
attend to positions :math:`i - W` to :math:`i`, :math:`W + 1` tokens),

.. math::

    M_{ij} = \begin{cases} 0 & i - w < j \le i \\ -\infty & \text{otherwise.} \end{cases}

A token farther back still reaches the query, through the layers: after
:math:`L` layers, information can travel :math:`L \times w` positions, and
attention (and a cache that keeps only the window) costs :math:`O(T w)`
instead of :math:`O(T^2)`.  The band is the causal mask with a ``window``
(:func:`~literate_transformer.core.masks.causal_mask`), the one GPT-3's and
GPT-Neo's local layers use, here in every layer; ``sliding_window: None``
makes Mistral Llama again.

Mistral's config has neither ``attention_bias`` nor ``mlp_bias``: its
projections never have biases, which is how Llama's classes read a config
without those fields.  So Mistral's attention, feed-forward network and
layers are Llama's (``transformers``' ``MistralAttention``, ``MistralMLP``
and ``MistralDecoderLayer`` are :class:`~literate_transformer.models.llama.LlamaAttention`,
:class:`~literate_transformer.models.llama.LlamaMLP` and
:class:`~literate_transformer.models.llama.LlamaDecoderLayer` here), and
this file is the window alone.

>>> import torch
>>> from transformers import MistralConfig
>>> from literate_transformer.core.masks import causal_mask
>>> config = MistralConfig(vocab_size=40, hidden_size=24, intermediate_size=40, num_hidden_layers=3,
...                        num_attention_heads=4, num_key_value_heads=1, head_dim=6, sliding_window=2,
...                        max_position_embeddings=16)
>>> model = MistralForCausalLM(config).eval()
>>> attentions = model(torch.tensor([[5, 6, 7, 8]]), output_attentions=True).attentions
>>> band = causal_mask(4, window=2)              # each query: its own key and the one before
>>> [torch.equal(probs[0, 0] > 0, band) for probs in attentions]      # in every layer, not every other one
[True, True, True]
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..core.masks import build_attention_mask
from ..core.validation import check_positive_int
from .llama import LlamaForCausalLM, LlamaModel
from .registry import register

__all__ = [
    "MistralModel",
    "MistralForCausalLM",
]


class MistralModel(LlamaModel):
    """Llama's stack, every layer attending within the sliding window.

    Args:
        config: A ``transformers`` ``MistralConfig``.
    """

    hf_name = "Mistral"
    config_type, config_name = "mistral", "MistralConfig"

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """Llama's, and a ``sliding_window`` that is a positive int, or ``None`` (no window)."""
        super().check_own_config(config)
        if config.sliding_window is not None:
            check_positive_int(config.sliding_window, f"{cls.config_name}.sliding_window")

    def attention_masks(
        self, attention_mask: Tensor | None, length: int, past_length: int, dtype: torch.dtype, device: torch.device
    ) -> dict[str, Tensor]:
        """The band of ``sliding_window`` keys with the padding, built once, for every layer (all are ``"full"``)."""
        band = build_attention_mask(
            attention_mask,
            query_length=length,
            causal=True,
            past_length=past_length,
            device=device,
            dtype=dtype,
            window=self.config.sliding_window,
        )
        return {"full": band}


class MistralForCausalLM(LlamaForCausalLM):
    """Mistral with its language-model head.

    Args:
        config: A ``transformers`` ``MistralConfig``.
    """

    model_class = MistralModel


register(MistralModel, MistralForCausalLM)


#: The checks of a Mistral config, by the name they had before they were declared (:class:`MistralModel`).
check_mistral_config = MistralModel.check_config
