"""Shared fixtures: the offline environment, tiny configs, randomised weights and the checkpoint."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

from literate_transformer.checkpoints import use_offline_environment
from literate_transformer.core.config import TransformerConfig

# Tests never reach for the model hub and never print progress bars (the project's one definition).
use_offline_environment()

#: The sizes of :func:`tiny_config`: small, and all distinct, so that a swapped dimension cannot hide.
TINY = dict(
    vocab_size=50,
    hidden_size=24,
    num_attention_heads=4,
    intermediate_size=40,
    num_hidden_layers=2,
    max_position_embeddings=16,
    num_labels=3,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state."""
    torch.manual_seed(0)


@pytest.fixture
def tiny_config() -> Callable[..., TransformerConfig]:
    """A factory of small configs without dropout: ``tiny_config(hidden_size=32, ...)`` overrides fields."""

    def make(**changes) -> TransformerConfig:
        return TransformerConfig(**{**TINY, **changes})

    return make


@pytest.fixture
def randomize() -> Callable[[nn.Module], nn.Module]:
    """Give every parameter random values, layer norms included, and switch to evaluation mode.

    Fresh layer norms are the identity (weight 1, bias 0) and fresh biases are
    small, which could hide a swapped or missing layer norm in a comparison.
    """

    @torch.no_grad()
    def apply(module: nn.Module, scale: float = 0.3) -> nn.Module:
        for sub in module.modules():
            if isinstance(sub, nn.LayerNorm):
                sub.weight.normal_(1.0, 0.2)
                sub.bias.normal_(0.0, 0.2)
            elif isinstance(sub, (nn.Linear, nn.Embedding)):
                for parameter in sub.parameters(recurse=False):
                    parameter.normal_(0.0, scale)
        return module.eval()

    return apply


@pytest.fixture(scope="session")
def tokenizer():
    from literate_transformer import load_tokenizer

    return load_tokenizer()


@pytest.fixture(scope="session")
def hf_model():
    """HuggingFace's BertModel on the offline checkpoint, eager attention, eval mode."""
    from literate_transformer import load_hf_model

    return load_hf_model()


class HFApi:
    """The differences between ``transformers`` 4.x and 5.x that the comparisons meet, in one place.

    Tests that compare with HuggingFace call these instead of checking
    versions themselves.
    """

    @staticmethod
    def hidden_states(layer_output):
        """A HuggingFace layer's output tensor: 5.x returns it, 4.x a tuple whose first entry it is."""
        return layer_output[0] if isinstance(layer_output, tuple) else layer_output


@pytest.fixture(scope="session")
def hf_api() -> HFApi:
    return HFApi()
