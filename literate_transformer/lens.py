r"""The lens: read any module's output during a forward pass, and change it, with PyTorch's forward hooks.

Interpretability starts with two moves: *read* what a layer computed (the
residual stream after layer 3, the attention of head 5), and *change* it to
see what the rest of the model makes of the change (a clean run's activation
put into a corrupted run: *activation patching*).  Neither needs new code in
the model.  PyTorch calls a **forward hook**, ``hook(module, args, output)``,
each time a module's ``forward`` returns
(:meth:`torch.nn.Module.register_forward_hook`); a hook that returns a value
replaces the output, and the handle it was registered with takes it off
(``handle.remove()``).  A hook is state on the module: one left behind runs
on every later call, so each hook here is removed in a ``finally``, when the
call or the ``with`` block ends, by an exception or not.

A hook goes on a module, found by its name in ``model.named_modules()``.
The families keep HuggingFace's names, so ``"model.layers.3"`` is that layer
here, in ``transformers``' Llama (whose cache holds the same tensors under
the same names) and in a checkpoint's keys.  A hook sees what a *module*
returns: a sum a ``forward`` computes in between (the residual stream between
attention and MLP) has no name, because no module returns it.

`TransformerLens <https://github.com/TransformerLensOrg/TransformerLens>`_
rebuilds each model with an identity module, ``HookPoint``, at every
activation it names, and puts the same forward hooks on those; its
``run_with_cache`` (a cache of detached tensors, returned with the output)
and ``run_with_hooks(fwd_hooks=[(name, fn)])`` are :func:`run_with_cache`
and :func:`patch` here, on the modules the model already has:

=================================  ==========================================================
TransformerLens                    here (Llama's names)
=================================  ==========================================================
``hook_embed``                     ``model.embed_tokens``
``blocks.{i}.hook_resid_pre``      ``model.layers.{i-1}`` (the embeddings for ``i = 0``)
``blocks.{i}.hook_resid_post``     ``model.layers.{i}``
``blocks.{i}.hook_attn_out``       ``model.layers.{i}.self_attn``
``blocks.{i}.hook_mlp_out``        ``model.layers.{i}.mlp``
``blocks.{i}.attn.hook_pattern``   ``cache.attentions(i)``
=================================  ==========================================================

Many modules return more than a tensor: an attention module an
:class:`~literate_transformer.core.outputs.AttentionOutput`, a layer a
:class:`~literate_transformer.core.outputs.LayerOutput`, a stack a
:class:`~literate_transformer.core.outputs.ModelOutput`.  The cache keeps,
and a patch receives and returns, their **hidden states**: the tensor, the
first tensor of a tuple, the ``last_hidden_state`` (else the first tensor
field) of an output dataclass; a patch's result goes back in their place.  A
module that runs more than once (the token table an encoder and a decoder
share, ALBERT's one layer) is cached at each call: ``cache[name]`` is the
first, ``cache.calls(name)`` all; a patch replaces every call's output.

The fused kernel never forms the attention probabilities
(:func:`~literate_transformer.core.kernels.attend`): they exist when a call
asks for them with ``output_attentions=True`` (the eager code then runs), and
every family then returns them, one ``(B, H, T, S)`` tensor per layer.
:func:`run_with_cache` asks, unless the call says otherwise, and
:meth:`ActivationCache.attentions` reads them by layer, and by
``stack="encoder"`` or ``"decoder"`` (``kind="cross"`` for the decoder's
attention to the encoder) in an encoder-decoder.

>>> import torch
>>> model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
>>> output, cache = run_with_cache(model, input=torch.tensor([[1.0, -1.0]]))
>>> cache.keys(), torch.equal(cache["1"], output)
(['0', '1'], True)
>>> with patch(model, {"0": torch.zeros_like}):
...     model(torch.tensor([[1.0, -1.0]]))
tensor([[0., 0.]])
>>> patch(model, {"2": torch.zeros_like})
Traceback (most recent call last):
    ...
ValueError: the model has no module '2'; its names begin: '0', '1'
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from torch import Tensor, nn

__all__ = ["ActivationCache", "run_with_cache", "patch"]

#: HuggingFace's output field of each ``(stack, kind)`` of :meth:`ActivationCache.attentions` (``None``: the
#: model's one stack; the only cross-attention is the decoder's).
ATTENTION_FIELDS = {
    (None, "self"): "attentions",
    ("encoder", "self"): "encoder_attentions",
    ("decoder", "self"): "decoder_attentions",
    ("decoder", "cross"): "cross_attentions",
    (None, "cross"): "cross_attentions",
}


class ActivationCache:
    """What :func:`run_with_cache` recorded: each module's hidden states, detached, by name in the order the
    modules returned (a layer's parts before the layer), and the attention probabilities."""

    def __init__(self, calls: Mapping[str, list[Tensor]], attentions: Mapping[str, tuple[Tensor, ...]]) -> None:
        self._calls, self._attentions = dict(calls), dict(attentions)

    def calls(self, name: str) -> tuple[Tensor, ...]:
        """Every output of module ``name``, in order; a ``KeyError`` naming the nearest names for another name."""
        if name not in self._calls:
            raise KeyError(_unknown(name, self._calls, "the cache holds no module"))
        return tuple(self._calls[name])

    def __getitem__(self, name: str) -> Tensor:
        return self.calls(name)[0]

    def __contains__(self, name: object) -> bool:
        return name in self._calls

    def __iter__(self) -> Iterator[str]:
        return iter(self._calls)

    def __len__(self) -> int:
        return len(self._calls)

    def keys(self) -> list[str]:
        return list(self._calls)

    def attentions(self, layer: int, stack: str | None = None, kind: str = "self") -> Tensor:
        """Layer ``layer``'s attention probabilities, ``(B, H, T, S)``: each query's row sums to 1.

        Args:
            layer: The layer's index in its stack (negative counts from the end).
            stack: ``None`` in a model of one stack; ``"encoder"`` or ``"decoder"`` in an encoder-decoder.
            kind: ``"self"``, or ``"cross"`` for the decoder's attention to the encoder's output.

        Raises:
            ValueError: for a stack or kind the run did not record, naming what it did record.
            IndexError: for a layer the stack does not have.
        """
        field = ATTENTION_FIELDS.get((stack, kind))
        if field not in self._attentions:
            hint = " (an encoder-decoder: pass stack='encoder' or 'decoder')" * (
                "encoder_attentions" in self._attentions
            )
            raise ValueError(
                f"no attention probabilities for stack={stack!r}, kind={kind!r}{hint}; recorded: "
                f"{self._recorded()} (what the model returns with output_attentions=True)"
            )
        count = len(self._attentions[field])
        if isinstance(layer, bool) or not isinstance(layer, int) or not -count <= layer < count:
            raise IndexError(f"layer must be an int in [{-count}, {count}): {field} has {count} layers, got {layer!r}")
        return self._attentions[field][layer]

    def _recorded(self) -> str:
        held = [f"{field} of {len(value)} layer{'s' * (len(value) > 1)}" for field, value in self._attentions.items()]
        return ", ".join(held) or "none"

    def __repr__(self) -> str:
        shown = [repr(name) for name in self._calls]
        shown = [*shown[:3], "...", *shown[-2:]] if len(shown) > 6 else shown
        modules = f"{len(self)} modules" + (f": {', '.join(shown)}" if shown else "")
        return f"ActivationCache({modules}; attentions: {self._recorded()})"


def run_with_cache(
    model: nn.Module, names: Iterable[str] | str | None = None, **inputs: Any
) -> tuple[Any, ActivationCache]:
    """Run ``model(**inputs)``; keep what each module of ``names`` returned, and the attention probabilities.

    Args:
        model: Any module: the package's families, ``transformers``' models.
        names: One name or several of ``model.named_modules()``; by default every module but the model itself.
        **inputs: The model's inputs, by name; ``output_attentions=True`` is added where ``forward`` takes it.

    Returns:
        ``(outputs, cache)``: what the model returned, and an :class:`ActivationCache`.

    Raises:
        TypeError: for a ``model`` that is not a module.
        ValueError: for a name the model has not, listing the nearest names.
    """
    modules = _modules(model, names)
    if "output_attentions" not in inputs and _takes(model, "output_attentions"):
        inputs = {**inputs, "output_attentions": True}
    calls: dict[str, list[Tensor]] = {}

    def record(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            hidden, _ = _hidden_states(output)
            if hidden is not None:
                # Detached: the cache is a record, not part of the graph (nor does it keep one alive).
                calls.setdefault(name, []).append(hidden.detach())

        return hook

    with _hooked(modules, record):
        outputs = model(**inputs)
    # Per layer, one (B, H, T, S) tensor of each field the output has (an encoder-decoder's three, or one).
    attentions = {
        field: tuple(tensor.detach() for tensor in value)
        for field in dict.fromkeys(ATTENTION_FIELDS.values())
        if isinstance(value := getattr(outputs, field, None), (tuple, list)) and value
    }
    return outputs, ActivationCache(calls, attentions)


def patch(model: nn.Module, patches: Mapping[str, Callable[[Tensor], Tensor]]) -> contextlib.AbstractContextManager:
    """A ``with`` block in which each module ``name`` of ``patches`` returns ``fn(hidden_states)`` instead.

    ``fn`` receives what the cache holds for that name and returns a tensor of its shape (a cached tensor,
    or the one it received with some positions changed).  Names and functions are checked here, before any
    hook is put on; the hooks are removed when the block ends, however it ends.

    Raises:
        TypeError: for a ``model`` not a module, ``patches`` not a mapping, an ``fn`` not callable or, during
            the forward, one that returns no tensor.
        ValueError: for a name the model has not (listing the nearest names); during the forward, an ``fn``
            whose tensor has another shape (naming the module and both shapes); at the end of a block in which
            no forward called a patched module (nothing was patched).
    """
    if not isinstance(patches, Mapping):
        raise TypeError(f"patches must be a mapping {{module name: fn}}, got {type(patches).__name__}")
    modules = _modules(model, patches)
    for name, fn in patches.items():
        if not callable(fn):
            raise TypeError(f"the patch of {name!r} must be callable (hidden states -> tensor), got {fn!r}")

    fired: set[str] = set()

    def replace(name: str) -> Callable[..., Any]:
        def hook(module: nn.Module, args: Any, output: Any) -> Any:
            fired.add(name)
            hidden, slot = _hidden_states(output)
            if hidden is None:
                raise TypeError(f"module {name!r} returned a {type(output).__name__}, which holds no tensor to patch")
            new = patches[name](hidden)
            if not isinstance(new, Tensor):
                raise TypeError(f"the patch of {name!r} must return a tensor, got {type(new).__name__}")
            if new.shape != hidden.shape:
                raise ValueError(
                    f"the patch of {name!r} returned shape {tuple(new.shape)}, but the module's hidden states "
                    f"have shape {tuple(hidden.shape)}"
                )
            return _with_hidden_states(output, slot, new)

        return hook

    def check_fired() -> None:
        # A module the forward never called (a container whose forward is the stack's own loop, say) returns
        # nothing to replace: say so, rather than let the block look as if the patch had changed nothing.
        unused = [name for name in modules if name not in fired]
        if unused:
            raise ValueError(
                f"no forward inside the block called {', '.join(map(repr, unused))}, so nothing was patched; "
                "patch a module the forward calls (run_with_cache lists them: cache.keys())"
            )

    return _hooked(modules, replace, on_success=check_fired)


@contextlib.contextmanager
def _hooked(
    modules: Mapping[str, nn.Module],
    make: Callable[[str], Callable[..., Any]],
    on_success: Callable[[], None] | None = None,
) -> Iterator[None]:
    """Each module with the forward hook ``make(name)`` while the block runs, all removed whatever happens;
    ``on_success()`` after a block that raised nothing."""
    handles = []
    try:
        for name, module in modules.items():
            handles.append(module.register_forward_hook(make(name)))
        yield
    finally:
        for handle in handles:
            handle.remove()
    if on_success is not None:
        on_success()


def _modules(model: nn.Module, names: Iterable[str] | str | None) -> dict[str, nn.Module]:
    """The modules ``names`` asks for, by name; every module but the model itself for ``None``."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if names is None:
        return {name: module for name, module in model.named_modules() if name}
    # Every name a module answers to: a shared module's other names too (BART's encoder.embed_tokens).
    everything = dict(model.named_modules(remove_duplicate=False))
    names = [names] if isinstance(names, str) else list(names)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"module names are strings, got {name!r}")
        if name not in everything:
            raise ValueError(_unknown(name, everything, "the model has no module"))
    return {name: everything[name] for name in names}


def _unknown(name: str, known: Iterable[str], what: str) -> str:
    """The message for a name that is not there, with the nearest that are (:func:`difflib.get_close_matches`)."""
    known = [known_name for known_name in known if known_name]
    nearest = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
    if nearest:
        return f"{what} {name!r}; the nearest names: {', '.join(map(repr, nearest))}"
    return f"{what} {name!r}; its names begin: {', '.join(map(repr, known[:5]))}"


def _takes(model: nn.Module, argument: str) -> bool:
    """Whether ``model``'s ``forward`` takes the keyword ``argument``, by name or through ``**kwargs``."""
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False
    return argument in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def _hidden_states(output: Any) -> tuple[Tensor | None, int | str | None]:
    """A module output's hidden states and their slot (``None`` for the output itself, an index into a tuple,
    a dataclass's field), or ``(None, None)`` where it holds no tensor."""
    if isinstance(output, Tensor):
        return output, None
    if dataclasses.is_dataclass(output) and not isinstance(output, type):
        # A stack with a head leads with its logits: its hidden states are the last layer's.
        fields = sorted((field.name for field in dataclasses.fields(output)), key=lambda f: f != "last_hidden_state")
        slots = [(getattr(output, field), field) for field in fields]
    elif isinstance(output, (tuple, list)):
        slots = [(item, index) for index, item in enumerate(output)]
    else:
        return None, None
    return next(((value, slot) for value, slot in slots if isinstance(value, Tensor)), (None, None))


def _with_hidden_states(output: Any, slot: int | str | None, new: Tensor) -> Any:
    """``output`` with ``new`` in the slot of its hidden states (:func:`_hidden_states`), the rest as it was."""
    if slot is None:
        return new
    if isinstance(slot, str):
        return dataclasses.replace(output, **{slot: new})
    items = list(output)
    items[slot] = new
    # A named tuple (AttentionOutput, LayerOutput) takes its fields one by one; a tuple or a list, an iterable.
    return type(output)(*items) if hasattr(output, "_fields") else type(output)(items)
