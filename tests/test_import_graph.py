"""No import cycle inside the packages split by job (a module imports only modules below it)."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

import largefedbench

ROOT = Path(largefedbench.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: str) -> dict[str, set[str]]:
    """module -> the modules of ``package`` it imports, at the top or inside a function (lazy imports count too:
    a lazy import hides a cycle, it does not remove it). The package's own ``__init__`` is left out: it only
    re-exports."""
    folder = ROOT.parent.joinpath(*package.split("."))
    modules = {_module_name(p): p for p in folder.glob("*.py") if p.name != "__init__.py"}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from . import x / from .x import y
                    base = ".".join(name.split(".")[: -node.level] + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            deps |= {t for t in targets if t in modules and t != name}
        graph[name] = deps
    return graph


def test_the_graph_sees_top_level_and_lazy_imports():
    graph = import_graph("largefedbench.models")
    assert "largefedbench.models.hub" in graph["largefedbench.models.embedder"]
    assert "largefedbench.models.tiny" in graph["largefedbench.models.bundle"]
    assert "largefedbench.models.identity" in graph["largefedbench.models.gguf"]


def test_a_cycle_would_be_found():
    with pytest.raises(graphlib.CycleError):
        tuple(graphlib.TopologicalSorter({"a": {"b"}, "b": {"a"}}).static_order())


@pytest.mark.parametrize("package", ["largefedbench.models", "largefedbench.privacy"])
def test_no_import_cycle(package):
    graph = import_graph(package)
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as err:
        pytest.fail(f"import cycle in {package}: {' -> '.join(err.args[1])}; move what both need into a module "
                    "of its own that imports neither")
