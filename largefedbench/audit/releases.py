"""Scoring text canaries from the run's releases: every noised sum that left the federation.

A synthetic-data method learns from the clients only through ``Federation.private_sum`` (PE's and PE+SFT's vote
histograms, POPri's score sums). Each release is S = Σ clip(f(client)) + noise, where f is the method's client
function of that release. The audit applies the same f to every canary (inserted or not) on the canary's own span
embeddings, clips it like the federation does, and scores it against S, release after release: an inserted canary's own vector is inside S, a held-out one's is not. Per release, the inner product
⟨S, clip(f(canary))⟩ / clip² is about 1 from an inserted canary's own share, plus whatever other clients put on the
same direction (for PE's one-hot votes: other votes for the canary's nearest sample). The score is its smallest value
over the releases: an inserted canary keeps its share in every release it takes part in, while a held-out canary
scores high only if others land on its direction in every release. (Measured on the tiny PE test with the noise off,
the smallest separated inserted from held-out canaries better than the sum: bound 1.1 against 0.48.) With Poisson
sampling an inserted canary is absent from some releases, which weakens this score: audit with full participation
(the default of PE and POPri) or more canaries. With the noise the accountant assumes, a canary's share is buried in
noise of scale σ·clip per coordinate; without it, it shows. This is Andrew et al.'s (ICLR 2024) random-direction score, with each canary's direction given
by the method's own client function.

Only library client functions marked ``scorable_by_audit`` (PE's ``NnVotes``, POPri's ``PopriScores``: vectorised,
pure functions of a client's span embeddings) are scored; running other client functions (local training, functions
that look up cohort-only state) for every canary at every release would cost a training run per canary or fail, so
such releases are counted and skipped. Methods whose releases are scored say so with ``audit_by_releases = True``.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from largefedbench.client_views import ClientStore, chunk_view
from largefedbench.io import atomic_write_bytes

SCORE = ("smallest over the run's batched releases (noised sums) of the inner product of the release with the "
         "canary's clipped vector under that release's own client function, divided by clip²")


class ReleaseScores:
    """``Federation.on_release`` for text canaries: every canary's inner product with every batched release.

    With ``path`` (in the seed's run folder) the rows are saved after every scored release and loaded on start, so a
    killed and resumed seed scores the releases made before the kill too. A release re-made after the resume is the
    same noised sum (the same seeds), recognised by its digest and counted once."""

    def __init__(self, canaries: ClientStore, n_canaries: int, path: Path | None = None) -> None:
        self.canaries = canaries
        self.n = int(n_canaries)
        self.per_release: list[np.ndarray] = []  # one (m,) row per scored release
        self.digests: list[str] = []  # of each scored release's noised sum
        self.skipped = 0
        self.path = path
        if path is not None and path.is_file():
            with np.load(path) as saved:
                self.per_release = list(saved["rows"])
                self.digests = [str(d) for d in saved["digests"]]

    @property
    def scored(self) -> int:
        return len(self.per_release)

    @property
    def scores(self) -> np.ndarray:
        """Each canary's score: the smallest over releases of ⟨release, its clipped vector⟩ / clip²."""
        return np.min(self.per_release, axis=0) if self.per_release else np.zeros(self.n)

    def __call__(self, *, client_fn: Callable[[Any], Any], clip: float, batched: bool, round_: int, fed_seed: int,
                 noisy: Any) -> None:
        if not batched or not getattr(client_fn, "scorable_by_audit", False):
            self.skipped += 1
            return
        from largefedbench.privacy.clipping import clip_rows

        release = np.asarray(noisy, dtype=np.float64).reshape(-1)
        digest = hashlib.sha256(release.tobytes()).hexdigest()
        if digest in self.digests:
            return  # made again after a resume: already scored
        view = chunk_view(self.canaries, np.arange(len(self.canaries.ids)), round_=round_, fed_seed=fed_seed)
        rows = clip_rows(np.asarray(client_fn(view), dtype=np.float64).reshape(len(view), -1), clip)
        self.per_release.append(rows @ release / clip**2)
        self.digests.append(digest)
        if self.path is not None:
            self._save()

    def _save(self) -> None:
        """Atomically: the rows and digests so far (temp file + rename)."""
        buffer = io.BytesIO()
        np.savez(buffer, rows=np.stack(self.per_release), digests=np.asarray(self.digests))
        atomic_write_bytes(self.path, buffer.getvalue())
