"""Deliberately wrong shape comments: tests/test_shape_comments.py checks that its checker reports them.

This module is not part of the package and is never imported by it.
"""

import inspect

import torch

B, E = 2, 24


def widen(hidden_state):
    doubled = hidden_state * 2  # (B, T, E)
    widened = torch.cat([doubled, doubled[..., :16]], dim=-1)  # (B, T, E)
    return widened


def pool(hidden_state):
    pooled = hidden_state.mean(dim=1)  # (B, T, E)
    return pooled


def pair(left_input, right_input):
    left = left_input + 0  # (B, T, E)
    right = right_input + 0  # (B, T, E)
    return left, right


def never_called(hidden_state):
    unused = hidden_state  # (B, T, E)
    return unused


NEVER_CALLED_LINE = inspect.getsourcelines(never_called)[1] + 1


def malformed(hidden_state):
    odd = hidden_state  # (B, Q)
    first, second = hidden_state, hidden_state  # (B, T, E)
    return odd, first, second


MODULE_LEVEL = torch.zeros(B, E)  # (B, E)


def run_wrong_width():
    widen(torch.randn(B, 3, E))


def run_wrong_rank():
    pool(torch.randn(B, 3, E))


def run_two_lengths():
    pair(torch.randn(B, 3, E), torch.randn(B, 3, E))
    pair(torch.randn(B, 5, E), torch.randn(B, 5, E))


def run_inconsistent_lengths():
    pair(torch.randn(B, 3, E), torch.randn(B, 5, E))
