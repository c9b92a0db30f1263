r"""RoBERTa: BERT's architecture, trained longer and differently, with positions counted after the padding.

RoBERTa (Liu et al., 2019, "RoBERTa: A Robustly Optimized BERT Pretraining
Approach", arXiv:1907.11692) changes almost nothing in the model and a lot
in how it is trained: *dynamic* masking, a new mask drawn every time a
sequence is seen rather than once when the data is prepared (section 4.1),
no next-sentence prediction, with inputs of full sentences packed up to 512
tokens (section 4.2), much larger batches (section 4.3), a byte-level BPE
vocabulary of 50K entries (section 4.4), and more data, for longer (section 5).  Its layers are BERT's, name for name
(:mod:`~literate_transformer.models.bert`); the checkpoints use one token
type (``type_vocab_size=1``), so the segment table is a single vector added
to every token.

What the model does differently is where a token's position comes from.
RoBERTa inherits fairseq's rule: positions are counted from the token ids,
**after the padding index**, and a padding token gets the padding index
itself,

.. math::

    p_t = \begin{cases} \text{pad} + \#\{s \le t : x_s \ne \text{pad}\} & x_t \ne \text{pad} \\
    \text{pad} & x_t = \text{pad} \end{cases}

(HuggingFace's ``create_position_ids_from_input_ids``).  With
``pad_token_id=1`` the first token reads row 2 of the position table, and a
table of ``max_position_embeddings=514`` rows holds 512 positions: the first
two rows are never read by a real token.  So a sequence may have at most
``max_position_embeddings - pad_token_id - 1`` tokens, and the model refuses
longer ones by name.

>>> import torch
>>> create_position_ids_from_input_ids(torch.tensor([[0, 31, 47, 2, 1, 1]]), padding_idx=1)
tensor([[2, 3, 4, 5, 1, 1]])
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..core.validation import Arguments, check_input_ids, check_token_inputs, validate_with
from .bert import BertEmbeddings, BertModel
from .registry import register

__all__ = [
    "create_position_ids_from_input_ids",
    "RobertaEmbeddings",
    "RobertaModel",
]


def create_position_ids_from_input_ids(input_ids: Tensor, padding_idx: int, past_key_values_length: int = 0) -> Tensor:
    """RoBERTa's positions: real tokens counted from ``padding_idx + 1``, padding at ``padding_idx``.

    Args:
        input_ids: ``(B, T)`` token ids.
        padding_idx: The padding token's id, which is also the position the padding reads.
        past_key_values_length: Real positions before these (HuggingFace's argument; 0 for an encoder).

    Returns:
        ``(B, T)`` positions.
    """
    # 1 for a real token, 0 for padding.
    mask = input_ids.ne(padding_idx).int()  # (B, T)
    # Each real token's count of real tokens up to itself; padding stays 0.
    incremental_indices = (torch.cumsum(mask, dim=1).type_as(mask) + past_key_values_length) * mask  # (B, T)
    # Shifted past the padding index: the first real token sits at padding_idx + 1.
    return incremental_indices.long() + padding_idx


def _check_embeddings_inputs(embeddings: RobertaEmbeddings, args: Arguments) -> None:
    config = embeddings.config
    # Positions run up to T + pad_token_id: the table must hold them.
    check_input_ids(args.input_ids, config.vocab_size, config.max_position_embeddings - embeddings.padding_idx - 1)
    check_token_inputs(args, config)


class RobertaEmbeddings(BertEmbeddings):
    """BERT's embeddings, whose default positions are counted from the ids, after the padding index.

    The tables are BERT's (``word_embeddings``, ``position_embeddings``,
    ``token_type_embeddings``, ``LayerNorm``); only the positions a call
    reads change.

    Args:
        config: A ``transformers`` RoBERTa config.
    """

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.padding_idx = config.pad_token_id

    @validate_with(_check_embeddings_inputs)
    def forward(
        self, input_ids: Tensor, token_type_ids: Tensor | None = None, position_ids: Tensor | None = None
    ) -> Tensor:
        """Embed token ids; as :meth:`BertEmbeddings.forward <literate_transformer.models.bert.BertEmbeddings.forward>`.

        Args:
            input_ids: ``(B, T)`` token ids.
            token_type_ids: ``(B, T)`` segment ids; all zeros when omitted.
            position_ids: ``(B, T)``; by default counted from the ids after ``pad_token_id``.

        Returns:
            The embeddings, ``(B, T, E)``.
        """
        if position_ids is None:
            # fairseq's positions: counted over the real tokens, after the padding index.
            position_ids = create_position_ids_from_input_ids(input_ids, self.padding_idx)  # (B, T)
        return super().forward(input_ids, token_type_ids, position_ids)


class RobertaModel(BertModel):
    """RoBERTa: :class:`RobertaEmbeddings`, then BERT's encoder and pooler.

    Args:
        config: A ``transformers`` :class:`~transformers.RobertaConfig`.
        add_pooling_layer: Build the ``pooler`` (as HuggingFace does by default).
    """

    # The configs this class reads (and converts), checked (core.config.ChecksConfig): no decoder, no
    # cross-attention, absolute positions, and its own check of the positions' table.
    config_type, config_name = "roberta", "RobertaConfig"
    # Converting reads BERT's declarations (models.registry.ConvertsFromHF) under RoBERTa's names.
    hf_prefix = "roberta."
    hf_heads = ("lm_head.",)

    def __init__(self, config: Any, add_pooling_layer: bool = True) -> None:
        self.check_config(config)
        super().__init__(config, add_pooling_layer)
        # The one module RoBERTa changes: its embeddings count positions after the padding.
        self.embeddings = RobertaEmbeddings(config)

    @classmethod
    def check_own_config(cls, config: Any) -> None:
        """A ``pad_token_id``, and a position table longer than it: positions are counted after the padding id."""
        if not isinstance(config.pad_token_id, int) or config.max_position_embeddings <= config.pad_token_id + 1:
            raise ValueError(
                f"{cls.config_name}: positions start after pad_token_id ({config.pad_token_id!r}), so "
                f"max_position_embeddings ({config.max_position_embeddings}) must exceed pad_token_id + 1"
            )

    def check_token_inputs(self, args: Arguments) -> Tensor:
        """BERT's check of the token inputs, with RoBERTa's limit on their length.

        Positions run up to ``T + pad_token_id``, so a sequence holds at most
        ``max_position_embeddings - pad_token_id - 1`` tokens.  ``forward`` is
        :meth:`BertModel.forward <literate_transformer.models.bert.BertModel.forward>`:
        only the embeddings, and so this check, change.
        """
        _check_embeddings_inputs(self.embeddings, args)
        return args.input_ids


register(RobertaModel)
