"""Input validation shared by the modules.

A wrong input to a transformer rarely fails where the mistake is: a float
``input_ids`` tensor fails inside the embedding lookup, an id beyond the
vocabulary triggers an index error (or a device-side assert on a GPU), and a
mask of the wrong shape may even broadcast silently into wrong numbers.  The
functions here check what the public ``forward`` methods receive and raise a
:class:`TypeError` or :class:`ValueError` that names the argument, what was
expected and what was given.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

_KINDS = {
    "float": lambda t: t.is_floating_point(),
    "int": lambda t: not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool,
    "bool": lambda t: t.dtype == torch.bool,
}


def _shape_text(shape: Sequence[int | None]) -> str:
    return "(" + ", ".join("*" if dim is None else str(dim) for dim in shape) + ")"


def check_tensor(
    value: object,
    name: str,
    *,
    ndim: int | None = None,
    dtypes: Sequence[str] | None = None,
    shape: Sequence[int | None] | None = None,
) -> Tensor:
    """Check that ``value`` is a tensor of the expected rank, dtype kind and shape.

    Args:
        value: What the caller passed.
        name: The argument's name, used in the error message.
        ndim: Expected number of dimensions.
        dtypes: Allowed dtype kinds among ``"float"``, ``"int"``, ``"bool"``.
        shape: Expected shape; ``None`` entries match any size.

    Returns:
        ``value``, unchanged.
    """
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if dtypes is not None and not any(_KINDS[kind](value) for kind in dtypes):
        raise TypeError(f"{name} must have a {' or '.join(dtypes)} dtype, got {value.dtype}")
    if shape is not None and ndim is None:
        ndim = len(shape)
    if ndim is not None and value.dim() != ndim:
        expected = _shape_text(shape) if shape is not None else f"{ndim}-D"
        raise ValueError(f"{name} must be {ndim}-D with shape {expected}, got shape {tuple(value.shape)}")
    if shape is not None:
        for expected_dim, actual_dim in zip(shape, value.shape, strict=True):
            if expected_dim is not None and expected_dim != actual_dim:
                raise ValueError(f"{name} must have shape {_shape_text(shape)}, got {tuple(value.shape)}")
    return value


def check_input_ids(
    input_ids: object,
    vocab_size: int,
    max_position_embeddings: int | None = None,
    name: str = "input_ids",
    past_length: int = 0,
) -> Tensor:
    """Token ids: an integer ``(B, T)`` tensor with values in ``[0, vocab_size)``.

    ``T + past_length`` must not exceed ``max_position_embeddings`` when given.
    """
    input_ids = check_tensor(input_ids, name, ndim=2, dtypes=("int",), shape=(None, None))
    if input_ids.shape[1] == 0:
        raise ValueError(f"{name} must hold at least one token per sequence, got shape {tuple(input_ids.shape)}")
    if input_ids.numel():
        low, high = int(input_ids.min()), int(input_ids.max())
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise ValueError(f"{name} must be token ids in [0, vocab_size={vocab_size}), found {bad}")
    if max_position_embeddings is not None and input_ids.shape[1] + past_length > max_position_embeddings:
        raise ValueError(
            f"{name} has {input_ids.shape[1]} tokens"
            + (f" after {past_length} cached ones" if past_length else "")
            + f", more than max_position_embeddings={max_position_embeddings}"
        )
    return input_ids


def check_attention_mask(
    mask: object, batch_size: int | None, key_length: int | None, name: str = "attention_mask"
) -> Tensor:
    """A tokenizer-style mask: ``(B, S)``, boolean or 0/1 numbers."""
    mask = check_tensor(mask, name, ndim=2, shape=(batch_size, key_length))
    if mask.dtype != torch.bool and mask.numel() and not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError(f"{name} must hold only 0 and 1 (or booleans), got other values")
    return mask


def check_token_type_ids(token_type_ids: object, shape: Sequence[int], type_vocab_size: int) -> Tensor:
    """Segment ids: an integer tensor of ``shape`` with values in ``[0, type_vocab_size)``."""
    token_type_ids = check_tensor(token_type_ids, "token_type_ids", dtypes=("int",), shape=tuple(shape))
    if token_type_ids.numel():
        low, high = int(token_type_ids.min()), int(token_type_ids.max())
        if low < 0 or high >= type_vocab_size:
            bad = low if low < 0 else high
            raise ValueError(f"token_type_ids must be in [0, type_vocab_size={type_vocab_size}), found {bad}")
    return token_type_ids


def check_hidden_states(x: object, hidden_size: int, name: str = "hidden_states") -> Tensor:
    """Hidden states: a floating-point ``(B, T, E)`` tensor with ``E == hidden_size``."""
    return check_tensor(x, name, ndim=3, dtypes=("float",), shape=(None, None, hidden_size))
