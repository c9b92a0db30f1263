"""Shape scenarios of the site's tooling: the module the browser page's graph is exported from."""

from __future__ import annotations

import torch
from lt_site.export import BrowserBert

from literate_transformer.models.bert import BertModel

from . import DIMS, T, tiny_config, token_ids


def scenario_export():
    # No export here: its forward is what runs.
    BrowserBert(BertModel(tiny_config()).eval())(token_ids(), torch.zeros(DIMS["B"], T, dtype=torch.long))
