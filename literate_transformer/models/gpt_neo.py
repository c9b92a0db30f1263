r"""GPT-Neo: GPT-3's alternating dense and local layers, with separate projections and unscaled scores.

GPT-Neo (Black et al., 2021, EleutherAI) is an open replication of the
GPT-3 architecture (:mod:`~literate_transformer.models.gpt3`): GPT-2's
pre-LN blocks, and layers that alternate between *global* attention (every
earlier token) and *local* attention (the last ``window_size`` tokens).
``transformers``' ``modeling_gpt_neo.py`` differs from GPT-3 as this file
builds it in the modules, not in the idea:

=============================================  ==========================================================
GPT-Neo changes from GPT-3                     here
=============================================  ==========================================================
scores **not** divided by :math:`\sqrt{D}`     :class:`GPTNeoSelfAttention` (``scale=1``): ``_attn`` computes
                                               ``torch.matmul(query, key.transpose(-1, -2))`` and adds the
                                               mask, with no division
``q_proj``, ``k_proj``, ``v_proj`` (no bias),  :class:`GPTNeoSelfAttention`, inside an ``attn.attention``
``out_proj`` (with one)                        wrapper (HF's names: ``h.0.attn.attention.q_proj``)
``nn.Linear`` layers in the MLP                :class:`GPTNeoMLP` (weights stored ``(out, in)``, unlike ``Conv1D``)
the config's names                             ``num_heads``, ``num_layers``, ``intermediate_size``,
                                               ``attention_types``, ``resid_dropout``, ...
=============================================  ==========================================================

Without the :math:`1/\sqrt{D}` the scores are :math:`\sqrt{D}` times larger
for the same weights, and the softmax correspondingly sharper; a trained
GPT-Neo has simply learned query and key projections that are smaller by
that factor, so the model is the same family of functions.  (HuggingFace
also computes these scores in float32 whatever the model's dtype; this file
computes them in the model's dtype, which the float32 tests cannot tell
apart.)  The local layers' band is GPT-3's mask, counted over the positions
of the sequence as ``transformers`` counts them: the buffer ``bias`` of a
local ``GPTNeoSelfAttention`` is ``tril(ones) ^ tril(ones, -window_size)``,
which tests compare with the package's band.

>>> import torch
>>> from transformers import GPTNeoConfig
>>> config = GPTNeoConfig(vocab_size=40, hidden_size=24, num_layers=2, num_heads=3,
...                       attention_types=[[["global", "local"], 1]], window_size=2, max_position_embeddings=16)
>>> model = GPTNeoForCausalLM(config).eval()
>>> [block.attention_type for block in model.transformer.h], model.transformer.h[0].attn.attention.scale
(['global', 'local'], 1.0)
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ..core.outputs import AttentionOutput
from ..parts.attention import Attention
from ..parts.positions import LearnedPositionalEmbedding
from .gpt2 import GPT2MLP
from .gpt3 import GPT3Block, GPT3LMHeadModel, GPT3Model
from .registry import register

__all__ = [
    "GPTNeoSelfAttention",
    "GPTNeoAttention",
    "GPTNeoMLP",
    "GPTNeoBlock",
    "GPTNeoModel",
    "GPTNeoForCausalLM",
]


class GPTNeoSelfAttention(Attention):
    """Causal self-attention, global or local, with ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``; scores unscaled.

    Args:
        config: The GPT-Neo config.
        attention_type: ``"global"`` or ``"local"`` (which mask the block hands it).
    """

    projections = ("q_proj", "k_proj", "v_proj", "out_proj")
    # What GPT-J changes in this attention, declared: GPT-Neo's scores are not divided by sqrt(D), its output layer
    # has a bias, and its config names the dropouts its own way.
    #: The factor on the scores; GPT-Neo's 1 leaves them as they are, and ``None`` divides them by :math:`\sqrt{D}`.
    score_scale: float | None = 1.0
    #: Whether ``out_proj`` adds a bias (the query, key and value projections never do).
    output_bias = True
    #: The config's fields for the dropout on the probabilities and on the output.
    dropout_fields = ("attention_dropout", "resid_dropout")

    def __init__(self, config: Any, attention_type: str = "global") -> None:
        width, heads = config.hidden_size, config.num_attention_heads
        attention_dropout, output_dropout = (float(getattr(config, field)) for field in self.dropout_fields)
        super().__init__(config, heads, width // heads, dropout=attention_dropout, scale=self.score_scale)
        self.attention_type = attention_type
        self.add_projections(width, bias=False, output_bias=self.output_bias)
        self.resid_dropout = nn.Dropout(output_dropout)

    def output(self, context: Tensor) -> Tensor:
        """:math:`W^O` (``out_proj``), then dropout."""
        return self.resid_dropout(super().output(context))


class GPTNeoAttention(nn.Module):
    """HuggingFace's wrapper around the attention (so the weights are ``attn.attention.q_proj``, ...).

    Args:
        config: The GPT-Neo config.
        layer_id: The block's index (its kind is ``config.attention_layers[layer_id]``).
    """

    def __init__(self, config: Any, layer_id: int = 0) -> None:
        super().__init__()
        self.attention = GPTNeoSelfAttention(config, config.attention_layers[layer_id])

    def forward(self, hidden_states: Tensor, **kwargs: Any) -> AttentionOutput:
        """The wrapped :class:`GPTNeoSelfAttention`."""
        return self.attention(hidden_states, **kwargs)


class GPTNeoMLP(GPT2MLP):
    """GPT-2's feed-forward network with ``nn.Linear`` layers (``c_fc``, ``c_proj``).

    Args:
        intermediate_size: ``F`` (``intermediate_size``, by default :math:`4E`).
        config: The GPT-Neo config.
    """

    @staticmethod
    def projection(in_features: int, out_features: int) -> nn.Module:
        """An ``nn.Linear``, its weight stored ``(out, in)``, not GPT's :class:`~literate_transformer.models.openai_gpt.Conv1D`."""
        return nn.Linear(in_features, out_features)

    @staticmethod
    def dropout_probability(config: Any) -> float:
        """GPT-Neo's field for it, ``resid_dropout``."""
        return float(config.resid_dropout)


class GPTNeoBlock(GPT3Block):
    """GPT-3's block, global or local, with GPT-Neo's modules.

    Args:
        config: The GPT-Neo config.
        layer_idx: The block's index (its kind is ``config.attention_layers[layer_idx]``).
    """

    attention_class = GPTNeoAttention
    mlp_class = GPTNeoMLP
    intermediate_field = "intermediate_size"


class GPTNeoModel(GPT3Model):
    """GPT-Neo's stack: ``wte`` + ``wpe``, the blocks ``h``, ``ln_f``; GPT-3's masks, GPT-2's forward.

    Args:
        config: A ``transformers`` :class:`~transformers.GPTNeoConfig`.
    """

    # Its config's checks: GPT-3's, the heads under GPT-Neo's names.
    config_type, config_name, config_heads = "gpt_neo", "GPTNeoConfig", ("hidden_size", "num_heads")
    block_class = GPTNeoBlock
    # Older releases saved each attention's constant mask and the value that filled it: dropped when converting.
    hf_name = "GPT-Neo"
    hf_dropped = (".attn.attention.bias", ".attn.attention.masked_bias")

    def build_embeddings(self, config: Any) -> None:
        """GPT-2's ``wte``, ``wpe`` and ``drop``, the dropout under GPT-Neo's field, ``embed_dropout``."""
        self.wte = nn.Embedding(config.vocab_size, config.hidden_size)
        self.wpe = LearnedPositionalEmbedding(config.max_position_embeddings, config.hidden_size)
        self.drop = nn.Dropout(float(config.embed_dropout))


class GPTNeoForCausalLM(GPT3LMHeadModel):
    """GPT-Neo with its language-model head (the token table ``wte``, as the config ties it).

    Args:
        config: A ``transformers`` :class:`~transformers.GPTNeoConfig`.
    """

    model_class = GPTNeoModel


register(GPTNeoModel, GPTNeoForCausalLM)


#: The checks of a GPT-Neo config, by the name they had before they were declared (:class:`GPTNeoModel`).
check_gpt_neo_config = GPTNeoModel.check_config
