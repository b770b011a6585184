"""The board's plots, one pair per group: the privacy–utility frontier (top-1 accuracy against ε per method, with
the ε = 0 and ε = ∞ references) and the costs (POPri Table 2 columns). PNGs written atomically, without
timestamps, so the same entries give the same bytes with the same matplotlib."""

from __future__ import annotations

import io
import math
from pathlib import Path

from largefedbench.io import atomic_write_bytes
from largefedbench.leaderboard.board import EPSILON_BUCKETS, Group, Row

_EPSILON_TICKS = (0.01, 0.03, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    plt = _pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return path


#: the frontier's markers, cycled beside tab10's colours (7 and 10 share no factor)
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def frontier_plot(group: Group, path: Path) -> Path:
    """Top-1 accuracy (mean ± std over seeds) against ε; hollow markers for entries shown apart."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    private = [r for r in group.rows if 0 < r.epsilon < math.inf]
    methods = sorted({r.label for r in private})
    colors = plt.get_cmap("tab10")
    for i, name in enumerate(methods):
        rows = sorted((r for r in private if r.label == name), key=lambda r: r.epsilon)
        ranked = [r for r in rows if r.status == "ranked"]
        color, marker = colors(i % 10), MARKERS[i % len(MARKERS)]  # 7 markers × 10 colours: no two methods alike
        if ranked:
            ax.errorbar([r.epsilon for r in ranked], [100 * r.top1 for r in ranked],
                        yerr=[100 * r.entry.metrics.next_token_accuracy.top1.std for r in ranked], marker=marker,
                        capsize=3, color=color, label=name)
        apart = [r for r in rows if r.status != "ranked"]
        if apart:
            ax.scatter([r.epsilon for r in apart], [100 * r.top1 for r in apart], facecolors="none",
                       edgecolors=color, marker=marker, label=f"{name} (unranked / contaminated)")
    public = _mean_reference(group, "reference_public")
    non_private = _mean_reference(group, "reference_non_private")
    no_signal = _mean_reference(group, "reference_generator_only")
    ax.axhline(public, color="0.35", linestyle=":", linewidth=1, label="ε = 0 (public model)")
    if no_signal is not None:
        ax.axhline(no_signal, color="tab:brown", linestyle="-.", linewidth=1,
                   label="ε = 0 generator-only (no private signal)")
    zoom = _zoom(private, [v for v in (public, no_signal) if v is not None], non_private)
    if zoom is None:
        ax.axhline(non_private, color="0.35", linestyle="--", linewidth=1, label="ε = ∞ (non-private)")
    else:  # far above every private row: the axis keeps to the rows, the reference is written at its top
        ax.set_ylim(*zoom)
        ax.plot([], [], color="0.35", linestyle="--", linewidth=1, label=f"ε = ∞ (non-private): {non_private:.2f} % ↑")
        ax.annotate(f"↑ ε = ∞ (non-private): {non_private:.2f} %, above the axis", xy=(0.01, 0.98),
                    xycoords="axes fraction", va="top", fontsize=7, color="0.35")
    if private:
        ax.set_xscale("log")
        low, high = min(r.epsilon for r in private) / 1.6, max(r.epsilon for r in private) * 1.6
        ax.set_xlim(low, high)
        ticks = [t for t in _EPSILON_TICKS if low <= t <= high]
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        for bound in (b for _label, b in EPSILON_BUCKETS if low < b < high):  # the edges of the matched budgets
            ax.axvline(bound, color="0.8", linewidth=0.8, zorder=0)
    else:
        ax.set_xticks([])
        ax.text(0.5, 0.5, "no private entries yet", transform=ax.transAxes, ha="center", color="0.4")
    ax.set_xlabel("ε (user-level, log scale)")
    ax.set_ylabel("top-1 next-token accuracy (%)")
    ax.set_title(f"privacy–utility frontier: {group.dataset}, {group.window[0]} – {group.window[1]}, "
                 f"{group.profile} profile, public {group.public}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _save(fig, path)


def _mean_reference(group: Group, attr: str) -> float | None:
    """A reference row's top-1 (%) averaged over the group's entries; None where no entry carries it."""
    values = [ref.top1.mean for r in group.rows if (ref := getattr(r.entry.metrics, attr)) is not None]
    return 100 * sum(values) / len(values) if values else None


def _zoom(private: list[Row], references: list[float], non_private: float) -> tuple[float, float] | None:
    """The y-range of the private rows and the ε = 0 references when the non-private line lies above them by more than
    their own spread: on a common axis it would squeeze every method into a sliver (None: one axis holds all)."""
    if not private:
        return None
    tops = [100 * (r.top1 + r.entry.metrics.next_token_accuracy.top1.std) for r in private]
    bottoms = [100 * (r.top1 - r.entry.metrics.next_token_accuracy.top1.std) for r in private]
    low, high = min(bottoms + references), max(tops + references)
    spread = max(high - low, 0.5)
    if non_private - high <= spread:
        return None
    return low - 0.08 * spread, high + 0.15 * spread


def _label(row: Row) -> str:
    eps = row.epsilon
    shown = "∞" if math.isinf(eps) else f"{eps:.3g}"
    apart = "" if row.status == "ranked" else f" [{row.status}]"
    return f"{row.label} (ε={shown}){apart}"


def _value_text(value: float | None) -> str:
    return "n/a" if value is None else ("0" if value == 0 else f"{value:.3g}")


def costs_plot(group: Group, path: Path) -> Path | None:
    """Communication and compute per client per round; None when no entry of the group reports costs."""
    rows = [r for r in group.rows if r.entry.costs.rounds > 0]
    if not rows:
        return None
    plt = _pyplot()
    fig, (comm, comp) = plt.subplots(1, 2, figsize=(9.0, 0.8 + 0.45 * len(rows)), sharey=True)
    ys = list(range(len(rows)))
    height = 0.38
    for ax, pairs, xlabel in (
        (comm, (("floats_down_per_client_per_round", "down"), ("floats_up_per_client_per_round", "up")),
         "floats per client per round (log)"),
        (comp, (("client_seconds_per_client_per_round", "client s / client"), ("server_seconds_per_round",
                                                                                "server s")), "seconds per round (log)"),
    ):
        positive = [v for r in rows for a, _ in pairs if (v := getattr(r.entry.costs, a))]
        for k, (attr, label) in enumerate(pairs):
            raw = [getattr(r.entry.costs, attr) for r in rows]
            at = [y + (k - 0.5) * height for y in ys]
            bars = ax.barh(at, [v or 0.0 for v in raw], height=height, label=label)
            floor = min(positive) if positive else 1.0
            for y, v, bar in zip(at, raw, bars):  # zero / missing values have no bar on a log axis: write them
                ax.text(max(bar.get_width(), floor), y, f" {_value_text(v)}", va="center", fontsize=6)
        if positive:
            ax.set_xscale("log")
            ax.set_xlim(min(positive) / 3, max(positive) * 8)
            ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.set_xlabel(xlabel, fontsize=8)
        ax.legend(fontsize=7, loc="best", framealpha=0.9)
        ax.grid(alpha=0.3, axis="x")
    comm.set_yticks(ys, [_label(r) for r in rows], fontsize=7)
    comm.invert_yaxis()
    fig.suptitle(f"costs (POPri Table 2 columns): {group.dataset}, {group.profile} profile", fontsize=9)
    return _save(fig, path)
