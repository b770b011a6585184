"""Rows of one method in several configurations within a group name the settings that differ (e.g. a preset that
changed a method's settings leaves both configurations on the board)."""

from __future__ import annotations

from types import SimpleNamespace as NS

from largefedbench.leaderboard.board import VARIANT_KEYS, Group, Row, mark_variants
from largefedbench.leaderboard.columns import COLUMNS


def _row(method: str, config: dict, preset: str = "cpu") -> Row:
    entry = NS(method=NS(name=method, version="0.3.0", source="built-in"), config=NS(method=config, preset=preset),
               declared=None)
    return Row(entry, "ranked", f"entries/demo/{method}/x.json", [])


def _group(*rows: Row) -> Group:
    return Group("demo", "demo-prose", "ab" * 32, ("2025-01-01", "2026-04-30"), "cpu", True, "generic", list(rows))


def test_only_the_differing_settings_of_a_method_run_twice_are_named():
    base = {"rounds": 3, "prompt_format": "continuation", "prefix_words": 12}
    old, new = _row("pe", base), _row("pe", {**base, "prompt_format": "few-shot"})
    same_a, same_b = _row("popri", {"rounds": 3}), _row("popri", {"rounds": 3})
    alone = _row("dp-fedavg", {"clip": 0.1})
    mark_variants(_group(old, new, same_a, same_b, alone))
    assert (old.variant, new.variant) == ("prompt_format=continuation", "prompt_format=few-shot")
    assert old.label == "pe [prompt_format=continuation]" and new.label != old.label
    assert same_a.variant == same_b.variant == alone.variant == "" and same_a.label == "popri"
    method = next(c for c in COLUMNS if c.key == "method")
    assert method.text(new) == "pe 0.3.0 [prompt_format=few-shot]" and method.text(alone) == "dp-fedavg 0.3.0"


def test_a_row_at_matched_compute_says_so_beside_its_full_row():
    from largefedbench.registry import get_method
    from largefedbench.run.presets import preset_config

    cls = get_method("dp-resample")
    full = _row("dp-resample", vars(preset_config(cls, "cpu")))
    matched = _row("dp-resample", vars(preset_config(cls, "matched")), preset="matched")
    mark_variants(_group(full, matched))
    assert matched.variant.startswith("matched compute, epochs=0.5") and "matched" not in full.variant
    assert full.variant.startswith("epochs=2.0")
    import pytest

    from largefedbench.errors import InputError

    with pytest.raises(InputError, match="'popri' has no matched preset"):
        preset_config(get_method("popri"), "matched")


def test_a_setting_only_one_row_has_counts_as_differing_and_long_lists_are_cut():
    a = _row("ctcl", {f"k{i}": 0 for i in range(VARIANT_KEYS + 2)})
    b = _row("ctcl", {f"k{i}": 1 for i in range(VARIANT_KEYS + 2)} | {"extra": True})
    mark_variants(_group(a, b))
    assert b.variant.startswith("extra=True, k0=1") and b.variant.endswith(", …")
    assert a.variant.startswith("extra=None") and a.variant.count("=") == VARIANT_KEYS


def test_a_plug_in_row_that_did_not_run_in_the_namespaces_sandbox_is_marked():
    from largefedbench.leaderboard.columns import UNSANDBOXED, unsandboxed

    def row(source: str, sandbox: str | None) -> Row:
        entry = NS(method=NS(name="m", version="1", source=source), config=NS(method={}), declared=None,
                   environment=NS(sandbox=sandbox))
        return Row(entry, "ranked", "entries/demo/m/x.json", [])

    method = next(c for c in COLUMNS if c.key == "method")
    assert unsandboxed(row("lfb_example_method", "process")) and unsandboxed(row("lfb_example_method", None))
    assert method.text(row("lfb_example_method", "none")).endswith(UNSANDBOXED)
    assert not unsandboxed(row("lfb_example_method", "namespaces")) and not unsandboxed(row("built-in", "none"))
