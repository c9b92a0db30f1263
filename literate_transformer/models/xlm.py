r"""XLM: a BERT-like encoder that is told each token's language, trained on pairs of translations.

XLM (Lample and Conneau, 2019, "Cross-lingual Language Model Pretraining",
NeurIPS, arXiv:1901.07291) trains one encoder on many languages with one
shared BPE vocabulary (section 3.1), by masked language modelling on
monolingual text (section 3.3) and by **translation language modelling**
(TLM, section 3.4): a sentence and its translation are concatenated into one
stream, words are masked in both, and to fill a masked English word the
model may read the French sentence beside it.  The positions of the second
sentence start again at 0, and every token carries a learned *language
embedding* saying which language it is in (the paper's Figure 2).

The model is the 2017 post-LN encoder with three changes, all in the
embeddings and the masking:

.. math::

    h^{(0)}_t = \operatorname{LayerNorm}\big(W^{\text{word}}_{x_t} + W^{\text{pos}}_{p_t}
    + W^{\text{lang}}_{\ell_t}\big) \cdot m_t,

* ``langs`` (:math:`\ell_t`), one language id per token, read from
  ``lang_embeddings`` when the config has more than one language
  (``n_langs > 1`` and ``use_lang_emb``); without ``langs`` no language
  vector is added, as in ``transformers``;
* positions from a learned table, or from the 2017 sinusoids
  (``sinusoidal_embeddings``, the table then frozen);
* :math:`m_t`, 1 for a real token and 0 for padding, multiplies the
  embeddings and **every layer's output**: padded positions hold zeros all
  the way up.  Without an ``attention_mask`` the padding is whatever follows
  the first ``pad_index`` tokens of each row, counted as HuggingFace counts
  it (the number of non-padding tokens is the length).

The modules are flat lists on the model (``attentions.N.q_lin``,
``layer_norm1.N``, ``ffns.N.lin1``, ``layer_norm2.N``), the original
release's layout, kept so that the weights load by name.  The token type
ids, when given, are read from the *word* table (XLM has no table of its
own for them), as HuggingFace's XLM does.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ..core.activations import get_activation
from ..core.masks import MaskHook
from ..core.outputs import LayerOutput, ModelOutput
from ..core.residual import add_and_norm
from ..core.validation import Arguments, check_tensor, check_token_inputs, checks_values, validate_with, value_error
from ..parts.attention import Attention
from ..parts.feed_forward import feed_forward
from ..parts.norms import make_norm
from ..parts.positions import LearnedPositionalEmbedding
from .registry import ConvertsFromHF, register

__all__ = ["XLMMultiHeadAttention", "XLMTransformerFFN", "XLMModel"]


#: XLM options this package does not build, and the only value each accepts.
class XLMMultiHeadAttention(Attention):
    """Self-attention under XLM's names, ``q_lin``, ``k_lin``, ``v_lin`` and ``out_lin`` (``MultiHeadAttention``).

    The shared :class:`~literate_transformer.parts.attention.Attention` with four biased layers, XLM's width
    (``emb_dim``), its heads and its attention dropout.

    Args:
        config: A ``transformers`` :class:`~transformers.XLMConfig`.
    """

    projections = ("q_lin", "k_lin", "v_lin", "out_lin")

    def __init__(self, config: Any) -> None:
        super().__init__(config, config.n_heads, config.emb_dim // config.n_heads, dropout=config.attention_dropout)
        self.add_projections(config.emb_dim)


class XLMTransformerFFN(nn.Module):
    """The feed-forward network, ``lin1`` (E -> 4E), GELU or ReLU, ``lin2`` (4E -> E), dropout (``TransformerFFN``).

    Args:
        config: A ``transformers`` :class:`~transformers.XLMConfig` (``gelu_activation`` picks the GELU).
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.lin1 = nn.Linear(config.emb_dim, 4 * config.emb_dim)
        self.lin2 = nn.Linear(4 * config.emb_dim, config.emb_dim)
        self.act = get_activation("gelu" if config.gelu_activation else "relu")
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, hidden_states: Tensor) -> Tensor:
        """``(B, T, E) -> (B, T, E)``."""
        return feed_forward(hidden_states, self.lin1, self.lin2, self.act, self.dropout)


def _check_model_inputs(model: XLMModel, args: Arguments) -> None:
    config = model.config
    # The ids, the mask and the positions as every model checks them (XLM's token types are its own).
    token_inputs = Arguments(
        input_ids=args.input_ids, attention_mask=args.attention_mask, position_ids=args.position_ids
    )
    input_ids = check_token_inputs(token_inputs, config)
    batch_size, length = input_ids.shape
    if args.token_type_ids is not None:
        ids = check_tensor(args.token_type_ids, "token_type_ids", dtypes=("int",), shape=(batch_size, length))
        if ids.numel() and checks_values(ids) and (int(ids.min()) < 0 or int(ids.max()) >= config.vocab_size):
            raise value_error(f"token_type_ids are read from the word table: they must be in [0, {config.vocab_size})")
    if model.uses_langs and args.langs is not None:
        langs = check_tensor(args.langs, "langs", dtypes=("int",), shape=(batch_size, length))
        if langs.numel() and checks_values(langs) and (int(langs.min()) < 0 or int(langs.max()) >= config.n_langs):
            raise value_error(f"langs must be language ids in [0, n_langs={config.n_langs})")


class XLMModel(ConvertsFromHF, MaskHook, nn.Module):
    """XLM's encoder: the embeddings, then ``n_layers`` post-LN layers kept as flat lists of modules.

    Args:
        config: A ``transformers`` :class:`~transformers.XLMConfig`.

    Attributes:
        uses_langs: Whether the model adds language embeddings (where it is given ``langs``).
    """

    # Its config's checks (core.config.ChecksConfig): an encoder, not causal; heads dividing emb_dim; its own.
    config_type, config_name, config_unsupported = "xlm", "XLMConfig", {"causal": False, "is_encoder": True}
    config_heads = ("emb_dim", "n_heads")

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """Sinusoids of an even width."""
        if config.sinusoidal_embeddings and config.emb_dim % 2:
            raise ValueError(f"XLMConfig.sinusoidal_embeddings needs an even emb_dim, got {config.emb_dim}")

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = self.check_config(config)
        dim = config.emb_dim
        self.uses_langs = config.n_langs > 1 and config.use_lang_emb
        self.position_embeddings = LearnedPositionalEmbedding(config.max_position_embeddings, dim)
        if config.sinusoidal_embeddings:
            # The 2017 sinusoids, frozen: still a weight of the checkpoint, never trained.
            self.position_embeddings.freeze_to_sinusoids()
        if self.uses_langs:
            #: One learned vector per language (``n_langs x E``).
            self.lang_embeddings = nn.Embedding(config.n_langs, dim)
        self.embeddings = nn.Embedding(config.vocab_size, dim, padding_idx=config.pad_index)
        self.layer_norm_emb = make_norm(dim, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        # The layers' modules, one list per kind (the original release's layout).
        self.attentions = nn.ModuleList(XLMMultiHeadAttention(config) for _ in range(config.n_layers))
        self.layer_norm1 = nn.ModuleList(make_norm(dim, eps=config.layer_norm_eps) for _ in range(config.n_layers))
        self.ffns = nn.ModuleList(XLMTransformerFFN(config) for _ in range(config.n_layers))
        self.layer_norm2 = nn.ModuleList(make_norm(dim, eps=config.layer_norm_eps) for _ in range(config.n_layers))

    @validate_with(_check_model_inputs)
    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        langs: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        *,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModelOutput:
        """Contextual vectors for every token; padded positions hold zeros.

        Args:
            input_ids: ``(B, T)`` token ids.
            attention_mask: ``(B, T)``, 1 for real tokens and 0 for padding; by
                default the first ``(input_ids != pad_index).sum()`` tokens of each row are real.
            langs: ``(B, T)`` language ids, read where the model has language embeddings; without them
                none is added (as in ``transformers``).
            token_type_ids: ``(B, T)`` ids added from the word table (rarely used).
            position_ids: ``(B, T)``; ``0 .. T-1`` by default (TLM restarts them for the second sentence).
            output_attentions: Return every layer's ``(B, H, T, T)`` probabilities.
            output_hidden_states: Return the embeddings and every layer's output.

        Returns:
            A :class:`~literate_transformer.core.outputs.ModelOutput`.

        Raises:
            ValueError: for ids outside the vocabulary, sequences longer than the position table,
                masks of the wrong shape, and ``langs`` outside ``[0, n_langs)``.
        """
        length = input_ids.shape[1]
        if attention_mask is None:
            # HuggingFace's rule without a mask: each row's first (number of non-padding tokens) positions are real.
            lengths = (input_ids != self.config.pad_index).sum(dim=1)  # (B,)
            attention_mask = torch.arange(length, device=input_ids.device)[None] < lengths[:, None]  # (B, T)
        if position_ids is None:
            position_ids = torch.arange(length, device=input_ids.device)[None]  # (1, T)
        # m_t as a factor: 1 for a real token, 0 for padding.
        keep = attention_mask.to(self.embeddings.weight.dtype).unsqueeze(-1)  # (B, T, 1)
        # What the token is, where it is, and (XLM's own) which language it is in.
        tensor = self.embeddings(input_ids) + self.position_embeddings(position_ids)  # (B, T, E)
        if self.uses_langs and langs is not None:
            tensor = tensor + self.lang_embeddings(langs)
        if token_type_ids is not None:
            tensor = tensor + self.embeddings(token_type_ids)
        embedding_output = self.dropout(self.layer_norm_emb(tensor)) * keep  # (B, T, E)
        mask = self.attention_masks(attention_mask, length, 0, embedding_output.dtype)["full"]
        hidden_states, layer_outputs = embedding_output, []
        for index in range(self.config.n_layers):
            # Post-LN attention (dropout on its output), then post-LN feed-forward ...
            attention = self.attentions[index](hidden_states, attention_mask=mask, output_attentions=output_attentions)
            hidden_states = add_and_norm(
                hidden_states, attention.hidden_states, self.layer_norm1[index], norm_first=False, dropout=self.dropout
            )
            ffn_output = self.ffns[index](hidden_states)  # (B, T, E)
            hidden_states = add_and_norm(hidden_states, ffn_output, self.layer_norm2[index], norm_first=False)
            # ... and the padded positions zeroed again.
            hidden_states = hidden_states * keep  # (B, T, E)
            layer_outputs.append(LayerOutput(hidden_states, attention.attention_probs))
        return ModelOutput.from_layers(embedding_output, layer_outputs, hidden_states, output_hidden_states)


register(XLMModel)
