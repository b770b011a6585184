"""Test helpers: write entries where they belong, and derive new *consistent* entries from a real one (every
derived number — means, spreads, gap closed, ε from the ledger — is recomputed, so a variant stays valid)."""

from __future__ import annotations

import copy
import json
import math
import shutil
import statistics
from pathlib import Path
from typing import Any

from largefedbench.leaderboard.schema import SYNTHETIC_TEXT_STATS
from largefedbench.privacy import PrivacyLedger

ACCURACY_SECTIONS = ("next_token_accuracy", "reference_public", "reference_non_private")


def load(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def entry_path(board: Path, data: dict[str, Any]) -> Path:
    return board / "entries" / data["dataset"]["name"] / data["method"]["name"] / f"{data['entry_id']}.json"


def save(board: Path, data: dict[str, Any], path: Path | None = None, artifacts_from: Path | None = None) -> Path:
    """Write ``data`` at its place under ``board`` (or at ``path``), with its artifact PNGs copied beside it."""
    path = path or entry_path(board, data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))
    for name in data.get("artifacts", {}).values() if artifacts_from else ():
        if (artifacts_from / name).is_file() and not (path.parent / name).exists():
            shutil.copyfile(artifacts_from / name, path.parent / name)
    return path


def _stat(values: list[float]) -> dict[str, Any]:
    return {"per_seed": values, "mean": math.fsum(values) / len(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0}


def recompute(data: dict[str, Any]) -> dict[str, Any]:
    """Means, standard deviations and gap closed recomputed from the per-seed values (in place)."""
    m = data["metrics"]
    for section in ACCURACY_SECTIONS:
        for k in ("top1", "top3", "top5"):
            m[section][k] = _stat(m[section][k]["per_seed"])
    m["validation_top1"] = _stat(m["validation_top1"]["per_seed"])
    if m.get("fid"):
        m["fid"] = _stat(m["fid"]["per_seed"])
    gaps = [(a - a0) / (ai - a0) for a, a0, ai in zip(m["next_token_accuracy"]["top1"]["per_seed"],
                                                      m["reference_public"]["top1"]["per_seed"],
                                                      m["reference_non_private"]["top1"]["per_seed"])]
    m["gap_closed"] = _stat(gaps)
    gen = m.get("reference_generator_only")
    if gen:
        for k in ("top1", "top3", "top5"):
            gen[k] = _stat(gen[k]["per_seed"])
        top1, g1, inf1 = (m[s]["top1"]["per_seed"] for s in ("next_token_accuracy", "reference_generator_only",
                                                              "reference_non_private"))
        m["gain_over_generator_only"] = _stat([a - g for a, g in zip(top1, g1)])
        m["gap_closed_over_generator_only"] = _stat([(a - g) / (i - g) for a, g, i in zip(top1, g1, inf1)])
    for stat in _other_stats(m):
        stat.update(_stat(stat["per_seed"]))
    return data


def _other_stats(m: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-seed synthetic-text and window-novel statistics that are neither accuracy sections nor derived from them."""
    stats = [m[name] for name in SYNTHETIC_TEXT_STATS if m.get(name)]
    novel = m.get("window_novel") or {}
    stats += [novel[name] for name in ("top1", "reference_non_private", "reference_generator_only", "gap_closed")
              if novel.get(name)]
    return stats


def relabel(data: dict[str, Any], *, method: str | None = None, entry_id: str | None = None,
            version: str | None = None) -> dict[str, Any]:
    out = copy.deepcopy(data)
    if method:
        out["method"]["name"] = method
    if version:
        out["method"]["version"] = version
    out["entry_id"] = entry_id or f"{out['method']['name']}--variant--{abs(hash(json.dumps(out, sort_keys=True))) % 10**8}"
    return out


def with_seeds(data: dict[str, Any], seeds: list[int], spread: float = 0.002) -> dict[str, Any]:
    """The entry as if run with ``seeds``: seed k's numbers are the first seed's, moved by k·spread (method only)."""
    out = copy.deepcopy(data)
    m = out["metrics"]

    def cycle(values: list[float], step: float = 0.0) -> list[float]:
        return [values[i % len(values)] + (i - (len(seeds) - 1) / 2) * step for i in range(len(seeds))]

    for section in ACCURACY_SECTIONS:
        for k in ("top1", "top3", "top5"):
            step = spread if section == "next_token_accuracy" else 0.0
            m[section][k]["per_seed"] = cycle(m[section][k]["per_seed"], step)
    m["validation_top1"]["per_seed"] = cycle(m["validation_top1"]["per_seed"], spread)
    if m.get("fid"):
        m["fid"]["per_seed"] = cycle(m["fid"]["per_seed"], 0.01)
    if m.get("reference_generator_only"):
        for k in ("top1", "top3", "top5"):
            m["reference_generator_only"][k]["per_seed"] = cycle(m["reference_generator_only"][k]["per_seed"])
    for stat in _other_stats(m):
        stat["per_seed"] = cycle(stat["per_seed"])
    p = out["privacy"]
    p["ledgers"] = [copy.deepcopy(p["ledgers"][i % len(p["ledgers"])]) for i in range(len(seeds))]
    if p.get("calibrations") is not None:
        p["calibrations"] = [copy.deepcopy(p["calibrations"][i % len(p["calibrations"])]) for i in range(len(seeds))]
    p["epsilon_per_seed"] = [p["epsilon_per_seed"][i % len(p["epsilon_per_seed"])] for i in range(len(seeds))]
    out["history"] = [out["history"][i % len(out["history"])] for i in range(len(seeds))] if out["history"] else []
    if out.get("selection"):  # one list of choices per seed
        per = out["selection"]["per_seed"]
        out["selection"]["per_seed"] = [copy.deepcopy(per[i % len(per)]) for i in range(len(seeds))]
    out["seeds"] = list(seeds)
    return recompute(out)


def shift_accuracy(data: dict[str, Any], delta: float) -> dict[str, Any]:
    out = copy.deepcopy(data)
    for k in ("top1", "top3", "top5"):
        stat = out["metrics"]["next_token_accuracy"][k]
        stat["per_seed"] = [v + delta for v in stat["per_seed"]]
    return recompute(out)


def with_noise(data: dict[str, Any], factor: float) -> dict[str, Any]:
    """Every ledger's noise multipliers scaled by ``factor``; ε (per seed, max) and the target recomputed. The
    calibration records go (no calibration for the new target made these σ), so the variant is a version-2 entry,
    made before the records: valid with a note, its σ marked on the board as checked only by re-running."""
    out = copy.deepcopy(data)
    out["schema_version"] = 2
    p = out["privacy"]
    p.pop("calibrations", None)
    for ledger in p["ledgers"]:
        for event in ledger["events"]:
            event["noise_multiplier"] *= factor
    eps = [PrivacyLedger.from_dict(ledger).epsilon(p["delta"], p["accountant"]) for ledger in p["ledgers"]]
    p["epsilon_per_seed"] = eps
    p["epsilon"] = max(eps)
    p["target_epsilon"] = math.ceil(max(eps) * 10) / 10
    return out


def as_reference(data: dict[str, Any], kind: str) -> dict[str, Any]:
    """The ε = 0 ("public") or ε = ∞ ("non-private") reference entry built from ``data``'s references."""
    out = copy.deepcopy(data)
    m, p = out["metrics"], out["privacy"]
    source = "reference_public" if kind == "public" else "reference_non_private"
    m["next_token_accuracy"] = copy.deepcopy(m[source])
    m["fid"] = None
    for name in ("reference_generator_only", "gain_over_generator_only", "gap_closed_over_generator_only",
                 *SYNTHETIC_TEXT_STATS):  # a reference row: no synthetic text
        m.pop(name, None)
    n = len(out["seeds"])
    p.pop("calibrations", None)  # the references calibrate nothing
    cls = "PublicReference" if kind == "public" else "NonPrivateReference"
    out["method"].update(name=kind, output="model", source="built-in", target=f"largefedbench.methods.references:{cls}",
                         paper=f"POPri (Hou et al., ICML 2025) §5: the ε = {'0' if kind == 'public' else '∞'} reference")
    if kind == "public":
        p.update(epsilon=0.0, delta=0.0, target_epsilon=0.0, epsilon_per_seed=[0.0] * n, accountant="rdp",
                 ledgers=[{"format": "lfb-privacy-ledger/1", "events": []}] * n)
    else:
        noiseless = {"format": "lfb-privacy-ledger/1",
                     "events": [{"type": "gaussian", "noise_multiplier": 0.0, "count": 1}]}
        p.update(epsilon="inf", target_epsilon="inf", epsilon_per_seed=["inf"] * n, accountant="pld",
                 ledgers=[noiseless] * n)
    out["costs"].update(rounds=0, floats_down_per_client_per_round=None, floats_up_per_client_per_round=None,
                        client_seconds_per_client_per_round=None, server_seconds_per_round=None)
    out["artifacts"] = {}
    out["history"] = [[] for _ in range(n)]
    out["config"]["method"] = {}  # the references have no settings and train the downstream model
    out["contamination"]["model"] = out["profile"]["downstream"]["id"]
    out["entry_id"] = f"{kind}--{out['dataset']['snapshot']}--{out['config']['profile']}--reference"
    return recompute(out)
