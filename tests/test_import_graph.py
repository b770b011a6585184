"""No import cycle inside the packages split by job (a module imports only modules below it)."""

from __future__ import annotations

import ast
import graphlib
import re
from functools import cache
from pathlib import Path

import pytest

import largefedbench

ROOT = Path(largefedbench.__file__).parent
REPO = ROOT.parent
#: the folders installed into the library as its packages (pyproject.toml's package-dir)
INSTALLED_FOLDERS = {"largefedbench.methods": REPO / "methods", "largefedbench.scrapers": REPO / "scrapers"}


@cache
def library_modules() -> dict[str, Path]:
    """Every module of the library by its import name (a package by its ``__init__.py``): ``largefedbench/`` and
    the folders installed into it."""
    files: dict[str, Path] = {}
    for folder, package in [(ROOT, "largefedbench"), *((f, name) for name, f in INSTALLED_FOLDERS.items())]:
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            files[".".join([package, *(parts[:-1] if parts[-1] == "__init__" else parts)])] = path
    return files


def library_packages() -> list[str]:
    return sorted(name for name, path in library_modules().items() if path.name == "__init__.py")


@cache
def imported_modules(module: str) -> frozenset[str]:
    """The library modules ``module`` imports: at the top, inside a function or under ``TYPE_CHECKING`` (a lazy or
    type-only import hides a cycle, it does not remove it). ``from P import x`` is an arrow to the module ``P.x``
    when there is one (Python imports a submodule even while ``P`` is half-initialised), else to ``P`` itself."""
    modules, path = library_modules(), library_modules()[module]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    deps: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            deps |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x / from .x import y
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                deps.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return frozenset(d for d in deps if d in modules and d != module)


def import_graph(package: str) -> dict[str, set[str]]:
    """module -> the modules it imports, for every module of ``package`` and of the packages below it (their
    ``__init__`` included: a module that imports a name from its own package's ``__init__``, which imports that
    module, closes a cycle)."""
    inside = [m for m in library_modules() if m == package or m.startswith(package + ".")]
    return {m: {d for d in imported_modules(m) if d in inside} for m in inside}


def test_the_graph_sees_top_level_lazy_and_type_checking_imports():
    graph = import_graph("largefedbench.models")
    assert "largefedbench.models.hub" in graph["largefedbench.models.embedder"]
    assert "largefedbench.models.tiny" in graph["largefedbench.models.bundle"]
    assert "largefedbench.models.identity" in graph["largefedbench.models.gguf"]
    assert "largefedbench.run.request" in import_graph("largefedbench.run")["largefedbench.run.entry"]  # TYPE_CHECKING


def test_every_package_is_checked():
    assert {"largefedbench", "largefedbench.run", "largefedbench.methods", "largefedbench.methods.fedbiscuit",
            "largefedbench.scrapers"} <= set(library_packages())


def test_a_cycle_would_be_found():
    with pytest.raises(graphlib.CycleError):
        tuple(graphlib.TopologicalSorter({"a": {"b"}, "b": {"a"}}).static_order())


@pytest.mark.parametrize("package", library_packages())
def test_no_import_cycle(package):
    """No cycle among the modules of ``package`` and its subpackages (``largefedbench`` itself: the whole library)."""
    graph = import_graph(package)
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as err:
        pytest.fail(f"import cycle in {package}: {' -> '.join(err.args[1])}; move what both need into a module "
                    "of its own that imports neither")


# -- rooms and layers (docs/architecture.md) ----------------------------------------------------------------
ARCHITECTURE = REPO / "docs" / "architecture.md"

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
    modules = library_modules()
    rooms = {_room(m) for m in modules} - {None}
    graph: dict[str, set[str]] = {r: set() for r in rooms}
    for module in modules:
        room = _room(module)
        if room is not None:
            graph[room] |= {_room(d) for d in imported_modules(module)} - {room, None}
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


def test_no_module_grows_past_600_lines_without_saying_why():
    """Growth by files, not by length: a module over 600 lines must say in its docstring why it is one file."""
    long = {name: n for name, path in library_modules().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 600
            and "600 lines" not in (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "")}
    assert not long, f"modules over 600 lines whose docstring does not say why: {long}"
