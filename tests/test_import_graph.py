"""No import cycle inside the packages split by job (a module imports only modules below it)."""

from __future__ import annotations

import ast
import graphlib
import re
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


# -- rooms and layers (docs/architecture.md) ----------------------------------------------------------------
REPO = ROOT.parent
ARCHITECTURE = REPO / "docs" / "architecture.md"
#: where each room's code lives: the library's folders and modules, and the two folders installed into it
ROOM_FOLDERS = {"methods": REPO / "methods", "scrapers": REPO / "scrapers"}

#: Arrows that run up, each with why (docs/architecture.md lists the same): none today. A new one fails; one that is
#: allowed for a stated reason goes here and in the docs, and leaves both when it is fixed.
KNOWN_UP: dict[tuple[str, str], str] = {}
#: Arrows inside one layer that close a cycle (the same list in docs/architecture.md): none today.
KNOWN_BACK: dict[tuple[str, str], str] = {}


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "largefedbench" and len(parts) > 1 else None


def room_graph() -> dict[str, set[str]]:
    """room -> the rooms it imports (a room: a folder of largefedbench or a top-level module; lazy imports and
    imports under TYPE_CHECKING count)."""
    files: dict[str, Path] = {}
    for folder, package in [(ROOT, "largefedbench"), *((f, f"largefedbench.{name}") for name, f in ROOM_FOLDERS.items())]:
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            module = ".".join([package, *(parts[:-1] if parts[-1] == "__init__" else parts)])
            files[module] = path
    rooms = {_room(m) for m in files} - {None}
    graph: dict[str, set[str]] = {r: set() for r in rooms}
    for module, path in files.items():
        room = _room(module)
        if room is None:
            continue
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                targets = [base]
            else:
                continue
            graph[room] |= {_room(t) for t in targets if _room(t) in rooms and _room(t) != room}
    return graph


def layers() -> dict[str, int]:
    """room -> its layer, read from the table of docs/architecture.md."""
    out: dict[str, int] = {}
    for line in ARCHITECTURE.read_text().splitlines():
        row = re.match(r"\| (\d+) \| (.+?) \|", line)
        if row:
            out |= {name: int(row.group(1)) for name in re.findall(r"`(\w+)`", row.group(2))}
    return out


def test_every_room_has_a_layer_in_docs_architecture():
    graph, layer = room_graph(), layers()
    assert {"data", "privacy", "federation", "methods", "cli"} <= set(graph)
    missing, stale = set(graph) - set(layer), set(layer) - set(graph)
    assert not missing, f"rooms with no layer: {sorted(missing)}; add them to the table of docs/architecture.md"
    assert not stale, f"docs/architecture.md names rooms that do not exist: {sorted(stale)}"


def test_imports_run_down_the_layers_except_the_known_arrows():
    graph, layer = room_graph(), layers()
    up = {(a, b) for a, deps in graph.items() for b in deps if layer[b] > layer[a]}
    assert not up - set(KNOWN_UP), (f"new imports running up the layers: {sorted(up - set(KNOWN_UP))}; move the "
                                    "imported code down (docs/architecture.md)")
    assert not set(KNOWN_UP) - up, (f"fixed: {sorted(set(KNOWN_UP) - up)} no longer run up; remove them from KNOWN_UP "
                                    "and from docs/architecture.md")
    back = {(a, b) for a, b in KNOWN_BACK if b in graph[a]}
    assert back == set(KNOWN_BACK), (f"fixed: {sorted(set(KNOWN_BACK) - back)}; remove them from KNOWN_BACK and from "
                                     "docs/architecture.md")
    rest = {a: {b for b in deps if (a, b) not in KNOWN_UP and (a, b) not in KNOWN_BACK} for a, deps in graph.items()}
    try:
        tuple(graphlib.TopologicalSorter(rest).static_order())
    except graphlib.CycleError as err:
        pytest.fail(f"import cycle between rooms: {' -> '.join(err.args[1])}; move what both need into a lower room")


def test_docs_architecture_names_every_known_arrow():
    text = ARCHITECTURE.read_text()
    for a, b in [*KNOWN_UP, *KNOWN_BACK]:
        assert f"`{a} → {b}`" in text, f"docs/architecture.md does not list the known arrow {a} → {b}"
