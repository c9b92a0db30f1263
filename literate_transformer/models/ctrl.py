r"""CTRL: GPT-2's pre-LN stack, with a control code as the first token and sines for positions.

CTRL (Keskar et al., 2019, "CTRL: A Conditional Transformer Language Model
for Controllable Generation", arXiv:1909.05858) is a language model whose
training sequences each begin with a *control code*, a token that names
where the text comes from (``Wikipedia``, ``Books``, ``Reviews``, a URL,
...).  The model learns :math:`p(x_t \mid c, x_{<t})`, and at generation time
the first token of the prompt chooses the domain and style of what follows.
Nothing in the architecture marks the code: it is an ordinary token of the
vocabulary, read by the same causal self-attention as every other one.

What CTRL changes from GPT-2 (:mod:`~literate_transformer.models.gpt2`),
read from ``transformers``' ``modeling_ctrl.py``:

=================================================  ==========================================================
CTRL changes                                       here
=================================================  ==========================================================
token vectors scaled by :math:`\sqrt{E}`           :meth:`CTRLModel.embed`
fixed sinusoidal positions, CTRL's layout          :func:`ctrl_positional_encoding`: the 2017 paper's angles,
                                                   all the sines first, then all the cosines
separate ``Wq``, ``Wk``, ``Wv`` and ``dense``      :class:`CTRLAttention` (``nn.Linear``, with biases)
a ReLU network ``dff`` wide, ``ffn.0``, ``ffn.2``  :class:`CTRLBlock` (an ``nn.Sequential``, as HF names it)
the blocks' layer norms, ``layernorm1/2``          :math:`\epsilon = 10^{-6}` always; the final ``layernorm``
                                                   reads ``layer_norm_epsilon``
a bias on the head                                 :class:`CTRLLMHeadModel` (``lm_head.bias``)
=================================================  ==========================================================

The blocks stay pre-LN, with a final layer norm, and GPT's forward
(:meth:`~literate_transformer.models.openai_gpt.OpenAIGPTModel.forward`)
runs them; a sequence's positions are counted over its real tokens, as for
every model of the package.  The sinusoid is the 2017 paper's, with one
frequency per pair of features,

.. math::

    \text{PE}_{p} = \big[\sin(p\,\omega_0), \dots, \sin(p\,\omega_{E/2-1}),\;
    \cos(p\,\omega_0), \dots, \cos(p\,\omega_{E/2-1})\big], \qquad \omega_i = 10000^{-2i/E},

but where :class:`~literate_transformer.parts.positions.SinusoidalPositionalEncoding`
interleaves sine and cosine feature by feature, CTRL puts the two halves
side by side: the same numbers, in another order (a test finds them equal
after that permutation).

>>> from transformers import CTRLConfig
>>> config = CTRLConfig(vocab_size=40, n_embd=24, dff=32, n_layer=2, n_head=3, n_positions=16)
>>> model = CTRLLMHeadModel(config).eval()
>>> model.transformer.pos_encoding.shape, "transformer.pos_encoding" in model.state_dict()   # fixed: not saved
(torch.Size([16, 24]), False)
>>> model.lm_head.weight is model.transformer.w.weight, model.lm_head.bias.shape
(True, torch.Size([40]))
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from ..parts.attention import Attention
from ..parts.norms import make_norm
from ..parts.stack import DecoderLayer, Sublayer
from .gpt2 import GPT2LMHeadModel, GPT2Model
from .registry import register

__all__ = [
    "ctrl_positional_encoding",
    "CTRLAttention",
    "CTRLBlock",
    "CTRLModel",
    "CTRLLMHeadModel",
]

#: The epsilon of every block's two layer norms: fixed in CTRL's code (the config's is the final norm's).
CTRL_BLOCK_LAYER_NORM_EPS = 1e-6


def ctrl_positional_encoding(num_positions: int, dim: int, dtype: torch.dtype = torch.float32) -> Tensor:
    r"""CTRL's table of positions: row :math:`p` holds :math:`\sin(p\,\omega_i)` for every pair, then :math:`\cos(p\,\omega_i)`.

    Computed as ``transformers``' ``positional_encoding`` computes it (in ``dtype``).

    Args:
        num_positions: The rows of the table (``n_positions``).
        dim: ``E``; an odd ``E`` gets one sine more than cosines, as in ``transformers``.
        dtype: The dtype of the computation.

    Returns:
        ``(num_positions, E)``.
    """
    positions = torch.arange(num_positions, dtype=torch.int64).to(dtype)[:, None]
    features = torch.arange(dim, dtype=torch.int64).to(dtype)[None, :]
    # Features 2i and 2i + 1 share the frequency 1 / 10000^(2i / E).
    angles = positions * (1 / torch.pow(10000, (2 * (features // 2)) / dim))
    # The sines of the even features' angles, then the cosines of the odd ones': two halves, not interleaved.
    return torch.cat([torch.sin(angles[:, 0::2]), torch.cos(angles[:, 1::2])], dim=-1)


class CTRLAttention(Attention):
    """Causal self-attention with three separate projections, ``Wq``, ``Wk``, ``Wv``, and ``dense`` (:math:`W^O`).

    Args:
        config: The CTRL config.
    """

    projections = ("Wq", "Wk", "Wv", "dense")

    def __init__(self, config: Any) -> None:
        width, heads = config.hidden_size, config.num_attention_heads
        super().__init__(config, heads, width // heads)
        self.add_projections(width)


class CTRLBlock(DecoderLayer):
    r"""One pre-LN block (``transformers``' ``EncoderLayer``): :math:`x + \operatorname{Drop}(\operatorname{Attn}(\operatorname{LN}_1 x))`, then the ReLU network the same way.

    GPT-2's block under CTRL's names, its dropouts outside the sub-layers; the
    forward is every decoder-only layer's
    (:meth:`~literate_transformer.parts.stack.DecoderLayer.forward`).

    Args:
        config: The CTRL config.
        layer_idx: The block's index (every block of CTRL is built alike).
    """

    def __init__(self, config: Any, layer_idx: int = 0) -> None:
        super().__init__()
        self.multi_head_attention = CTRLAttention(config)
        # HuggingFace's feed-forward network is an nn.Sequential, so its layers are ffn.0 and ffn.2 (ffn.1: the ReLU).
        self.ffn = nn.Sequential(
            nn.Linear(config.hidden_size, config.dff), nn.ReLU(), nn.Linear(config.dff, config.hidden_size)
        )
        self.layernorm1 = make_norm(config.hidden_size, CTRL_BLOCK_LAYER_NORM_EPS)
        self.layernorm2 = make_norm(config.hidden_size, CTRL_BLOCK_LAYER_NORM_EPS)
        self.dropout1 = nn.Dropout(config.resid_pdrop)
        self.dropout2 = nn.Dropout(config.resid_pdrop)

    def sublayers(self) -> tuple[Sublayer, Sublayer]:
        """``multi_head_attention`` with ``layernorm1`` and ``dropout1``, the ReLU network ``ffn`` with the others."""
        return (
            Sublayer(self.multi_head_attention, self.layernorm1, self.dropout1),
            Sublayer(self.ffn, self.layernorm2, self.dropout2),
        )


class CTRLModel(GPT2Model):
    """CTRL's stack: the token table ``w``, the fixed table of positions, the blocks ``h`` and ``layernorm``; GPT's forward.

    Arguments in HuggingFace's order as far as the package has them
    (``input_ids``, ``past_key_values``, ``attention_mask``), as GPT-2's.

    Args:
        config: A ``transformers`` :class:`~transformers.CTRLConfig`.
    """

    # Its config's checks: heads dividing n_embd; its activation is fixed (ReLU), not a field.
    config_type, config_name, config_activation = "ctrl", "CTRLConfig", None
    block_class = CTRLBlock
    # The table of sines is computed from the config: a checkpoint that lists it has it dropped.
    hf_name = "CTRL"
    hf_dropped = (".pos_encoding",)

    def build_embeddings(self, config: Any) -> None:
        """The token table ``w``, the fixed table of positions, and ``dropout``."""
        #: The token table (V x E).
        self.w = nn.Embedding(config.vocab_size, config.hidden_size)
        #: The sinusoidal table (positions x E): fixed, so a buffer that is not saved (nor in HF's checkpoints).
        self.register_buffer(
            "pos_encoding",
            ctrl_positional_encoding(config.max_position_embeddings, config.hidden_size),
            persistent=False,
        )
        self.dropout = nn.Dropout(config.embd_pdrop)

    def build_final_norm(self, config: Any) -> None:
        """``layernorm``, GPT-2's ``ln_f`` under CTRL's name."""
        self.layernorm = make_norm(config.hidden_size, config.layer_norm_epsilon)

    def get_input_embeddings(self) -> nn.Embedding:
        """The token table, ``w``."""
        return self.w

    def embed(self, input_ids: Tensor, position_ids: Tensor) -> Tensor:
        r"""The first block's input: the token vectors times :math:`\sqrt{E}`, plus the positions' sines, dropped out."""
        tokens = self.w(input_ids) * math.sqrt(self.config.hidden_size)
        return self.dropout(tokens + self.pos_encoding[position_ids].to(tokens.dtype))

    def final_norm(self, hidden_states: Tensor) -> Tensor:
        """``layernorm``: the pre-LN stack's output, normalised once at the end."""
        return self.layernorm(hidden_states)


class CTRLLMHeadModel(GPT2LMHeadModel):
    """CTRL with its language-model head: the token table ``w`` (as the config ties it) and a bias.

    Args:
        config: A ``transformers`` :class:`~transformers.CTRLConfig`.

    Attributes:
        transformer: The :class:`CTRLModel`.
        lm_head: ``E -> V`` with a bias; with ``tie_word_embeddings`` (CTRL's default) its weight *is*
            ``transformer.w.weight``.
    """

    #: The stack it builds.
    model_class = CTRLModel
    hf_ties = (("lm_head.weight", "transformer.w.weight"),)
    #: A bias per token on the scores, beside the tied table.
    lm_head_bias = True


register(CTRLModel, CTRLLMHeadModel)


#: The checks of a CTRL config, by the name they had before they were declared (:class:`CTRLModel`).
check_ctrl_config = CTRLModel.check_config
