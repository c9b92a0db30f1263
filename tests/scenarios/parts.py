"""Shape scenarios of the parts: norms, positions, feed-forward variants, heads."""

from __future__ import annotations

import torch

from literate_transformer.parts.feed_forward import GatedFeedForward
from literate_transformer.parts.norms import make_norm
from literate_transformer.parts.positions import RelativePositionBias, position_ids

from . import DIMS, S, T, hidden


def scenario_parts():
    make_norm(DIMS["E"], 1e-6, kind="rms_norm")(hidden())
    GatedFeedForward(DIMS["E"], DIMS["F"])(hidden())
    mask = torch.ones(DIMS["B"], S, dtype=torch.long)
    mask[1, 0] = 0
    position_ids(mask, T, S - T)
    for bidirectional in (True, False):
        RelativePositionBias(DIMS["H"], num_buckets=8, max_distance=16, bidirectional=bidirectional)(T, S, S - T)
