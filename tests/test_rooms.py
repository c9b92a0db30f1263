"""The package's rooms: floors that import only downwards, no circle, and none of the site's machinery.

The import graph is read from the source with :mod:`ast`, every ``import``
statement counted, the ones inside functions included (an import moved into
a function to dodge a circle is still an arrow).  Imports made by name at run
time (``importlib``: the registry's discovery of the families, the package's
lazy exports) are not arrows: nothing is imported before it is asked for.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import literate_transformer

PACKAGE = Path(literate_transformer.__file__).resolve().parent
NAME = PACKAGE.name

#: The floors, from the ground up: a module may import its own floor and the floors below it.
FLOORS = {
    "manifest": 0,
    "core": 0,
    "parts": 1,
    "book": 2,
    "pretraining": 2,
    "bpe": 2,
    "lora": 2,
    "tasks": 2,
    "models": 3,
    "fast": 4,
    "interop": 4,
    "trained": 4,
    "onnx_export": 4,
    "family_tree": 4,
    "visualize": 4,
    "lens": 4,
    "fine_tuning": 4,
    "diagrams": 4,
    "figures": 4,
    "": 5,  # the package's own __init__: lazy exports of everything
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _imported(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The package's modules one import statement names (the longest existing module of each name)."""
    is_package = MODULES[module].name == "__init__.py"
    base = module.split(".") if is_package else module.split(".")[:-1]
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        prefix = node.module or ""
        if node.level:
            prefix = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
        names = [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]
    found = set()
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module and name.split(".")[0] == NAME:
            found.add(name)
    return found


@functools.cache
def _graph() -> dict[str, set[str]]:
    """Each module of the package and the package's modules it imports (read once: the tests only read it)."""
    graph = {}
    for module, path in MODULES.items():
        arrows = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                arrows |= _imported(module, node)
        # A sub-package's __init__ is reached on the way to its children: not an arrow of its own.
        graph[module] = {target for target in arrows if not module.startswith(target + ".")}
    return graph


def _floor(module: str) -> int:
    relative = module.removeprefix(NAME).lstrip(".")
    return FLOORS[relative.split(".")[0]]


def test_the_graph_reads_function_local_imports():
    # Guards the reader: the registry imports nothing by statement, the BERT file imports the core at the top.
    graph = _graph()
    assert f"{NAME}.core.checkpoints" in graph[f"{NAME}.models.bert"]
    assert len(graph) >= 25 and sum(map(len, graph.values())) >= 50


def test_the_import_graph_has_no_circle():
    graph = _graph()
    state: dict[str, int] = {}
    circles = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                circles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_every_module_imports_only_its_floor_and_the_floors_below():
    climbing = [
        f"{module} (floor {_floor(module)}) imports {target} (floor {_floor(target)})"
        for module, targets in _graph().items()
        for target in sorted(targets)
        if _floor(target) > _floor(module)
    ]
    assert not climbing, "\n".join(climbing)


def test_the_core_imports_nothing_above_it():
    graph = _graph()
    outside = {
        f"{module} -> {target}"
        for module in graph
        if module.startswith(f"{NAME}.core")
        for target in graph[module]
        if not target.startswith(f"{NAME}.core")
    }
    assert not outside


#: The one module a machinery is the lesson of: the decoder's ONNX export, which the onnxruntime engine runs.
LESSONS_OF = {"import onnx": (PACKAGE / "onnx_export.py",)}


@pytest.mark.parametrize(
    ("machinery", "what"),
    [
        ("settrace(", "records lines (the annotated source's runtime values)"),
        ("import onnx", "exports ONNX (the try page)"),
        ("torch.onnx", "exports ONNX (the try page)"),
        ("class Proof", "defines the proof records (the badges)"),
    ],
)
def test_no_module_of_the_package_holds_the_sites_machinery(machinery, what):
    holders = [
        path.relative_to(PACKAGE.parent).as_posix()
        for path in MODULES.values()
        if machinery in path.read_text(encoding="utf-8") and path not in LESSONS_OF.get(machinery, ())
    ]
    assert not holders, f"{', '.join(holders)} {what}: that is the site's, in docs/_tools"


def test_interop_names_no_model_family_but_bert_and_from_hf_has_no_if_chain():
    interop = (PACKAGE / "interop.py").read_text(encoding="utf-8")
    for family in ("gpt2", "bart", "t5", "llama"):
        assert f"models.{family}" not in interop.lower()
    registry = ast.parse((PACKAGE / "models" / "registry.py").read_text(encoding="utf-8"))
    from_hf = next(node for node in registry.body if isinstance(node, ast.FunctionDef) and node.name == "from_hf")
    names = {node.value for node in ast.walk(from_hf) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert not any(name.startswith(("Bert", "GPT", "Bart")) for name in names)


def _norm_constructions(path: Path) -> list[int]:
    """The lines of ``path`` that build a norm class directly: ``nn.LayerNorm(...)``, ``RMSNorm(...)``, ...

    (Calling a norm a module holds, ``self.LayerNorm(x)``, is applying it, not building one.)
    """
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Name):
            built = function.id in ("LayerNorm", "RMSNorm")
        else:
            built = (
                isinstance(function, ast.Attribute)
                and function.attr in ("LayerNorm", "RMSNorm")
                and ast.unparse(function.value) in ("nn", "torch.nn")
            )
        if built:
            lines.append(node.lineno)
    return lines


def test_every_model_builds_its_norms_with_make_norm():
    # The factory is the one place a norm is built; interop builds torch's own modules on purpose.
    exempt = {"parts/norms.py", "interop.py"}
    built = {
        relative: lines
        for path in MODULES.values()
        if (relative := path.relative_to(PACKAGE).as_posix()) not in exempt and (lines := _norm_constructions(path))
    }
    assert not built, f"norms built without parts.norms.make_norm: {built}"
