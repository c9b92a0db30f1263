r"""Llama: RMS norms, rotary positions on whole heads, a SwiGLU network, and grouped-query attention.

Llama (Touvron et al., 2023, "LLaMA: Open and Efficient Foundation Language
Models", arXiv:2302.13971, §2.2) is a pre-LN decoder like GPT-2
(:mod:`~literate_transformer.models.gpt2`) assembled from parts that later
decoders all took:

* **RMS norms** (:class:`~literate_transformer.parts.norms.RMSNorm`) instead
  of layer norms: each sub-layer's input, and the stack's output, divided by
  its root mean square, with a learned gain and no bias;
* **rotary positions** (:mod:`~literate_transformer.parts.rotary`) on every
  feature of every head, Llama's way (the two halves of a head form the
  pairs, ``rotate_half``), and no position table at all;
* a **SwiGLU** feed-forward network
  (:class:`~literate_transformer.parts.feed_forward.GatedFeedForward`,
  :math:`(\operatorname{SiLU}(x W_\text{gate}) \odot x W_\text{up}) W_\text{down}`);
* **no biases**, unless the config asks (``attention_bias``, ``mlp_bias``).

Llama 2 (Touvron et al., 2023, arXiv:2307.09288, §2.2) added
**grouped-query attention** to its largest model, and Llama 3 to all: the
:math:`H` query heads share :math:`K < H` key/value heads, in groups of
:math:`H / K` (``num_key_value_heads``), so that the cache a model keeps per
token is :math:`H/K` times smaller.  The shared
:class:`~literate_transformer.parts.attention.Attention` repeats each key
and value head for its group (:func:`~literate_transformer.parts.heads.repeat_kv`).

.. math::

    h \leftarrow h + \operatorname{Attn}\big(\operatorname{RMS}_1 h;\ R_m\big), \qquad
    h \leftarrow h + \operatorname{SwiGLU}\big(\operatorname{RMS}_2 h\big), \qquad
    \text{logits} = \operatorname{RMS}_f\big(h^{(L)}\big) W_\text{head}^\top .

Under HuggingFace's names (``model.embed_tokens``,
``model.layers.0.self_attn.q_proj``, ``model.layers.0.mlp.gate_proj``,
``model.layers.0.input_layernorm``, ``model.norm``, ``lm_head``) a
``transformers`` Llama's weights load by name.  Llama's descendants read the
same config fields, so a family built on Llama (Qwen3, Mistral) names the
classes it swaps (``attention_class``, ``layer_class``, ``model_class``) and
writes only what they change; a bias field its config lacks
(``attention_bias``, ``mlp_bias``) reads as no biases.

Rotary scaling
--------------
``rope_scaling`` (``rope_parameters`` in ``transformers`` 5) may stretch the
rotations for longer contexts.  This file builds the original rotations
(``None`` or ``rope_type: "default"``) and Llama 3.1's (``"llama3"``,
:func:`~literate_transformer.parts.rotary.llama3_inverse_frequencies`), and
refuses the other kinds with a ValueError that names the field.

>>> import torch
>>> from transformers import LlamaConfig
>>> config = LlamaConfig(vocab_size=40, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
...                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16)
>>> model = LlamaForCausalLM(config).eval()
>>> output = model(torch.tensor([[5, 6, 7]]), use_cache=True)
>>> output.logits.shape, output.past_key_values[0].self_attention[0].shape   # (B, T, V); keys (B, K, S, D)
(torch.Size([1, 3, 40]), torch.Size([1, 2, 3, 6]))
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ..book.decoding import GenerationMixin
from ..core.outputs import LayerCache, ModelOutput
from ..core.validation import (
    Arguments,
    check_attention_mask,
    check_input_ids,
    check_past_key_values,
    check_tensor,
    checks_values,
    validate_with,
    value_error,
)
from ..parts.attention import Attention
from ..parts.feed_forward import GatedFeedForward
from ..parts.heads import LanguageModelHead
from ..parts.norms import RMSNorm
from ..parts.rotary import RotaryEmbedding, inverse_frequencies, llama3_inverse_frequencies, rotate_queries_and_keys
from ..parts.stack import DecoderLayer, DecoderStack, Sublayer
from ..parts.static_cache import StaticCacheGeneration
from .registry import ConvertsFromHF, register

__all__ = [
    "ROPE_TYPES",
    "rope_parameters",
    "head_dim_of",
    "key_value_heads_of",
    "partial_rotary_factor_of",
    "rotary_dim_of",
    "rotary_inverse_frequencies",
    "kv_cache_bytes_per_token",
    "LlamaAttention",
    "LlamaMLP",
    "LlamaDecoderLayer",
    "LlamaModel",
    "LlamaForCausalLM",
]

#: The kinds of ``rope_scaling`` this package builds.
ROPE_TYPES = ("default", "llama3")


def rope_parameters(config: Any) -> dict[str, Any]:
    """The config's rotary parameters as one dict: ``rope_type``, ``rope_theta`` and the scaling's own fields.

    ``transformers`` 5 keeps them in ``rope_parameters``; 4.x in
    ``rope_theta`` and ``rope_scaling`` (whose kind is ``rope_type``, or
    ``type`` in older configs).
    """
    parameters = getattr(config, "rope_parameters", None)
    if parameters is None:
        scaling = getattr(config, "rope_scaling", None) or {}
        parameters = {"rope_theta": getattr(config, "rope_theta", 10000.0), **scaling}
    parameters = dict(parameters)
    parameters.setdefault("rope_type", parameters.get("type", "default"))
    return parameters


def head_dim_of(config: Any) -> int:
    """``D``: the config's ``head_dim``, or the hidden size shared by the heads."""
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def key_value_heads_of(config: Any) -> int:
    """``K``: the config's ``num_key_value_heads``, or one per query head (multi-head attention)."""
    return getattr(config, "num_key_value_heads", None) or config.num_attention_heads


def partial_rotary_factor_of(config: Any) -> float:
    """The fraction of a head's features that turn: ``partial_rotary_factor`` (in ``rope_parameters`` in
    ``transformers`` 5, a field of the config in 4.x), or 1 (all of them) where the config does not say."""
    factor = rope_parameters(config).get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None))
    return 1.0 if factor is None else factor


def rotary_dim_of(config: Any) -> int:
    """``R``: the features of a head that turn, ``int(D * partial_rotary_factor)`` as ``transformers`` counts them
    (``D`` in Llama, which turns them all)."""
    return int(head_dim_of(config) * partial_rotary_factor_of(config))


def rotary_inverse_frequencies(config: Any) -> Tensor:
    """The frequencies of a head's pairs: ``rope_theta``'s over the ``R`` turned features, scaled as ``rope_scaling``
    says (Llama 3.1's)."""
    parameters = rope_parameters(config)
    inv_freq = inverse_frequencies(rotary_dim_of(config), parameters["rope_theta"])
    if parameters["rope_type"] == "llama3":
        inv_freq = llama3_inverse_frequencies(
            inv_freq,
            parameters["factor"],
            parameters["low_freq_factor"],
            parameters["high_freq_factor"],
            parameters["original_max_position_embeddings"],
        )
    return inv_freq


def kv_cache_bytes_per_token(config: Any, bytes_per_number: int = 2) -> int:
    r"""What generation keeps per token of context: a key and a value of ``D`` numbers, per key/value head, per layer.

    .. math::

        2 \cdot L \cdot K \cdot D \cdot \text{bytes per number}

    With grouped-query attention (:math:`K < H`) the cache is :math:`H / K`
    times smaller than with one key/value head per query head.

    Args:
        config: A Llama-like config (``num_hidden_layers``, ``num_key_value_heads``, ``head_dim``).
        bytes_per_number: 2 for float16 and bfloat16 (the dtype checkpoints are released in), 4 for float32.
    """
    return 2 * config.num_hidden_layers * key_value_heads_of(config) * head_dim_of(config) * bytes_per_number


class LlamaAttention(Attention):
    """Grouped-query attention: ``q_proj`` for ``H`` heads, ``k_proj`` and ``v_proj`` for ``K``, ``o_proj``; rotary positions.

    Args:
        config: The Llama config.
        layer_idx: The layer's index.
    """

    projections = ("q_proj", "k_proj", "v_proj", "o_proj")

    def __init__(self, config: Any, layer_idx: int = 0) -> None:
        heads, kv_heads, head_dim = config.num_attention_heads, key_value_heads_of(config), head_dim_of(config)
        super().__init__(
            config, heads, head_dim, num_key_value_heads=kv_heads, dropout=config.attention_dropout, layer_idx=layer_idx
        )
        # Biases as ``attention_bias`` says (none in Llama's own models); a config without the field (Mistral's) has none.
        self.add_projections(config.hidden_size, bias=getattr(config, "attention_bias", False))

    def position(self, query: Tensor, key: Tensor, position_embeddings: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        """Turn every head's queries and keys by the tokens' angles (pairs: the two halves of a head)."""
        return rotate_queries_and_keys(query, key, position_embeddings)


class LlamaMLP(GatedFeedForward):
    """The SwiGLU network under Llama's names (``gate_proj``, ``up_proj``, ``down_proj``).

    Args:
        config: The Llama config.
    """

    def __init__(self, config: Any) -> None:
        # Biases as ``mlp_bias`` says (none in Llama's own models); a config without the field (Mistral's, Qwen3's)
        # has none.
        bias = getattr(config, "mlp_bias", False)
        super().__init__(config.hidden_size, config.intermediate_size, config.hidden_act, bias=bias)


class LlamaDecoderLayer(DecoderLayer):
    r"""One pre-RMS-norm layer: :math:`x + \operatorname{Attn}(\operatorname{RMS}_1 x)`, then :math:`x + \operatorname{MLP}(\operatorname{RMS}_2 x)`.

    The forward is GPT's blocks' (:meth:`~literate_transformer.parts.stack.DecoderLayer.forward`), the
    rotary angles handed to attention.

    Args:
        config: The Llama config.
        layer_idx: The layer's index.
    """

    #: The arrangement of its residual sub-layers (:mod:`~literate_transformer.core.residual`): pre-norm.
    norm_first = True
    # The classes it builds (parts.stack.DecoderLayer), and its norms' class, built from (hidden_size,
    # rms_norm_eps), which a descendant may swap too; the stack's final norm is of the layers' kind.
    attention_class, mlp_class, norm_class = LlamaAttention, LlamaMLP, RMSNorm

    def __init__(self, config: Any, layer_idx: int = 0) -> None:
        super().__init__()
        self.self_attn = self.attention_class(config, layer_idx)
        self.mlp = self.mlp_class(config)
        self.input_layernorm = self.norm_class(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = self.norm_class(config.hidden_size, config.rms_norm_eps)

    def sublayers(self) -> tuple[Sublayer, Sublayer]:
        """Grouped-query ``self_attn`` after ``input_layernorm``, the SwiGLU ``mlp`` after ``post_attention_layernorm``."""
        return Sublayer(self.self_attn, self.input_layernorm), Sublayer(self.mlp, self.post_attention_layernorm)


def _check_position_ids(position_ids: object, batch_size: int, length: int) -> None:
    position_ids = check_tensor(position_ids, "position_ids", ndim=2, dtypes=("int",))
    if position_ids.shape[0] not in (1, batch_size) or position_ids.shape[1] != length:
        raise ValueError(
            f"position_ids must have shape ({batch_size}, {length}) or (1, {length}), got {tuple(position_ids.shape)}"
        )
    if position_ids.numel() and checks_values(position_ids) and int(position_ids.min()) < 0:
        raise value_error("position_ids must be non-negative")


def check_llama_inputs(model: LlamaModel, args: Arguments) -> None:
    """A Llama stack's inputs: ids of the vocabulary, a cache of its ``K`` heads of ``D``, masks and positions that fit.

    Rotary positions have no table to run past, so any length is accepted (as ``transformers`` accepts it).
    """
    config = model.config
    input_ids = check_input_ids(args.input_ids, config.vocab_size)
    batch_size, length = input_ids.shape
    past_length = check_past_key_values(
        args.past_key_values,
        num_layers=len(model.layers),
        batch_size=batch_size,
        num_heads=key_value_heads_of(config),
        head_size=head_dim_of(config),
    )
    if args.attention_mask is not None:
        check_attention_mask(args.attention_mask, batch_size, past_length + length)
    if args.position_ids is not None:
        _check_position_ids(args.position_ids, batch_size, length)


class LlamaModel(ConvertsFromHF, DecoderStack, nn.Module):
    """Llama's stack: ``embed_tokens``, the ``layers``, the final RMS ``norm``, and the rotary angles.

    Its forward takes HuggingFace's ``input_ids``, ``attention_mask``,
    ``position_ids`` and ``past_key_values`` in that order; the rest go by name.

    Args:
        config: A ``transformers`` :class:`~transformers.LlamaConfig`.
    """

    # Its config's checks (core.config.ChecksConfig); the rest is its own, below.
    config_type, config_name, config_activation = "llama", "LlamaConfig", "hidden_act"
    #: The layer a family's stack builds.
    layer_class: type[nn.Module] = LlamaDecoderLayer
    # Older releases saved each layer's rotary frequencies, which the model computes from the config: dropped
    # when converting (models.registry.ConvertsFromHF).
    hf_name = "Llama"
    hf_dropped = (".rotary_emb.inv_freq",)
    #: Whether the family may turn only part of each head (``partial_rotary_factor`` below 1, as Phi-3's configs
    #: may); Llama turns every feature and refuses a factor.
    partial_rotary = False

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """Query heads in groups of key/value heads, an even head size, a ``rope_scaling`` this file builds, and
        every feature of a head turned (or, in a family that sets :attr:`partial_rotary`, an even number of them)."""
        name = cls.config_name
        heads, kv_heads = config.num_attention_heads, key_value_heads_of(config)
        if heads < 1 or kv_heads < 1 or heads % kv_heads:
            raise ValueError(
                f"{name}.num_attention_heads ({heads}) must be divisible by num_key_value_heads ({kv_heads}): "
                "each key/value head serves a group of query heads"
            )
        if not getattr(config, "head_dim", None) and config.hidden_size % heads:
            raise ValueError(f"hidden_size ({config.hidden_size}) must be divisible by num_attention_heads ({heads})")
        if head_dim_of(config) % 2:
            raise ValueError(f"{name}.head_dim ({head_dim_of(config)}) must be even: rotary positions turn pairs")
        parameters = rope_parameters(config)
        if parameters["rope_type"] not in ROPE_TYPES:
            raise ValueError(
                f"{name}.rope_scaling={parameters!r} is not supported: rope_type {parameters['rope_type']!r} "
                f"(only None, 'default' and 'llama3')"
            )
        factor = partial_rotary_factor_of(config)
        if factor != 1.0 and not cls.partial_rotary:
            raise ValueError(
                f"{name}.rope_scaling partial_rotary_factor={factor!r} is not supported (Llama turns every feature "
                "of a head)"
            )
        if isinstance(factor, bool) or not (isinstance(factor, (int, float)) and 0 < factor <= 1):
            raise ValueError(
                f"{name}.partial_rotary_factor must be a number in (0, 1], the share of a head that turns, "
                f"got {factor!r}"
            )
        rotary_dim = rotary_dim_of(config)
        if rotary_dim < 2 or rotary_dim % 2:
            raise ValueError(
                f"{name}.partial_rotary_factor={factor!r} turns {rotary_dim} of a head's {head_dim_of(config)} "
                "features: rotary positions turn pairs, so that must be an even number, at least 2"
            )

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = self.check_config(config)
        padding_idx = config.pad_token_id
        if not (isinstance(padding_idx, int) and 0 <= padding_idx < config.vocab_size):
            padding_idx = None
        #: The token table (V x E); the padding id's row gets no gradient, as in HuggingFace's.
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=padding_idx)
        self.layers = nn.ModuleList(self.layer_class(config, index) for index in range(config.num_hidden_layers))
        # The final norm, of the layers' kind.
        self.norm = self.layer_class.norm_class(config.hidden_size, config.rms_norm_eps)
        #: The frequencies of the rotations (a buffer, not saved), as ``rope_scaling`` says.
        self.rotary_emb = RotaryEmbedding(rotary_dim_of(config), inv_freq=rotary_inverse_frequencies(config))

    def get_input_embeddings(self) -> nn.Embedding:
        """The token table, ``embed_tokens``."""
        return self.embed_tokens

    # -- what Llama changes in the decoder stack (parts.stack.DecoderStack); its mask is the causal one -------
    def embed(self, input_ids: Tensor, position_ids: Tensor) -> Tensor:
        """The first layer's input: the token vectors alone (positions enter inside attention, as rotations)."""
        return self.embed_tokens(input_ids)

    def layer_inputs(self, position_ids: Tensor) -> dict[str, Any]:
        """Every token's angles, as ``(cos, sin)``, computed once for all the layers."""
        return {"position_embeddings": self.rotary_emb(position_ids)}

    def final_norm(self, hidden_states: Tensor) -> Tensor:
        """``norm``: the final RMS norm of the pre-norm stack's output."""
        return self.norm(hidden_states)

    @validate_with(check_llama_inputs)
    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        past_key_values: tuple[LayerCache, ...] | None = None,
        *,
        use_cache: bool = False,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """Contextual vectors for every position; the arguments as in GPT's stack
        (:meth:`~literate_transformer.models.openai_gpt.OpenAIGPTModel.forward`), in HuggingFace's order for Llama
        (``position_ids`` and ``past_key_values`` may come by position too), the cache with ``K`` heads per layer.
        """
        # The layers over the cache, as every decoder stack runs them (parts.stack.DecoderStack.run_stack).
        return self.run_stack(
            self.layers,
            input_ids,
            attention_mask,
            position_ids,
            past_key_values,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )


class LlamaForCausalLM(ConvertsFromHF, LanguageModelHead, StaticCacheGeneration, GenerationMixin, nn.Module):
    """Llama with its language-model head (``lm_head``, tied to ``embed_tokens`` only if the config says so).

    The head, its scores and its loss are every decoder's
    (:class:`~literate_transformer.parts.heads.LanguageModelHead`); its
    ``generate()`` runs over a static cache
    (:class:`~literate_transformer.parts.static_cache.StaticCacheGeneration`),
    and ``compile()`` compiles its decoding step.

    Args:
        config: A ``transformers`` :class:`~transformers.LlamaConfig`.

    Attributes:
        model: The :class:`LlamaModel` (HuggingFace's name).
        lm_head: ``E -> V`` without bias.
    """

    #: The stack a family's language model builds.
    model_class: type[nn.Module] = LlamaModel
    #: The head and the token table it is when the config ties them (checked when converting).
    hf_ties = (("lm_head.weight", "model.embed_tokens.weight"),)
    #: ``None`` (rotary positions have no table to run past, so generation may go past ``max_position_embeddings``).
    position_limit = None


register(LlamaModel, LlamaForCausalLM)


#: The checks of a Llama config, by the name they had before they were declared (:class:`LlamaModel`).
check_llama_config = LlamaModel.check_config
