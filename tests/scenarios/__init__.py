"""The scenarios of the shape-comment check: small forward passes that run every shape-commented line.

``tests/core/test_shape_comments.py`` runs every ``scenario_*`` function of
every module in this folder under the site's line recorder and compares each
commented line's tensor with its comment.  A new model family adds a module
here (``scenarios/<family>.py``) with a scenario that runs its code, unless its
record's scenario (:mod:`scenarios.families`: every decoder family's running
example on a padded batch, then greedy decoding) runs all of it.  The helpers below give every scenario the legend's fixed sizes.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path

import torch

from literate_transformer.core.config import TransformerConfig
from literate_transformer.core.records import config_sizes

#: Fixed sizes of the legend letters in every scenario (all distinct; K, the key/value heads, is H unless a
#: scenario of grouped-query attention says otherwise with ``with_dims``; R, the features a rotary embedding
#: turns per head, is D unless a scenario of partial rotation says otherwise).
DIMS = {"B": 2, "H": 4, "K": 4, "D": 6, "R": 6, "E": 24, "F": 40, "V": 50, "C": 7, "L": 3}
#: W, the embedding width of the families that factorise their embeddings; A, the rows of DeBERTa's
#: relative-position table.
DIMS |= {"W": 10, "A": 12}
#: Block-sparse attention cuts S into N blocks of Z tokens; each of the M = N - 2 blocks between the two
#: global ones reads G key blocks.
DIMS |= {"N": 10, "M": 8, "G": 7, "Z": 5}
#: U, the real tokens of an unpadded (packed) batch.
DIMS |= {"U": 9}
#: Query and key lengths the scenarios use (any values work; distinct ones catch swaps).
T, S = 3, 5


def with_dims(**dims: int) -> Callable[[Callable[[], object]], Callable[[], object]]:
    """Declare fixed sizes other than :data:`DIMS` for one scenario."""

    def decorate(scenario):
        scenario.dims = dims
        return scenario

    return decorate


def tiny_config(**changes) -> TransformerConfig:
    """A config whose sizes are the legend's: E=24, H=4 (D=6), F=40, V=50, C=7, L=3, no dropout."""
    fields = dict(
        standard_sizes(),
        intermediate_size=DIMS["F"],
        num_labels=DIMS["C"],
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    fields.update(changes)
    return TransformerConfig(**fields)


def standard_sizes() -> dict[str, int]:
    """The legend's sizes under the standard names every ``transformers`` config answers to.

    ``GPT2Config(**standard_sizes())`` maps them onto GPT-2's own names
    (``n_embd``, ``n_head``, ``n_layer``) through its ``attribute_map``.
    """
    return config_sizes(None, DIMS, max_position_embeddings=16)


def encoder_decoder_sizes(**changes) -> dict[str, int]:
    """The legend's sizes under BART's names (BART, M2M-100, BigBird-Pegasus): a one-layer decoder as wide as the encoder.

    ``changes`` replace any of them: ``encoder_decoder_sizes(max_position_embeddings=64)``.
    """
    sizes = dict(
        vocab_size=DIMS["V"],
        d_model=DIMS["E"],
        encoder_layers=DIMS["L"],
        decoder_layers=1,
        encoder_attention_heads=DIMS["H"],
        decoder_attention_heads=DIMS["H"],
        encoder_ffn_dim=DIMS["F"],
        decoder_ffn_dim=DIMS["F"],
        max_position_embeddings=16,
    )
    return sizes | changes


def token_ids(length: int = T) -> torch.Tensor:
    return torch.randint(1, DIMS["V"], (DIMS["B"], length))


def hidden(length: int = T) -> torch.Tensor:
    return torch.randn(DIMS["B"], length, DIMS["E"])


def collect() -> list[Callable[[], object]]:
    """Every ``scenario_*`` function of every module of this folder, module by module, in the order written."""
    found = []
    for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        found += [value for name, value in vars(loaded).items() if name.startswith("scenario_") and callable(value)]
    return found
