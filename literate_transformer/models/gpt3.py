r"""GPT-3: GPT-2's architecture, with dense and locally banded attention in alternating layers.

"Language Models are Few-Shot Learners" (Brown et al., 2020) describes its
models in one sentence (§2.1): "We use the same model and architecture as
GPT-2 [...], with the exception that we use alternating dense and locally
banded sparse attention patterns in the layers of the transformer, similar
to the Sparse Transformer".  Everything else is size: Table 2.1 lists eight
models, from 125M parameters (12 layers of width 768) to 175B (96 layers of
width 12288), all with a context of 2048 tokens and a feed-forward width of
:math:`4E`.  OpenAI released no weights, and ``transformers`` has no GPT-3;
this file builds the architecture the sentence describes.

A dense layer is GPT-2's: query :math:`i` sees every key :math:`j \le i`.
A *locally banded* layer sees only the last :math:`w` keys, its own included,

.. math::

    M^{\text{local}}_{ij} = \begin{cases} 0 & i - w < j \le i \\ -\infty & \text{otherwise,} \end{cases}

so its attention costs :math:`O(T w)` instead of :math:`O(T^2)`, and
information from farther back still arrives, through the dense layers in
between.  The band is the causal mask with a ``window``
(:func:`~literate_transformer.core.masks.causal_mask`), built once per
forward next to the dense one; each block picks its own.  The paper gives
neither the band's width nor which layers come first: this file takes
GPT-Neo's names and choices (:mod:`~literate_transformer.models.gpt_neo`,
EleutherAI's replication of GPT-3): ``attention_layers`` alternating
``"global"`` (dense) and ``"local"`` (banded), dense first, and a
``window_size`` of 256 unless the config says otherwise.

=============================================  ==========================================================
GPT-3 changes from GPT-2                       here
=============================================  ==========================================================
banded layers between dense ones               :meth:`GPT3Model.attention_masks` builds both masks,
                                               :class:`GPT3Block` reads its own
``attention_layers`` and ``window_size``       :class:`GPT3Config`, GPT-2's config with the two fields
=============================================  ==========================================================

Tests check the band against ``transformers``' own (GPT-Neo's local
layers), and that a GPT-3 whose band covers the whole context computes
exactly what a GPT-2 with the same weights computes.

>>> import torch
>>> config = GPT3Config(vocab_size=40, n_embd=24, n_layer=2, n_head=3, n_positions=16, window_size=2)
>>> config.attention_layers
['global', 'local']
>>> model = GPT3LMHeadModel(config).eval()
>>> probs = model(torch.tensor([[5, 6, 7, 8]]), output_attentions=True).attentions
>>> (probs[1][0, 0] > 0).int()                                   # the local layer: a band of 2
tensor([[1, 0, 0, 0],
        [1, 1, 0, 0],
        [0, 1, 1, 0],
        [0, 0, 1, 1]], dtype=torch.int32)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from transformers import GPT2Config

from ..core.masks import build_attention_mask
from .gpt2 import GPT2Block, GPT2LMHeadModel, GPT2Model

__all__ = [
    "ATTENTION_TYPES",
    "TABLE_2_1",
    "GPT3_VOCAB_SIZE",
    "GPT3_CONTEXT",
    "GPT3Config",
    "table_2_1_config",
    "GPT3Block",
    "GPT3Model",
    "GPT3LMHeadModel",
]

#: The two kinds of layer under GPT-Neo's names, dense ("global") and locally banded ("local").
ATTENTION_TYPES = ("global", "local")

#: Table 2.1 of Brown et al. (2020), each model's ``n_params`` as printed, ``n_layers``, ``d_model``,
#: ``n_heads`` and ``d_head``.  (Two rows do not multiply out: XL's 24 heads of 128 are not its 2048, and 13B's 40
#: heads of 128 are not its 5140.)
TABLE_2_1 = {
    "GPT-3 Small": ("125M", 12, 768, 12, 64),
    "GPT-3 Medium": ("350M", 24, 1024, 16, 64),
    "GPT-3 Large": ("760M", 24, 1536, 16, 96),
    "GPT-3 XL": ("1.3B", 24, 2048, 24, 128),
    "GPT-3 2.7B": ("2.7B", 32, 2560, 32, 80),
    "GPT-3 6.7B": ("6.7B", 32, 4096, 32, 128),
    "GPT-3 13B": ("13.0B", 40, 5140, 40, 128),
    "GPT-3 175B": ("175.0B", 96, 12288, 96, 128),
}
#: GPT-2's byte-pair vocabulary, which §2.1 keeps ("reversible tokenization"), and §2.1's context of 2048 tokens.
GPT3_VOCAB_SIZE, GPT3_CONTEXT = 50257, 2048


class GPT3Config(GPT2Config):
    """GPT-2's config (:class:`~transformers.GPT2Config`) with GPT-3's two fields, under GPT-Neo's names."""

    model_type = "gpt3"

    def __init__(self, window_size: int = 256, attention_layers: list[str] | None = None, **kwargs: Any) -> None:
        """GPT-2's fields, and GPT-3's two.

        Args:
            window_size: How many keys a banded layer's query sees, its own included (256 unless given,
                GPT-Neo's choice; the paper gives none).
            attention_layers: ``"global"`` or ``"local"`` for each layer; by default they alternate, dense first.
            **kwargs: GPT-2's fields (``n_embd``, ``n_layer``, ``n_head``, ``n_positions``, ...).
        """
        super().__init__(**kwargs)
        self.window_size = window_size
        if attention_layers is None:
            attention_layers = [ATTENTION_TYPES[index % 2] for index in range(self.n_layer)]
        self.attention_layers = list(attention_layers)


def table_2_1_config(name: str, **fields: Any) -> GPT3Config:
    """The config of one of Table 2.1's models, with GPT-2's vocabulary and a context of 2048.

    The feed-forward width is :math:`4E` (§2.1).  Where the table's heads do
    not divide its ``d_model`` (XL and 13B), the config has one head: the
    parameters do not depend on how the projections are cut into heads.

    Args:
        name: A key of :data:`TABLE_2_1`.
        **fields: Other fields of the config.
    """
    _, layers, width, heads, _ = TABLE_2_1[name]
    heads = heads if width % heads == 0 else 1
    sizes = dict(vocab_size=GPT3_VOCAB_SIZE, n_positions=GPT3_CONTEXT, n_embd=width, n_layer=layers, n_head=heads)
    return GPT3Config(**{**sizes, **fields})


class GPT3Block(GPT2Block):
    """GPT-2's block, dense or locally banded: it reads the mask of its kind.

    Args:
        config: The GPT-3 config.
        layer_idx: The block's index (its kind is ``config.attention_layers[layer_idx]``).
    """

    def __init__(self, config: Any, layer_idx: int = 0) -> None:
        super().__init__(config, layer_idx)
        #: ``"global"`` (dense) or ``"local"`` (banded).
        self.attention_type = config.attention_layers[layer_idx]


class GPT3Model(GPT2Model):
    """GPT-3's stack: GPT-2's modules and forward, with dense and banded blocks.

    Args:
        config: A :class:`GPT3Config`.
    """

    # Its config's checks: GPT-2's, a positive window, and one kind of attention per layer.
    config_type, config_name, config_positive = "gpt3", "GPT3Config", ("window_size",)
    block_class = GPT3Block

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """One ``"global"`` or ``"local"`` per layer (GPT-Neo's config, under its own name, too)."""
        layers = config.attention_layers
        if len(layers) != config.num_hidden_layers or any(kind not in ATTENTION_TYPES for kind in layers):
            raise ValueError(
                f"{cls.config_name}.attention_layers must give each of the {config.num_hidden_layers} layers one "
                f"of {ATTENTION_TYPES}, got {layers!r}"
            )

    def attention_masks(
        self, attention_mask: Tensor | None, length: int, past_length: int, dtype: torch.dtype, device: torch.device
    ) -> dict[str, Tensor]:
        """Both masks, built once: the causal one for the dense blocks, the band of ``window_size`` for the local ones."""
        options = dict(query_length=length, causal=True, past_length=past_length, device=device, dtype=dtype)
        return {
            "global": build_attention_mask(attention_mask, **options),
            "local": build_attention_mask(attention_mask, window=self.config.window_size, **options),
        }


class GPT3LMHeadModel(GPT2LMHeadModel):
    """GPT-3 with GPT-2's language-model head (the token table ``wte``, as the config ties it).

    Args:
        config: A :class:`GPT3Config`.
    """

    model_class = GPT3Model


#: The checks of a GPT-3 config, by the name they had before they were declared (:class:`GPT3Model`).
check_gpt3_config = GPT3Model.check_config
