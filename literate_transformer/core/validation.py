"""Validation: bad input is refused at the door, with a message that names it.

A wrong input to a transformer rarely fails where the mistake is: a float
``input_ids`` tensor fails inside the embedding lookup, an id beyond the
vocabulary triggers an index error (or a device-side assert on a GPU), and a
mask of the wrong shape may even broadcast silently into wrong numbers.  The
functions here check what a caller passes and raise a :class:`TypeError` or
:class:`ValueError` that names the argument, what was expected and what was
given.

Checked once, at the entry point
--------------------------------
Each module states what its ``forward`` accepts in one check function next
to it, attached with :func:`validate_with`.  The check runs when the module
is called from outside, by a reader in a chapter or by user code, and is
skipped when another validated module calls it: a decoder layer checks its
inputs once, and its attention and feed-forward sub-layers trust their
caller (nanoGPT's rule: one check at the entry, none inside).  So the
``forward`` methods hold the lesson and nothing else, and the messages are
the same whichever module a reader calls first.

>>> from literate_transformer import FeedForward, TransformerConfig
>>> feed_forward = FeedForward(TransformerConfig(hidden_size=8, num_attention_heads=2, intermediate_size=16))
>>> feed_forward(torch.randn(1, 3, 6))
Traceback (most recent call last):
    ...
ValueError: hidden_states must have shape (*, *, 8), got (1, 3, 6)

Two tiers: shapes always, values where reading them is free
-----------------------------------------------------------
A check of a tensor's shape and dtype reads its metadata, which the host
already has: it costs nothing, and runs at every public entry.  A check of
its *values* (ids inside the vocabulary, a mask of 0s and 1s) must read
them.  For a tensor on the CPU that is a pass over memory the forward makes
anyway.  For a tensor on an accelerator it is a copy back to the host
(``int(t.max())``, ``bool(t.all())``, ``t.item()``, each one PyTorch's
``aten::_local_scalar_dense``), and the host waits there until the device
has finished all the work queued before it: at every call, and at every
step of generation.  So the value checks run only where they read nothing
back (:func:`checks_values`): on CPU tensors, or everywhere when the
environment variable ``LITERATE_TRANSFORMER_CHECK_VALUES=1`` (or
:func:`value_checks`) asks for them while debugging.  Their messages name
that switch.  On an accelerator without it, an id outside the vocabulary
fails inside the embedding's lookup, as it does in ``transformers``.

>>> with value_checks(False):                # as on an accelerator: no value is read
...     check_input_ids(torch.tensor([[5, 99]]), vocab_size=10).shape
torch.Size([1, 2])
>>> check_input_ids(torch.tensor([[5, 99]]), vocab_size=10)
Traceback (most recent call last):
    ...
ValueError: input_ids must be token ids in [0, vocab_size=10), found 99 (a value check: on CPU tensors, or with LITERATE_TRANSFORMER_CHECK_VALUES=1)
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor

from .outputs import Cache, LayerCache

# How many validated calls are running in this thread: only the outermost one checks.
_calls = threading.local()


#: The debug switch that turns the value checks on for tensors on an accelerator.
CHECK_VALUES_ENV = "LITERATE_TRANSFORMER_CHECK_VALUES"
# What every value check's message ends with: when such checks run.
_VALUE_CHECK = f"(a value check: on CPU tensors, or with {CHECK_VALUES_ENV}=1)"
# value_checks()'s setting for this thread: None (decide by device), True or False.
_values = threading.local()


class Arguments(types.SimpleNamespace):
    """A call's arguments by name, defaults filled in: what a check function reads (``args.input_ids``)."""


@contextlib.contextmanager
def value_checks(enabled: bool) -> Iterator[None]:
    """Inside the block, run the value checks everywhere (``True``) or nowhere (``False``), whatever the device.

    ``False`` is how a test makes the CPU behave as an accelerator does by default.

    Raises:
        TypeError: if ``enabled`` is not a bool.
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be a bool, got {enabled!r}")
    before = getattr(_values, "enabled", None)
    _values.enabled = enabled
    try:
        yield
    finally:
        _values.enabled = before


def checks_values(tensor: Tensor) -> bool:
    """Whether a check may read ``tensor``'s values: on the CPU, under the debug switch, or as :func:`value_checks` says.

    Never while :func:`torch.compile` traces, and never on the ``meta`` device, which has no values.
    """
    if torch.compiler.is_compiling() or tensor.device.type == "meta":
        return False
    enabled = getattr(_values, "enabled", None)
    if enabled is not None:
        return enabled
    return tensor.device.type == "cpu" or os.environ.get(CHECK_VALUES_ENV, "") == "1"


def value_error(message: str) -> ValueError:
    """A value check's :class:`ValueError`: ``message``, then when such checks run (:data:`CHECK_VALUES_ENV`)."""
    return ValueError(f"{message} {_VALUE_CHECK}")


def validate_with(check: Callable[..., object]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Run ``check`` on a function's arguments when it is called from outside the package's modules.

    The arguments are bound to the decorated function's own signature, with
    its defaults filled in, so the signature is written once (on the
    function) and ``check`` reads them by name: ``check(module, args)`` for
    a method (the module is ``self``), ``check(args)`` for a plain function,
    where ``args`` is an :class:`Arguments`.  A call that does not fit the
    signature raises the :class:`TypeError` Python would.

    The check runs only for the outermost validated call of a thread: when
    a validated ``forward`` calls another one, the inner check is skipped,
    because the outer one has already checked everything the inner one
    receives.  Under :func:`torch.compile` and :func:`torch.export.export`,
    which trace the code once, nothing is checked.

    Args:
        check: The check function; it raises on bad input.

    The decorated function keeps the check as ``check_call(*args, **kwargs)``, which
    binds and checks a call without running it (a caller that hands its
    arguments on checks them this way, before anything runs).

    Returns:
        A decorator.
    """

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(function)
        is_method = next(iter(signature.parameters), None) == "self"

        def run_check(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as error:
                raise TypeError(f"{function.__qualname__}(): {error}") from None
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            if is_method:
                check(arguments.pop("self"), Arguments(**arguments))
            else:
                check(Arguments(**arguments))

        def run_check_call(*args: Any, **kwargs: Any) -> None:
            run_check(args, kwargs)

        @functools.wraps(function)
        def checked(*args: Any, **kwargs: Any) -> Any:
            if torch.compiler.is_compiling():
                return function(*args, **kwargs)
            depth = getattr(_calls, "depth", 0)
            if depth == 0:
                run_check(args, kwargs)
            _calls.depth = depth + 1
            try:
                return function(*args, **kwargs)
            finally:
                _calls.depth = depth

        checked.check_call = run_check_call  # type: ignore[attr-defined]
        return checked

    return decorate


_KINDS = {
    "float": lambda t: t.is_floating_point(),
    "int": lambda t: not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool,
    "bool": lambda t: t.dtype == torch.bool,
}


def _shape_text(shape: Sequence[int | None]) -> str:
    return "(" + ", ".join("*" if dim is None else str(dim) for dim in shape) + ")"


def a_or_an(word: str) -> str:
    """The article a message puts before ``word``: "an int", "a float".

    >>> a_or_an("int"), a_or_an("float")
    ('an', 'a')
    """
    return "an" if word[:1].lower() in "aeiou" else "a"


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
        kinds = " or ".join(dtypes)
        raise TypeError(f"{name} must have {a_or_an(kinds)} {kinds} dtype, got {value.dtype}")
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
    if input_ids.numel() and checks_values(input_ids):
        low, high = int(input_ids.min()), int(input_ids.max())
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise value_error(f"{name} must be token ids in [0, vocab_size={vocab_size}), found {bad}")
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
    if (
        mask.dtype != torch.bool
        and mask.numel()
        and checks_values(mask)
        and not bool(((mask == 0) | (mask == 1)).all())
    ):
        raise value_error(f"{name} must hold only 0 and 1 (or booleans), got other values")
    return mask


def check_token_type_ids(token_type_ids: object, shape: Sequence[int], type_vocab_size: int) -> Tensor:
    """Segment ids: an integer tensor of ``shape`` with values in ``[0, type_vocab_size)``."""
    if type_vocab_size == 0:
        raise ValueError("token_type_ids was given, but the model has no token-type embeddings (type_vocab_size=0)")
    token_type_ids = check_tensor(token_type_ids, "token_type_ids", dtypes=("int",), shape=tuple(shape))
    if token_type_ids.numel() and checks_values(token_type_ids):
        low, high = int(token_type_ids.min()), int(token_type_ids.max())
        if low < 0 or high >= type_vocab_size:
            bad = low if low < 0 else high
            raise value_error(f"token_type_ids must be in [0, type_vocab_size={type_vocab_size}), found {bad}")
    return token_type_ids


def check_position_ids(position_ids: object, shape: Sequence[int], max_position_embeddings: int) -> Tensor:
    """Position ids: an integer ``(B, T)`` or ``(1, T)`` tensor with values in ``[0, max_position_embeddings)``."""
    batch_size, seq_length = shape
    position_ids = check_tensor(position_ids, "position_ids", dtypes=("int",), ndim=2)
    if position_ids.shape[0] not in (1, batch_size) or position_ids.shape[1] != seq_length:
        raise ValueError(
            f"position_ids must have shape ({batch_size}, {seq_length}) or (1, {seq_length}), "
            f"got {tuple(position_ids.shape)}"
        )
    if not (position_ids.numel() and checks_values(position_ids)):
        return position_ids
    if int(position_ids.min()) < 0 or int(position_ids.max()) >= max_position_embeddings:
        raise value_error(f"position_ids must be in [0, max_position_embeddings={max_position_embeddings})")
    return position_ids


def check_token_inputs(args: Arguments, config: Any, past_length: int = 0) -> Tensor:
    """The token inputs of a model or of its embeddings, as far as the call has them; returns the ids.

    ``input_ids`` of the vocabulary that fit the positions after
    ``past_length`` cached ones; and, where the function takes them and
    they are given, an ``attention_mask`` over the cached and the new
    positions, ``token_type_ids`` and ``position_ids`` of the ids' shape.
    """
    # A model with relative positions only (T5) has no table of positions to run past.
    max_positions = getattr(config, "max_position_embeddings", None)
    input_ids = check_input_ids(args.input_ids, config.vocab_size, max_positions, past_length=past_length)
    batch_size, length = input_ids.shape
    if getattr(args, "attention_mask", None) is not None:
        check_attention_mask(args.attention_mask, batch_size, past_length + length)
    if getattr(args, "token_type_ids", None) is not None:
        check_token_type_ids(args.token_type_ids, input_ids.shape, config.type_vocab_size)
    if getattr(args, "position_ids", None) is not None:
        check_position_ids(args.position_ids, input_ids.shape, config.max_position_embeddings)
    return input_ids


def check_source_and_target(args: Arguments, config: Any) -> None:
    """An encoder-decoder model's inputs: the source's token inputs, and a target of the same batch.

    ``input_ids`` (and its ``attention_mask``) as :func:`check_token_inputs`
    checks them; ``decoder_input_ids``, when given, ids of the vocabulary that
    fit the positions, one target per source, with a ``decoder_attention_mask``
    of its shape.
    """
    input_ids = check_token_inputs(args, config)
    if args.decoder_input_ids is None:
        return
    decoder_input_ids = check_input_ids(
        args.decoder_input_ids, config.vocab_size, getattr(config, "max_position_embeddings", None), "decoder_input_ids"
    )
    if decoder_input_ids.shape[0] != input_ids.shape[0]:
        raise ValueError(
            f"decoder_input_ids has batch size {decoder_input_ids.shape[0]}, but input_ids has batch size "
            f"{input_ids.shape[0]}: each target needs its own source"
        )
    if args.decoder_attention_mask is not None:
        check_attention_mask(args.decoder_attention_mask, *decoder_input_ids.shape, name="decoder_attention_mask")


def check_labels(labels: object, shape: Sequence[int], vocab_size: int, name: str = "labels") -> Tensor:
    """Training labels: token ids of ``shape`` in ``[0, vocab_size)``, or ``-100`` where the loss ignores them."""
    labels = check_tensor(labels, name, dtypes=("int",), shape=tuple(shape))
    if not (labels.numel() and checks_values(labels)):
        return labels
    scored = labels[labels != -100]
    if scored.numel() and (int(scored.min()) < 0 or int(scored.max()) >= vocab_size):
        raise value_error(f"{name} must be token ids in [0, vocab_size={vocab_size}) or -100 (ignored)")
    return labels


def check_hidden_states(x: object, hidden_size: int, name: str = "hidden_states") -> Tensor:
    """Hidden states: a floating-point ``(B, T, E)`` tensor with ``E == hidden_size``."""
    return check_tensor(x, name, ndim=3, dtypes=("float",), shape=(None, None, hidden_size))


def check_positive_int(value: object, name: str, minimum: int = 1) -> int:
    """An ``int`` (not a ``bool``) of at least ``minimum``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        what = {0: "a non-negative int", 1: "a positive int"}.get(minimum, f"an int of at least {minimum}")
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return value


def memory_of(device: torch.device | str) -> int | None:
    """The bytes of memory a tensor on ``device`` can at most take: the machine's physical memory for the CPU, the
    accelerator's own for CUDA; ``None`` where it is not known (then nothing is refused for its size)."""
    device = torch.device(device)
    if device.type == "cpu":
        try:
            return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            return None
    if device.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_properties(device).total_memory
    return None


def gibibytes(nbytes: int) -> str:
    """A number of bytes, for a message: ``"128.0 GiB (137,438,953,472 bytes)"``."""
    return f"{nbytes / 2**30:,.1f} GiB ({nbytes:,} bytes)"


def check_fits_in_memory(nbytes: int, what: str, device: torch.device | str) -> None:
    """Refuse, before it is allocated, what would take more memory than ``device`` has (:func:`memory_of`).

    Args:
        nbytes: What it would take.
        what: What it is, and what asks for it, for the message.
        device: Where it would be.

    Raises:
        ValueError: saying what would take how much, and how much the device has.
    """
    memory = memory_of(device)
    if memory is not None and nbytes > memory:
        raise ValueError(
            f"{what} would take {gibibytes(nbytes)}, more than the {gibibytes(memory)} of memory the {device} has"
        )


def check_norm_first(norm_first: object) -> bool:
    """The layer-norm arrangement: ``True`` for pre-LN, ``False`` for post-LN."""
    if not isinstance(norm_first, bool):
        raise TypeError(f"norm_first must be a bool (True: pre-LN, the book; False: post-LN, BERT), got {norm_first!r}")
    return norm_first


def check_mask(mask: object, scores_shape: Sequence[int], name: str = "attention_mask") -> Tensor:
    """A ready-made boolean or additive mask that broadcasts to the scores' shape ``(..., T, S)``."""
    mask = check_tensor(mask, name, dtypes=("bool", "float"))
    try:
        broadcast = torch.broadcast_shapes(mask.shape, tuple(scores_shape))
    except RuntimeError:
        broadcast = None
    if broadcast != torch.Size(scores_shape):
        raise ValueError(
            f"{name} must broadcast to the attention scores' shape {tuple(scores_shape)} (..., T, S), "
            f"got shape {tuple(mask.shape)}; turn a tokenizer's (B, S) attention_mask into a (B, 1, 1, S) "
            "mask with literate_transformer.core.masks.padding_mask"
        )
    return mask


def check_encoder_hidden_states(encoder_hidden_states: object, batch_size: int, hidden_size: int) -> Tensor:
    """The encoder's output that a decoder reads: present, ``(B, S, E)``, with the decoder's ``B`` and ``E``."""
    if encoder_hidden_states is None:
        raise ValueError(
            "encoder_hidden_states is required: the decoder's cross-attention takes its keys and values "
            "from the encoder's output, a (B, S, E) tensor"
        )
    states = check_tensor(encoder_hidden_states, "encoder_hidden_states", ndim=3, dtypes=("float",))
    if states.shape[-1] != hidden_size:
        raise ValueError(
            f"encoder_hidden_states has hidden size {states.shape[-1]}, but the decoder's hidden_size is "
            f"{hidden_size}: encoder and decoder must share E"
        )
    if states.shape[0] != batch_size:
        raise ValueError(
            f"encoder_hidden_states has batch size {states.shape[0]}, but the decoder input has batch size "
            f"{batch_size}: each target needs its own source"
        )
    return states


def check_token_id(value: object, name: str, vocab_size: int) -> int:
    """A single token id: an ``int`` in ``[0, vocab_size)``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int token id, got {type(value).__name__}")
    if not 0 <= value < vocab_size:
        raise ValueError(f"{name} must be a token id in [0, vocab_size={vocab_size}), got {value}")
    return value


def check_key_value_pair(pair: object, name: str, batch_size: int | None, num_heads: int, head_size: int) -> int:
    """A ``(keys, values)`` cache entry: two ``(B, H, S, D)`` tensors of one shape; returns ``S``."""
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise TypeError(f"{name} must be a (keys, values) pair of tensors, got {type(pair).__name__}")
    shape = (batch_size, num_heads, None, head_size)
    keys = check_tensor(pair[0], f"{name}[0] (keys)", dtypes=("float",), shape=shape)
    values = check_tensor(pair[1], f"{name}[1] (values)", dtypes=("float",), shape=shape)
    if keys.shape != values.shape:
        raise ValueError(
            f"{name}: keys and values must have the same shape, got {tuple(keys.shape)} and {tuple(values.shape)}"
        )
    return keys.shape[2]


def check_past_key_values(
    past_key_values: object,
    *,
    num_layers: int,
    batch_size: int | None,
    num_heads: int,
    head_size: int,
    source_length: int | None = None,
) -> int:
    """A cache returned by an earlier call: one :class:`~literate_transformer.core.outputs.LayerCache` per layer.

    Args:
        past_key_values: What the caller passed (``None`` for no cache; a
            :class:`~literate_transformer.core.outputs.Cache` is accepted as it is).
        num_layers: The model's number of layers.
        batch_size: The batch size of the new tokens (``None``: not checked).
        num_heads: The heads the cached keys and values have (key/value heads, with grouped-query attention).
        head_size: ``D``.
        source_length: The encoder's length ``S`` in a model whose layers cross-attend to it; ``None`` in a
            model without cross-attention, whose caches must hold none.

    Returns:
        The number of cached positions.

    Raises:
        TypeError: for a cache entry that is not a ``LayerCache`` of tensor pairs.
        ValueError: for a cache of another model, batch or source, or with layers of different lengths.
    """
    if past_key_values is None:
        return 0
    if isinstance(past_key_values, Cache):
        # A cache object (a static one) was made for this model and checks what it is given itself.
        return past_key_values.length
    if not isinstance(past_key_values, (list, tuple)) or len(past_key_values) != num_layers:
        raise ValueError(
            f"past_key_values must hold one LayerCache per decoder layer ({num_layers}), "
            f"got {type(past_key_values).__name__}"
            + (f" of length {len(past_key_values)}" if isinstance(past_key_values, (list, tuple)) else "")
        )
    lengths = set()
    for index, cache in enumerate(past_key_values):
        name = f"past_key_values[{index}]"
        if not isinstance(cache, LayerCache):
            raise TypeError(f"{name} must be a LayerCache, got {type(cache).__name__}")
        lengths.add(
            check_key_value_pair(cache.self_attention, f"{name}.self_attention", batch_size, num_heads, head_size)
        )
        if source_length is None:
            if cache.cross_attention is not None:
                raise ValueError(f"{name}.cross_attention must be None: this model has no cross-attention")
            continue
        cross_length = check_key_value_pair(
            cache.cross_attention, f"{name}.cross_attention", batch_size, num_heads, head_size
        )
        if cross_length != source_length:
            raise ValueError(
                f"{name}.cross_attention holds {cross_length} source positions, but encoder_hidden_states has "
                f"{source_length}: a cache belongs to the source it was computed from"
            )
    if len(lengths) != 1:
        raise ValueError(f"past_key_values: the layers' caches hold different numbers of positions {sorted(lengths)}")
    return lengths.pop()
