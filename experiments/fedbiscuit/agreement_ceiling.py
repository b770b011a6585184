"""How far a FedBis selector can agree with a client on its own pairs (docs/notes/history.md, "Why FedBis did not clear
the no-signal row"): for random pairs of a run's synthetic samples, each train client's label (the text its spans are
closer to, summed cosine: FedBis's preference) against the majority label over all train clients — the agreement a
perfect population selector would reach, and how many pairs most clients agree on. Reads private spans: a diagnostic,
never part of an entry.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/fedbiscuit/agreement_ceiling.py RUN_DIR/seed-0/synthetic-embeddings.npy \
        --home $LFB_HOME --snapshot demo-prose

The embeddings file is any synthetic seed's (unit all-MiniLM-L6-v2 rows, as the run folder keeps them).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("embeddings", type=Path, help="a seed's synthetic-embeddings.npy")
    ap.add_argument("--home", type=Path, default=None, help="the LargeFedBench home with the snapshot")
    ap.add_argument("--snapshot", default="demo-prose")
    ap.add_argument("--pairs", type=int, default=4000)
    args = ap.parse_args()
    from largefedbench.data.federated import load_snapshot
    from largefedbench.models.embedder import load_embedder, span_embeddings
    from largefedbench.models.profiles import get_profile
    from largefedbench.synthetic.scoring import client_embedding_sums

    fd = load_snapshot(args.snapshot, home=args.home)
    embedder, info = load_embedder(get_profile("cpu").embedder)
    spans = span_embeddings(fd, "train", embedder, info["cache_key"], root=args.home, progress=False)
    counts = np.asarray(fd.train.span_counts())
    sums = client_embedding_sums(spans, np.repeat(np.arange(len(counts)), counts), len(counts))
    samples = np.load(args.embeddings)
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, len(samples), args.pairs), rng.integers(0, len(samples), args.pairs)
    a, b = a[a != b], b[a != b]
    prefers_a = sums @ (samples[a] - samples[b]).T > 0  # (clients, pairs)
    share = prefers_a.mean(0)
    majority = share >= 0.5
    consensus = np.maximum(share, 1 - share)
    print(json.dumps({"clients": len(counts), "pairs": len(a),
                      "agreement_with_majority": round(float((prefers_a == majority).mean()), 4),
                      "pairs_with_70pct_consensus": round(float(np.mean(consensus >= 0.7)), 4),
                      "pairs_with_90pct_consensus": round(float(np.mean(consensus >= 0.9)), 4)}))


if __name__ == "__main__":
    main()
