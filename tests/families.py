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


def assert_encoder_equals_hf(
    hf_model,
    ours,
    input_ids,
    attention_mask,
    atol: float,
    hidden_states: bool = True,
    padded_rows: bool = True,
    **inputs,
):
    """An encoder's outputs equal ``transformers``' on a padded batch, within ``atol`` (fp32, ``rtol=0``).

    The last hidden state and (with ``hidden_states``) every layer's output at the real positions (what a
    padded position holds is each implementation's own business), and every layer's attention probabilities,
    the padded queries' rows included unless ``padded_rows`` is false (for a family whose releases of
    ``transformers`` disagree there; its test says how).  Also checks that the comparison is not vacuous:
    the mask hides the padded keys from the real queries.
    """
    kwargs = dict(attention_mask=attention_mask, output_attentions=True, output_hidden_states=hidden_states, **inputs)
    with torch.no_grad():
        expected = hf_model(input_ids=input_ids, **kwargs)
        actual = ours(input_ids, **kwargs)
    real = attention_mask.bool()
    torch.testing.assert_close(actual.last_hidden_state[real], expected.last_hidden_state[real], atol=atol, rtol=0)
    if hidden_states:
        assert len(actual.hidden_states) == len(expected.hidden_states)
        for ours_state, hf_state in zip(actual.hidden_states, expected.hidden_states, strict=True):
            torch.testing.assert_close(ours_state[real], hf_state[real], atol=atol, rtol=0)
    assert len(actual.attentions) == len(expected.attentions) > 0
    rows = slice(None) if padded_rows else real
    for ours_probs, hf_probs in zip(actual.attentions, expected.attentions, strict=True):
        ours_rows, hf_rows = ours_probs.transpose(1, 2)[rows], hf_probs.transpose(1, 2)[rows]  # (N, H, S)
        torch.testing.assert_close(ours_rows, hf_rows, atol=atol, rtol=0)
    # Not vacuous: a real query gives (numerically) no weight to a padded key.
    padded_row = int((~real).any(dim=1).nonzero()[0])
    padded_keys = ~real[padded_row]
    assert actual.attentions[0][padded_row, :, 0, padded_keys].abs().max().item() < 1e-6
    return actual, expected


def assert_refuses_bad_input(model, input_ids, config_name: str, vocab_size: int, max_length: int, **inputs):
    """Clear errors, naming the argument: ids outside the vocabulary, a mask of the wrong shape, a sequence too long.

    ``max_length`` is the longest sequence the model accepts; one token more must be refused by naming
    ``config_name`` (the config field that limits it).
    """
    too_big = input_ids.clone()
    too_big[0, 0] = vocab_size
    with pytest.raises(ValueError, match=rf"input_ids must be token ids in \[0, vocab_size={vocab_size}\)"):
        model(too_big, **inputs)
    with pytest.raises(ValueError, match="attention_mask must have shape"):
        model(input_ids, attention_mask=torch.ones(input_ids.shape[0], input_ids.shape[1] + 1, dtype=torch.long))
    too_long = torch.full((1, max_length + 1), 3)
    long_inputs = {name: value[:1, :1].expand(1, max_length + 1) for name, value in inputs.items()}
    with pytest.raises(ValueError, match=config_name):
        model(too_long, **long_inputs)
    model(too_long[:, :max_length], **{name: value[:, :max_length] for name, value in long_inputs.items()})


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
