"""Release scores survive a kill: saved after every scored release, loaded on resume, a re-made release counted once."""

from __future__ import annotations

import numpy as np
from test_federation_private_sum import D, small_split  # tests/ is on sys.path (rootdir conftest)

from largefedbench.audit.releases import ReleaseScores
from largefedbench.client_views import ClientStore


def mean_embedding(view):
    """A scorable client function: each canary's mean span embedding (zeros without spans)."""
    return np.stack([c.embeddings.mean(0) if len(c.embeddings) else np.zeros(D) for c in view.clients()])


mean_embedding.scorable_by_audit = True


def release(scores: ReleaseScores, noisy) -> None:
    scores(client_fn=mean_embedding, clip=1.0, batched=True, round_=0, fed_seed=0, noisy=noisy)


def test_a_resumed_seed_keeps_the_releases_scored_before_the_kill(tmp_path):
    clients, emb = small_split(12)
    store = ClientStore(clients, emb)
    rng = np.random.default_rng(0)
    sums = [rng.normal(size=D) for _ in range(3)]
    whole = ReleaseScores(store, 12)
    for s in sums:
        release(whole, s)

    path = tmp_path / "seed-0" / "audit-release-scores.npz"
    before_kill = ReleaseScores(store, 12, path)
    for s in sums[:2]:
        release(before_kill, s)
    resumed = ReleaseScores(store, 12, path)  # a new process: what was saved is loaded
    assert resumed.scored == 2
    for s in sums[1:]:  # the round in progress at the kill is made again, with the same noised sum
        release(resumed, s)
    assert resumed.scored == 3
    np.testing.assert_allclose(resumed.scores, whole.scores)
    resumed(client_fn=lambda view: 0, clip=1.0, batched=True, round_=0, fed_seed=0, noisy=sums[0])  # not scorable
    assert resumed.skipped == 1 and resumed.scored == 3
