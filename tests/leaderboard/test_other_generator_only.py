"""A gain over generator-only measured against other generator-only numbers than the group's entry is marked."""

from __future__ import annotations

from types import SimpleNamespace as NS

from largefedbench.leaderboard.board import Group, Row, mark_other_generator_only_rows
from largefedbench.leaderboard.columns import OTHER_GENERATOR_ONLY, _gain_text


def _row(method: str, seeds: list[int], top1: list[float], reference: list[float] | None = None,
         status: str = "ranked", created: str = "2026-11-27T10:00:00Z") -> Row:
    ref = None if reference is None else NS(top1=NS(per_seed=reference))
    gain = None if reference is None else NS(mean=sum(t - r for t, r in zip(top1, reference)) / len(top1), std=0.0)
    metrics = NS(next_token_accuracy=NS(top1=NS(per_seed=top1, mean=sum(top1) / len(top1))),
                 reference_generator_only=ref, gain_over_generator_only=gain)
    entry = NS(method=NS(name=method), seeds=seeds, created_at=created, metrics=metrics)
    return Row(entry, status, f"entries/demo/{method}/x.json", [])


def _group(*rows: Row) -> Group:
    return Group("demo", "demo-prose", "ab" * 32, ("2025-01-01", "2026-04-30"), "cpu", True, "generic", list(rows))


def test_a_gain_over_the_groups_generator_only_numbers_is_not_marked_and_one_over_other_numbers_is():
    board_row = _row("generator-only", [0, 1, 2], [0.151, 0.156, 0.154], status="ranked")
    same = _row("popri", [0, 1, 2], [0.16, 0.16, 0.16], reference=[0.151, 0.156, 0.154])
    other = _row("pe", [0, 1, 2], [0.153, 0.153, 0.153], reference=[0.1551, 0.1576, 0.1534])
    subset = _row("pe-sft", [1], [0.16], reference=[0.156])  # one seed of the group's row: the same numbers
    mark_other_generator_only_rows(_group(board_row, same, other, subset))
    assert not same.other_generator_only and not subset.other_generator_only and not board_row.other_generator_only
    assert other.other_generator_only
    assert _gain_text(other).endswith(OTHER_GENERATOR_ONLY) and OTHER_GENERATOR_ONLY not in _gain_text(same)


def test_the_groups_row_is_its_generator_only_entry_with_the_most_seeds_then_the_newest():
    old = _row("generator-only", [0, 1, 2], [0.155, 0.158, 0.153], created="2026-11-26T18:00:00Z")
    new = _row("generator-only", [0, 1, 2], [0.151, 0.156, 0.154], created="2026-11-27T18:00:00Z")
    one_seed = _row("generator-only", [0], [0.2], status="unranked", created="2026-11-28T18:00:00Z")
    current = _row("dp-resample", [0, 1, 2], [0.2, 0.2, 0.2], reference=[0.151, 0.156, 0.154])
    stale = _row("popri", [0, 1, 2], [0.16, 0.16, 0.16], reference=[0.155, 0.158, 0.153])
    mark_other_generator_only_rows(_group(old, new, one_seed, current, stale))
    assert not current.other_generator_only and stale.other_generator_only


def test_without_a_generator_only_entry_nothing_is_marked():
    row = _row("popri", [0, 1, 2], [0.16, 0.16, 0.16], reference=[0.15, 0.15, 0.15])
    mark_other_generator_only_rows(_group(row))
    assert not row.other_generator_only
