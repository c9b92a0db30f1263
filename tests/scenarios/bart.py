"""Shape scenarios of BART: a padded source, its attentions, targets made from the source, and greedy decoding."""

from __future__ import annotations

import torch
from transformers import BartConfig

from literate_transformer.models.bart import BartForConditionalGeneration, shift_tokens_right

from . import DIMS, S, encoder_decoder_sizes, token_ids


def scenario_bart():
    config = BartConfig(**encoder_decoder_sizes(), scale_embedding=True)
    bart = BartForConditionalGeneration(config).eval()
    source_mask = torch.ones(DIMS["B"], S, dtype=torch.long)
    source_mask[0, -1] = 0
    bart(token_ids(S), source_mask, token_ids(), output_attentions=True)
    bart(token_ids(S), source_mask)
    bart.generate(token_ids(S), source_mask, max_new_tokens=2)
    shift_tokens_right(token_ids(S), config.pad_token_id, config.decoder_start_token_id)
