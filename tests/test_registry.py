"""The method registry (largefedbench/registry.py) with dummy methods: built-in names, file and module references,
entry-point plug-ins, and the contract check that refuses a broken class when it is resolved, before any work."""

from __future__ import annotations

import inspect
import json
import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import echo_method
import pytest

from largefedbench import registry
from largefedbench.contract import Method
from largefedbench.errors import MethodError
from largefedbench.registry import (
    BUILTIN_METHODS,
    ENTRY_POINT_GROUP,
    get_method,
    list_methods,
    method_names,
    resolve_method,
)
from largefedbench.run.eval import EvalRequest, prepare

PLUGINS = "lfb_test_dummy_methods"

# the plug-in module: Echo (tests/echo_method.py) and, after it, the classes the contract check refuses
SOURCE = inspect.getsource(echo_method) + textwrap.dedent('''


    class NotAMethod:
        """Everything a method has except the base class: the plug-in that used to fail only after training."""

        name = "not-a-method"
        paper = "none (test double)"
        output = "synthetic text"
        Config = EchoConfig

        def train(self, fed, public, cfg, budget):
            return Artifact.synthetic(["x"])


    class NoTrain(Method):
        name = "no-train"
        paper = ""
        output = "model"
        Config = EchoConfig


    class LooseConfig(Method):
        name = "loose"
        paper = ""
        output = "pictures"

        class Config:
            pass

        def train(self, fed, public, cfg, budget):
            return None


    class NoTinyConfig(Method):
        name = "no-tiny"
        paper = ""
        output = "model"

        @dataclass
        class Config:
            n: int = 1

        def train(self, fed, public, cfg, budget):
            return None


    not_a_class = 3
''')


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """A module of dummy methods, importable as PLUGINS; returns its file."""
    path = tmp_path / f"{PLUGINS}.py"
    path.write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, PLUGINS, raising=False)
    yield path
    sys.modules.pop(PLUGINS, None)


@pytest.fixture
def entry_point_plugins(plugins, monkeypatch):
    """Three plug-ins registered through the entry-point group: a good one, a non-Method class and one that tries
    to take over a built-in name."""
    found = [EntryPoint("echo", f"{PLUGINS}:Echo", ENTRY_POINT_GROUP),
             EntryPoint("not-a-method", f"{PLUGINS}:NotAMethod", ENTRY_POINT_GROUP),
             EntryPoint("dp-fedavg", f"{PLUGINS}:Echo", ENTRY_POINT_GROUP)]
    monkeypatch.setattr(registry, "entry_points", lambda group: found if group == ENTRY_POINT_GROUP else [])
    return found


def test_builtins_resolve_lazily_to_method_subclasses():
    assert method_names()[: len(BUILTIN_METHODS)] == list(BUILTIN_METHODS)
    cls = get_method("public")
    assert issubclass(cls, Method) and cls.name == "public" and cls.fixed_epsilon == 0


def test_unknown_name_lists_the_known_ones_and_suggests_the_closest():
    with pytest.raises(MethodError) as info:
        get_method("dp-fedavgg")
    message = str(info.value)
    assert "did you mean 'dp-fedavg'" in message.lower() and "popri" in message and ENTRY_POINT_GROUP in message


def test_a_method_in_a_file_or_module_resolves_by_reference(plugins):
    by_file = get_method(f"{plugins}:Echo")
    assert by_file.name == "echo" and by_file.Config.tiny().n == 2
    by_module = get_method(f"{PLUGINS}:Echo")
    assert by_module.name == "echo" and issubclass(by_module, Method)


def test_a_plugin_that_does_not_subclass_method_is_refused_up_front_saying_what_it_lacks(plugins):
    with pytest.raises(MethodError) as info:
        get_method(f"{PLUGINS}:NotAMethod")
    message = str(info.value)
    assert "does not subclass largefedbench.contract.Method" in message
    assert "lacks status, fixed_epsilon, needs_span_embeddings" in message  # what the harness would read
    assert "class MyMethod(Method)" in message  # what to do


def test_lfb_eval_refuses_a_non_method_plugin_before_any_work(plugins, tmp_path):
    with pytest.raises(MethodError, match="does not subclass largefedbench.contract.Method"):
        prepare(EvalRequest(method=f"{plugins}:NotAMethod", dataset="no-such-snapshot", out=tmp_path / "board"))
    assert not (tmp_path / "board").exists()


@pytest.mark.parametrize("target, problems", [
    ("NoTrain", ["train(self, fed, public, cfg, budget) is not implemented"]),
    ("LooseConfig", ["Config must be a dataclass", "output must be one of ('synthetic text', 'model'), got 'pictures'"]),
    ("NoTinyConfig", ["Config.tiny() (a configuration for CPU tests) is missing"]),
    ("not_a_class", ["is not a class"]),
])
def test_a_class_breaking_the_contract_is_refused_with_every_problem(plugins, target, problems):
    with pytest.raises(MethodError) as info:
        get_method(f"{PLUGINS}:{target}")
    for problem in problems:
        assert problem in str(info.value)


def test_bad_references_say_what_to_give(plugins, tmp_path):
    with pytest.raises(MethodError, match="no method file"):
        get_method(f"{tmp_path / 'missing.py'}:Echo")
    with pytest.raises(MethodError, match="no module 'lfb_no_such_module'"):
        get_method("lfb_no_such_module:Echo")
    with pytest.raises(MethodError, match=f"module '{PLUGINS}' has no attribute 'Missing'"):
        get_method(f"{PLUGINS}:Missing")
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(MethodError, match="failed to load: RuntimeError: boom"):
        get_method(f"{broken}:Echo")
    (tmp_path / "lfb_needs_a_package.py").write_text("import lfb_not_installed_dependency\n")  # on sys.path
    with pytest.raises(MethodError, match="cannot be imported: No module named 'lfb_not_installed_dependency'. Install"):
        get_method("lfb_needs_a_package:Echo")


def test_entry_point_plugins_are_listed_and_a_broken_one_hides_nothing(entry_point_plugins):
    assert get_method("echo").name == "echo"
    assert get_method("dp-fedavg").__name__ == "DPFedAvg"  # a plug-in cannot take over a built-in name
    rows = {row.name: row for row in list_methods()}
    assert rows["echo"].status == "runnable" and rows["echo"].output == "synthetic text"
    assert rows["echo"].source == "entry point" and rows["echo"].target == f"{PLUGINS}:Echo"
    assert rows["not-a-method"].status == "broken"
    assert "does not subclass largefedbench.contract.Method" in rows["not-a-method"].error
    assert all(rows[name].status == "runnable" for name in BUILTIN_METHODS)


def test_resolving_gives_the_class_its_source_and_its_version_together(entry_point_plugins):
    from largefedbench import __version__
    from largefedbench.registry import ResolvedMethod, resolve_method

    builtin = resolve_method("dp-fedavg")
    assert builtin == ResolvedMethod(get_method("dp-fedavg"), "built-in", __version__)
    assert builtin.name == "dp-fedavg" and builtin.target == BUILTIN_METHODS["dp-fedavg"]
    plugin = resolve_method("echo")  # an entry-point plug-in: the module that defines it, its package's version
    assert (plugin.cls.name, plugin.source, plugin.version) == ("echo", PLUGINS, "unversioned")
    assert plugin.target == f"{PLUGINS}:Echo"
    sys.modules[PLUGINS].Echo.version = "0.3"  # a class that states its version when no distribution does
    assert resolve_method(f"{PLUGINS}:Echo").version == "0.3"
    by_module = resolve_method("largefedbench.methods.references:PublicReference")  # a built-in class, by reference
    assert by_module.source == "largefedbench.methods.references" and by_module.version == __version__


def test_every_committed_entry_of_a_built_in_names_the_class_it_resolves_to_today():
    """An entry's id hashes its ``method.target`` (``module:Class``), so a built-in class keeps the target its
    committed entries record wherever its code moves (FedBis and FedBiscuit, defined in a module of their package,
    name the package)."""
    board = Path(__file__).resolve().parents[1] / "leaderboard" / "entries"
    recorded: dict[str, set[str]] = {}
    for path in board.glob("*/*/*.json"):
        if not path.name.endswith(".reproduced.json"):
            method = json.loads(path.read_text())["method"]
            if method.get("source") == "built-in":
                recorded.setdefault(method["name"], set()).add(method["target"])
    assert {"fedbis", "fedbiscuit"} <= set(recorded)
    for name, targets in sorted(recorded.items()):
        assert targets == {resolve_method(name).target}, f"{name}: entries record {targets}"
    assert resolve_method("fedbis").target == "largefedbench.methods.fedbiscuit:FedBis"
    assert resolve_method("fedbiscuit").target == "largefedbench.methods.fedbiscuit:FedBiscuit"


def test_lfb_methods_lists_plugins_as_their_sandbox_describes_them(entry_point_plugins, monkeypatch, capsys):
    """`lfb methods` imports the built-ins only: a plug-in's row comes from its own sandboxed process (an import here
    would have raised), a broken one still says why."""
    import json

    from largefedbench.cli import main

    builtin_only = registry.get_method

    def no_plugins(name):
        if name not in BUILTIN_METHODS:
            raise AssertionError(f"the CLI imported the plug-in {name}")
        return builtin_only(name)

    monkeypatch.setattr(registry, "get_method", no_plugins)
    assert main(["methods", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["echo"]["status"] == "runnable" and rows["echo"]["output"] == "synthetic text"
    assert rows["not-a-method"]["status"] == "broken" and "imported the plug-in" not in rows["not-a-method"]["error"]
    assert all(rows[name]["status"] == "runnable" for name in BUILTIN_METHODS)
