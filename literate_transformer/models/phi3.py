r"""Phi-3: Llama's layers with their projections fused, in Mistral's stack, turning part of each head if asked.

Phi-3-mini (Abdin et al., 2024, "Phi-3 Technical Report: A Highly Capable
Language Model Locally on Your Phone", arXiv:2404.14219, §2) "is built upon
a similar block structure as Llama-2": RMS norms, rotary positions, a SwiGLU
network, 32 heads of 96 features in 32 layers, 3.8B parameters.  Its
released configs add Mistral's sliding window
(:mod:`~literate_transformer.models.mistral`; 2047 tokens in
Phi-3-mini-4k's), and ``transformers`` builds Phi-3 from Mistral's classes.
This file is what Phi-3 changes in them: Llama's attention, network and
layer (Mistral's are Llama's), and Mistral's stack.

**One product for the queries, keys and values.**  Where Llama keeps three
matrices that read the same input, ``q_proj``, ``k_proj`` and ``v_proj``,
Phi-3 keeps one, ``qkv_proj``, whose weight stacks theirs (one row per
output feature, as ``nn.Linear`` keeps a weight): the queries' :math:`HD`
rows, then the keys' :math:`KD`, then the values' :math:`KD`,

.. math::

    \begin{bmatrix} q & k & v \end{bmatrix} = x \begin{bmatrix} W_Q & W_K & W_V \end{bmatrix},
    \qquad x \in \mathbb{R}^{E},\ \begin{bmatrix} W_Q & W_K & W_V \end{bmatrix} \in \mathbb{R}^{E \times (H + 2K) D},

and the product is cut after :math:`HD` features and after :math:`KD` more.
Each output feature is the same dot product of a row of weights with
:math:`x` as before, so the outputs are Llama's to float32 rounding (a test
cuts ``qkv_proj`` into a Llama attention's three layers and gets the same
logits).  What
changes is the work around them: the same weight bytes, every number of the
three matrices, are read once either way, but in one call instead of three,
which reads :math:`x` once and pays the per-call cost of a multiply (its
dispatch, its launch on an accelerator) once.  When a model writes one token
per step, a step is little arithmetic over a lot of memory, and those
per-call costs are a good part of it
(:mod:`~literate_transformer.parts.static_cache` profiles such a step).

**One product for the gate and the up-projection.**  The SwiGLU network's two
widenings read the same input too: ``gate_up_proj`` is :math:`W_\text{gate}`
and :math:`W_\text{up}` side by side, :math:`E \to 2F`, cut in two halves,
the gate's first,

.. math::

    \begin{bmatrix} g & u \end{bmatrix} = x \begin{bmatrix} W_\text{gate} & W_\text{up} \end{bmatrix},
    \qquad \operatorname{MLP}(x) = \big(\operatorname{SiLU}(g) \odot u\big)\, W_\text{down} .

The report says nothing of the fusion: it is how the released code and
checkpoints store the weights, which ``transformers`` keeps, and so the
names here.  Attention between the projections is every family's
(:class:`~literate_transformer.parts.attention.Attention`): only
:meth:`Phi3Attention.project` and :meth:`Phi3Attention.output` are Phi-3's,
so the cache a decoding step writes in place
(:mod:`~literate_transformer.parts.static_cache`) serves Phi-3 as it serves
Llama.

**Rotary positions on part of each head** (``partial_rotary_factor``): the
first :math:`R = \lfloor D \cdot \text{factor} \rfloor` features of each
head turn, in Llama's pairs (the two halves of those :math:`R`), and the
other :math:`D - R` carry no position, as in GPT-J
(:mod:`~literate_transformer.models.gptj`).  Phi-3's own models turn them
all (factor 1); Phi-4-mini, which ``transformers`` builds with these
classes, turns three quarters.  ``transformers`` 5 keeps the factor in
``rope_parameters``, where this file reads it (in a 4.x config, a field of
the config, in the releases that have it; the first ones turn whole heads).

**Dropout on each sub-layer's output** before the residual sum
(``resid_pdrop``, 0 in the released configs).  ``transformers`` 5's Phi-3
applies none to the embeddings, whatever ``embd_pdrop`` says, and neither
does this file.

The long-context scaling of the 128k models (``rope_scaling`` of type
``"longrope"``, ``"su"`` in older configs) is not built here: a config that
asks for it is refused, naming the field.

``qkv_proj``'s rows, cut into three, are a Llama attention's ``q_proj``,
``k_proj`` and ``v_proj``:

>>> import torch
>>> from transformers import Phi3Config
>>> from literate_transformer.models.llama import LlamaAttention
>>> from literate_transformer.parts.rotary import RotaryEmbedding
>>> config = Phi3Config(hidden_size=24, num_attention_heads=4, num_key_value_heads=2)
>>> fused, separate = Phi3Attention(config), LlamaAttention(config)
>>> fused.qkv_proj.weight.shape                  # ((H + 2K) D, E): 24 query rows, then 12 key and 12 value rows
torch.Size([48, 24])
>>> query, key, value = fused.qkv_proj.weight.split([24, 12, 12])
>>> _ = separate.load_state_dict({"q_proj.weight": query, "k_proj.weight": key, "v_proj.weight": value,
...                               "o_proj.weight": fused.o_proj.weight})
>>> states, angles = torch.randn(1, 5, 24), RotaryEmbedding(6)(torch.arange(5)[None])
>>> torch.allclose(fused(states, position_embeddings=angles).hidden_states,
...                separate(states, position_embeddings=angles).hidden_states, atol=1e-6)
True
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ..core.activations import get_activation
from ..parts.stack import Sublayer
from .llama import LlamaAttention, LlamaDecoderLayer, rope_parameters
from .mistral import MistralForCausalLM, MistralModel
from .registry import register

__all__ = [
    "Phi3Attention",
    "Phi3MLP",
    "Phi3DecoderLayer",
    "Phi3Model",
    "Phi3ForCausalLM",
]


class Phi3Attention(LlamaAttention):
    """Llama's attention with one fused projection, ``qkv_proj``, for the queries, keys and values; ``o_proj``.

    Args:
        config: The Phi-3 config.
        layer_idx: The layer's index.
    """

    #: ``None``, for one fused ``qkv_proj`` in place of separate query, key and value layers (see ``project``).
    projections = None

    def add_projections(self, width: int, bias: bool = False, output_bias: bool | None = None) -> None:
        """Build ``qkv_proj``, ``E -> (H + 2K) D`` (the queries', keys' and values' rows, stacked), and ``o_proj``,
        ``H D -> E``.

        Args:
            width: ``E``.
            bias: Whether the layers add a bias (Phi-3's config has no ``attention_bias``: none).
            output_bias: Whether ``o_proj`` does, where it differs.
        """
        inner, key_value = self.num_heads * self.head_size, self.num_key_value_heads * self.head_size
        self.qkv_proj = nn.Linear(width, inner + 2 * key_value, bias=bias)
        self.o_proj = nn.Linear(inner, width, bias=bias if output_bias is None else output_bias)

    def project(self, hidden_states: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One product gives every head's queries, keys and values, ``(B, T, (H + 2K) D)``, cut into the queries
        ``(B, T, H D)``, the keys and the values ``(B, T, K D)``."""
        inner, key_value = self.num_heads * self.head_size, self.num_key_value_heads * self.head_size
        # x [W_Q W_K W_V]: one multiply for the three, then the features cut after H D and after K D more.
        return self.qkv_proj(hidden_states).split([inner, key_value, key_value], dim=-1)

    def output(self, context: Tensor) -> Tensor:
        """:math:`W^O` (``o_proj``)."""
        return self.o_proj(context)


class Phi3MLP(nn.Module):
    """The SwiGLU network with its two widenings fused: ``gate_up_proj`` (``E -> 2F``), ``down_proj`` (``F -> E``).

    Args:
        config: The Phi-3 config.
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        #: :math:`W_\text{gate}` and :math:`W_\text{up}` side by side: the gate's F rows, then the up-projection's.
        self.gate_up_proj = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.activation_fn = get_activation(config.hidden_act)

    def forward(self, hidden_states: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, E)``: :math:`(\\operatorname{act}(x W_\\text{gate}) \\odot x W_\\text{up}) W_\\text{down}`."""
        # Both widenings in one multiply, cut in two halves: the gate's, then the up-projection's.
        gate, up = self.gate_up_proj(hidden_states).chunk(2, dim=-1)
        # The gate, act(x W_gate), times the other widening, element by element.
        intermediate = self.activation_fn(gate) * up  # (B, T, F)
        # Back to the model's width.
        return self.down_proj(intermediate)


class Phi3DecoderLayer(LlamaDecoderLayer):
    """Llama's pre-RMS-norm layer with Phi-3's attention and MLP, and dropout on each sub-layer's output.

    Args:
        config: The Phi-3 config.
        layer_idx: The layer's index.
    """

    attention_class, mlp_class = Phi3Attention, Phi3MLP

    def __init__(self, config: Any, layer_idx: int = 0) -> None:
        super().__init__(config, layer_idx)
        #: Dropout on the attention's output before the residual sum (``resid_pdrop``).
        self.resid_attn_dropout = nn.Dropout(config.resid_pdrop)
        #: Dropout on the MLP's output before the residual sum (``resid_pdrop``).
        self.resid_mlp_dropout = nn.Dropout(config.resid_pdrop)

    def sublayers(self) -> tuple[Sublayer, Sublayer]:
        """Llama's two sub-layers, each output through its dropout before it joins the residual stream."""
        return (
            Sublayer(self.self_attn, self.input_layernorm, self.resid_attn_dropout),
            Sublayer(self.mlp, self.post_attention_layernorm, self.resid_mlp_dropout),
        )


class Phi3Model(MistralModel):
    """Mistral's stack (its sliding window, where the config has one) with Phi-3's layers, turning
    ``partial_rotary_factor`` of each head.

    Args:
        config: A ``transformers`` ``Phi3Config``.
    """

    hf_name = "Phi3"
    config_type, config_name = "phi3", "Phi3Config"
    layer_class = Phi3DecoderLayer
    partial_rotary = True

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """The original rotations only (no ``longrope``), then Mistral's checks."""
        parameters = rope_parameters(config)
        if parameters["rope_type"] != "default":
            raise ValueError(
                f"{cls.config_name}.rope_scaling={parameters!r} is not supported: rope_type "
                f"{parameters['rope_type']!r} (only None and 'default': the 128k models' long-context scaling is not "
                "built here)"
            )
        super().check_own_config(config)


class Phi3ForCausalLM(MistralForCausalLM):
    """Phi-3 with its language-model head (tied to ``embed_tokens`` only if the config says so).

    Args:
        config: A ``transformers`` ``Phi3Config``.
    """

    model_class = Phi3Model


register(Phi3Model, Phi3ForCausalLM)


#: The checks of a Phi-3 config, by the name other families' checks have (:class:`Phi3Model`).
check_phi3_config = Phi3Model.check_config
