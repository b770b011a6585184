"""The reference rows' cache key carries the fingerprint of the code that computes them."""

from __future__ import annotations

import sys

import pytest

from largefedbench.run import reference_code
from largefedbench.run.reference_code import _sources, reference_code_fingerprint


def test_the_generator_only_fingerprint_covers_the_sampler_and_the_others_the_downstream_training():
    names = {name: {p.name for m in reference_code.reference_modules(name) for p in _sources(m)[1]}
             for name in ("public", "non-private", "generator-only")}
    harness = {"evaluator.py", "seed.py"}  # the evaluator, and run_seed, which stores a reference method's own rows
    assert {"generation.py", "prompts.py", "downstream.py", "generator_only.py", *harness} <= names["generator-only"]
    assert {"downstream.py", "references.py", "contract.py", *harness} <= names["non-private"] == names["public"]
    assert "generation.py" not in names["public"]  # a sampler change does not recompute the rows that sample nothing
    fps = {name: reference_code_fingerprint(name) for name in names}
    assert all(len(fp) == 16 for fp in fps.values()) and fps["generator-only"] != fps["public"]


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    pkg = tmp_path / "lfb_fake_ref_pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "sampler.py").write_text("TEMPERATURE = 0.8\n")
    (tmp_path / "lfb_fake_ref_mod.py").write_text("ROWS = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(reference_code, "BASE_MODULES", ("lfb_fake_ref_pkg", "lfb_fake_ref_mod"))
    reference_code_fingerprint.cache_clear()
    yield pkg
    reference_code_fingerprint.cache_clear()
    for name in [m for m in sys.modules if m.startswith("lfb_fake_ref")]:
        del sys.modules[name]


def test_a_change_to_any_source_file_changes_the_fingerprint(fake_package):
    before = reference_code_fingerprint("public")
    reference_code_fingerprint.cache_clear()
    assert reference_code_fingerprint("public") == before  # the same files: the same key
    (fake_package / "sub" / "sampler.py").write_text("TEMPERATURE = 1.0\n")  # a module deep in the package
    reference_code_fingerprint.cache_clear()
    changed = reference_code_fingerprint("public")
    assert changed != before
    (fake_package.parent / "lfb_fake_ref_mod.py").write_text("ROWS = 4\n")  # a single module
    reference_code_fingerprint.cache_clear()
    assert reference_code_fingerprint("public") not in (before, changed)


def test_a_module_that_cannot_be_found_is_an_error_not_an_empty_key(monkeypatch):
    monkeypatch.setattr(reference_code, "BASE_MODULES", ("lfb_no_such_module_anywhere",))
    reference_code_fingerprint.cache_clear()
    try:
        with pytest.raises(ImportError, match="lfb_no_such_module_anywhere"):
            reference_code_fingerprint("public")
    finally:
        reference_code_fingerprint.cache_clear()
