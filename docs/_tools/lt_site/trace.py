r"""Tracing: what the tensor on each line really is, while the code runs.

A shape comment such as ``# (B, H, T, D)`` is a claim; a reader who wants
to *see* the tensor has to run the code.  This module runs it for them:
:class:`LineTracer` watches the functions of some source files with
:func:`sys.settrace` and, each time one of their assignment statements has
run, hands the values it assigned to a callback.  Two things are built on
it:

* the test that executes every shape comment of the package (it checks each
  commented line's tensor against the comment's letters), and
* the annotated-source pages of the site, which show next to each line the
  shape, dtype and a small preview of what it computed on a running example
  (:func:`record`, run on the examples of :mod:`lt_site.examples`), and the
  pages that read each family top to bottom: the functions its running
  example's forward pass called, in the order of their first call
  (:class:`CallPath`, recorded by the same run).

Both see exactly the same statements: :func:`assignments` lists, for a
file, every statement inside a function that assigns to one name or to a
tuple of names.

>>> import torch
>>> from pathlib import Path
>>> from literate_transformer.book import feed_forward
>>> from literate_transformer import TransformerConfig
>>> layer = feed_forward.FeedForward(TransformerConfig(hidden_size=8, num_attention_heads=2, intermediate_size=16))
>>> records = record(lambda: layer(torch.randn(1, 3, 8)), [Path(feed_forward.__file__)])
>>> [(r.names, r.values[0].shape) for r in records.values()]
[(('intermediate',), (1, 3, 16)), (('intermediate',), (1, 3, 16)), (('output',), (1, 3, 8))]
"""

from __future__ import annotations

import ast
import functools
import itertools
import math
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = [
    "Assignment",
    "assignments",
    "Function",
    "functions",
    "LineTracer",
    "CallRecord",
    "CallPath",
    "TensorSummary",
    "HEATMAP_SIZE",
    "PREVIEW_VALUES",
    "LineRecord",
    "ModuleCalls",
    "fold_names",
    "summarize",
    "record",
    "trace_example",
    "merge_traces",
    "trace_examples",
]


# ---------------------------------------------------------------------------
# Which statements to watch
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Assignment:
    """One assignment statement inside a function.

    Attributes:
        path: The file (as the interpreter names it, ``code.co_filename``).
        line: The statement's first line.
        end_line: Its last line.
        function: ``(first line, name)`` of the enclosing function's code object (decorators included).
        names: The names it assigns, in order (one, or the elements of a tuple target).
    """

    path: str
    line: int
    end_line: int
    function: tuple[int, str]
    names: tuple[str, ...]


def _functions(tree: ast.AST) -> Iterable[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _own_statements(function: ast.AST) -> Iterable[ast.stmt]:
    """Statements of a function, not of the functions or classes nested in it."""
    stack = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                stack.append(child)


def _target_names(statement: ast.stmt) -> tuple[str, ...] | None:
    """The names a statement assigns, or ``None`` when it assigns to something else (an attribute, an item)."""
    if isinstance(statement, ast.Assign):
        if len(statement.targets) != 1:
            return None
        target = statement.targets[0]
    elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
        target = statement.target
    else:
        return None
    if isinstance(target, ast.Name):
        return (target.id,)
    if isinstance(target, ast.Tuple) and all(isinstance(element, ast.Name) for element in target.elts):
        return tuple(element.id for element in target.elts)
    return None


def assignments(path: str | Path) -> list[Assignment]:
    """Every statement of a file that assigns to names, inside a function, in source order.

    Raises:
        FileNotFoundError: when ``path`` does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path {path} is not a file")
    return list(_assignments(str(path), path.read_text()))


# Every running example watches every file of the package: each file's statements and functions are found once
# per text (not once per example), by the two functions below.
@functools.cache
def _assignments(path: str, text: str) -> tuple[Assignment, ...]:
    found = []
    for function in _functions(ast.parse(text)):
        first_line = min([function.lineno] + [decorator.lineno for decorator in function.decorator_list])
        for statement in _own_statements(function):
            names = _target_names(statement)
            if names is not None:
                found.append(
                    Assignment(path, statement.lineno, statement.end_lineno, (first_line, function.name), names)
                )
    return tuple(sorted(found, key=lambda assignment: assignment.line))


@dataclass(frozen=True)
class Function:
    """One function (or method) of a file, as its code object names it.

    Attributes:
        line: Its first line, decorators included (``code.co_firstlineno``).
        name: Its name (``code.co_name``).
        qualname: Its name inside the module (``Class.method``; ``outer.<locals>.inner`` for a closure).
        end_line: Its last line.
    """

    line: int
    name: str
    qualname: str
    end_line: int


def functions(path: str | Path) -> dict[tuple[int, str], Function]:
    """Every function of a file, by ``(first line, name)`` (how a running frame's code object names it).

    Raises:
        FileNotFoundError: when ``path`` does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path {path} is not a file")
    return dict(_functions_of(path.read_text()))


@functools.cache
def _functions_of(text: str) -> dict[tuple[int, str], Function]:
    found: dict[tuple[int, str], Function] = {}

    def visit(body: Iterable[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                line = min([node.lineno] + [decorator.lineno for decorator in node.decorator_list])
                found[(line, node.name)] = Function(line, node.name, prefix + node.name, node.end_lineno)
                visit(node.body, f"{prefix}{node.name}.<locals>.")
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            else:
                # Definitions under an if, a try or a with (a fallback for an older release) are the module's too.
                visit([child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt)], prefix)

    visit(ast.parse(text).body, "")
    return found


# ---------------------------------------------------------------------------
# Watching them run
# ---------------------------------------------------------------------------
class LineTracer:
    """Calls ``callback(assignment, frame_locals, frame_id)`` each time a watched statement has run.

    A statement has run when the next line of its frame starts outside it,
    or when the function returns; a statement that raised is not reported.
    ``frame_id`` numbers the calls (a checker binds letters such as ``T``
    per call; a frame's ``id()`` would not do, since it is reused once the
    frame is freed).  Use as a context manager; nesting
    with another :class:`LineTracer` is not supported; a tracer set before
    it still receives the ``call`` events (its local tracers are not used).

    Args:
        watched: The statements to report.
        callback: What to call.
        on_call: Also called with the frame of every Python function that starts running (a
            :class:`CallPath`), whether or not it has a watched statement.
    """

    def __init__(
        self,
        watched: Iterable[Assignment],
        callback: Callable[[Assignment, dict[str, Any], int], None],
        on_call: Callable[[Any], None] | None = None,
    ) -> None:
        self.callback = callback
        self.on_call = on_call
        self._calls = itertools.count()
        #: path -> (function first line, name) -> line -> assignment
        self.index: dict[str, dict[tuple[int, str], dict[int, Assignment]]] = {}
        for assignment in watched:
            lines = self.index.setdefault(assignment.path, {}).setdefault(assignment.function, {})
            for line in range(assignment.line, assignment.end_line + 1):
                lines[line] = assignment

    def __enter__(self) -> LineTracer:
        self._previous = sys.gettrace()
        sys.settrace(self._on_call)
        return self

    def __exit__(self, *exc_info: object) -> None:
        sys.settrace(self._previous)

    def _on_call(self, frame, event, arg):
        if event != "call":
            return None
        # A tracer set before (a record of what the run reached, lt_site.deps.Reached) still sees every call.
        if self._previous is not None:
            self._previous(frame, event, arg)
        if self.on_call is not None:
            self.on_call(frame)
        functions = self.index.get(frame.f_code.co_filename)
        if functions is None:
            return None
        lines = functions.get((frame.f_code.co_firstlineno, frame.f_code.co_name))
        if lines is None:
            return None
        return self._frame_tracer(lines, next(self._calls))

    def _frame_tracer(self, lines: dict[int, Assignment], frame_id: int):
        pending: list[Assignment | None] = [None]

        def trace(frame, event, arg):
            statement = pending[0]
            if event == "line":
                if statement is not None and not statement.line <= frame.f_lineno <= statement.end_line:
                    self.callback(statement, frame.f_locals, frame_id)
                    statement = pending[0] = None
                if statement is None:
                    pending[0] = lines.get(frame.f_lineno)
            elif event == "return" and statement is not None:
                self.callback(statement, frame.f_locals, frame_id)
                pending[0] = None
            elif event == "exception":
                # The statement did not complete: nothing was assigned.
                pending[0] = None
            return trace

        return trace


# ---------------------------------------------------------------------------
# Which functions a forward pass runs, in order
# ---------------------------------------------------------------------------
@dataclass
class CallRecord:
    """One function of a :class:`CallPath`: where it is, how often it ran and who called it first.

    Attributes:
        path: Its file.
        line: Its first line (decorators included).
        end_line: Its last line.
        name: Its name inside the module (``Class.method``).
        calls: How many times it ran during the entry call (once per layer, say).
        caller: ``(path, line)`` of the call that ran it first, in the nearest watched function above it
            that is not a decorator's wrapper of it (``None`` for the entry call itself).
        caller_name: That function's name inside its module.
    """

    path: str
    line: int
    end_line: int
    name: str
    calls: int = 1
    caller: tuple[str, int] | None = None
    caller_name: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class CallPath:
    """The functions of some files that one call runs, in the order of their first call.

    The call is the one running when a function named ``entry``
    (``forward``) starts for the first time: the outermost function of the
    files then running, the model's forward pass called by a running example
    (or the wrapper that checks its inputs first).  The constructors run
    before it and the decoding run after it are not part of it.  Each
    function that starts running inside it is recorded once, at its first
    call, with the call that ran it; later calls are counted.  Functions that
    are not definitions of the files (a lambda, a generator expression) are
    not recorded.

    Give it to :class:`LineTracer` (``on_call``) or to :func:`record` (``calls``).

    Args:
        paths: The files to watch.
        entry: The name of the function whose first outside call is recorded.
    """

    def __init__(self, paths: Sequence[str | Path], entry: str = "forward") -> None:
        self.entry = entry
        #: path -> (first line, name) -> function
        self.functions = {str(path): functions(path) for path in paths}
        #: The functions of the entry call, in the order of their first call.
        self.calls: list[CallRecord] = []
        self._index: dict[tuple[str, int, str], CallRecord] = {}
        self._outermost = self._root = None
        self._finished = False

    def _watched_above(self, frame) -> Iterable[Any]:
        """The frames of the watched files above ``frame``, nearest first."""
        frame = frame.f_back
        while frame is not None:
            if frame.f_code.co_filename in self.functions:
                yield frame
            frame = frame.f_back

    def _function_of(self, frame) -> Function | None:
        code = frame.f_code
        return self.functions[code.co_filename].get((code.co_firstlineno, code.co_name))

    def __call__(self, frame) -> None:
        if self._finished:
            return
        code = frame.f_code
        if code.co_filename not in self.functions:
            return
        above = list(self._watched_above(frame))
        if self._root is None:
            if not above:
                # A new outermost call: what the calls before it ran is not the entry call's.
                self._outermost = frame
                self.calls, self._index = [], {}
            if self._outermost is None:
                return
            if code.co_name == self.entry:
                # The entry call is the outermost one now running: the forward, or a wrapper that checks its inputs
                # first (what it ran before the forward started is recorded already).
                self._root = self._outermost
        elif frame is not self._root and not any(caller is self._root for caller in above):
            # The entry call has returned: the path is complete.
            self.stop()
            return
        self._add(frame, above)

    def _wraps(self, outer, frame) -> bool:
        """Whether ``outer`` is a decorator's wrapper of ``frame``'s function.

        A wrapper's closure holds the function it wraps, which was defined elsewhere (a helper defined beside
        the wrapper, in the same enclosing function, is called, not wrapped).
        """
        function = self._function_of(outer)
        if function is None or ".<locals>." not in function.qualname:
            return False
        siblings = function.qualname.rpartition(".<locals>.")[0] + ".<locals>."
        for name in outer.f_code.co_freevars:
            value = outer.f_locals.get(name)
            value = getattr(value, "__func__", value)
            if getattr(value, "__code__", None) is frame.f_code:
                return not getattr(value, "__qualname__", "").startswith(siblings)
        return False

    def _add(self, frame, above: list[Any]) -> None:
        """Record ``frame``'s function at its first call (``above``: the watched frames above it, nearest first)."""
        function = self._function_of(frame)
        if function is None:
            return
        key = (frame.f_code.co_filename, function.line, function.name)
        if key in self._index:
            self._index[key].calls += 1
            return
        record = CallRecord(frame.f_code.co_filename, function.line, function.end_line, function.qualname)
        callee = frame
        for above_frame in above:
            # The nearest function above, past the wrappers of what it calls (a generator expression's frame is
            # its function's, a wrapper's caller is the wrapped function's).
            if self._wraps(above_frame, callee):
                callee = above_frame
                continue
            calling = self._function_of(above_frame)
            if calling is not None:
                record.caller = (above_frame.f_code.co_filename, above_frame.f_lineno)
                record.caller_name = calling.qualname
                break
        self._index[key] = record
        self.calls.append(record)

    def stop(self) -> None:
        """Record nothing more (and let the entry call's frame go)."""
        self._finished = True
        self._outermost = self._root = None


# ---------------------------------------------------------------------------
# What a line computed, in a few numbers
# ---------------------------------------------------------------------------
#: The largest heatmap a preview carries (rows, columns); bigger matrices are subsampled.
HEATMAP_SIZE = 12
#: How many of a tensor's first values a preview lists.
PREVIEW_VALUES = 6


def _round(value: float) -> float | str:
    """Four significant digits: enough to read, small to store (``"inf"``, ``"nan"`` as text, for JSON)."""
    if not math.isfinite(value):
        return str(value)
    return float(f"{value:.4g}")


@dataclass
class TensorSummary:
    """A tensor, summarised for a page: its shape, dtype, first values, statistics and a small heatmap.

    Attributes:
        shape: The shape.
        dtype: The dtype, e.g. ``"float32"``.
        values: The first :data:`PREVIEW_VALUES` values, flattened.
        stats: ``mean``, ``std``, ``min`` and ``max`` of its finite entries, computed in
            float64 whatever the tensor's dtype (for booleans the fraction ``True`` as
            ``mean``), so that they cannot overflow: a masked score is ``finfo(float32).min``,
            and a float32 mean of a row of them is ``-inf``; and how many entries are
            ``-inf``, ``+inf`` or NaN, where any are.
        heatmap: For a tensor with at least two dimensions: the last two
            dimensions of its first matrix (index 0 of the others), at most
            :data:`HEATMAP_SIZE` squared, as rows of values; else ``None``.
        heatmap_of: Which rows and columns the heatmap shows (``"rows 0-6 of 7, columns 0-6 of 7"``).
    """

    shape: tuple[int, ...]
    dtype: str
    values: list[float]
    stats: dict[str, float]
    heatmap: list[list[float]] | None = None
    heatmap_of: str | None = None


def summarize(tensor: torch.Tensor) -> TensorSummary:
    """Summarise ``tensor`` (see :class:`TensorSummary`).

    >>> summarize(torch.arange(6.0).view(2, 3)).stats
    {'mean': 2.5, 'std': 1.708, 'min': 0.0, 'max': 5.0}
    >>> summarize(torch.tensor([1.0, 3.0, -torch.inf, -torch.inf])).stats    # filtered scores: the finite ones
    {'mean': 2.0, 'std': 1.0, 'min': 1.0, 'max': 3.0, '-inf': 2}
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"tensor must be a torch.Tensor, got {type(tensor).__name__}")
    data = tensor.detach().to("cpu")
    # Statistics and heatmaps in float64, whatever the dtype (booleans become 0 and 1): no overflow.
    numeric = data.double()
    flat = numeric.flatten()
    stats: dict[str, float] = {}
    # The statistics of the finite entries; infinite ones (a filtered score is -inf) and NaNs are counted apart.
    # When the least and the greatest entry are finite, every entry is (a NaN makes both NaN): the common case
    # then skips the mask, its copy and the counts, most of a large tensor's cost (28 million weights: 1.1 s).
    extremes = torch.stack([flat.min(), flat.max()]) if flat.numel() else flat
    if flat.numel() and bool(torch.isfinite(extremes).all()):
        finite, counts = flat, ()
    else:
        finite = flat[torch.isfinite(flat)]
        extremes = torch.stack([finite.min(), finite.max()]) if finite.numel() else finite
        counts = (("-inf", int((flat == -torch.inf).sum())), ("+inf", int((flat == torch.inf).sum())))
        counts += (("nan", int(flat.isnan().sum())),)
    if finite.numel():
        low, high = extremes.tolist()
        stats = {
            "mean": _round(finite.mean().item()),
            "std": _round(finite.std(unbiased=False).item()) if finite.numel() > 1 else 0.0,
            "min": _round(low),
            "max": _round(high),
        }
    stats.update((key, count) for key, count in counts if count)
    heatmap = heatmap_of = None
    if numeric.dim() >= 2 and numeric.shape[-1] > 1 and numeric.shape[-2] > 1:
        matrix = numeric.reshape(-1, *numeric.shape[-2:])[0]
        rows = torch.linspace(0, matrix.shape[0] - 1, min(HEATMAP_SIZE, matrix.shape[0])).round().long().unique()
        columns = torch.linspace(0, matrix.shape[1] - 1, min(HEATMAP_SIZE, matrix.shape[1])).round().long().unique()
        heatmap = [[_round(value) for value in row] for row in matrix[rows][:, columns].tolist()]
        leading = "first matrix; " if numeric.dim() > 2 else ""
        heatmap_of = f"{leading}{len(rows)} of {matrix.shape[0]} rows, {len(columns)} of {matrix.shape[1]} columns"
    return TensorSummary(
        tuple(data.shape),
        str(data.dtype).removeprefix("torch."),
        [_round(value) for value in flat[:PREVIEW_VALUES].tolist()],
        stats,
        heatmap,
        heatmap_of,
    )


@dataclass
class LineRecord:
    """What one statement computed the first time it ran, and how often it ran.

    Attributes:
        path: The file.
        line: The statement's first line.
        end_line: Its last line (where a trailing shape comment sits).
        names: The names it assigned.
        values: One :class:`TensorSummary` per name that held a tensor (``None`` for the others).
        calls: How many times the statement ran (a statement inside a loop over layers runs once per layer).
        example: The running example that produced the first values.
    """

    path: str
    line: int
    end_line: int
    names: tuple[str, ...]
    values: list[TensorSummary | None]
    calls: int = 1
    example: str = ""

    def as_dict(self) -> dict[str, Any]:
        """:func:`dataclasses.asdict`'s dict, one level deep: the summaries' lists are shared, not copied value by
        value (``asdict`` copied each number of each heatmap, two of the trace's ten seconds)."""
        fields = dict(self.__dict__)
        fields["values"] = [None if value is None else dict(value.__dict__) for value in self.values]
        return fields


class ModuleCalls:
    """Which line of some files called which module, by the name the lens caches its output under.

    While the block runs, a global forward hook of PyTorch sees every module return; it walks up from
    itself to the first frame of a watched file, the line that called the module, and notes the module
    there.  Each module is named as the first model that ran it names it (``model.named_modules()``,
    HuggingFace's names): :func:`literate_transformer.lens.run_with_cache` keeps that line's result as
    ``cache[name]`` for that model.  The decoder the static cache's loops run wraps the model (as ``model``): it is not a
    model of its own, and the model inside it names the modules.

    Args:
        paths: The files to watch.
    """

    def __init__(self, paths: Sequence[str | Path]) -> None:
        self.paths = {str(path) for path in paths}
        #: (path, line) -> the modules called there, in order, each once.
        self.modules: dict[tuple[str, int], list[nn.Module]] = {}
        #: id(module) -> the module and its name in the first model that ran it.  The module is kept: while it
        #: lives no other object takes its id, so no module is named by another that died before it ran.
        self._named: dict[int, tuple[nn.Module, str]] = {}
        self._depth = 0

    def _before(self, module: nn.Module, args: Any) -> None:
        if self._depth == 0:
            root = module.model if type(module).__name__ == "StaticCacheDecoder" else module
            for name, child in root.named_modules(remove_duplicate=False):
                # The first model that ran a module names it; a module shared within it keeps its first name.
                self._named.setdefault(id(child), (child, name))
        self._depth += 1

    def _after(self, module: nn.Module, args: Any, output: Any) -> None:
        self._depth -= 1
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename not in self.paths:
            if "/torch/" not in frame.f_code.co_filename.replace("\\", "/"):
                return  # called from outside the watched files (a running example's own code)
            frame = frame.f_back
        if frame is not None:
            called = self.modules.setdefault((frame.f_code.co_filename, frame.f_lineno), [])
            if not any(module is seen for seen in called):
                called.append(module)

    def __enter__(self) -> ModuleCalls:
        self._handles = [
            nn.modules.module.register_module_forward_pre_hook(self._before),
            nn.modules.module.register_module_forward_hook(self._after),
        ]
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._depth = 0

    def cache_names(self) -> dict[tuple[str, int], str]:
        """``{(path, line): name}``: each line's modules by name (the model itself has none), folded (:func:`fold_names`)."""
        found = {}
        for key, modules in self.modules.items():
            names = [self._named[id(module)][1] for module in modules if id(module) in self._named]
            names = [name for name in names if name]
            if names:
                found[key] = fold_names(names)
        return found


def fold_names(names: Sequence[str]) -> str:
    """One name for the modules a line called: ``model.layers.{i}`` for ``model.layers.0``, ``.1``, ...; where
    the line called modules of several kinds, the first kind's, and how many other kinds there were.

    >>> fold_names(["model.layers.0", "model.layers.1"])
    'model.layers.{i}'
    >>> fold_names(["encoder.layer.0.attention", "encoder.layer.1.attention"])
    'encoder.layer.{i}.attention'
    >>> fold_names(["model.norm"])
    'model.norm'
    >>> fold_names(["h.0.attn", "h.0.mlp", "h.1.attn", "h.1.mlp"])
    'h.{i}.attn (and 1 other)'
    """
    kinds = list(dict.fromkeys(re.sub(r"\.\d+(?=\.|$)", ".{i}", name) for name in names))
    # A kind called once is named as it is: model.layers.0 of a one-layer model stays model.layers.0.
    first = kinds[0] if sum(re.sub(r"\.\d+(?=\.|$)", ".{i}", n) == kinds[0] for n in names) > 1 else names[0]
    others = len(kinds) - 1
    return first if not others else f"{first} (and {others} other{'s' * (others > 1)})"


def record(
    run: Callable[[], object], paths: Sequence[Path], example: str = "", calls: CallPath | None = None
) -> dict[tuple[str, int], LineRecord]:
    """Run ``run()`` and record, for every assignment in a function of ``paths``, what it assigned.

    Only statements that assigned at least one tensor are kept; the values
    are those of the first time each statement ran.

    Args:
        run: What to run (no arguments).
        paths: The source files to watch.
        example: A name stored with each record.
        calls: Also records, in the same run, the functions its forward pass called (see :class:`CallPath`).

    Returns:
        ``{(path, line): LineRecord}``.
    """
    watched = [assignment for path in paths for assignment in assignments(path)]
    records: dict[tuple[str, int], LineRecord] = {}

    def on_assignment(assignment: Assignment, local_values: dict[str, Any], frame_id: int) -> None:
        key = (assignment.path, assignment.line)
        if key in records:
            records[key].calls += 1
            return
        values = [local_values.get(name) for name in assignment.names]
        if not any(isinstance(value, torch.Tensor) for value in values):
            return
        summaries = [summarize(value) if isinstance(value, torch.Tensor) else None for value in values]
        records[key] = LineRecord(
            assignment.path, assignment.line, assignment.end_line, assignment.names, summaries, 1, example
        )

    try:
        with torch.no_grad(), LineTracer(watched, on_assignment, on_call=calls):
            run()
    finally:
        if calls is not None:
            calls.stop()
    return dict(sorted(records.items()))


def trace_example(example: Any, package_root: str | Path) -> dict[str, Any]:
    """Run one example under :func:`record` and return what it computed, as JSON-ready data, by file and line.

    Args:
        example: A running example (it has a ``name``, a ``description``, ``dims`` and a ``run`` that takes
            no arguments, as :class:`lt_site.base.RunningExample` does).
        package_root: The package's folder: every ``*.py`` file under it is watched, and paths in the result
            are relative to it.

    Returns:
        ``{"description", "dims", "lines": {relative path: {line: record}}, "path": {"calls", "lines"} or
        None, "hooks": {relative path: {line: name}}}``: what each line it ran computed the first time; its
        *forward path* (the functions of the package its model's first forward pass called, in the order of
        their first call, :class:`CallPath`, and the records of their lines), ``None`` when it ran no forward
        pass; and, for each line that called a module, the lens's cache name of that module
        (:class:`ModuleCalls`).
    """
    root = Path(package_root)
    paths = sorted(root.rglob("*.py"))

    def relative(path: str) -> str:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()

    calls = CallPath(paths)
    with ModuleCalls(paths) as modules:
        records = record(example.run, paths, example.name, calls=calls)
    hooks: dict[str, dict[str, str]] = {}
    for (path, line), name in modules.cache_names().items():
        hooks.setdefault(relative(path), {})[str(line)] = name
    forward_path = None
    if calls.calls:
        spans = [(call.path, call.line, call.end_line) for call in calls.calls]
        on_path = [
            line_record
            for (path, line), line_record in records.items()
            if any(path == span_path and first <= line <= last for span_path, first, last in spans)
        ]
        forward_path = {
            "calls": [
                dict(
                    call.as_dict(),
                    path=relative(call.path),
                    caller=[relative(call.caller[0]), call.caller[1]] if call.caller else None,
                )
                for call in calls.calls
            ],
            "lines": _by_file(on_path, relative),
        }
    return {
        "description": example.description,
        "dims": example.dims,
        "lines": _by_file(records.values(), relative),
        "path": forward_path,
        "hooks": hooks,
    }


def merge_traces(traces: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The traces of several examples (:func:`trace_example`, by name, in order) as one.

    Returns:
        ``{"examples": {name: {"description", "dims"}}, "lines": {relative path: {line: record}},
        "paths": {name: {"calls", "lines"}}, "hooks": {relative path: {line: {"name", "example"}}}}``:
        ``lines`` and ``hooks`` hold, for each line, the first example that ran it (with that example's count
        of calls); an example that ran no forward pass has no path.
    """
    lines: dict[str, dict[str, Any]] = {}
    hooks: dict[str, dict[str, dict[str, str]]] = {}
    for name, trace in traces.items():
        for path, records in trace["lines"].items():
            for line, line_record in records.items():
                lines.setdefault(path, {}).setdefault(line, line_record)
        for path, names in trace["hooks"].items():
            for line, hook in names.items():
                hooks.setdefault(path, {}).setdefault(line, {"name": hook, "example": name})
    return {
        "examples": {name: {"description": t["description"], "dims": t["dims"]} for name, t in traces.items()},
        "lines": {
            path: dict(sorted(records.items(), key=lambda item: int(item[0])))
            for path, records in sorted(lines.items())
        },
        "paths": {name: trace["path"] for name, trace in traces.items() if trace["path"] is not None},
        "hooks": hooks,
    }


def trace_examples(examples: Sequence[Any], package_root: str | Path) -> dict[str, Any]:
    """Run each example once under :func:`record` (:func:`trace_example`) and merge them (:func:`merge_traces`).

    Args:
        examples: The running examples, in order.
        package_root: The package's folder (see :func:`trace_example`).

    Returns:
        What :func:`merge_traces` returns.
    """
    return merge_traces({example.name: trace_example(example, package_root) for example in examples})


def _by_file(records: Iterable[LineRecord], relative: Callable[[str], str]) -> dict[str, dict[str, Any]]:
    """``{relative path: {line: record}}``: records as JSON-ready data."""
    lines: dict[str, dict[str, Any]] = {}
    for line_record in records:
        data = line_record.as_dict()
        data["path"] = relative(line_record.path)
        lines.setdefault(data["path"], {})[str(line_record.line)] = data
    return lines
