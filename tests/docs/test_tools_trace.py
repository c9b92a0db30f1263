"""The site's tracing and proofs registry (lt_site): what the annotated pages and the proof badges are built from."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from lt_site import examples, trace
from lt_site.proofs import PROOFS

import literate_transformer
from literate_transformer.book import encoder as encoder_module
from literate_transformer.book.encoder import TransformerEncoder

ROOT = Path(literate_transformer.__file__).resolve().parents[1]


def test_assignments_lists_names_and_tuples_inside_functions(tmp_path):
    source = tmp_path / "module.py"
    source.write_text(
        "x = 1\n"  # module level: not in a function
        "def f(a):\n"
        "    b = a + 1\n"
        "    c, d = a, b\n"
        "    a.attribute = 2\n"  # not a name
        "    e: int = (\n"
        "        3\n"
        "    )\n"
        "    return b\n"
    )
    found = trace.assignments(source)
    assert [(a.line, a.end_line, a.names) for a in found] == [(3, 3, ("b",)), (4, 4, ("c", "d")), (6, 8, ("e",))]
    assert all(a.function == (2, "f") for a in found)


def test_a_file_read_again_after_an_edit_gives_its_new_statements_and_functions(tmp_path):
    # Each file is parsed once per text, for every example that watches it; an edit is a new text.
    source = tmp_path / "module.py"
    source.write_text("def f(a):\n    b = a\n    return b\n")
    assert [a.names for a in trace.assignments(source)] == [("b",)]
    assert list(trace.functions(source)) == [(1, "f")]
    source.write_text("def g(a):\n    c = a\n    d = c\n    return d\n")
    assert [a.names for a in trace.assignments(source)] == [("c",), ("d",)]
    assert list(trace.functions(source)) == [(1, "g")]
    # The same text again: the same statements, under the path asked for.
    other = tmp_path / "other.py"
    other.write_text(source.read_text())
    assert {a.path for a in trace.assignments(other)} == {str(other)}


def test_assignments_refuses_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="path"):
        trace.assignments(tmp_path / "missing.py")


def test_record_keeps_the_first_call_and_counts_the_others(tiny_config):
    encoder = TransformerEncoder(tiny_config(num_hidden_layers=3)).eval()
    input_ids = torch.randint(1, 50, (2, 5))
    records = trace.record(lambda: encoder(input_ids), [Path(encoder_module.__file__)], example="tiny")
    by_name = {record.names: record for record in records.values()}
    # The embeddings run once per call; every line of a layer once per layer.
    assert by_name[("hidden_states",)].values[0].shape == (2, 5, 24)
    layer_lines = [record for record in records.values() if record.calls == 3]
    assert layer_lines, "no line of TransformerEncoderLayer.forward was counted once per layer"
    assert all(record.example == "tiny" for record in records.values())


def test_summaries_are_small_whatever_the_tensor():
    summary = trace.summarize(torch.arange(40 * 50, dtype=torch.float32).view(1, 40, 50))
    assert summary.shape == (1, 40, 50) and summary.dtype == "float32"
    assert len(summary.heatmap) == trace.HEATMAP_SIZE and len(summary.heatmap[0]) == trace.HEATMAP_SIZE
    assert summary.heatmap[0][0] == 0.0 and summary.heatmap[-1][-1] == 1999.0  # corners kept
    assert summary.values == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    mask = trace.summarize(torch.tensor([True, False, True, True]))
    assert mask.stats["mean"] == 0.75 and mask.heatmap is None
    # Infinite entries are counted apart: the statistics are the finite ones' (no "mean -inf", no "std nan").
    stats = trace.summarize(torch.tensor([float("inf"), 1.0, -float("inf"), -float("inf")])).stats
    assert stats == {"mean": 1.0, "std": 0.0, "min": 1.0, "max": 1.0, "-inf": 2, "+inf": 1}
    # A NaN among finite entries is counted apart too, and an empty tensor has no statistics.
    assert trace.summarize(torch.tensor([1.0, float("nan"), 3.0])).stats == {
        "mean": 2.0,
        "std": 1.0,
        "min": 1.0,
        "max": 3.0,
        "nan": 1,
    }
    assert trace.summarize(torch.ones(0, 3)).stats == {}
    with pytest.raises(TypeError, match="tensor"):
        trace.summarize([1, 2])


def test_statistics_of_masked_scores_do_not_overflow():
    # Masked scores are finfo(float32).min: their float32 mean is -inf, their float64 mean is what it is.
    lowest = torch.finfo(torch.float32).min
    scores = torch.full((1, 4, 4), lowest)
    scores[..., 0] = 1.0
    assert scores.mean().item() == float("-inf")  # the overflow the float64 statistics avoid
    stats = trace.summarize(scores).stats
    assert all(isinstance(stats[key], float) for key in ("mean", "std", "min", "max")), stats
    assert stats["min"] == float(f"{lowest:.4g}") and stats["mean"] == float(f"{0.75 * lowest:.4g}")


def test_the_book_example_traces_every_book_module():
    example = next(example for example in examples.RUNNING_EXAMPLES if example.name == "book")
    paths = sorted((ROOT / "literate_transformer" / "book").glob("*.py"))
    records = trace.record(example.run, paths, example.name)
    traced = {Path(path).stem for path, _ in records}
    assert {"attention", "feed_forward", "embeddings", "encoder", "classification", "decoder", "generation"} <= traced


def defined_names(path: Path) -> set[str]:
    """The functions and classes ``path`` defines, methods as ``Class.method`` (as ``:pyobject:`` names them)."""

    def names(body, prefix: str = ""):
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield prefix + node.name
            if isinstance(node, ast.ClassDef):
                yield from names(node.body, f"{prefix}{node.name}.")

    return set(names(ast.parse(path.read_text(encoding="utf-8")).body))


def test_defined_names_name_methods_by_their_class(tmp_path):
    source = tmp_path / "test_module.py"
    source.write_text("def test_a():\n    pass\nclass Tests:\n    def test_b(self):\n        pass\n")
    assert defined_names(source) == {"test_a", "Tests", "Tests.test_b"}


@pytest.mark.parametrize("proof", PROOFS, ids=[f"{proof.subject}={proof.reference}" for proof in PROOFS])
def test_every_proof_names_an_object_of_the_package_and_an_existing_test(proof):
    module, _, name = proof.subject.rpartition(".")
    assert hasattr(importlib.import_module(f"literate_transformer.{module}"), name), proof.subject
    path, _, function = proof.test.partition("::")
    assert function in defined_names(ROOT / path), proof.test
    assert proof.example in {example.name for example in examples.RUNNING_EXAMPLES}


CALLED = """
import functools


def checked(function):
    @functools.wraps(function)
    def wrapper(*args):
        check(*args)
        return function(*args)

    return wrapper


def check(*args):
    return True


class Parent:
    def __init__(self):
        self.scale = helper(2)

    @checked
    def forward(self, x):
        return self.layer(self.embed(x)) + self.layer(x)

    def embed(self, x):
        return helper(x)

    def layer(self, x):
        def inner(y):
            return helper(y) + 1

        return inner(x)


class Child(Parent):
    def embed(self, x):
        return super().embed(x) * self.scale


def helper(x):
    return x + 1
"""


def run_called(module) -> None:
    """What a running example does (from outside the watched file): build, two forward passes, a call after."""
    model = module.Child()
    model.forward(1)
    model.forward(2)
    module.helper(3)


@pytest.fixture
def called(tmp_path, monkeypatch):
    """A module of plain functions (a wrapper, a constructor, a closure, a subclass), imported from a file."""
    (tmp_path / "called_module.py").write_text(CALLED)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "called_module", raising=False)  # another test's copy, from another folder
    return importlib.import_module("called_module"), tmp_path / "called_module.py"


def test_the_call_path_is_the_first_forward_in_the_order_of_first_calls(called):
    module, path = called
    calls = trace.CallPath([path])
    with trace.LineTracer([], lambda *args: None, on_call=calls):
        run_called(module)
    names = [call.name for call in calls.calls]
    # The constructor ran before the forward, the second forward and helper(3) after it: none is on the path.
    # The wrapper that checks the forward's inputs comes first, with what it ran; each function once.
    assert names == [
        "checked.<locals>.wrapper",
        "check",
        "Parent.forward",
        "Child.embed",
        "Parent.embed",
        "helper",
        "Parent.layer",
        "Parent.layer.<locals>.inner",
    ]
    by_name = {call.name: call for call in calls.calls}
    assert by_name["Parent.layer"].calls == 2 and by_name["helper"].calls == 3
    lines = path.read_text().splitlines()
    forward = by_name["Parent.forward"]
    assert lines[forward.line - 1].strip() == "@checked" and "return self.layer" in lines[forward.end_line - 1]


def test_a_call_names_its_caller_past_the_wrappers_of_what_it_calls(called):
    module, path = called
    calls = trace.CallPath([path])
    with trace.LineTracer([], lambda *args: None, on_call=calls):
        run_called(module)
    by_name = {call.name: call for call in calls.calls}
    # The entry call (the wrapper) has no caller in the file, nor has the forward (the wrapper only wraps it).
    assert by_name["checked.<locals>.wrapper"].caller is None
    assert by_name["Parent.forward"].caller is None
    # A helper defined beside the wrapper is called by it, not wrapped.
    assert by_name["check"].caller_name == "checked.<locals>.wrapper"
    assert by_name["Parent.embed"].caller_name == "Child.embed"
    inner = by_name["Parent.layer.<locals>.inner"]
    assert inner.caller_name == "Parent.layer" and inner.caller == (str(path), by_name["Parent.layer"].end_line)


def test_trace_examples_records_each_examples_path_with_its_own_values(tmp_path, monkeypatch):
    package = tmp_path / "tinytraced"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text(
        "import torch\n\n\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        doubled = x * 2  # (B, E)\n"
        "        return doubled.sum()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tinytraced.model", raising=False)
    from tinytraced.model import Model

    def example(name, rows):
        return SimpleNamespace(name=name, description=name, dims={"B": rows}, run=lambda: Model()(torch.ones(rows, 3)))

    idle = SimpleNamespace(name="idle", description="no forward", dims={}, run=Model)
    data = trace.trace_examples([example("one", 1), example("two", 2), idle], package)
    # The annotated source keeps the first example's values; each path its own.
    assert tuple(data["lines"]["model.py"]["6"]["values"][0]["shape"]) == (1, 3)
    assert tuple(data["paths"]["two"]["lines"]["model.py"]["6"]["values"][0]["shape"]) == (2, 3)
    assert set(data["paths"]) == {"one", "two"} and set(data["examples"]) == {"one", "two", "idle"}
    assert [call["name"] for call in data["paths"]["two"]["calls"]] == ["Model.forward"]
    assert data["paths"]["two"]["calls"][0]["path"] == "model.py"


def test_each_line_that_calls_a_module_gets_the_lens_cache_name_of_its_result(tmp_path, monkeypatch):
    package = tmp_path / "tinyhooked"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text(
        "import torch\n\n\n"
        "class Model(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.layers = torch.nn.ModuleList(torch.nn.Linear(3, 3) for _ in range(2))\n"
        "        self.norm = torch.nn.LayerNorm(3)\n\n"
        "    def forward(self, x):\n"
        "        for layer in self.layers:\n"
        "            x = layer(x)\n"
        "        return self.norm(x)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tinyhooked.model", raising=False)
    from tinyhooked.model import Model

    example = SimpleNamespace(name="one", description="one", dims={}, run=lambda: Model()(torch.ones(1, 3)))
    data = trace.trace_examples([example], package)
    # The loop's line called both layers: one name, the index a letter; the model itself has no line.
    assert data["hooks"]["model.py"] == {
        "12": {"name": "layers.{i}", "example": "one"},
        "13": {"name": "norm", "example": "one"},
    }
    # And what the lens caches under those names is what those lines' calls returned.
    from literate_transformer import lens

    model = Model()
    output, cache = lens.run_with_cache(model, x=torch.ones(1, 3))
    assert torch.equal(cache["norm"], output) and set(cache.keys()) == {"layers.0", "layers.1", "norm"}


def test_a_module_that_ran_is_kept_while_named_so_that_no_later_module_takes_its_id_and_name(tmp_path):
    import gc
    import weakref

    calls = trace.ModuleCalls([tmp_path / "model.py"])
    with calls:
        first = torch.nn.Sequential(torch.nn.Linear(2, 2))
        first(torch.ones(1, 2))
        ran = weakref.ref(first[0])
        del first
        gc.collect()
        # Kept: while it lives, no module made later can have its id, and so be named as it was ("0").
        assert ran() is not None
        second = torch.nn.Sequential(torch.nn.Identity(), torch.nn.Linear(2, 2))
        second(torch.ones(1, 2))
    assert calls._named[id(second[1])][1] == "1"
