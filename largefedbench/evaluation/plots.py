"""Plots written next to a leaderboard entry: metrics by round and, for synthetic text, the 2-D PCA of synthetic
against validation embeddings (POPri Figures 2 and 4). PNGs are written atomically; nothing is shown."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from largefedbench.io import atomic_write_bytes

#: history keys drawn by round when a method reports them (label, lower is better?)
ROUND_METRICS = {"fid": "FID vs validation clients", "validation_top1": "validation top-1 accuracy",
                 "sigma": "noise multiplier σ"}


def _figure():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _figure().close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return path


def plot_rounds(histories: list[list[dict[str, Any]]], seeds: list[int], key: str, title: str, path: Path) -> Path | None:
    """``key`` by round, one line per seed; None when no seed reported it."""
    series = []
    for seed, hist in zip(seeds, histories):
        points = [(h.get("round"), h.get(key)) for h in hist if isinstance(h.get(key), (int, float))]
        points = [(r if isinstance(r, (int, float)) else i, v) for i, (r, v) in enumerate(points)]
        if points:
            series.append((seed, points))
    if not series:
        return None
    plt = _figure()
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for seed, points in series:
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o", label=f"seed {seed}")
    ax.set_xlabel("round")
    ax.set_ylabel(ROUND_METRICS.get(key, key))
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)


def plot_pca(synthetic: np.ndarray, validation: np.ndarray, title: str, path: Path, max_points: int = 3000,
             seed: int = 0) -> Path:
    """2-D PCA (fitted on both sets) of synthetic vs validation embeddings."""
    from sklearn.decomposition import PCA

    rng = np.random.default_rng(seed)

    def subsample(x: np.ndarray) -> np.ndarray:
        return x[rng.choice(len(x), max_points, replace=False)] if len(x) > max_points else x

    syn, val = subsample(np.asarray(synthetic)), subsample(np.asarray(validation))
    pca = PCA(n_components=2, random_state=seed).fit(np.vstack([syn, val]))
    plt = _figure()
    fig, ax = plt.subplots(figsize=(4.6, 4.2))
    v2, s2 = pca.transform(val), pca.transform(syn)
    ax.scatter(v2[:, 0], v2[:, 1], s=5, alpha=0.4, label=f"validation clients ({len(val)})", color="#1f77b4")
    ax.scatter(s2[:, 0], s2[:, 1], s=5, alpha=0.4, label=f"synthetic ({len(syn)})", color="#d62728")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.legend(fontsize=7, markerscale=3)
    return _save(fig, path)


def write_entry_plots(entry: dict[str, Any], run_dir: Path, entry_path: Path, *, validation: np.ndarray | None = None) -> dict[str, Path]:
    """Every plot an entry has, beside ``entry_path`` as ``<entry-id>.<plot>.png``; returns name -> path."""
    out: dict[str, Path] = {}
    stem = entry_path.name[: -len(".json")]
    label = f"{entry['method']['name']} on {entry['dataset']['snapshot']}, ε = {entry['privacy']['target_epsilon']}"
    for key in ROUND_METRICS:
        path = plot_rounds(entry["history"], entry["seeds"], key, f"{label}: {ROUND_METRICS[key]} by round",
                           entry_path.parent / f"{stem}.{key.replace('_', '-')}-by-round.png")
        if path is not None:
            out[f"{key}_by_round"] = path
    first = run_dir / f"seed-{entry['seeds'][0]}" / "synthetic-embeddings.npy"
    if validation is not None and first.exists():
        out["pca"] = plot_pca(np.load(first), validation, f"{label}: synthetic vs validation (PCA)",
                              entry_path.parent / f"{stem}.pca.png")
    return out
