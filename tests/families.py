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

import pytest
from torch import Tensor


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
