r"""GPT-J: rotary positions on part of each head, and attention and MLP side by side in every block.

GPT-J-6B (Wang and Komatsuzaki, 2021, EleutherAI) stands beside GPT-Neo,
not under it: its stack is GPT-2's (:mod:`~literate_transformer.models.gpt2`)
without the position table, dense in every layer, and its attention is
GPT-Neo's (:mod:`~literate_transformer.models.gpt_neo`) with three declared
differences (the scores scaled by :math:`1/\sqrt{D}` again, no bias on
``out_proj``, the dropouts under GPT-2's field names).  It changes how
positions reach attention and how a block is wired:

* **No position table.**  Nothing is added to the token vectors; instead
  every attention layer turns the first ``rotary_dim`` features of each
  head's queries and keys by an angle that grows with the position
  (:mod:`~literate_transformer.parts.rotary`), GPT-J's way: neighbouring
  features form the pairs (``rotate_every_two``).  The other
  :math:`D - \text{rotary\_dim}` features of a head carry no position at
  all.  The angles are computed once per forward (:meth:`GPTJModel.layer_inputs`)
  and read by every block.
* **One layer norm, two sub-layers in parallel.**  Attention and the MLP
  both read the same normalised input, and both outputs join the residual
  stream at once:

  .. math::

      h \leftarrow h + \operatorname{Attn}(\operatorname{LN} h) + \operatorname{MLP}(\operatorname{LN} h),

  one layer norm per block instead of two, and the two sub-layers can run
  at the same time.
* Dense attention in every layer (no local layers: GPT-2's causal mask, not
  GPT-Neo's pair of masks), an MLP named ``fc_in``/``fc_out``, and a head
  with a bias, not tied by default.

>>> import torch
>>> from transformers import GPTJConfig
>>> config = GPTJConfig(vocab_size=40, n_embd=24, n_layer=2, n_head=3, rotary_dim=4, n_positions=16)
>>> model = GPTJForCausalLM(config).eval()
>>> model(torch.tensor([[5, 6, 7]])).logits.shape                     # (B, T, V)
torch.Size([1, 3, 40])
>>> hasattr(model.transformer, "wpe"), model.transformer.rotary_emb
(False, RotaryEmbedding(dim=4, interleaved=True))
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ..core.activations import get_activation
from ..core.outputs import LayerCache, LayerOutput
from ..parts.feed_forward import feed_forward
from ..parts.norms import make_norm
from ..parts.rotary import RotaryEmbedding, rotate_queries_and_keys
from .gpt2 import GPT2LMHeadModel, GPT2Model
from .gpt_neo import GPTNeoSelfAttention
from .registry import register

__all__ = [
    "GPTJAttention",
    "GPTJMLP",
    "GPTJBlock",
    "GPTJModel",
    "GPTJForCausalLM",
]


class GPTJAttention(GPTNeoSelfAttention):
    """GPT-Neo's projections without biases, scores scaled by :math:`1/\\sqrt{D}`, queries and keys turned.

    Args:
        config: The GPT-J config.
        layer_idx: The block's index.
    """

    # GPT-J scales its scores by 1/sqrt(D), where GPT-Neo does not; its out_proj has no bias; its config names the
    # dropouts as GPT-2's does.
    score_scale = None
    output_bias = False
    dropout_fields = ("attn_pdrop", "resid_pdrop")

    def __init__(self, config: Any, layer_idx: int = 0) -> None:
        super().__init__(config)

    def position(self, query: Tensor, key: Tensor, position_embeddings: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        """Turn each head's first ``rotary_dim`` features by the tokens' angles, in pairs of neighbours."""
        return rotate_queries_and_keys(query, key, position_embeddings, interleaved=True)


class GPTJMLP(nn.Module):
    """The feed-forward network, ``fc_in`` (E -> F), the activation, ``fc_out`` (F -> E), dropout.

    Args:
        intermediate_size: ``F`` (``n_inner``, by default :math:`4E`).
        config: The GPT-J config.
    """

    def __init__(self, intermediate_size: int, config: Any) -> None:
        super().__init__()
        self.fc_in = nn.Linear(config.hidden_size, intermediate_size)
        self.fc_out = nn.Linear(intermediate_size, config.hidden_size)
        self.act = get_activation(config.activation_function)
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, hidden_states: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, E)``, the plain feed-forward network."""
        return feed_forward(hidden_states, self.fc_in, self.fc_out, self.act, self.dropout)


class GPTJBlock(nn.Module):
    r"""One parallel block: :math:`x + \operatorname{Attn}(\operatorname{LN} x) + \operatorname{MLP}(\operatorname{LN} x)`.

    Args:
        config: The GPT-J config.
        layer_idx: The block's index.
    """

    def __init__(self, config: Any, layer_idx: int = 0) -> None:
        super().__init__()
        inner_dim = config.n_inner if config.n_inner is not None else 4 * config.hidden_size
        self.ln_1 = make_norm(config.hidden_size, config.layer_norm_epsilon)
        self.attn = GPTJAttention(config, layer_idx)
        self.mlp = GPTJMLP(inner_dim, config)

    def forward(
        self,
        hidden_states: Tensor,
        attention_mask: Tensor | None = None,
        *,
        position_embeddings: tuple[Tensor, Tensor],
        past_key_value: LayerCache | None = None,
        use_cache: bool = False,
        output_attentions: bool = False,
    ) -> LayerOutput:
        """Run the block; ``position_embeddings`` are the tokens' ``(cos, sin)`` (:meth:`GPTJModel.layer_inputs`)."""
        # 1) One layer norm, read by both sub-layers.
        normalised = self.ln_1(hidden_states)
        attention = self.attn(
            normalised,
            attention_mask=attention_mask,
            past_key_value=None if past_key_value is None else past_key_value.self_attention,
            use_cache=use_cache,
            output_attentions=output_attentions,
            position_embeddings=position_embeddings,
        )
        feed_forward_output = self.mlp(normalised)
        # 2) Both outputs join the residual stream at once.
        hidden_states = attention.hidden_states + feed_forward_output + hidden_states
        cache = LayerCache(attention.past_key_value) if use_cache else None
        return LayerOutput(hidden_states, attention.attention_probs, None, cache)


class GPTJModel(GPT2Model):
    """GPT-J's stack: GPT-2's, with ``wte`` and no position table, GPT-J's blocks, and rotary angles for all of them.

    Args:
        config: A ``transformers`` :class:`~transformers.GPTJConfig`.
    """

    # Its config's checks: GPT-2's, and a rotary width that fits a head.
    config_type, config_name = "gptj", "GPTJConfig"
    block_class = GPTJBlock
    # Older releases saved constant buffers (the causal mask, its fill value, the rotary table): dropped.
    hf_name = "GPT-J"
    hf_dropped = (".attn.bias", ".attn.masked_bias", ".attn.embed_positions")

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        #: The angles' frequencies, a buffer that is not saved; GPT-J's pairs are neighbouring features.
        self.rotary_emb = RotaryEmbedding(config.rotary_dim, interleaved=True)

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """``rotary_dim``: an even number of features (they turn in pairs), at most a head's."""
        head_size, rotary_dim = config.hidden_size // config.num_attention_heads, config.rotary_dim
        if type(rotary_dim) is not int or rotary_dim % 2 or not 0 < rotary_dim <= head_size:
            raise ValueError(
                f"GPTJConfig.rotary_dim={rotary_dim!r} must be an even number of features, at most a head's {head_size}"
            )

    def build_embeddings(self, config: Any) -> None:
        """The token table ``wte`` and ``drop``: no position table (positions enter inside attention)."""
        self.wte = nn.Embedding(config.vocab_size, config.hidden_size)
        self.drop = nn.Dropout(config.embd_pdrop)

    def embed(self, input_ids: Tensor, position_ids: Tensor) -> Tensor:
        """The first block's input: the token vectors alone (positions enter inside attention), dropped out."""
        return self.drop(self.wte(input_ids))

    def layer_inputs(self, position_ids: Tensor) -> dict[str, Any]:
        """The tokens' rotary angles as ``(cos, sin)``, computed once for every block."""
        return {"position_embeddings": self.rotary_emb(position_ids)}


class GPTJForCausalLM(GPT2LMHeadModel):
    """GPT-J with its language-model head: ``E -> V`` with a bias, tied to ``wte`` only if the config says so.

    Args:
        config: A ``transformers`` :class:`~transformers.GPTJConfig`.
    """

    model_class = GPTJModel
    lm_head_bias = True


register(GPTJModel, GPTJForCausalLM)


#: The checks of a GPT-J config, by the name they had before they were declared (:class:`GPTJModel`).
check_gptj_config = GPTJModel.check_config
