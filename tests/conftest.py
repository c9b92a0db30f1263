"""Shared fixtures: the offline checkpoint, loaded once per test session."""

from __future__ import annotations

import os

import pytest
import torch

# Tests never reach for the model hub and never print progress bars.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state."""
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def tokenizer():
    from literate_transformer import load_tokenizer

    return load_tokenizer()


@pytest.fixture(scope="session")
def hf_model():
    """HuggingFace's BertModel on the offline checkpoint, eager attention, eval mode."""
    from literate_transformer import load_hf_model

    return load_hf_model()
