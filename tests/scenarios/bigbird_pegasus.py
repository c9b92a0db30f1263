"""Shape scenarios of BigBird-Pegasus: a long padded source read block-sparse, a short one read in full."""

from __future__ import annotations

import torch
from transformers import BigBirdPegasusConfig

from literate_transformer.models.bigbird_pegasus import BigBirdPegasusForConditionalGeneration

from . import DIMS, encoder_decoder_sizes, token_ids


def scenario_bigbird_pegasus():
    # N = 10 blocks of Z = 5 tokens; each of the M = 8 middle blocks reads G = 5 + 2 key blocks.
    config = BigBirdPegasusConfig(
        **encoder_decoder_sizes(encoder_layers=2, max_position_embeddings=64),
        block_size=DIMS["Z"],
        num_random_blocks=DIMS["G"] - 5,
    )
    bigbird = BigBirdPegasusForConditionalGeneration(config).eval()
    length = DIMS["N"] * DIMS["Z"] - 2  # padded to N whole blocks
    source_mask = torch.ones(DIMS["B"], length, dtype=torch.long)
    source_mask[0, -3:] = 0
    bigbird(token_ids(length), source_mask, token_ids(), output_attentions=True)
    bigbird(token_ids(length), source_mask, token_ids())
    bigbird.generate(token_ids(12), max_new_tokens=2)
