"""Empirical privacy auditing (`lfb audit`): canary clients in one ordinary run, an ε lower bound beside the claim.

The ledger's ε proves the arithmetic, not the implementation. An audit adds ``m`` canary clients to the train
split, each by a seeded fair coin, runs the method unchanged through the harness and the federation (canaries are
ordinary clients: sampled, clipped, noised, accounted), scores every canary from what the run released, and turns
the scores into

- the one-run ε lower bound of Steinke, Nasr & Jagielski (NeurIPS 2023) at the confidence asked
  (:mod:`.estimators`), valid whatever the method does; an entry whose bound exceeds its claimed ε is flagged;
- for model updates, the one-shot ε estimate of Andrew et al. (ICLR 2024).

Canary design and membership scores (:mod:`.canaries`): model-update canaries return a fixed random unit direction
scaled to the clip norm, scored by the cosine between that direction and the released model's delta from the public
model; text canaries own three random, well-formed secret sentences, scored by the largest embedding cosine between
them and the released synthetic set. The hooks into a run are in :mod:`largefedbench.run.audit`.
"""
