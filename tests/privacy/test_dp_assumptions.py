"""Every release states what its accounting assumes (relation, sampling, sensitivity); accountants refuse the pairs
they cannot account for; a budget stops a run before a release that would break it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from largefedbench.errors import PrivacyError
from largefedbench.privacy import PoissonGaussianEvent, PrivacyLedger
from largefedbench.privacy.accountants import REFUSED_PAIRS, SUPPORTED_PAIRS, epsilon_of
from largefedbench.privacy.calibration import PrivacyBudget
from largefedbench.privacy.events import GaussianEvent, TreeAggregationEvent
from largefedbench.privacy.mechanisms import Gaussian


def test_each_event_records_its_relation_sampling_and_sensitivity():
    assert PoissonGaussianEvent(1.0, 0.1, 3).to_dict() == {
        "type": "poisson_gaussian", "noise_multiplier": 1.0, "sample_rate": 0.1, "steps": 3,
        "relation": "add_remove", "sampling": "poisson", "sensitivity": 1.0}
    assert (GaussianEvent(1.0).sampling, GaussianEvent(1.0).relation) == ("none", "add_remove")
    assert (TreeAggregationEvent(1.0, 8).sampling, TreeAggregationEvent(1.0, 8).relation) == ("fixed", "replace_special")
    assert Gaussian(2.0).events(sampling="fixed", sample_rate=0.1)[0].sampling == "none"  # no amplification claimed


def test_a_ledger_written_before_the_fields_reads_back_with_the_assumptions_it_made():
    old = {"format": "lfb-privacy-ledger/1", "events": [
        {"type": "poisson_gaussian", "noise_multiplier": 1.1, "sample_rate": 0.01, "steps": 100},
        {"type": "tree_aggregation", "noise_multiplier": 2.0, "rounds_per_epoch": 16, "epochs": 2}]}
    ledger = PrivacyLedger.from_dict(old)
    assert ledger.events == (PoissonGaussianEvent(1.1, 0.01, 100), TreeAggregationEvent(2.0, 16, 2))
    with pytest.raises(PrivacyError, match="needs exactly the fields"):
        PrivacyLedger.from_dict({"format": "lfb-privacy-ledger/1", "events": [
            {"type": "gaussian", "noise_multiplier": 1.0, "count": 1, "clip": 3}]})


@pytest.mark.parametrize("event", [
    PoissonGaussianEvent(1.0, 0.01, 10, relation="replace_one", sensitivity=2.0),
    GaussianEvent(1.0, sampling="fixed"),
    GaussianEvent(1.0, sampling="fixed", relation="replace_one", sensitivity=2.0),
    PoissonGaussianEvent(1.0, 0.01, 10, sampling="none", relation="replace_special"),
    TreeAggregationEvent(1.0, 8, relation="add_remove"),
])
def test_an_unsupported_pair_is_refused_naming_the_pair(event):
    with pytest.raises(PrivacyError, match=f"sampling '{event.sampling}', relation '{event.relation}'"):
        PrivacyLedger([event]).epsilon(1e-5)
    with pytest.raises(PrivacyError, match="cannot be accounted|only tree aggregation|cannot account"):
        epsilon_of([event], 1e-5, "pld")


def test_replace_one_needs_twice_the_sensitivity_and_is_then_the_same_release():
    with pytest.raises(PrivacyError, match="sensitivity 1·C, but under replace_one one client can move the sum by 2·C"):
        PrivacyLedger([GaussianEvent(2.0, relation="replace_one")]).epsilon(1e-5)
    replace = PrivacyLedger([GaussianEvent(2.0, relation="replace_one", sensitivity=2.0)]).epsilon(1e-5)
    assert replace == pytest.approx(PrivacyLedger([GaussianEvent(1.0)]).epsilon(1e-5), rel=1e-12)
    assert set(SUPPORTED_PAIRS).isdisjoint(REFUSED_PAIRS)


def test_a_budget_stops_the_run_before_the_release_that_would_break_it():
    from test_federation_private_sum import small_split  # tests/ is on sys.path (rootdir conftest)

    from largefedbench.federation import Federation

    clients, emb = small_split(40, seed=1)
    budget = PrivacyBudget(1.0, 1e-5)
    sigma = budget.calibrate(PoissonGaussianEvent(1.0, sample_rate=0.5, steps=2), n_clients=40)
    fed = Federation(clients, embeddings=emb, seed=0)
    fed.budget = budget
    for _ in range(2):  # the two releases σ was calibrated for
        fed.private_sum(fed.sample(0.5), lambda view: np.ones(3), clip=1.0, mechanism=Gaussian(sigma))
    before = fed.ledger.to_dict()
    with pytest.raises(PrivacyError, match=r"this release would bring ε to .* over the budget ε = 1"):
        fed.private_sum(fed.sample(0.5), lambda view: np.ones(3), clip=1.0, mechanism=Gaussian(sigma))
    assert fed.ledger.to_dict() == before  # nothing was released or recorded
    assert fed.ledger.epsilon(1e-5) <= 1.0 * 1.01
    unlimited = Federation(clients, embeddings=emb, seed=0)
    unlimited.budget = PrivacyBudget(math.inf, 1e-5)
    for _ in range(3):
        unlimited.private_sum(unlimited.sample(0.5), lambda view: np.ones(3), clip=1.0, mechanism=Gaussian(sigma))
