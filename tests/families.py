"""Checks every model family's tests make, written once: a family's test file calls them on its own models.

A family of the package is proved against ``transformers`` the same way
whatever it is: its key map names a tensor a checkpoint lacks, the logits
agree at the real positions of a padded batch, cached decoding equals
uncached decoding.  The helpers here state those checks; the family's test
file says which model, which key, which tolerance.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import pytest
import torch
from torch import Tensor, nn


def assert_key_map_names_a_missing_tensor(
    key_map: Callable[..., dict[str, Tensor]], state: Mapping[str, Tensor], expected: Mapping[str, Tensor], key: str
) -> None:
    """Drop ``key`` from a checkpoint's ``state``: the family's key map must refuse it, naming that tensor."""
    state = {name: tensor for name, tensor in state.items() if name != key}
    with pytest.raises(ValueError, match=rf"missing tensors: {re.escape(key)}"):
        key_map(state, expected)


def assert_key_map_refuses_a_changed_copy(
    key_map: Callable[..., dict[str, Tensor]],
    state: Mapping[str, Tensor],
    expected: Mapping[str, Tensor],
    key: str,
    message: str,
) -> None:
    """Change the copy ``key`` of a tied tensor: the key map must refuse the checkpoint, saying ``message``."""
    state = dict(state)
    state[key] = state[key] + 1
    with pytest.raises(ValueError, match=message):
        key_map(state, expected)


def assert_close_at_real_positions(
    actual: Tensor, expected: Tensor, attention_mask: Tensor, atol: float = 1e-5, name: str = "output"
) -> None:
    """``(B, T, ...)`` tensors agree to ``atol`` at the positions whose ``attention_mask`` is 1 (padding aside)."""
    real = attention_mask.bool()
    assert real.any() and not real.all(), f"{name}: the batch must mix real and padded positions"
    torch.testing.assert_close(actual[real], expected[real], atol=atol, rtol=0, msg=name)


def assert_cached_decoding_equals_uncached(
    model: nn.Module, input_ids: Tensor, attention_mask: Tensor | None, max_new_tokens: int, **generate_kwargs: Any
) -> None:
    """Greedy decoding with the key/value cache writes what decoding without it writes, with the same scores."""
    from literate_transformer.book.generation import greedy_generate

    arguments = dict(attention_mask=attention_mask, **generate_kwargs)
    cached = greedy_generate(model, input_ids, max_new_tokens, use_cache=True, **arguments)
    recomputed = greedy_generate(model, input_ids, max_new_tokens, use_cache=False, **arguments)
    assert cached.logits.shape[1] > 1, "decoding stopped after one step: nothing cached was reused"
    assert torch.equal(cached.sequences, recomputed.sequences)
    torch.testing.assert_close(cached.logits, recomputed.logits, atol=1e-5, rtol=0)
