"""Ranks the seeds support: rows that a test over their seeds cannot tell apart share a rank, shown as a range.

Row A is *significantly better* than row B when both hold:

* the difference of their mean top-1 exceeds :data:`FLOOR` (0.2 points), the per-seed difference that running the
  same seed on another CPU (or thread count) gives, which no number of seeds averages away; and
* where both rows have at least two seeds, Welch's two-sided :data:`LEVEL` (95 %) t-interval of that difference,
  from the rows' per-seed top-1, lies above 0. A row with one seed has no spread to test, so only the floor decides.

Within an ε bucket a row's rank runs from 1 + the number of rows significantly better than it to the number of rows
not significantly worse than it (itself included): "2–4" says the seeds put the row second to fourth. Rows keep
their order by mean top-1. `lfb leaderboard reproduce` judges a re-run against the same floor and the entry's own
seed spread (:func:`spread_tolerance`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

#: two-sided confidence level of the Welch interval
LEVEL = 0.95
#: accuracy (a fraction: 0.002 = 0.2 points of top-1) that the machine alone moves a seed by; never ordered within
FLOOR = 0.002
#: a re-run of a seed may land within this many of the entry's per-seed sample standard deviations (or FLOOR)
SPREAD_SDS = 2.0


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_quantile(p: float, df: float) -> float:
    """The p-quantile (p ≥ 0.5) of Student's t with ``df`` (> 0, not necessarily whole) degrees of freedom."""
    def upper_tail(t: float) -> float:  # P(T > t), t ≥ 0
        return 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))

    lo, hi = 0.0, 1.0
    while upper_tail(hi) > 1.0 - p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if upper_tail(mid) > 1.0 - p else (lo, mid)
    return (lo + hi) / 2.0


def welch_interval(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> tuple[float, float] | None:
    """Welch's two-sided ``level`` interval of mean(a) − mean(b); None when a row has fewer than two values."""
    if len(a) < 2 or len(b) < 2:
        return None
    d = statistics.fmean(a) - statistics.fmean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    if se == 0.0:
        return d, d
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = t_quantile(1.0 - (1.0 - level) / 2.0, df) * se
    return d - half, d + half


def significantly_better(a: Sequence[float], b: Sequence[float], *, level: float = LEVEL, floor: float = FLOOR) -> bool:
    """Whether per-seed values ``a`` are significantly better than ``b`` (the rule of the module docstring)."""
    if statistics.fmean(a) - statistics.fmean(b) <= floor:
        return False
    interval = welch_interval(a, b, level)
    return interval is None or interval[0] > 0.0


def rank_ranges(rows: Sequence[Sequence[float]], *, level: float = LEVEL,
                floor: float = FLOOR) -> list[tuple[int, int]]:
    """(first, last) rank of each row of per-seed values: 1 + the rows significantly better, the rows not
    significantly worse (itself included)."""
    n = len(rows)
    better = [[significantly_better(x, y, level=level, floor=floor) for y in rows] for x in rows]
    return [(1 + sum(better[j][i] for j in range(n)), n - sum(better[i])) for i in range(n)]


def rank_text(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}–{last}"


def spread_tolerance(per_seed: Sequence[float], *, sds: float = SPREAD_SDS, floor: float = FLOOR) -> float:
    """How far a re-run of one of an entry's seeds may land from it: ``sds`` sample standard deviations of the entry's
    per-seed values, at least ``floor`` (all of it for a one-seed entry)."""
    spread = statistics.stdev(per_seed) if len(per_seed) > 1 else 0.0
    return max(floor, sds * spread)


RULE = (f"Ranks are ranges the seeds support: a row is ahead of another only when its mean top-1 is more than "
        f"{100 * FLOOR:.1f} points higher (what another CPU alone moves a seed by) and Welch's "
        f"{LEVEL:.0%} t-interval of the difference, over the rows' per-seed top-1, lies above 0; a row's rank runs "
        "from 1 + the rows ahead of it to the rows not behind it, so rows the seeds cannot order share a range "
        "(\"2–4\"); rows are listed by mean top-1.")
