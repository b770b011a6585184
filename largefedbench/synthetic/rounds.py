"""Round bookkeeping shared by the synthetic-data methods: noise calibration, cohorts, FID, timing (the rounds loop
itself is :mod:`largefedbench.run.rounds`).

Privacy plan (POPri §3.1 "Privacy guarantees", App. D.1): T rounds, each one Poisson-sampled Gaussian sum of
unit-norm client vectors (sensitivity 1) at rate q = clients_per_round / n_clients (q = 1: full participation,
as in the paper's Table 1); σ is the smallest noise multiplier whose T planned events fit the budget
(``PrivacyBudget.calibrate``, opacus RDP as in the paper). Every round goes through ``fed.private_sum``, which
records the event that the harness accounts.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from largefedbench.errors import InputError, MethodError
from largefedbench.evaluation import fid
from largefedbench.privacy import PoissonGaussianEvent

__all__ = ["UNRELEASED_FILE", "Timer", "keep_lowest_fid_adapter", "chunks", "cohort_fields", "draw_cohort", "fid_to",
           "noise_for_rounds", "public_examples", "record_unreleased", "take", "unreleased_path"]

#: where un-noised per-round diagnostics go (the seed's run folder): never into the history, info or the entry
UNRELEASED_FILE = "unreleased-diagnostics.json"

#: final synthetic sets (10^6 samples in the paper) are generated this many prompts at a time, bounding memory
FINAL_CHUNK = 8192


def noise_for_rounds(budget, fed, *, rounds: int, clients_per_round: int | None) -> tuple[float, float]:
    """``(σ, q)`` for ``rounds`` noisy sums at sampling rate ``q`` within ``budget`` (0 < ε < ∞)."""
    if rounds < 1:
        raise InputError(f"rounds={rounds} must be at least 1")
    if budget.is_public or budget.is_non_private:
        raise MethodError(f"a synthetic-data method runs at 0 < ε < ∞, got ε={budget.epsilon}; the references are "
                          "the methods 'public' (ε = 0) and 'non-private' (ε = ∞)")
    n = fed.n_clients
    if clients_per_round is None:
        q = 1.0
    elif not 1 <= clients_per_round <= n:
        raise InputError(f"clients_per_round={clients_per_round} must be between 1 and the number of clients ({n})")
    else:
        q = clients_per_round / n
    sigma = budget.calibrate(PoissonGaussianEvent(1.0, sample_rate=q, steps=rounds), n_clients=n)
    return float(sigma), q


def draw_cohort(fed, rate: float):
    """Everyone at rate 1 (full participation), else a Poisson cohort at ``rate``; starts a federation round."""
    return fed.everyone() if rate >= 1.0 else fed.sample(rate)


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


def fid_to(embeddings: np.ndarray, reference: np.ndarray) -> float:
    """FID between two embedding sets, NaN when either has fewer than two rows."""
    if len(embeddings) < 2 or len(reference) < 2:
        return math.nan
    return float(fid(embeddings, reference))


def public_examples(public, *, min_words: int = 0, minimum: int = 1) -> list[str]:
    """Public spans with more than ``min_words`` words (PrE-Text's filter), or all of them when too few pass."""
    texts = [t for t in public.public_texts() if t.strip()]
    if len(texts) < minimum:
        raise MethodError(f"the snapshot has {len(texts)} public spans; the prompts need at least {minimum}. Build it "
                          "with --public-months >= 1 so that records before the window exist")
    kept = [t for t in texts if len(t.split()) > min_words]
    return kept if len(kept) >= minimum else texts


class Timer:
    """Accumulates wall seconds of the ``with timer:`` blocks it times."""

    def __init__(self) -> None:
        self.seconds = 0.0

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - start


def keep_lowest_fid_adapter(loop, model, texts: Sequence[str], embedder, validation: np.ndarray, round_index: int) -> None:
    """Early stopping on the validation clients (POPri §5.2): the FID of ``texts`` (sampled from the generator after
    the last round) joins ``loop``'s history and its selection, then the lowest-FID adapter is loaded into ``model``."""
    from largefedbench.models import embed
    from largefedbench.synthetic.lora import load_lora_state, lora_state

    value = fid_to(embed(list(texts), embedder), validation)
    loop.history.append({"round": round_index, "fid": value, "evaluation_only": True})
    loop.offer(value, round_index, lora_state(model))
    load_lora_state(model, loop.best.weights)


def take(texts: Sequence[str], indices: Sequence[int]) -> list[str]:
    """``[texts[i] for i in indices]``."""
    return [texts[int(i)] for i in indices]


def chunks(total: int, size: int = FINAL_CHUNK) -> Iterator[tuple[int, int]]:
    """``(index, n)`` for consecutive pieces of ``total`` items, ``size`` at most each."""
    for i, lo in enumerate(range(0, total, size)):
        yield i, min(size, total - lo)
