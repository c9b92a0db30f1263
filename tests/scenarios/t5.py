"""Shape scenarios of T5: both feed-forward kinds, tied and untied heads, a padded source, cached decoding."""

from __future__ import annotations

import torch
from transformers import T5Config

from literate_transformer.core.records import config_sizes
from literate_transformer.models.t5 import T5ForConditionalGeneration

from . import DIMS, S, token_ids


def scenario_t5():
    for feed_forward_proj, tied in (("relu", True), ("gated-gelu", False)):
        config = T5Config(
            **config_sizes("t5", DIMS),
            num_decoder_layers=2,
            relative_attention_num_buckets=8,
            relative_attention_max_distance=16,
            feed_forward_proj=feed_forward_proj,
            tie_word_embeddings=tied,
            decoder_start_token_id=0,
        )
        t5 = T5ForConditionalGeneration(config).eval()
        source_mask = torch.ones(DIMS["B"], S, dtype=torch.long)
        source_mask[0, -2:] = 0
        t5(token_ids(S), source_mask, token_ids(), output_attentions=True)
        t5.generate(token_ids(S), source_mask, max_new_tokens=2)
        t5._shift_right(token_ids())
