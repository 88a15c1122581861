"""The import graph of the project's packages: no cycle, and the library stands alone.

Every import counts, at module level or inside a function (a deferred import still couples two
modules); only imports under `if TYPE_CHECKING:` are left out, since they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("corrector", "evaluate", "service")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every Import/ImportFrom node, not descending into `if TYPE_CHECKING:` blocks."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking_only(node):
            for child in node.orelse:
                yield from _imports(child)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node)


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports (`from package import module` names the module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            targets = [f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in modules else origin
                       for alias in node.names]
        found |= {t for t in targets if t.split(".")[0] in PACKAGES}
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, or a module importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in graph:
                continue
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_relative_and_function_level_imports():
    graph = import_graph()
    assert "corrector.pipeline" in graph["corrector.runtime.processes"]  # inside a function
    assert "corrector.runtime.models" in graph["corrector.pipeline"]  # relative, two levels
    assert "corrector.evaluation.sweep" in graph["corrector.finetune.calibrate"]


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_library_imports_neither_the_evaluator_nor_the_service():
    graph = import_graph()
    leaks = {name: sorted(t for t in targets if t.split(".")[0] in ("evaluate", "service"))
             for name, targets in graph.items() if name.split(".")[0] == "corrector"}
    assert {name: found for name, found in leaks.items() if found} == {}


def test_public_names_import_from_the_package_and_their_former_modules():
    from corrector import Corrector, CorrectorConfig, Edit, Result, pipeline
    from corrector import config as moved_config
    from corrector.confusion import ConfusionSet
    from corrector.models import load_model
    from corrector.processes import ProcessCorrector
    from corrector.resources.confusion import ConfusionSet as moved_confusion
    from corrector.runtime import workers as moved_workers
    from corrector.runtime.models import load_model as moved_load_model
    from corrector.runtime.processes import ProcessCorrector as moved_process_corrector

    assert (ConfusionSet, load_model, ProcessCorrector) == (moved_confusion, moved_load_model, moved_process_corrector)
    assert Corrector.__module__ == "corrector.pipeline" and pipeline.CorrectorConfig is CorrectorConfig
    for name in ("CorrectorConfig", "DEFAULT_MAX_EDITS", "MAX_PASSES", "scorer_with_overrides", "whitelist_terms"):
        assert getattr(pipeline, name) is getattr(moved_config, name)
    for name in ("MIN_SPLIT_ITEMS", "MIN_SPLIT_ITEMS_ONNX"):
        assert getattr(pipeline, name) == getattr(moved_workers, name)
    assert Result(source="a", target="a").edits == [] and Edit(0, "因", "应", 0.5).kind == "other"
