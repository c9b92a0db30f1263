r"""Diagrams: the architecture drawn from the modules themselves.

A hand-drawn figure of a transformer layer can disagree with the code, and
nobody notices; that is how the Annotated Transformer's readers came to ask,
again and again, where the layer norm really goes.  The drawings of this
module are computed from the objects they show, so they cannot drift:

* :func:`trace_layer` runs a layer once on random inputs, records which
  sub-modules its ``forward`` calls, in order, and works out from the
  tensors themselves what each one reads: the previous result, or the sum
  of two earlier values (a residual connection).  :func:`layer_diagram`
  draws that trace, so a pre-LN and a post-LN layer look different because
  they compute differently, and a layer that forgets a residual connection
  is drawn without one.
* :func:`head_split_diagram` draws ``transpose_for_scores``, the reshape
  ``(B, T, E) -> (B, T, H, D) -> (B, H, T, D)``, by running it on the feature
  indices and colouring every feature by the head it lands in.
* :func:`kv_cache_diagram` decodes a few steps with a key/value cache and
  draws the cache's real shapes, step by step.
* :func:`architectures_diagram` sets the encoder-only, decoder-only and
  encoder-decoder families side by side, with the sub-layers of the
  package's own layers and the attention masks of :mod:`~literate_transformer.core.masks`.

Every diagram is a :class:`Diagram`: an inline SVG (a notebook and the site
show it as HTML, so it takes the page's colours: lines and text are
``currentColor``, fills are translucent, and the site's dark mode works),
with a ``<title>`` and a ``<desc>`` for screen readers.

>>> from literate_transformer import TransformerConfig, TransformerEncoderLayer
>>> config = TransformerConfig(hidden_size=8, num_attention_heads=2, intermediate_size=16)
>>> [step.name for step in trace_layer(TransformerEncoderLayer(config, norm_first=True))]
['input', 'layer_norm_1', 'attention', '+', 'layer_norm_2', 'feed_forward', '+', 'output']
>>> [step.name for step in trace_layer(TransformerEncoderLayer(config, norm_first=False))]
['input', 'attention', '+', 'layer_norm_1', 'feed_forward', '+', 'layer_norm_2', 'output']
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from .core.masks import causal_mask

__all__ = [
    "Diagram",
    "Step",
    "trace_layer",
    "layer_diagram",
    "head_split_diagram",
    "kv_cache_diagram",
    "architectures_diagram",
]

#: Fill colours by role: mid-tones drawn translucent, readable on a light and on a dark page.
#: Each can be overridden by the page's CSS (``--lt-diagram-attention`` and so on).
COLOURS = {
    "attention": "#3b82f6",
    "feed-forward": "#f59e0b",
    "norm": "#22c55e",
    "other": "#94a3b8",
    "new": "#ef4444",
}


@dataclass(frozen=True)
class Diagram:
    """An SVG drawing with its accessible name.

    Attributes:
        svg: The ``<svg>`` element, with ``<title>`` and ``<desc>``.
        title: A short name (the SVG's ``<title>``, read as its accessible name).
        description: What the drawing shows, in words (its ``<desc>``).
    """

    svg: str
    title: str
    description: str

    def _repr_html_(self) -> str:
        # Inline, not an <img>: only an inline SVG inherits the page's text colour (and so its dark mode).
        return f'<figure class="lt-diagram" style="margin: 1em 0; overflow-x: auto">{self.svg}</figure>'

    def __str__(self) -> str:
        return self.svg


@dataclass(frozen=True)
class Step:
    """One step of a traced layer.

    Attributes:
        name: The sub-module's attribute path (``"attention"``,
            ``"attention.output.LayerNorm"``), ``"+"`` for a residual sum,
            ``"input"`` or ``"output"``.
        label: What to write in the box: the class and its sizes.
        role: ``"attention"``, ``"feed-forward"``, ``"norm"``, ``"add"``, ``"input"``,
            ``"output"`` or ``"other"``.
        reads: The indices of the steps whose results this one reads (two for a sum).
        side_input: The name of a second input (``"encoder output"`` for cross-attention), or ``None``.
    """

    name: str
    label: str
    role: str
    reads: tuple[int, ...]
    side_input: str | None = None


# ---------------------------------------------------------------------------
# Tracing a layer
# ---------------------------------------------------------------------------
def _watched(module: nn.Module, prefix: str = "") -> list[tuple[str, nn.Module]]:
    """The sub-modules to record: layer norms, and the largest sub-modules that contain none (no dropout)."""
    watched = []
    for name, child in module.named_children():
        if child is None or isinstance(child, nn.Dropout):
            continue
        path = prefix + name
        if isinstance(child, nn.LayerNorm) or not any(isinstance(m, nn.LayerNorm) for m in child.modules()):
            watched.append((path, child))
        else:
            watched.extend(_watched(child, path + "."))
    return watched


def _first_tensor(value: Any) -> Tensor | None:
    if isinstance(value, Tensor):
        return value
    hidden_states = getattr(value, "hidden_states", None)
    if isinstance(hidden_states, Tensor):
        return hidden_states
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], Tensor):
        return value[0]
    return None


def _role(module: nn.Module) -> str:
    name = type(module).__name__.lower()
    if isinstance(module, nn.LayerNorm):
        return "norm"
    if "attention" in name:
        return "attention"
    if "feedforward" in name or "intermediate" in name or isinstance(module, nn.Linear):
        return "feed-forward"
    return "other"


def _label(module: nn.Module) -> str:
    """The class name and the sizes that matter, read from the module."""
    kind = type(module).__name__
    if isinstance(module, nn.LayerNorm):
        return f"{kind}({module.normalized_shape[0]})"
    if isinstance(module, nn.Linear):
        return f"{kind}({module.in_features} → {module.out_features})"
    heads = getattr(module, "num_heads", None) or getattr(module, "num_attention_heads", None)
    head_size = getattr(module, "head_size", None) or getattr(module, "attention_head_size", None)
    if heads and head_size:
        return f"{kind}: {heads} heads × {head_size}"
    linears = [m for m in module.modules() if isinstance(m, nn.Linear)]
    if linears:
        sizes = [linears[0].in_features] + [linear.out_features for linear in linears]
        return f"{kind}: " + " → ".join(map(str, sizes))
    return kind


def _matches(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=1e-4, atol=1e-5))


def trace_layer(layer: nn.Module, *inputs: Tensor, **kwargs: Any) -> list[Step]:
    """Run ``layer`` once and return, in call order, what its ``forward`` computed.

    The recorded sub-modules are the layer norms and the largest sub-modules
    that contain no layer norm (dropout is left out: it is the identity in
    evaluation mode, where the trace runs).  Each step reads either earlier
    results or a sum of two of them; a sum is a residual connection and gets
    a step of its own (``"+"``).

    Args:
        layer: A transformer layer, e.g. a
            :class:`~literate_transformer.book.encoder.TransformerEncoderLayer`,
            a :class:`~literate_transformer.book.decoder.TransformerDecoderLayer`
            or a :class:`~literate_transformer.models.bert.BertLayer`.
        *inputs: Its positional inputs; by default one random ``(1, 5, E)``
            tensor, plus a random ``(1, 4, E)`` encoder output for a layer
            with cross-attention.
        **kwargs: Further keyword arguments of the layer's ``forward``.

    Returns:
        The steps, from ``"input"`` to ``"output"``.

    Raises:
        ValueError: if a recorded input is neither an earlier result nor a sum of two.
    """
    hidden_size = next(p.shape[-1] for n, p in layer.named_parameters() if "norm" in n.lower())
    generator = torch.Generator().manual_seed(0)
    if not inputs:
        inputs = (torch.randn(1, 5, hidden_size, generator=generator),)
        if getattr(layer, "cross_attention", None) is not None or getattr(layer, "crossattention", None) is not None:
            inputs += (torch.randn(1, 4, hidden_size, generator=generator),)
    side = {id(t): "encoder output" for t in inputs[1:] if isinstance(t, Tensor)}
    calls: list[tuple[str, nn.Module, Tensor, str | None, Tensor]] = []

    def hook(name: str):
        def record(module: nn.Module, args: tuple, kw: dict, output: Any) -> None:
            tensors = [a for a in args if isinstance(a, Tensor)] + [v for v in kw.values() if isinstance(v, Tensor)]
            extra = next((side[id(t)] for t in tensors[1:] if id(t) in side), None)
            calls.append((name, module, tensors[0], extra, _first_tensor(output)))

        return record

    handles = [module.register_forward_hook(hook(name), with_kwargs=True) for name, module in _watched(layer)]
    was_training = layer.training
    try:
        layer.eval()
        with torch.no_grad():
            output = _first_tensor(layer(*inputs, **kwargs))
    finally:
        layer.train(was_training)
        for handle in handles:
            handle.remove()

    steps = [Step("input", f"input {tuple(inputs[0].shape)}", "input", ())]
    values = [inputs[0]]

    def source(tensor: Tensor, what: str) -> int:
        # The most recent value it equals, or else a sum of two values: a residual connection.
        for index in range(len(values) - 1, -1, -1):
            if _matches(tensor, values[index]):
                return index
        for j in range(len(values) - 1, 0, -1):
            for i in range(j - 1, -1, -1):
                if values[i].shape == values[j].shape and _matches(tensor, values[i] + values[j]):
                    steps.append(Step("+", "+", "add", (i, j)))
                    values.append(values[i] + values[j])
                    return len(values) - 1
        raise ValueError(f"cannot trace {what}: its input is no earlier result and no sum of two")

    for name, module, tensor, extra, result in calls:
        reads = source(tensor, name)
        steps.append(Step(name, _label(module), _role(module), (reads,), extra))
        values.append(result)
    steps.append(Step("output", f"output {tuple(output.shape)}", "output", (source(output, "the output"),)))
    return steps


# ---------------------------------------------------------------------------
# SVG helpers
# ---------------------------------------------------------------------------
_FONT = 12  # px; monospace, so a character is about 0.6 em wide
_CHAR = 0.6 * _FONT


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _fill(role: str, opacity: float = 0.22) -> str:
    colour = COLOURS.get(role, COLOURS["other"])
    return f'style="fill: var(--lt-diagram-{role}, {colour}); fill-opacity: {opacity}"'


def _text(x: float, y: float, text: str, anchor: str = "middle", size: int = _FONT, weight: str = "normal") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" dominant-baseline="middle" '
        f'font-size="{size}" font-weight="{weight}" fill="currentColor">{_esc(text)}</text>'
    )


def _arrow_marker(uid: str) -> str:
    return (
        f'<defs><marker id="{uid}-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="currentColor"/></marker></defs>'
    )


def _svg(body: list[str], width: float, height: float, title: str, description: str) -> Diagram:
    content = "".join(body)
    uid = "lt-diagram-" + hashlib.sha256((title + content).encode()).hexdigest()[:10]
    content = content.replace("{uid}", uid)
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
        f'style="max-width: 100%; height: auto; color: inherit; font-family: var(--pst-font-family-monospace, '
        f'monospace)" role="img" aria-labelledby="{uid}-title {uid}-desc">'
        f'<title id="{uid}-title">{_esc(title)}</title><desc id="{uid}-desc">{_esc(description)}</desc>'
        f"{_arrow_marker(uid)}{content}</svg>"
    )
    return Diagram(svg, title, description)


def _arrow(points: Sequence[tuple[float, float]]) -> str:
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return (
        f'<polyline points="{path}" fill="none" stroke="currentColor" stroke-width="1.3" '
        'marker-end="url(#{uid}-arrow)"/>'
    )


# ---------------------------------------------------------------------------
# Layers
# ---------------------------------------------------------------------------
_ROW = 52  # vertical distance between steps
_BOX_HEIGHT = 36
_SKIP = 16  # horizontal spacing of the residual arcs


def _layer_group(steps: Sequence[Step], x0: float, y0: float, box_width: float) -> tuple[list[str], float, float]:
    """The elements of one traced layer, top to bottom; returns them, the group's width and its height."""
    arcs = [(step.reads[0], index) for index, step in enumerate(steps) if step.role == "add"]
    arcs += [
        (read, index)
        for index, step in enumerate(steps)
        if step.role != "add"
        for read in step.reads
        if read != index - 1
    ]
    margin = _SKIP * (len(arcs) + 1)
    centre = x0 + margin + box_width / 2
    body = []
    y = [y0 + _BOX_HEIGHT / 2 + index * _ROW for index in range(len(steps))]
    for index, step in enumerate(steps):
        if step.role == "add":
            body.append(
                f'<circle cx="{centre:.1f}" cy="{y[index]:.1f}" r="10" fill="none" stroke="currentColor" '
                'stroke-width="1.3"/>'
            )
            body.append(_text(centre, y[index] + 1, "+", size=15, weight="bold"))
        else:
            role = step.role if step.role in COLOURS else "other"
            opacity = 0.08 if step.role in ("input", "output") else 0.22
            left = centre - box_width / 2
            top = y[index] - _BOX_HEIGHT / 2
            body.append(
                f'<rect x="{left:.1f}" y="{top:.1f}" width="{box_width:.1f}" height="{_BOX_HEIGHT}" rx="5" '
                f'{_fill(role, opacity)} stroke="currentColor" stroke-width="1"/>'
            )
            if step.role in ("input", "output"):
                body.append(_text(centre, y[index], step.label))
            else:
                body.append(_text(centre, y[index] - 7, step.name, weight="bold"))
                body.append(_text(centre, y[index] + 8, step.label, size=10))
            if step.side_input:
                right = centre + box_width / 2
                body.append(_arrow([(right + 40, y[index]), (right + 2, y[index])]))
                body.append(_text(right + 44, y[index], step.side_input, anchor="start", size=11))
        # The straight edge from the step above, when this step reads it.
        if index and (index - 1) in steps[index].reads:
            half = 10 if steps[index].role == "add" else _BOX_HEIGHT / 2
            above = 10 if steps[index - 1].role == "add" else _BOX_HEIGHT / 2
            body.append(_arrow([(centre, y[index - 1] + above), (centre, y[index] - half - 1)]))
    # The residual arcs: leave the main line below the value they carry, rejoin at the sum.
    for depth, (read, index) in enumerate(sorted(arcs, key=lambda arc: arc[1] - arc[0])):
        x = centre - box_width / 2 - _SKIP * (depth + 1)
        start = y[read] + (10 if steps[read].role == "add" else _BOX_HEIGHT / 2) + 7
        end_x = centre - (10 if steps[index].role == "add" else box_width / 2) - 1
        body.append(f'<circle cx="{centre:.1f}" cy="{start:.1f}" r="2.2" fill="currentColor"/>')
        body.append(_arrow([(centre, start), (x, start), (x, y[index]), (end_x, y[index])]))
    side = max((len(step.side_input) * 0.6 * 11 + 50 for step in steps if step.side_input), default=10)
    width = margin + box_width + side
    height = y[-1] + _BOX_HEIGHT / 2 - y0
    return body, width, height


def _describe(steps: Sequence[Step]) -> str:
    words = []
    for step in steps[1:-1]:
        if step.role == "add":
            words.append(f"add the result to the value of step {step.reads[0]} (a residual connection)")
        else:
            words.append(
                f"{step.name} ({step.label})" + (f", which also reads the {step.side_input}" if step.side_input else "")
            )
    return "; then ".join(words)


def layer_diagram(layers: nn.Module | Mapping[str, nn.Module], *inputs: Tensor, **kwargs: Any) -> Diagram:
    """Draw a layer (or several, side by side) as its ``forward`` computes it.

    The input and output boxes show the shapes the trace ran on: pass the
    tensors the surrounding text computes with (a chapter's ``x``), or the
    drawing shows :func:`trace_layer`'s random default input instead.

    Args:
        layers: A layer, or a mapping from a caption to a layer (drawn side by side).
        *inputs: Passed to :func:`trace_layer`.
        **kwargs: Passed to :func:`trace_layer`.

    Returns:
        A :class:`Diagram`: boxes for the sub-modules in the order they run,
        circles for the residual sums, with an arc from the value each sum adds back.
    """
    if isinstance(layers, nn.Module):
        layers = {type(layers).__name__: layers}
    traces = {caption: trace_layer(layer, *inputs, **kwargs) for caption, layer in layers.items()}
    longest = max(max(len(s.name) * _CHAR, len(s.label) * _CHAR * 10 / 12) for t in traces.values() for s in t)
    box_width = max(150.0, longest + 20)
    body, x, height = [], 10.0, 0.0
    for caption, steps in traces.items():
        group, width, group_height = _layer_group(steps, x, 34, box_width)
        body.append(_text(x + width / 2, 14, caption, weight="bold", size=13))
        body.extend(group)
        x += width + 30
        height = max(height, group_height)
    names = " and ".join(traces)
    description = " ".join(f"{caption}: {_describe(steps)}." for caption, steps in traces.items())
    return _svg(body, x - 20, height + 44, f"Diagram of {names}, as its forward pass runs", description)


# ---------------------------------------------------------------------------
# transpose_for_scores
# ---------------------------------------------------------------------------
def _head_colour(head: int, heads: int) -> str:
    return f"hsl({360 * head / heads:.0f}, 70%, 50%)"


def head_split_diagram(self_attention: nn.Module, length: int = 5) -> Diagram:
    """Draw ``transpose_for_scores``: ``(B, T, E) -> (B, T, H, D) -> (B, H, T, D)``, run on the feature indices.

    Args:
        self_attention: A :class:`~literate_transformer.models.bert.BertSelfAttention`
            (anything with ``num_attention_heads``, ``attention_head_size`` and
            ``transpose_for_scores``).
        length: ``T``, the number of token rows to draw.

    Returns:
        A :class:`Diagram` in three panels; every feature is coloured by the
        head it lands in after the reshape.
    """
    heads, head_size = self_attention.num_attention_heads, self_attention.attention_head_size
    hidden = heads * head_size
    # Feature e of every token carries the value e: after the reshape, each head's block says which features it got.
    features = torch.arange(hidden, dtype=torch.float32).expand(1, length, hidden)  # (1, T, E)
    split = self_attention.transpose_for_scores(features)  # (1, H, T, D)
    owner = torch.zeros(hidden, dtype=torch.long)
    for head in range(heads):
        owner[split[0, head, 0].long()] = head
    cell_w = max(1.0, min(4.0, 420 / hidden))
    cell_h = 9.0
    body = []
    # Panel 1: (B, T, E), every feature coloured by the head it will belong to.
    y = 40.0
    body.append(_text(10, 16, f"(B, T, E) = (1, {length}, {hidden}): one row per token", anchor="start"))
    start = 0
    for e in range(1, hidden + 1):
        # One rectangle per run of consecutive features that land in the same head.
        if e == hidden or owner[e] != owner[start]:
            body.append(
                f'<rect x="{10 + start * cell_w:.2f}" y="{y}" width="{(e - start) * cell_w:.2f}" '
                f'height="{cell_h * length:.1f}" style="fill: {_head_colour(int(owner[start]), heads)}; '
                'fill-opacity: 0.55"/>'
            )
            start = e
    body.append(
        f'<rect x="10" y="{y}" width="{cell_w * hidden:.1f}" height="{cell_h * length:.1f}" fill="none" '
        'stroke="currentColor" stroke-width="1"/>'
    )
    # Panel 2: .view(B, T, H, D): the same memory, cut into H blocks of D.
    y2 = y + cell_h * length + 44
    body.append(
        _text(
            10, y2 - 16, f".view(B, T, H, D) = (1, {length}, {heads}, {head_size}): E cut into blocks", anchor="start"
        )
    )
    gap = 4.0
    for head in range(heads):
        x = 10 + head * (head_size * cell_w + gap)
        body.append(
            f'<rect x="{x:.2f}" y="{y2}" width="{head_size * cell_w:.2f}" height="{cell_h * length:.1f}" '
            f'style="fill: {_head_colour(head, heads)}; fill-opacity: 0.55" stroke="currentColor" stroke-width="0.8"/>'
        )
    # Panel 3: .permute(0, 2, 1, 3): heads in front, each a T x D matrix of its own.
    y3 = y2 + cell_h * length + 44
    body.append(
        _text(
            10, y3 - 16, f".permute(0, 2, 1, 3) -> (B, H, T, D) = (1, {heads}, {length}, {head_size})", anchor="start"
        )
    )
    tile_w = head_size * cell_w
    per_row = max(1, int(460 // (tile_w + 14)))
    for head in range(heads):
        x = 10 + (head % per_row) * (tile_w + 14)
        top = y3 + (head // per_row) * (cell_h * length + 24)
        body.append(
            f'<rect x="{x:.2f}" y="{top:.1f}" width="{tile_w:.2f}" height="{cell_h * length:.1f}" '
            f'style="fill: {_head_colour(head, heads)}; fill-opacity: 0.55" stroke="currentColor" stroke-width="0.8"/>'
        )
        body.append(_text(x + tile_w / 2, top + cell_h * length + 9, f"head {head}", size=10))
    rows = -(-heads // per_row)
    height = y3 + rows * (cell_h * length + 24) + 6
    width = max(10 + hidden * cell_w, 10 + heads * (head_size * cell_w + gap), 10 + per_row * (tile_w + 14), 470) + 10
    description = (
        f"The {hidden} features of each of {length} tokens are cut into {heads} consecutive blocks of {head_size}; "
        f"head h receives features h*{head_size} to (h+1)*{head_size}-1, and the permute puts the {heads} heads "
        f"in front, each a {length} by {head_size} matrix of its own."
    )
    return _svg(body, width, height, "transpose_for_scores: splitting the hidden size into heads", description)


# ---------------------------------------------------------------------------
# The key/value cache
# ---------------------------------------------------------------------------
def kv_cache_diagram(model: nn.Module, input_ids: Tensor, steps: int = 4, bos_token_id: int = 1) -> Diagram:
    """Decode ``steps`` tokens with a cache and draw the cache of the first decoder layer at every step.

    Args:
        model: An :class:`~literate_transformer.book.decoder.EncoderDecoderTransformer`.
        input_ids: One source sequence ``(1, S)``.
        steps: How many tokens to decode.
        bos_token_id: The first decoder input.

    Returns:
        A :class:`Diagram`: per step, the one new token that runs through the
        decoder, the self-attention keys its query reads (the cached ones and
        its own, the cache growing by one), and the cross-attention keys,
        projected from the encoder's output at the first step and reused.
    """
    was_training = model.training
    model.eval()
    shapes = []
    with torch.no_grad():
        encoder_states = model.encode(input_ids).last_hidden_state
        token = torch.full((input_ids.shape[0], 1), bos_token_id, dtype=torch.long, device=input_ids.device)
        cache = None
        for _ in range(steps):
            output = model.decode(token, encoder_states, past_key_values=cache, use_cache=True)
            cache = output.past_key_values
            self_keys, _ = cache[0].self_attention
            cross_keys, _ = cache[0].cross_attention
            shapes.append((token.shape[1], tuple(self_keys.shape), tuple(cross_keys.shape)))
            token = output.logits[:, -1:].argmax(dim=-1)
    model.train(was_training)
    cell, row = 16.0, 40.0
    body = [
        _text(10, 14, "step", anchor="start", weight="bold"),
        _text(70, 14, "self-attention keys (cached + new)", anchor="start", weight="bold"),
    ]
    source_length = shapes[0][2][2]
    longest = max(len(str(shape[1])) for shape in shapes)
    cross_x = max(70 + 44 + shapes[-1][1][2] * cell + 4 + longest * 6 + 30, 70 + 40 * _CHAR)
    body.append(_text(cross_x + 40, 14, "cross-attention keys", anchor="start", weight="bold"))
    for index, (new, self_shape, cross_shape) in enumerate(shapes):
        y = 32 + index * row
        body.append(_text(10, y + cell / 2, f"{index + 1}: {new} token in", anchor="start", size=11))
        cached = self_shape[2]
        for position in range(cached):
            fresh = position >= cached - new
            style = _fill("new", 0.5) if fresh else _fill("attention", 0.22)
            body.append(
                f'<rect x="{70 + 44 + position * cell:.1f}" y="{y}" width="{cell - 2}" height="{cell - 2}" {style} '
                'stroke="currentColor" stroke-width="0.8"/>'
            )
        body.append(_text(70 + 44 + cached * cell + 4, y + cell / 2, f"{self_shape}", anchor="start", size=10))
        for position in range(cross_shape[2]):
            style = _fill("new", 0.5) if index == 0 else _fill("feed-forward", 0.22)
            body.append(
                f'<rect x="{cross_x + 40 + position * cell:.1f}" y="{y}" width="{cell - 2}" height="{cell - 2}" '
                f'{style} stroke="currentColor" stroke-width="0.8"/>'
            )
        note = "projected now" if index == 0 else "reused"
        body.append(_text(cross_x + 40 + source_length * cell + 4, y + cell / 2, note, anchor="start", size=10))
    width = max(cross_x + 40 + source_length * cell + 110, cross_x + 40 + 21 * _CHAR)
    height = 32 + steps * row
    description = (
        f"At each of {steps} steps one token enters the decoder. Layer 0's self-attention keys grow from "
        f"{shapes[0][1][2]} to {shapes[-1][1][2]} positions, one new per step, and the new query reads all of them; "
        f"the {source_length} cross-attention keys are projected from the encoder output at the first step and reused."
    )
    return _svg(body, width, height, "The key/value cache, step by step", description)


# ---------------------------------------------------------------------------
# Three families
# ---------------------------------------------------------------------------
def _mask_grid(mask: Tensor, x: float, y: float, cell: float = 9.0) -> list[str]:
    body = []
    rows, columns = mask.shape
    for i in range(rows):
        for j in range(columns):
            if bool(mask[i, j]):
                body.append(
                    f'<rect x="{x + j * cell:.1f}" y="{y + i * cell:.1f}" width="{cell - 1}" height="{cell - 1}" '
                    f"{_fill('attention', 0.6)}/>"
                )
    body.append(
        f'<rect x="{x - 1:.1f}" y="{y - 1:.1f}" width="{columns * cell + 1:.1f}" height="{rows * cell + 1:.1f}" '
        'fill="none" stroke="currentColor" stroke-width="0.8"/>'
    )
    return body


def _stack(x: float, y: float, width: float, title: str, names: Sequence[str], role: str) -> tuple[list[str], float]:
    height = 26 + 16 * len(names)
    body = [
        f'<rect x="{x}" y="{y}" width="{width}" height="{height}" rx="6" {_fill(role, 0.18)} '
        'stroke="currentColor" stroke-width="1"/>',
        _text(x + width / 2, y + 13, title, weight="bold"),
    ]
    body += [_text(x + width / 2, y + 30 + 16 * k, name, size=11) for k, name in enumerate(names)]
    return body, height


def architectures_diagram(encoder_layer: nn.Module, decoder_layer: nn.Module, length: int = 6) -> Diagram:
    """The three families side by side: encoder-only, decoder-only, encoder-decoder.

    Args:
        encoder_layer: An encoder layer (its sub-layers, as traced, are listed).
        decoder_layer: A decoder layer with cross-attention (likewise; the
            decoder-only column leaves its cross-attention out).
        length: The size of the drawn attention masks.

    Returns:
        A :class:`Diagram` with, per family, the stack of layers and the
        masks its attention uses: every key for an encoder, the causal mask
        (:func:`~literate_transformer.core.masks.causal_mask`) for a decoder,
        and every source position for cross-attention.
    """
    encoder_names = [s.name for s in trace_layer(encoder_layer) if s.role not in ("input", "output", "add", "norm")]
    decoder_names = [s.name for s in trace_layer(decoder_layer) if s.role not in ("input", "output", "add", "norm")]
    decoder_only = [name for name in decoder_names if "cross" not in name]
    full = torch.ones(length, length, dtype=torch.bool)
    causal = causal_mask(length)
    columns = [
        ("encoder-only (BERT)", [("N × encoder layer", encoder_names, "attention")], [("self-attention", full)]),
        ("decoder-only (GPT-2)", [("N × decoder layer", decoder_only, "feed-forward")], [("self-attention", causal)]),
        (
            "encoder-decoder (2017 transformer, T5)",
            [("N × encoder layer", encoder_names, "attention"), ("N × decoder layer", decoder_names, "feed-forward")],
            [("encoder self", full), ("decoder self", causal), ("cross", full)],
        ),
    ]
    body, x = [], 10.0
    height = 0.0
    widths = (190.0, 190.0, 300.0)
    for (title, stacks, masks), width in zip(columns, widths, strict=True):
        body.append(_text(x + width / 2, 14, title, weight="bold", size=12))
        y = 30.0
        stack_width = width if len(stacks) == 1 else (width - 10) / 2
        tallest = 0.0
        for k, (name, names, role) in enumerate(stacks):
            group, stack_height = _stack(x + k * (stack_width + 10), y, stack_width, name, names, role)
            body += group
            tallest = max(tallest, stack_height)
        if len(stacks) == 2:
            arrow_y = y + tallest / 2
            body.append(_arrow([(x + stack_width, arrow_y), (x + stack_width + 9, arrow_y)]))
        y += tallest + 22
        body.append(_text(x, y, "attention masks", anchor="start", size=10))
        y += 12
        slot = width / len(masks)
        for k, (name, mask) in enumerate(masks):
            mx = x + k * slot + (slot - length * 9) / 2
            body += _mask_grid(mask, mx, y)
            body.append(_text(x + k * slot + slot / 2, y + length * 9 + 10, name, size=10))
        height = max(height, y + length * 9 + 20)
        x += width + 30
    body.append(
        _text(
            10, height + 4, "masks: rows are queries, columns keys; a filled cell may attend", anchor="start", size=10
        )
    )
    height += 14
    description = (
        "Encoder-only models stack encoder layers whose self-attention lets every token see every token. "
        "Decoder-only models stack decoder layers without cross-attention; their self-attention is causal, each "
        "token sees itself and the tokens before it. Encoder-decoder models run an encoder over the source and a "
        "decoder whose layers add cross-attention, in which every target position may read every source position."
    )
    return _svg(body, x - 20, height, "Encoder-only, decoder-only and encoder-decoder transformers", description)
