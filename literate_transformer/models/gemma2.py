r"""Gemma 2: Llama with local layers between global ones, soft-capped scores, and a norm on each side of every sub-layer.

Gemma 2 (Gemma Team, 2024, "Gemma 2: Improving Open Language Models at a
Practical Size", arXiv:2408.00118) keeps Llama's plan
(:mod:`~literate_transformer.models.llama`): rotary positions on whole
heads, grouped-query attention, a gated feed-forward network, RMS norms and
no biases.  The paper's abstract names its change to attention,
interleaving local and global attention layers; the details below are read
off ``transformers``' ``modeling_gemma2.py`` and ``configuration_gemma2.py``,
which this file equals:

* **Local and global layers.**  ``layer_types`` gives each layer's kind.  A
  ``"sliding_attention"`` layer lets a query see the last ``sliding_window``
  tokens, its own included (Mistral's band,
  :mod:`~literate_transformer.models.mistral`); a ``"full_attention"`` layer
  sees every earlier token.  Gemma 2's configs alternate them, local first.
  The local layers cost :math:`O(T w)` and need only the last :math:`w`
  tokens' keys and values (this package's cache keeps them all, and the band
  hides the older ones); the global layers between them still reach the
  whole context.  The stack builds both masks once, and each layer reads
  its own, as GPT-3's blocks do (:class:`~literate_transformer.models.gpt3.GPT3Block`).
* **Soft-capped scores and logits.**  Every attention score :math:`s`
  becomes :math:`c \tanh(s / c)` before the mask (``attn_logit_softcapping``),
  and so does every final logit (``final_logit_softcapping``): about
  :math:`s` where :math:`|s| \ll c`, and never past :math:`\pm c`, so no
  score or logit can run away however large the weights grow.  PyTorch's
  fused kernel has no such step, so capped attention runs the eager code
  (:func:`~literate_transformer.core.kernels.attend`), as ``transformers``'
  Gemma 2 declines SDPA (``_supports_sdpa = False``).
* **Its own query scale.**  Scores are multiplied by
  :math:`1/\sqrt{\mathtt{query\_pre\_attn\_scalar}}`, a number of the config,
  not by :math:`1/\sqrt{D}`.
* **A norm on both sides of each sub-layer.**  Llama normalises what a
  sub-layer reads; Gemma 2 also normalises what it writes, before the
  residual sum.  Four norms a layer: ``input_layernorm`` and
  ``post_attention_layernorm`` around attention, ``pre_feedforward_layernorm``
  and ``post_feedforward_layernorm`` around the feed-forward network
  (Llama's ``post_attention_layernorm`` is the norm *before* its
  feed-forward network: the same name, another place).
* **A gain of** :math:`1 + w`.  Gemma 2's RMS norm multiplies by
  :math:`1 + w`, :math:`w` starting at 0, and does so in float32, casting
  back afterwards (Llama casts first, then multiplies by its gain).
* **Scaled embeddings.**  The token vectors are multiplied by :math:`\sqrt{E}`,
  a float32 number first cast to the table's dtype (so in bfloat16, as
  ``transformers``' comment on it notes, :math:`\sqrt{3072} = 55.4256`
  becomes 55.5).
* **GeGLU.**  The gate's activation is the tanh GELU
  (``hidden_activation="gelu_pytorch_tanh"``), not the SiLU, under a field
  name of its own (Llama's is ``hidden_act``).

.. math::

    h \leftarrow h + \operatorname{RMS}'_2\big(\operatorname{Attn}_\ell(\operatorname{RMS}'_1 h)\big), \qquad
    h \leftarrow h + \operatorname{RMS}'_4\big(\operatorname{GeGLU}(\operatorname{RMS}'_3 h)\big), \qquad
    \text{logits} = c_f \tanh\!\big(\operatorname{RMS}'_f(h^{(L)})\, W^\top / c_f\big),

with :math:`\operatorname{RMS}'(x) = (1 + w) \odot x / \operatorname{rms}(x)`, :math:`h^{(0)} = \sqrt{E}\,
\text{embed}(\text{ids})`, and :math:`\operatorname{Attn}_\ell` banded in the local layers.

``transformers`` 4.41 has no Gemma 2 (its tests skip there, saying so).
This file refuses ``use_bidirectional_attention=True`` (attention without
the causal mask; ``transformers``' default, ``None``, is causal).

Two of its differences on numbers (chapter 14 runs a whole Gemma 2): a new
norm's weight :math:`w` is 0, and its gain :math:`1 + w` is 1, as a new
Llama norm's is; a logit soft-capped at :math:`c = 2` keeps a small value
and never passes :math:`c`:

>>> import torch
>>> norm = Gemma2RMSNorm(4)
>>> x = torch.tensor([[3.0, -3.0, 3.0, -3.0]])
>>> with torch.no_grad():
...     print(norm(x))                                  # divided by its RMS, 3, times 1 + 0
...     _ = norm.weight.fill_(1.0)
...     print(norm(x))                                  # times 1 + 1
tensor([[ 1.0000, -1.0000,  1.0000, -1.0000]])
tensor([[ 2.0000, -2.0000,  2.0000, -2.0000]])
>>> cap = 2.0                                                          # final_logit_softcapping
>>> (cap * torch.tanh(torch.tensor([0.5, 5.0, 50.0]) / cap)).round(decimals=3)
tensor([0.4900, 1.9730, 2.0000])
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ..core.masks import build_attention_mask
from ..core.outputs import ModelOutput
from ..core.validation import check_positive_int
from ..parts.feed_forward import GatedFeedForward
from ..parts.heads import causal_lm_loss
from ..parts.norms import RMSNorm
from ..parts.stack import Sublayer
from .llama import LlamaAttention, LlamaDecoderLayer, LlamaForCausalLM, LlamaModel
from .registry import register

__all__ = [
    "LAYER_TYPES",
    "layer_types_of",
    "Gemma2RMSNorm",
    "Gemma2MLP",
    "Gemma2Attention",
    "Gemma2DecoderLayer",
    "Gemma2Model",
    "Gemma2ForCausalLM",
]

#: The kinds of layer, by ``transformers``' names: banded (local) and dense (global).
LAYER_TYPES = ("sliding_attention", "full_attention")


def layer_types_of(config: Any) -> list[str]:
    """Each layer's kind: the config's ``layer_types``, or, where a config has none (older ``transformers``), the
    alternation those releases hard-coded (``sliding_window if not bool(layer_idx % 2)``): local, global, local, ..."""
    return list(getattr(config, "layer_types", None) or [LAYER_TYPES[i % 2] for i in range(config.num_hidden_layers)])


class Gemma2RMSNorm(RMSNorm):
    r"""RMS norm with the gain :math:`1 + w` (``weight`` is :math:`w`, starting at 0), applied in float32.

    Args:
        hidden_size: The number of features :math:`E`.
        eps: Added to the mean square before the root.
    """

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__(hidden_size, eps)
        # w = 0: a new norm's gain is 1, as a new Llama norm's is.
        nn.init.zeros_(self.weight)

    def forward(self, hidden_states: Tensor) -> Tensor:
        """Normalise the last dimension, ``(..., E)``, in float32; the result in the input's dtype."""
        states = hidden_states.float()
        # Divide by the root mean square, as Llama's norm does ...
        normalised = states * torch.rsqrt(states.pow(2).mean(-1, keepdim=True) + self.eps)
        # ... then the gain 1 + w, still in float32: the cast comes last.
        return (normalised * (1.0 + self.weight.float())).to(hidden_states.dtype)


class Gemma2MLP(GatedFeedForward):
    """GeGLU: Llama's gated network under its names, the gate's activation ``hidden_activation`` (the tanh GELU).

    Args:
        config: The Gemma 2 config.
    """

    def __init__(self, config: Any) -> None:
        super().__init__(config.hidden_size, config.intermediate_size, config.hidden_activation)


class Gemma2Attention(LlamaAttention):
    """Llama's grouped-query attention, scaled by ``query_pre_attn_scalar`` and soft-capped.

    Args:
        config: The Gemma 2 config.
        layer_idx: The layer's index.
    """

    def __init__(self, config: Any, layer_idx: int = 0) -> None:
        super().__init__(config, layer_idx)
        # Scores times 1/sqrt(query_pre_attn_scalar), not 1/sqrt(D).
        self.scale = config.query_pre_attn_scalar**-0.5
        # Then c tanh(s / c), before the mask (core.kernels.scaled_dot_product_attention).
        self.softcap = config.attn_logit_softcapping


class Gemma2DecoderLayer(LlamaDecoderLayer):
    """Pre-norm and post-norm at once: :math:`x + \\operatorname{RMS}'_\\text{post}(f(\\operatorname{RMS}'_\\text{pre} x))`.

    Llama's layer with Gemma 2's attention, GeGLU network and norms, and two norms more: each sub-layer's
    output is normalised too, before the residual sum.  Its forward is every decoder layer's
    (:meth:`~literate_transformer.parts.stack.DecoderLayer.forward`) on the mask of its kind.

    Args:
        config: The Gemma 2 config.
        layer_idx: The layer's index (its kind is ``layer_types[layer_idx]``).
    """

    attention_class = Gemma2Attention
    mlp_class = Gemma2MLP
    norm_class = Gemma2RMSNorm

    def __init__(self, config: Any, layer_idx: int = 0) -> None:
        super().__init__(config, layer_idx)
        #: ``"sliding_attention"`` (local, banded) or ``"full_attention"`` (global).
        self.attention_type = layer_types_of(config)[layer_idx]
        self.pre_feedforward_layernorm = Gemma2RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_feedforward_layernorm = Gemma2RMSNorm(config.hidden_size, config.rms_norm_eps)

    def sublayers(self) -> tuple[Sublayer, Sublayer]:
        """Each sub-layer between its two norms: the first reads its input, the second its output.

        A :class:`~literate_transformer.parts.stack.Sublayer`'s third module acts on the sub-layer's output
        before the residual sum (CTRL's dropout); here it is the post-norm.
        """
        return (
            Sublayer(self.self_attn, self.input_layernorm, self.post_attention_layernorm),
            Sublayer(self.mlp, self.pre_feedforward_layernorm, self.post_feedforward_layernorm),
        )


class Gemma2Model(LlamaModel):
    """Llama's stack with Gemma 2's layers and final norm, embeddings scaled by :math:`\\sqrt{E}`, and two masks.

    Args:
        config: A ``transformers`` ``Gemma2Config``.
    """

    hf_name = "Gemma 2"
    config_type, config_name, config_activation = "gemma2", "Gemma2Config", "hidden_activation"
    layer_class = Gemma2DecoderLayer

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """Llama's, and Gemma 2's own fields: a kind per layer, a window where a layer is local, positive scales
        and soft-caps (a soft-cap may be ``None``: no cap), and causal attention."""
        super().check_own_config(config)
        kinds = layer_types_of(config)
        if len(kinds) != config.num_hidden_layers or not set(kinds) <= set(LAYER_TYPES):
            raise ValueError(f"Gemma2Config.layer_types={kinds!r} must name one of {LAYER_TYPES} for each layer")
        if "sliding_attention" in kinds:
            check_positive_int(config.sliding_window, "Gemma2Config.sliding_window")
        for field in ("query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping"):
            value = getattr(config, field)
            if not (
                (value is None and field.endswith("softcapping")) or (isinstance(value, (int, float)) and value > 0)
            ):
                raise ValueError(f"Gemma2Config.{field}={value!r} must be a positive number")
        if getattr(config, "use_bidirectional_attention", None):
            raise ValueError("Gemma2Config.use_bidirectional_attention=True is not supported (only causal attention)")

    def embed(self, input_ids: Tensor, position_ids: Tensor) -> Tensor:
        """The token vectors times :math:`\\sqrt{E}`, a float32 number cast to their dtype (as ``transformers``)."""
        embeddings = self.embed_tokens(input_ids)
        normalizer = torch.tensor(self.config.hidden_size**0.5, dtype=torch.float32, device=embeddings.device)
        return embeddings * normalizer.to(embeddings.dtype)

    def attention_masks(
        self, attention_mask: Tensor | None, length: int, past_length: int, dtype: torch.dtype, device: torch.device
    ) -> dict[str, Tensor]:
        """Both masks, built once, by ``layer_types``' names: the causal one, and the band of ``sliding_window``."""
        options = dict(query_length=length, causal=True, past_length=past_length, device=device, dtype=dtype)
        return {
            "full_attention": build_attention_mask(attention_mask, **options),
            "sliding_attention": build_attention_mask(attention_mask, window=self.config.sliding_window, **options),
        }


class Gemma2ForCausalLM(LlamaForCausalLM):
    """Gemma 2 with its language-model head (tied to ``embed_tokens`` when the config says so), its logits soft-capped.

    Args:
        config: A ``transformers`` ``Gemma2Config``.
    """

    model_class = Gemma2Model

    def score_next_tokens(self, output: ModelOutput, labels: Tensor | None) -> ModelOutput:
        """Llama's logits, capped to :math:`\\pm` ``final_logit_softcapping``; the loss (with ``labels``) on the capped ones."""
        output = super().score_next_tokens(output, None)
        cap = self.config.final_logit_softcapping
        if cap is not None:
            # c tanh(z / c): every logit within (-c, c), the large ones squeezed, the small ones nearly unchanged.
            output.logits = cap * torch.tanh(output.logits / cap)
        if labels is not None:
            output.loss = causal_lm_loss(output.logits, labels)
        return output


register(Gemma2Model, Gemma2ForCausalLM)


#: The checks of a Gemma 2 config, by the name they had before they were declared (:class:`Gemma2Model`).
check_gemma2_config = Gemma2Model.check_config
