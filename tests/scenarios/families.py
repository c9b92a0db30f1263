"""Shape scenarios of every decoder family, from its record: a padded batch with its attentions, then greedy decoding.

Each decoder family's record (:mod:`literate_transformer.core.records`)
holds its running example's config and the legend's sizes where they are
not the book example's (Llama's ``K = 2`` key/value heads, GPT-J's ``R = 4``
rotated features, GPT's ``F = 4E``): a scenario ``scenario_<family>`` runs
its model on :data:`~scenarios.DIMS`' batch, the second row left-padded by
one, with its attentions, then writes two tokens.  What a family runs
beyond that (GPT-2's given positions, Mixtral's router scores) is in
:mod:`scenarios.decoders`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import torch
import transformers

from literate_transformer.core.records import FamilyRecord, records

from . import DIMS, T, token_ids


def _scenario(family: FamilyRecord) -> Callable[[], None]:
    def scenario() -> None:
        module = importlib.import_module(f"literate_transformer.{family.module}")
        config_class = getattr(module if family.since is None else transformers, family.config)
        model = getattr(module, family.example_model)(config_class(**family.sizes, **family.ids)).eval()
        mask = torch.ones(DIMS["B"], T, dtype=torch.long)
        mask[1, 0] = 0
        model(token_ids(), attention_mask=mask, output_attentions=True)
        model.generate(token_ids(), mask, max_new_tokens=2)

    scenario.__name__ = f"scenario_{family.key}"
    # The record's legend sizes (its layers, L, are its own: no decoder's shape comment names them).
    scenario.dims = {**family.dims, "L": family.sizes.get("num_hidden_layers", DIMS["L"])}
    return scenario


for _family in records().values():
    # Every decoder this release of transformers has (GPT-3, which it lacks, is the package's own config).
    if _family.branch == "decoder" and (_family.since is None or _family.in_transformers()):
        globals()[f"scenario_{_family.key}"] = _scenario(_family)
