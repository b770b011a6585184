"""Gains over generator-only measured against other generator-only numbers than most of the group's are marked."""

from __future__ import annotations

from types import SimpleNamespace as NS

from largefedbench.leaderboard.board import Group, Row, mark_other_generator_only_rows
from largefedbench.leaderboard.columns import OTHER_GENERATOR_ONLY, _gain_text

OLD, NEW = [0.1551, 0.1576, 0.1534], [0.1510, 0.1556, 0.1537]  # generator-only before and after a sampler change


def _row(method: str, seeds: list[int], top1: list[float], reference: list[float] | None = None, *,
         created: str, preset: str = "cpu", overrides: dict | None = None) -> Row:
    ref = None if reference is None else NS(top1=NS(per_seed=reference))
    gain = None if reference is None else NS(mean=sum(t - r for t, r in zip(top1, reference)) / len(top1), std=0.0)
    metrics = NS(next_token_accuracy=NS(top1=NS(per_seed=top1, mean=sum(top1) / len(top1))),
                 reference_generator_only=ref, gain_over_generator_only=gain)
    entry = NS(method=NS(name=method), seeds=seeds, created_at=created, metrics=metrics,
               config=NS(preset=preset, overrides=overrides or {}))
    return Row(entry, "ranked", f"entries/demo/{method}/x.json", [])


def _group(*rows: Row) -> Group:
    return Group("demo", "demo-prose", "ab" * 32, ("2025-01-01", "2026-04-30"), "cpu", True, "generic", list(rows))


def test_rows_over_an_older_generator_only_row_are_marked_and_the_stale_generator_only_entry_too():
    entry = _row("generator-only", [0, 1, 2], OLD, created="2026-11-26T18:27:00Z")
    popri = _row("popri", [0, 1, 2], [0.16] * 3, reference=OLD, created="2026-11-27T01:09:00Z")
    newer = [_row(m, [0, 1, 2], [0.2] * 3, reference=NEW, created=f"2026-11-27T1{i}:19:00Z")
             for i, m in enumerate(("dp-resample", "pe", "ctcl"))]
    one_seed = _row("pe-sft", [1], [0.16], reference=NEW[1:2], created="2026-11-27T09:00:00Z")  # agrees on its seed
    mark_other_generator_only_rows(_group(entry, popri, *newer, one_seed))
    assert entry.other_generator_only and popri.other_generator_only
    assert not any(r.other_generator_only for r in newer) and not one_seed.other_generator_only
    assert _gain_text(popri).endswith(OTHER_GENERATOR_ONLY) and _gain_text(entry) == f"– {OTHER_GENERATOR_ONLY}"
    assert OTHER_GENERATOR_ONLY not in _gain_text(newer[0])


def test_the_newest_entry_is_marked_when_it_is_the_outlier():
    """One new entry from another CPU does not mark the whole group: the majority's numbers are the group's."""
    older = [_row(m, [0, 1, 2], [0.16] * 3, reference=OLD, created=f"2026-11-2{i}T00:00:00Z")
             for i, m in enumerate(("popri", "pe", "pe-sft"))]
    outlier = _row("fedbiscuit", [0, 1, 2], [0.17] * 3, reference=NEW, created="2026-12-01T00:00:00Z")
    mark_other_generator_only_rows(_group(*older, outlier))
    assert outlier.other_generator_only and not any(r.other_generator_only for r in older)


def test_other_presets_and_a_generator_only_entry_with_overrides_are_not_compared():
    newest = _row("popri", [0, 1, 2], [0.16] * 3, reference=NEW, created="2026-11-27T11:00:00Z")
    tiny = _row("popri", [0, 1, 2], [0.3] * 3, reference=[0.2, 0.2, 0.2], preset="tiny", created="2026-11-26T00:00:00Z")
    swept = _row("generator-only", [0], [0.17], created="2026-11-28T00:00:00Z", overrides={"n_final": "64"})
    mark_other_generator_only_rows(_group(newest, tiny, swept))
    assert not any(r.other_generator_only for r in (newest, tiny, swept))


def test_rows_without_a_shared_seed_or_without_generator_only_numbers_are_not_marked():
    newest = _row("popri", [0, 1, 2], [0.16] * 3, reference=NEW, created="2026-11-27T11:00:00Z")
    disjoint = _row("pe", [3, 4], [0.15] * 2, reference=[0.1, 0.1], created="2026-11-26T00:00:00Z")
    dp_fl = _row("dp-fedavg", [0, 1, 2], [0.17] * 3, created="2026-11-20T00:00:00Z")
    mark_other_generator_only_rows(_group(newest, disjoint, dp_fl))
    assert not any(r.other_generator_only for r in (newest, disjoint, dp_fl))
