"""The unreleased diagnostic ``record_agreement``: per selector round, the share of the cohort clients' own validation
pairs on which the broadcast selector agrees with the client, written to the run folder's unreleased file — raw
(not differentially private), never in the entry, and only on the ``local`` executor, where the client functions
run in the method's process."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from largefedbench.errors import InputError
from largefedbench.rounds import record_unreleased, unreleased_path

if TYPE_CHECKING:
    from largefedbench.methods.fedbiscuit.selector import PairTask

    from largefedbench.fedtrain import Release

__all__ = ["AGREEMENT_NEEDS_LOCAL", "AgreementTally", "check_agreement_recordable", "record_agreement"]

AGREEMENT_NEEDS_LOCAL = ("record_agreement needs --executor local: the raw agreement is a diagnostic the client "
                         "functions keep in the process they run in, and on the process or Ray executor that is a "
                         "worker it never leaves; add --executor local, or turn record_agreement off")


class AgreementTally:
    """How often the broadcast selector agrees with the cohort clients on their own validation pairs (never trained
    on), summed inside the client function before local training: an aggregate, not differentially private (an
    unreleased diagnostic), and only filled on the ``local`` executor (a Ray worker fills its own copy)."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size, self.agree, self.pairs, self.clients = int(batch_size), 0, 0, 0

    def add(self, task: PairTask, model, pairs: np.ndarray, labels: np.ndarray) -> None:
        prefers_a = task.prefers_a(model, pairs.reshape(-1), self.batch_size) > 0
        self.agree += int((prefers_a == (labels.reshape(-1) == 0)).sum())
        self.pairs += int(labels.size)
        self.clients += len(labels)

    def summary(self) -> dict[str, float]:
        return {"selector_agreement_on_own_validation_pairs": self.agree / self.pairs if self.pairs else float("nan"),
                "validation_pairs": self.pairs}


def check_agreement_recordable(fed, public) -> None:
    """Before the first round: the run has a folder for the diagnostic and runs the client functions here."""
    unreleased_path(public)  # raises if the run has no folder to write the diagnostic to
    if not fed.clients_run_here:
        raise InputError(AGREEMENT_NEEDS_LOCAL)


def record_agreement(public, release: Release, phase: str) -> None:
    """After a selector round's release: its agreement tally to the run folder's unreleased file."""
    tally = getattr(release.client_fn, "tally", None)
    if tally is None:
        return
    if tally.clients != len(release.cohort):
        raise InputError(AGREEMENT_NEEDS_LOCAL)
    record_unreleased(public, int(release.cohort.round), {"phase": phase, **tally.summary()})
