"""Each row's matched no-signal control (its --shuffled-releases run) and the window-novel column's resolution."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from largefedbench.leaderboard.board import Group, Row, gain_over_control, mark_controls
from largefedbench.leaderboard.columns import _control_text, columns_for, novel_separates


def _row(method: str, top1: list[float], *, seeds=(0, 1, 2), eps: float = 4.0, control: bool = False,
         config: dict | None = None, created: str = "2026-12-07T00:00:00Z", novel=None) -> Row:
    metrics = NS(next_token_accuracy=NS(top1=NS(per_seed=top1, mean=sum(top1) / len(top1),
                                                std=(max(top1) - min(top1)) / 2)), window_novel=novel)
    entry = NS(method=NS(name=method), seeds=list(seeds), created_at=created, metrics=metrics,
               config=NS(preset="cpu", method=config or {"rounds": 10}),
               diagnostic=NS(kind="shuffled-releases") if control else None,
               privacy=NS(epsilon=eps, target_epsilon=eps))
    return Row(entry, "diagnostic" if control else "ranked", f"entries/d/{method}/x.json", [])


def _group(*rows: Row) -> Group:
    return Group("congress", "s", "ab" * 32, ("2024-12-01", "2025-01-03"), "cpu", False, "generic", list(rows))


def test_a_row_is_paired_with_its_own_methods_shuffled_run_at_its_epsilon_and_settings():
    popri = _row("popri", [0.20, 0.21, 0.22])
    ctl = _row("popri", [0.18, 0.18, 0.21], control=True)
    older_ctl = _row("popri", [0.1] * 3, control=True, created="2026-11-01T00:00:00Z")
    other_eps = _row("popri", [0.1] * 3, control=True, eps=1.0, created="2026-12-08T00:00:00Z")
    other_cfg = _row("popri", [0.1] * 3, control=True, config={"rounds": 5}, created="2026-12-08T00:00:00Z")
    pe = _row("pe", [0.2] * 3)
    mark_controls(_group(popri, ctl, older_ctl, other_eps, other_cfg, pe))
    assert popri.control is ctl and pe.control is None and ctl.control is None
    mean, std, n = gain_over_control(popri)
    assert (mean, n) == (pytest.approx(0.06 / 3), 3) and std == pytest.approx(0.01)  # diffs 0.02, 0.03, 0.01
    assert _control_text(popri) == "+2.00 ± 1.00" and _control_text(pe) == "–"


def test_without_shared_seeds_the_means_are_compared_with_both_spreads():
    row, ctl = _row("pe", [0.2, 0.3], seeds=(0, 1)), _row("pe", [0.1, 0.1], seeds=(5, 6), control=True)
    mark_controls(_group(row, ctl))
    mean, std, n = gain_over_control(row)
    assert mean == pytest.approx(0.15) and std == pytest.approx(0.05) and n == 2


def _novel(top1: float, ci95: float | None = 0.01, reference: str | None = "generic"):
    return NS(top1=NS(mean=top1, std=0.0), ci95=ci95, reference=reference)


def test_the_novel_column_is_left_out_where_no_two_rows_differ_by_more_than_their_intervals():
    close = [_row("a", [0.2] * 3, novel=_novel(0.300)), _row("b", [0.2] * 3, novel=_novel(0.310))]
    apart = [_row("a", [0.2] * 3, novel=_novel(0.300)), _row("b", [0.2] * 3, novel=_novel(0.330))]
    stale = [_row("a", [0.2] * 3, novel=_novel(0.1, None, None)), _row("b", [0.2] * 3, novel=_novel(0.9, None, None))]
    assert not novel_separates(close) and novel_separates(apart) and not novel_separates(stale)
    assert "novel" not in [c.key for c in columns_for("ranked", close)]
    assert "novel" in [c.key for c in columns_for("ranked", apart)] and "novel" in [c.key for c in columns_for("ranked")]


def test_the_board_says_first_what_data_its_results_are_on():
    from largefedbench.leaderboard.board import Board

    real = _group(_row("popri", [0.2] * 3))
    demo = Group("demo", "demo-prose", "cd" * 32, ("2025-01-01", "2026-04-30"), "cpu", True, "generic", [])
    only_demo = Board([demo], 0)
    assert only_demo.data_statement().startswith("No results on real records yet")
    both = Board([real, demo], 0)
    assert both.data_statement().startswith("Results on real dated records: congress (2024-12-01 – 2025-01-03).")
    arxiv = Group("arxiv-qbio", "arxiv-qbio-x", "ab" * 32, ("2025-11-01", "2026-08-08"), "cpu", False, "generic", [])
    for text in (Board([arxiv], 0).data_statement(), arxiv.title):  # a stand-in says so wherever it appears
        assert "arxiv-qbio [arXiv q-bio abstracts: a stand-in in the genre of bioRxiv abstracts, not bioRxiv]" in text


def test_a_private_row_the_seeds_do_not_put_above_the_public_model_says_so():
    from largefedbench.leaderboard.board import REFERENCES
    from largefedbench.leaderboard.columns import no_gain_over_public

    def with_public(row: Row, public: list[float]) -> Row:
        row.entry.metrics.reference_public = NS(top1=NS(per_seed=public))
        row.entry.metrics.gap_closed = NS(mean=0.0, std=0.0)
        return row

    flat = with_public(_row("dp-fedavg", [0.1540, 0.1545, 0.1550]), [0.1530] * 3)  # within the 0.2-point floor
    ahead = with_public(_row("dp-ftrl", [0.132, 0.137, 0.137]), [0.119] * 3)
    public = with_public(_row("public", [0.119] * 3, eps=0.0), [0.119] * 3)
    public.bucket = REFERENCES
    assert no_gain_over_public(flat) and not no_gain_over_public(ahead) and not no_gain_over_public(public)
    gap = next(c for c in columns_for("ranked") if c.key == "gap")
    assert gap.text(flat).endswith("· no gain over ε=0") and "no gain" not in gap.text(ahead)
