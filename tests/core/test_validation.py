"""The two tiers of input checks: shapes and dtypes always, values only where reading them costs nothing."""

from __future__ import annotations

import types

import pytest
import torch

from literate_transformer.core.validation import (
    CHECK_VALUES_ENV,
    Arguments,
    check_attention_mask,
    check_input_ids,
    check_labels,
    checks_values,
    value_checks,
)

BAD_IDS = torch.tensor([[5, 99]])


def test_values_are_checked_on_the_cpu_and_the_message_names_the_switch():
    with pytest.raises(ValueError, match=rf"found 99 \(a value check: on CPU tensors, or with {CHECK_VALUES_ENV}=1\)"):
        check_input_ids(BAD_IDS, vocab_size=10)


def test_without_value_checks_only_the_shape_and_dtype_are_checked():
    with value_checks(False):
        assert check_input_ids(BAD_IDS, vocab_size=10) is BAD_IDS
        check_attention_mask(torch.tensor([[0, 7]]), 1, 2)
        check_labels(torch.tensor([[-5, 99]]), (1, 2), vocab_size=10)
        # The metadata tier still refuses what is wrong without reading a value.
        with pytest.raises(TypeError, match="input_ids must have an int dtype"):
            check_input_ids(BAD_IDS.float(), vocab_size=10)
        with pytest.raises(ValueError, match=r"attention_mask must have shape \(1, 3\)"):
            check_attention_mask(torch.ones(1, 2), 1, 3)


def test_an_accelerators_values_are_read_only_under_the_debug_switch(monkeypatch):
    on_a_gpu = types.SimpleNamespace(device=torch.device("cuda"))  # only the device is consulted
    monkeypatch.delenv(CHECK_VALUES_ENV, raising=False)
    assert checks_values(torch.zeros(1)) and not checks_values(on_a_gpu)
    monkeypatch.setenv(CHECK_VALUES_ENV, "1")
    assert checks_values(on_a_gpu)
    # The meta device has no values to read, whatever is asked.
    assert not checks_values(torch.zeros(1, device="meta"))
    with value_checks(False):
        assert not checks_values(on_a_gpu) and not checks_values(torch.zeros(1))
    with value_checks(True):
        assert checks_values(torch.zeros(1))


def test_value_checks_takes_a_bool_and_restores_what_was_before():
    with pytest.raises(TypeError, match="enabled must be a bool, got 1"):
        with value_checks(1):
            pass
    with value_checks(False):
        with value_checks(True):
            assert checks_values(torch.zeros(1))
        assert not checks_values(torch.zeros(1))
    assert checks_values(torch.zeros(1))


def test_arguments_are_a_namespace():
    args = Arguments(input_ids=1, attention_mask=None)
    assert (args.input_ids, args.attention_mask) == (1, None)
    assert isinstance(args, types.SimpleNamespace)
