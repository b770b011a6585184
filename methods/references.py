"""The two reference points every entry is read against (POPri §5, Table 1): ε = 0 and ε = ∞.

- ``public`` — the downstream model as pretrained on public data only; it touches no private client, so its
  ledger is empty and its ε is 0.
- ``non-private`` — the downstream model fine-tuned directly on every private train client's spans, with the
  epoch chosen on the validation clients; the ledger records one noiseless release, so its ε is ∞.

Gap closed = (acc − acc₀) / (acc∞ − acc₀) is measured between these two.
"""

from __future__ import annotations

import math

from largefedbench.contract import Artifact, Method, NoSettings, selection_of


class PublicReference(Method):
    name = "public"
    paper = "POPri (Hou et al., ICML 2025) §5: the ε = 0 reference, the public pretrained downstream model"
    output = "model"
    Config = NoSettings  # no settings: the profile's downstream training is used as is
    fixed_epsilon = 0.0

    def train(self, fed, public, cfg, budget) -> Artifact:
        return Artifact.trained_model(public.models.new_downstream(), note="public checkpoint, no private data used")


class NonPrivateReference(Method):
    name = "non-private"
    paper = "POPri (Hou et al., ICML 2025) §5: the ε = ∞ reference, fine-tuned on the private clients directly"
    output = "model"
    Config = NoSettings  # no settings: the profile's downstream training is used as is
    fixed_epsilon = math.inf

    def train(self, fed, public, cfg, budget) -> Artifact:
        texts = fed.release_without_noise()
        return Artifact.trained_model(selection_of(fed).train_downstream(texts), n_train_spans=len(texts))
