"""The one import of method authors: every name resolves, and the CONTRIBUTING plug-in needs nothing else."""

from __future__ import annotations

import ast
from pathlib import Path

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
