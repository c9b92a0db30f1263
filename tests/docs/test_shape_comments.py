"""The trailing shape comments of the package are executed, not just read.

Every line of ``literate_transformer/*.py`` of the form::

    name = <expression>  # (B, H, T, D)

inside a function is a claim about the shape of ``name`` after that line runs.
This test runs the *scenarios* of ``tests/scenarios/`` (small forward
passes) under :func:`sys.settrace`, and each time such a line has run it
compares the local variable's real shape with the comment.  The site's own
tooling (``docs/_tools``) is checked the same way, and the statements are
read by the site's tracer (:func:`lt_site.trace.assignments`, the one the
annotated pages show runtime values with): that is why this test lives with
the site's tests.  It fails when

* a comment is wrong (rank or size),
* a commented line never ran in any scenario (so every new module must add a
  scenario), or
* a comment looks like a shape but uses a letter outside the legend, or sits on
  a line the checker cannot check (not ``one_name = ...``, or outside a
  function).

The legend: ``B`` batch, ``T`` query/target length, ``S`` key/value (source)
length, ``H`` heads, ``K`` key/value heads (``H`` unless a model groups its
queries), ``D`` head size, ``R`` rotated features per head (``D`` unless only
part of a head turns), ``E`` hidden size, ``F`` intermediate size, ``V``
vocabulary size, ``C`` number of labels, ``L`` number of layers, ``W``
embedding width (where it is not ``E``), ``A`` rows of a relative-position
table, ``U`` the real tokens of an unpadded (packed) batch, and for
block-sparse attention ``N`` blocks of ``Z`` tokens, ``M = N - 2`` middle
blocks, ``G`` key blocks a middle block reads; integers stand for
themselves.  ``T`` and ``S`` are bound *per call frame*: the first commented
line of a call that mentions them fixes their values for the rest of that
call.  The other letters are fixed for a scenario by :data:`DIMS`.

Adding a scenario
-----------------
Write a function ``scenario_<name>`` without arguments that runs the new
code on :func:`tiny_config` with batch size ``DIMS["B"]`` (the sizes are
all distinct, so a swapped dimension cannot hide); :data:`SCENARIOS`
collects it by its name.  A scenario that needs other fixed sizes (for instance the
real checkpoint, or another batch size) declares them with
``@with_dims(B=1, E=384, ...)``; letters it does not name keep the values of
:data:`DIMS`.  Scenarios run under ``torch.no_grad()`` with ``torch.manual_seed(0)``.
"""

from __future__ import annotations

import importlib.util
import io
import re
import tokenize
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import lt_site
import pytest
import scenarios
import torch
from lt_site import trace
from lt_site.export import BrowserBert
from scenarios import DIMS, T, tiny_config, token_ids

import literate_transformer
from literate_transformer.models.bert import BertModel

PACKAGE = Path(literate_transformer.__file__).resolve().parent
ROOT = PACKAGE.parent
FIXTURES = Path(__file__).resolve().parent / "shape_fixtures"

#: The site's tooling, whose shape comments are checked too.
TOOLS = Path(lt_site.__file__).resolve().parent
#: Letters bound per call frame by their first occurrence.
FREE_DIMS = ("T", "S")

LEGEND = set(DIMS) | set(FREE_DIMS)
# A trailing comment that is nothing but a parenthesised list of words or numbers.
SHAPE_COMMENT = re.compile(r"^#\s*\(\s*(\w+(?:\s*,\s*\w+)*)\s*,?\s*\)\s*$")


# ---------------------------------------------------------------------------
# The checker
# ---------------------------------------------------------------------------


def _display(path: str | Path) -> str:
    """A path relative to the repository when it is inside it."""
    path = Path(path)
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


@dataclass(frozen=True)
class ShapeComment:
    """One ``name = ...  # (dims)`` statement: the package tracer's assignment, with the comment's letters."""

    statement: trace.Assignment
    dims: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.statement.names[0]

    def where(self) -> str:
        return f"{_display(self.statement.path)}:{self.statement.line}"


@dataclass
class Report:
    comments: list[ShapeComment] = field(default_factory=list)
    #: Comments that look like shapes but cannot be checked.
    problems: list[str] = field(default_factory=list)
    #: Comments that were wrong when their line ran.
    mismatches: list[str] = field(default_factory=list)
    executed: set[ShapeComment] = field(default_factory=set)

    @property
    def unexecuted(self) -> list[str]:
        missing = sorted(
            (comment.statement.path, comment.statement.line)
            for comment in self.comments
            if comment not in self.executed
        )
        return [f"{_display(path)}:{line}" for path, line in missing]


def _trailing_comments(source: str) -> dict[int, str]:
    """Line number -> text of a comment that follows code on that line."""
    comments = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and token.line[: token.start[1]].strip():
            comments[token.start[0]] = token.string
    return comments


def find_shape_comments(path: Path) -> tuple[list[ShapeComment], list[str]]:
    """Parse one file: its checkable shape comments and the malformed ones.

    The statements are the package tracer's (:func:`lt_site.trace.assignments`), the same ones
    the site's annotated pages show the runtime values of.
    """
    trailing = {line: SHAPE_COMMENT.match(text) for line, text in _trailing_comments(path.read_text()).items()}
    shape_lines = {line: match.group(1) for line, match in trailing.items() if match}
    found, problems, claimed = [], [], set()
    for statement in trace.assignments(path):
        lines = [line for line in range(statement.line, statement.end_line + 1) if line in shape_lines]
        if not lines:
            continue
        claimed.update(lines)
        text = shape_lines[lines[-1]]
        if len(statement.names) != 1:
            problems.append(
                f"{_display(path)}:{statement.line}: shape comment on an assignment to something other than one name"
            )
            continue
        dims = tuple(dim.strip() for dim in text.split(","))
        unknown = [dim for dim in dims if dim not in LEGEND and not dim.isdigit()]
        if unknown:
            problems.append(
                f"{_display(path)}:{statement.line}: shape comment ({text}) uses {unknown}, not in the legend"
            )
            continue
        found.append(ShapeComment(statement, dims))
    for line in sorted(set(shape_lines) - claimed):
        problems.append(
            f"{_display(path)}:{line}: shape comment ({shape_lines[line]}) not on a `name = ...` line in a function"
        )
    return found, problems


class ShapeChecker:
    """Checks each commented statement's value against its comment, as the package's tracer reports it."""

    def __init__(self, comments: Iterable[ShapeComment], report: Report) -> None:
        self.report = report
        self.dims = dict(DIMS)
        self.by_statement = {comment.statement: comment for comment in comments}
        #: ``T`` and ``S`` are bound per call: frame -> letter -> size.
        self.bindings: dict[int, dict[str, int]] = {}

    def tracer(self) -> trace.LineTracer:
        return trace.LineTracer(self.by_statement, self.check)

    def check(self, statement: trace.Assignment, local_values: dict, frame_id: int) -> None:
        comment = self.by_statement[statement]
        self.report.executed.add(comment)
        bindings = self.bindings.setdefault(frame_id, {})
        value = local_values.get(comment.name)
        claim = f"{comment.where()}: {comment.name} is commented ({', '.join(comment.dims)})"
        if not isinstance(value, torch.Tensor):
            self.report.mismatches.append(f"{claim} but is a {type(value).__name__}, not a tensor")
            return
        actual = tuple(value.shape)
        if len(actual) != len(comment.dims):
            self.report.mismatches.append(f"{claim} but has shape {actual}")
            return
        for dim, size in zip(comment.dims, actual, strict=True):
            if dim.isdigit():
                expected = int(dim)
            elif dim in FREE_DIMS:
                expected = bindings.setdefault(dim, size)
            else:
                expected = self.dims[dim]
            if size != expected:
                bound = {**{k: self.dims[k] for k in comment.dims if k in self.dims}, **bindings}
                self.report.mismatches.append(f"{claim} but has shape {actual} (with {bound})")
                return


def run_scenarios(paths: Iterable[Path], scenarios: Iterable[Callable[[], object]]) -> Report:
    """Parse ``paths``, run every scenario under the package's tracer and report."""
    report = Report()
    for path in paths:
        comments, problems = find_shape_comments(path)
        report.comments.extend(comments)
        report.problems.extend(problems)
    checker = ShapeChecker(report.comments, report)
    for scenario in scenarios:
        checker.dims = {**DIMS, **getattr(scenario, "dims", {})}
        checker.bindings.clear()
        torch.manual_seed(0)
        try:
            with torch.no_grad(), checker.tracer():
                scenario()
        except Exception:  # a broken scenario is a failure, reported with its traceback
            report.mismatches.append(f"scenario {scenario.__name__} raised:\n{traceback.format_exc()}")
    return report


# ---------------------------------------------------------------------------
# The scenarios: every scenario_* function of tests/scenarios/ (a module per part or family), and the site's
# tooling's own
# ---------------------------------------------------------------------------
def scenario_export():
    """The module the browser page's graph is exported from: its forward runs (no export here)."""
    BrowserBert(BertModel(tiny_config()).eval())(token_ids(), torch.zeros(DIMS["B"], T, dtype=torch.long))


SCENARIOS: list[Callable[[], object]] = [*scenarios.collect(), scenario_export]


# ---------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def package_report() -> Report:
    return run_scenarios(sorted(PACKAGE.rglob("*.py")) + sorted(TOOLS.rglob("*.py")), SCENARIOS)


def test_package_has_shape_comments(package_report):
    # Guards the parser: if it found nothing, every other test here would pass vacuously.
    assert len(package_report.comments) >= 20


def test_shape_comments_are_well_formed(package_report):
    assert not package_report.problems, "\n".join(package_report.problems)


def test_shape_comments_match_the_real_shapes(package_report):
    assert not package_report.mismatches, "\n".join(package_report.mismatches)


def test_every_shape_comment_runs_in_a_scenario(package_report):
    # A commented line no scenario runs is unchecked: write a scenario_ function that runs it.
    assert not package_report.unexecuted, "shape-commented lines that no scenario in SCENARIOS runs:\n" + "\n".join(
        package_report.unexecuted
    )


# --- the checker itself, on deliberately wrong code --------------------------


def _load_fixture(name: str):
    spec = importlib.util.spec_from_file_location(f"shape_fixtures_{name}", FIXTURES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_checker_reports_a_wrong_shape_comment():
    fixture = _load_fixture("wrong_comments")
    report = run_scenarios([FIXTURES / "wrong_comments.py"], [fixture.run_wrong_width])
    assert len(report.mismatches) == 1
    assert "wrong_comments.py" in report.mismatches[0] and "widened is commented (B, T, E)" in report.mismatches[0]
    assert "(2, 3, 40)" in report.mismatches[0]


def test_checker_reports_a_wrong_rank():
    fixture = _load_fixture("wrong_comments")
    report = run_scenarios([FIXTURES / "wrong_comments.py"], [fixture.run_wrong_rank])
    assert len(report.mismatches) == 1 and "pooled is commented (B, T, E) but has shape (2, 24)" in report.mismatches[0]


def test_checker_binds_t_within_a_call_and_frees_it_between_calls():
    fixture = _load_fixture("wrong_comments")
    # Two calls with different lengths: fine, T is bound per call.
    assert run_scenarios([FIXTURES / "wrong_comments.py"], [fixture.run_two_lengths]).mismatches == []
    # One call in which two variables claim the same T but differ: reported.
    report = run_scenarios([FIXTURES / "wrong_comments.py"], [fixture.run_inconsistent_lengths])
    assert len(report.mismatches) == 1 and "right is commented (B, T, E)" in report.mismatches[0]


def test_checker_reports_a_commented_line_that_never_ran():
    fixture = _load_fixture("wrong_comments")
    report = run_scenarios([FIXTURES / "wrong_comments.py"], [fixture.run_two_lengths])
    assert any(where.endswith(f"wrong_comments.py:{fixture.NEVER_CALLED_LINE}") for where in report.unexecuted)


def test_checker_reports_malformed_comments():
    _, problems = find_shape_comments(FIXTURES / "wrong_comments.py")
    assert len(problems) == 3
    assert any("uses ['Q'], not in the legend" in problem for problem in problems)
    assert any("other than one name" in problem for problem in problems)
    assert any("not on a `name = ...` line" in problem for problem in problems)


def test_checker_reports_a_failing_scenario():
    def broken():
        raise RuntimeError("boom")

    report = run_scenarios([], [broken])
    assert len(report.mismatches) == 1 and "scenario broken raised" in report.mismatches[0]
