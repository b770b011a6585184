"""Consistency checks of an entry's numbers: per-seed lists, means, spreads and gap closed are recomputed."""

from __future__ import annotations

import math
import statistics

from largefedbench.leaderboard.findings import Finding, error
from largefedbench.leaderboard.schema import SYNTHETIC_TEXT_STATS, Entry

#: derived numbers (means, standard deviations, gap closed) must equal their recomputation within this
METRIC_ATOL = 1e-6
_FIX = "Entries are written by `lfb eval`; do not edit numbers by hand, re-run the evaluation"


def _stats(entry: Entry) -> dict[str, object]:
    m = entry.metrics
    stats: dict[str, object] = {}
    for section in ("next_token_accuracy", "reference_public", "reference_non_private"):
        for k in ("top1", "top3", "top5"):
            stats[f"metrics.{section}.{k}"] = getattr(getattr(m, section), k)
    stats["metrics.validation_top1"] = m.validation_top1
    stats["metrics.gap_closed"] = m.gap_closed
    for name in ("fid", "gain_over_generator_only", "gap_closed_over_generator_only", *SYNTHETIC_TEXT_STATS):
        if getattr(m, name) is not None:
            stats[f"metrics.{name}"] = getattr(m, name)
    if m.reference_generator_only is not None:
        for k in ("top1", "top3", "top5"):
            stats[f"metrics.reference_generator_only.{k}"] = getattr(m.reference_generator_only, k)
    w = m.window_novel
    if w is not None:
        for name in ("top1", "reference_non_private", "reference_generator_only", "gap_closed"):
            if getattr(w, name) is not None:
                stats[f"metrics.window_novel.{name}"] = getattr(w, name)
    return stats


def _sample_std(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def check_metrics(entry: Entry) -> list[Finding]:
    """Lengths = seeds, mean/std = recomputed, top-1 ≤ top-3 ≤ top-5, gap closed recomputed, FID present iff text."""
    out: list[Finding] = []
    n = len(entry.seeds)
    if len(set(entry.seeds)) != n:
        out.append(error("seeds", "seeds", f"repeats a seed: {entry.seeds}", "Each seed is one independent run; "
                         "list each once"))
    consistent = True
    for name, stat in _stats(entry).items():
        values = list(stat.per_seed)
        if len(values) != n:
            consistent = False
            out.append(error("metrics-consistency", f"{name}.per_seed", f"{len(values)} values for {n} seeds "
                             f"{entry.seeds}", _FIX))
            continue
        mean = math.fsum(values) / n
        if abs(stat.mean - mean) > METRIC_ATOL:
            out.append(error("metrics-consistency", f"{name}.mean", f"is {stat.mean:.9g} but the mean of per_seed "
                             f"is {mean:.9g} (tolerance {METRIC_ATOL:g})", _FIX))
        std = _sample_std(values)
        if abs(stat.std - std) > METRIC_ATOL:
            out.append(error("metrics-consistency", f"{name}.std", f"is {stat.std:.9g} but the sample standard "
                             f"deviation of per_seed is {std:.9g} (tolerance {METRIC_ATOL:g})", _FIX))
    m = entry.metrics
    for section in ("next_token_accuracy", "reference_public", "reference_non_private"):
        acc = getattr(m, section)
        if not acc.top1.mean <= acc.top3.mean + METRIC_ATOL <= acc.top5.mean + 2 * METRIC_ATOL:
            out.append(error("metrics-consistency", f"metrics.{section}",
                             f"top-1 {acc.top1.mean:.4f}, top-3 {acc.top3.mean:.4f}, top-5 {acc.top5.mean:.4f}: a "
                             "top-k accuracy cannot fall as k grows", _FIX))
    if m.fid is not None and any(v < 0 for v in m.fid.per_seed + [m.fid.mean]):
        out.append(error("metrics-range", "metrics.fid", "FID is a squared distance and cannot be negative", _FIX))
    for name, low, high in (("unigram_jsd", 0.0, 1.0), ("pairwise_cosine", -1.0, 1.0)):
        stat = getattr(m, name)
        if stat is not None and any(not low - METRIC_ATOL <= v <= high + METRIC_ATOL for v in stat.per_seed):
            out.append(error("metrics-range", f"metrics.{name}", f"lies outside [{low:g}, {high:g}]", _FIX))
    if entry.method.output == "synthetic text" and m.fid is None:
        out.append(error("metrics-consistency", "metrics.fid", "a synthetic-text method's entry has no FID",
                         _FIX))
    if consistent:
        out.extend(_check_gap(entry))
    return out


def _check_gap(entry: Entry) -> list[Finding]:
    m, out = entry.metrics, []
    for i, (acc, acc0, acc_inf, gap) in enumerate(zip(m.next_token_accuracy.top1.per_seed,
                                                       m.reference_public.top1.per_seed,
                                                       m.reference_non_private.top1.per_seed, m.gap_closed.per_seed)):
        if acc_inf == acc0:
            out.append(error("gap-closed", f"metrics.reference_non_private.top1.per_seed[{i}]",
                             "equals the ε = 0 reference, so gap closed is undefined", _FIX))
            continue
        expected = (acc - acc0) / (acc_inf - acc0)
        if abs(gap - expected) > METRIC_ATOL:
            out.append(error("gap-closed", f"metrics.gap_closed.per_seed[{i}]",
                             f"is {gap:.9g} but (acc − acc₀)/(acc∞ − acc₀) from the entry's top-1 accuracies is "
                             f"{expected:.9g} (tolerance {METRIC_ATOL:g})", _FIX))
    gen = m.reference_generator_only
    if gen is not None and m.gain_over_generator_only is not None:
        for i, (acc, g, gain) in enumerate(zip(m.next_token_accuracy.top1.per_seed, gen.top1.per_seed,
                                               m.gain_over_generator_only.per_seed)):
            if abs(gain - (acc - g)) > METRIC_ATOL:
                out.append(error("gap-closed", f"metrics.gain_over_generator_only.per_seed[{i}]",
                                 f"is {gain:.9g} but top-1 minus the generator-only row's is {acc - g:.9g}", _FIX))
    return out
