"""A stack: layers run one after another, each reading its own cache, and what the stack reports.

Every model runs its layers the same way: the first layer reads the
embeddings, each layer's output is the next one's input, and with a
key/value cache each layer reads its own entry of ``past_key_values``.
:func:`run_layers` is that loop, written once for every family; the book's
encoder and decoder write it out, where the chapters read it.  What the
stack then reports (every layer's output, attentions and cache, as
per-layer tuples) is :meth:`~literate_transformer.core.outputs.ModelOutput.from_layers`.

>>> import torch
>>> from torch import nn
>>> from literate_transformer.core.outputs import LayerOutput
>>> class Double(nn.Module):
...     def forward(self, hidden_states):
...         return LayerOutput(2 * hidden_states)
>>> hidden_states, outputs = run_layers([Double(), Double(), Double()], torch.ones(1))
>>> hidden_states, len(outputs)
(tensor([8.]), 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from ..core.outputs import LayerCache, LayerOutput

__all__ = ["run_layers"]


def run_layers(
    layers: Sequence[nn.Module],
    hidden_states: Tensor,
    *args: Any,
    past_key_values: Sequence[LayerCache] | None = None,
    **kwargs: Any,
) -> tuple[Tensor, list[LayerOutput]]:
    """Run ``layers`` in order: each reads the previous one's output and its own cache entry.

    Args:
        layers: The stack's layers, each returning a :class:`~literate_transformer.core.outputs.LayerOutput`.
        hidden_states: The first layer's input, ``(B, T, E)``.
        *args: What every layer reads besides (masks, the encoder's output), the same for all.
        past_key_values: One cache entry per layer, handed to each as ``past_key_value``; or ``None``.
        **kwargs: Keyword arguments of every layer (``use_cache``, ``output_attentions``, ...).

    Returns:
        ``(the last layer's output, what every layer returned)``.
    """
    outputs = []
    for index, layer in enumerate(layers):
        # With a cache, each layer reads its own entry (a stack without one, an encoder's, passes none).
        cache = {} if past_key_values is None else {"past_key_value": past_key_values[index]}
        outputs.append(layer(hidden_states, *args, **cache, **kwargs))
        # Each layer's output is the next one's input.
        hidden_states = outputs[-1].hidden_states
    return hidden_states, outputs
