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
  (:func:`record` and :data:`RUNNING_EXAMPLES`).

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
import itertools
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "Assignment",
    "assignments",
    "LineTracer",
    "TensorSummary",
    "HEATMAP_SIZE",
    "PREVIEW_VALUES",
    "LineRecord",
    "summarize",
    "record",
    "RunningExample",
    "RUNNING_EXAMPLES",
    "site_trace",
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
    found = []
    for function in _functions(ast.parse(path.read_text())):
        first_line = min([function.lineno] + [decorator.lineno for decorator in function.decorator_list])
        for statement in _own_statements(function):
            names = _target_names(statement)
            if names is not None:
                found.append(
                    Assignment(str(path), statement.lineno, statement.end_lineno, (first_line, function.name), names)
                )
    return sorted(found, key=lambda assignment: assignment.line)


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
    with another tracer is not supported.

    Args:
        watched: The statements to report.
        callback: What to call.
    """

    def __init__(
        self, watched: Iterable[Assignment], callback: Callable[[Assignment, dict[str, Any], int], None]
    ) -> None:
        self.callback = callback
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
        stats: ``mean``, ``std``, ``min`` and ``max`` (floating point; for booleans the
            fraction ``True`` as ``mean``).
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
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"tensor must be a torch.Tensor, got {type(tensor).__name__}")
    data = tensor.detach().to("cpu")
    # Statistics and heatmaps in float32, whatever the dtype (booleans become 0 and 1).
    numeric = data.float()
    flat = numeric.flatten()
    stats: dict[str, float] = {}
    if flat.numel():
        stats = {
            "mean": _round(flat.mean().item()),
            "std": _round(flat.std(unbiased=False).item()) if flat.numel() > 1 else 0.0,
            "min": _round(flat.min().item()),
            "max": _round(flat.max().item()),
        }
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
        return asdict(self)


def record(run: Callable[[], object], paths: Sequence[Path], example: str = "") -> dict[tuple[str, int], LineRecord]:
    """Run ``run()`` and record, for every assignment in a function of ``paths``, what it assigned.

    Only statements that assigned at least one tensor are kept; the values
    are those of the first time each statement ran.

    Args:
        run: What to run (no arguments).
        paths: The source files to watch.
        example: A name stored with each record.

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

    with torch.no_grad(), LineTracer(watched, on_assignment):
        run()
    return dict(sorted(records.items()))


# ---------------------------------------------------------------------------
# The running examples of the site
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RunningExample:
    """An input run through some modules so that their pages can show what each line computed.

    Attributes:
        name: A short name.
        description: One sentence for the page: what ran, on what input.
        dims: The sizes of the legend's letters in this example (``{"B": 1, "T": 7, ...}``).
        run: What to run.
    """

    name: str
    description: str
    dims: dict[str, int]
    run: Callable[[], object] = field(repr=False)


def _bert_on_the_sentence() -> None:
    from .checkpoints import load_tokenizer
    from .diagrams import head_split_diagram
    from .export import BrowserBert
    from .models.bert import BertModel, sentence_embeddings

    encoded = load_tokenizer()("time flies like an arrow", return_tensors="pt")
    inputs = (encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    eager = BertModel.from_pretrained()
    # The eager path, with the attention probabilities (as the attention views show them) ...
    outputs = eager(*inputs, output_attentions=True)
    # ... the sentence vector the checkpoint was trained for ...
    sentence_embeddings(outputs.last_hidden_state, encoded["attention_mask"])
    # ... a mask that keeps every head (one row, for all layers) ...
    eager(*inputs, head_mask=torch.ones(eager.config.num_attention_heads))
    # ... the model the try page runs, and the head-split diagram on its first layer ...
    BrowserBert(eager)(encoded["input_ids"], encoded["token_type_ids"])
    head_split_diagram(eager.encoder.layer[0].attention.self, length=encoded["input_ids"].shape[1])
    # ... and the fused kernel on the same weights.
    fused = BertModel(eager.config.replace(attn_implementation="sdpa")).eval()
    fused.load_state_dict(eager.state_dict())
    fused(*inputs)


#: The small configuration of the book's running example (sizes all distinct, to tell the letters apart).
BOOK_EXAMPLE_SIZES = dict(
    vocab_size=50,
    hidden_size=24,
    num_attention_heads=4,
    intermediate_size=40,
    num_hidden_layers=2,
    max_position_embeddings=16,
    num_labels=3,
)


def _the_book_on_a_small_batch() -> None:
    from . import interop
    from .book.attention import AttentionHead, MultiHeadAttention, scaled_dot_product_attention
    from .book.classification import TransformerForSequenceClassification
    from .book.decoder import EncoderDecoderTransformer
    from .book.embeddings import SinusoidalPositionalEncoding
    from .book.generation import greedy_generate
    from .book.training import make_reversal_batch
    from .core import masks
    from .core.config import TransformerConfig
    from .core.kernels import fused_attention

    torch.manual_seed(0)
    config = TransformerConfig(**BOOK_EXAMPLE_SIZES, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    batch, target_length, source_length = 2, 5, 7
    heads, head_size = config.num_attention_heads, config.head_size
    source = torch.randint(3, config.vocab_size, (batch, source_length))
    target = torch.randint(3, config.vocab_size, (batch, target_length))
    source_mask = torch.ones(batch, source_length, dtype=torch.long)
    source_mask[1, -2:] = 0
    hidden = torch.randn(batch, target_length, config.hidden_size)
    query = torch.randn(batch, heads, target_length, head_size)
    key, value = (torch.randn(batch, heads, source_length, head_size) for _ in range(2))

    masks.build_attention_mask(source_mask, query_length=target_length, causal=False)
    masks.build_attention_mask(None, query_length=target_length, causal=True)
    scaled_dot_product_attention(query, key, value, masks.padding_mask(source_mask))
    fused_attention(query, key, value, masks.padding_mask(source_mask))
    AttentionHead(config.hidden_size, head_size)(hidden)
    MultiHeadAttention(config).eval()(hidden, output_attentions=True)
    SinusoidalPositionalEncoding(config.hidden_size, config.max_position_embeddings)(hidden)
    for norm_first in (True, False):
        model = EncoderDecoderTransformer(config, norm_first=norm_first).eval()
        model(source, target, source_mask, output_attentions=True)
        greedy_generate(model, source, max_new_tokens=3, bos_token_id=1, attention_mask=source_mask)
        interop.book_encoder_to_torch(model.encoder)
    TransformerForSequenceClassification(config).eval()(source, source_mask)
    make_reversal_batch(batch, 3, 6, torch.Generator().manual_seed(0))


def _the_families_on_a_small_batch() -> None:
    from .book.embeddings import RelativePositionBias
    from .core.config import TransformerConfig
    from .models.bart import BartForConditionalGeneration
    from .models.gpt2 import GPT2LMHeadModel

    torch.manual_seed(0)
    base = TransformerConfig(**BOOK_EXAMPLE_SIZES, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    batch, target_length, source_length = 2, 5, 7
    prompt = torch.randint(3, base.vocab_size, (batch, target_length))
    prompt_mask = torch.ones(batch, target_length, dtype=torch.long)
    prompt_mask[1, :2] = 0  # the second prompt is left-padded, as for generation
    gpt2 = GPT2LMHeadModel(base.replace(type_vocab_size=0, embedding_layer_norm=False, eos_token_id=2)).eval()
    gpt2(prompt, attention_mask=prompt_mask, output_attentions=True)
    gpt2.generate(prompt, prompt_mask, max_new_tokens=3)
    bart_config = base.replace(type_vocab_size=0, position_offset=2, scale_embedding=True, decoder_start_token_id=2)
    bart = BartForConditionalGeneration(bart_config, bart_config).eval()
    source = torch.randint(3, base.vocab_size, (batch, source_length))
    source_mask = torch.ones(batch, source_length, dtype=torch.long)
    source_mask[1, -2:] = 0
    bart(source, source_mask, prompt, output_attentions=True)
    bart(source, source_mask)  # no targets: the source shifted right, as HuggingFace's BART does
    bart.generate(source, source_mask, max_new_tokens=3)
    RelativePositionBias(base.num_attention_heads, num_buckets=8, max_distance=16)(target_length, source_length)


#: The running examples, in the order their records are taken (a line keeps the first example's values).
RUNNING_EXAMPLES: tuple[RunningExample, ...] = (
    RunningExample(
        "bert",
        '"time flies like an arrow" ([CLS] and [SEP] included: 7 tokens) through the pretrained checkpoint, '
        "with eager and with SDPA attention",
        {"B": 1, "T": 7, "S": 7, "H": 12, "D": 32, "E": 384, "F": 1536, "L": 6},
        _bert_on_the_sentence,
    ),
    RunningExample(
        "book",
        "a batch of 2 random token sequences (5 target and 7 source tokens, the second source padded by 2) "
        "through a small model: hidden size 24, 4 heads of 6, feed-forward width 40, vocabulary 50, 2 layers",
        {"B": 2, "T": 5, "S": 7, "H": 4, "D": 6, "E": 24, "F": 40, "V": 50, "L": 2, "C": 3},
        _the_book_on_a_small_batch,
    ),
    RunningExample(
        "families",
        "a small random GPT-2 (2 prompts of 5 tokens, the second left-padded by 2, then 3 new tokens) and "
        "a small random BART (2 sources of 7 tokens, the second padded by 2, targets of 5), both with the book "
        "example's sizes, and T5's relative bias for 5 queries and 7 keys",
        {"B": 2, "T": 5, "S": 7, "H": 4, "D": 6, "E": 24, "F": 40, "V": 50, "L": 2},
        _the_families_on_a_small_batch,
    ),
)


def site_trace(package_root: str | Path | None = None) -> dict[str, Any]:
    """Run every running example and return the records as JSON-ready data, by file and line.

    Args:
        package_root: The package's folder (default: this package's); paths in the result are relative to it.

    Returns:
        ``{"examples": {name: {"description", "dims"}}, "lines": {relative path: {line: record}}}``.
    """
    root = Path(package_root) if package_root is not None else Path(__file__).resolve().parent
    # The examples' own code (in this file) is not traced.
    paths = sorted(path for path in root.rglob("*.py") if path.resolve() != Path(__file__).resolve())
    merged: dict[tuple[str, int], LineRecord] = {}
    for example in RUNNING_EXAMPLES:
        for key, line_record in record(example.run, paths, example.name).items():
            # A line keeps the first example that ran it, with that example's count of calls.
            merged.setdefault(key, line_record)
    lines: dict[str, dict[str, Any]] = {}
    for (path, line), line_record in merged.items():
        relative = Path(path).resolve().relative_to(root.resolve()).as_posix()
        data = line_record.as_dict()
        data["path"] = relative
        lines.setdefault(relative, {})[str(line)] = data
    examples = {
        example.name: {"description": example.description, "dims": example.dims} for example in RUNNING_EXAMPLES
    }
    return {"examples": examples, "lines": lines}
