"""The one import of method authors: every name resolves, and the CONTRIBUTING plug-in needs nothing else."""

from __future__ import annotations

import ast

import largefedbench.api as api
from largefedbench.contract import Method


def test_every_exported_name_resolves():
    assert api.__all__ and all(getattr(api, name) is not None for name in api.__all__)
    assert api.Method is Method and {"RoundsLoop", "Gaussian", "PrivacyBudget", "ClientView"} <= set(api.__all__)


def test_the_example_plugin_imports_only_the_api(tmp_path):
    from largefedbench.run.scaffold import new_method

    module = new_method("my-method", tmp_path / "pkg") / "lfb_my_method" / "__init__.py"  # what `lfb new method` writes
    modules = {n.module for n in ast.walk(ast.parse(module.read_text())) if isinstance(n, ast.ImportFrom)}
    assert {m for m in modules if m and m.startswith("largefedbench")} == {"largefedbench.api"}


def test_every_contract_attribute_is_declared_on_method():
    for name in ("name", "paper", "output", "Config", "status", "fixed_epsilon", "needs_span_embeddings",
                 "audit_by_releases", "retired_settings", "version"):
        assert name in Method.__annotations__, f"Method does not declare {name}"


def test_the_api_imports_without_torch_until_a_torch_name_is_used():
    import subprocess
    import sys

    code = ("import sys, largefedbench.api as api; light = 'torch' not in sys.modules; api.Server; "
            "print(light, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True"]


def test_the_package_ships_its_type_marker():
    from pathlib import Path

    assert (Path(api.__file__).parent / "py.typed").is_file()
