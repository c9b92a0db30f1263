"""Shape scenarios of BART: a padded source, its attentions, targets made from the source, and greedy decoding."""

from __future__ import annotations

import torch
from transformers import BartConfig

from literate_transformer.models.bart import BartForConditionalGeneration, shift_tokens_right

from . import DIMS, S, token_ids


def scenario_bart():
    config = BartConfig(
        vocab_size=DIMS["V"],
        d_model=DIMS["E"],
        encoder_layers=DIMS["L"],
        decoder_layers=1,
        encoder_attention_heads=DIMS["H"],
        decoder_attention_heads=DIMS["H"],
        encoder_ffn_dim=DIMS["F"],
        decoder_ffn_dim=DIMS["F"],
        max_position_embeddings=16,
        scale_embedding=True,
    )
    bart = BartForConditionalGeneration(config).eval()
    source_mask = torch.ones(DIMS["B"], S, dtype=torch.long)
    source_mask[0, -1] = 0
    bart(token_ids(S), source_mask, token_ids(), output_attentions=True)
    bart(token_ids(S), source_mask)
    bart.generate(token_ids(S), source_mask, max_new_tokens=2)
    shift_tokens_right(token_ids(S), config.pad_token_id, config.decoder_start_token_id)
