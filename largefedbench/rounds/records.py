"""What a round records: its cohort (drawn and described as a published history row may describe it), un-noised
diagnostics kept out of the entry, and the signal-to-noise numbers of its releases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from largefedbench.errors import InputError

__all__ = ["UNRELEASED_FILE", "cohort_fields", "draw_cohort", "record_unreleased", "releases_of",
           "unreleased_path"]

#: where un-noised per-round diagnostics go (the seed's run folder): never into the history, info or the entry
UNRELEASED_FILE = "unreleased-diagnostics.json"


def draw_cohort(fed, rate: float):
    """Everyone at rate 1 (full participation), else a Poisson cohort at ``rate``; starts a federation round."""
    return fed.everyone() if rate >= 1.0 else fed.sample(rate)


def releases_of(fed, round_: int | None = None) -> list[dict[str, Any]]:
    """The signal-to-noise numbers of the federation's releases (``Federation.releases``), those of round ``round_``
    if given, without their round: what a history record carries under ``releases``."""
    log = getattr(fed, "releases", None)
    return [{k: v for k, v in r.items() if k != "round"} for r in (log if isinstance(log, list) else [])
            if round_ is None or r.get("round") == round_]


def cohort_fields(cohort, n_clients: int) -> dict[str, float]:
    """What a history row may say about a round's cohort (histories are published in the entry).

    A full-participation cohort (rate 1) has ``clients`` = every client, a public count. A Poisson cohort's exact size
    is a count of private participation that no noise covers (the accountant's amplification assumes it is hidden),
    so only its expected size ``expected_clients`` = q · N is written."""
    if cohort.sample_rate >= 1.0:
        return {"clients": len(cohort)}
    return {"expected_clients": round(float(cohort.sample_rate) * int(n_clients), 6)}


def unreleased_path(public) -> Path:
    """The file of un-noised diagnostics in the seed's run folder; a clear error when the run has no folder."""
    if public.run_dir is None:
        raise InputError("un-noised diagnostics are written to the run folder, and this run has none; turn the "
                         "diagnostic off (e.g. record_update_norms=False) or give the run a folder")
    return public.run_dir / UNRELEASED_FILE


def record_unreleased(public, round_index: int, stats: dict[str, Any]) -> None:
    """Keep un-noised per-round statistics (e.g. raw update norms) out of the entry: they are written to
    :data:`UNRELEASED_FILE` in the seed's run folder, one row per round (a resumed round replaces its row)."""
    from largefedbench.io import atomic_write_json

    path = unreleased_path(public)
    rows = json.loads(path.read_text()) if path.exists() else []
    rows = [r for r in rows if r.get("round") != int(round_index)] + [{"round": int(round_index), **stats}]
    atomic_write_json(path, sorted(rows, key=lambda r: r["round"]))
