"""Shape scenarios of M2M-100: a padded source, its attentions, and decoding with a forced target language."""

from __future__ import annotations

import torch
from transformers import M2M100Config

from literate_transformer.models.m2m_100 import M2M100ForConditionalGeneration

from . import DIMS, S, encoder_decoder_sizes, token_ids


def scenario_m2m_100():
    config = M2M100Config(**encoder_decoder_sizes())
    m2m = M2M100ForConditionalGeneration(config).eval()
    source = token_ids(S)
    source_mask = torch.ones(DIMS["B"], S, dtype=torch.long)
    source_mask[0, -1] = 0
    source[0, -1] = config.pad_token_id
    m2m(source, source_mask, token_ids(), output_attentions=True)
    m2m.generate(source, source_mask, max_new_tokens=2, forced_bos_token_id=3)
