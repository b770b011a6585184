"""PrivacyLedger: merging, JSON round trip, and ε equal to the accountant applied directly."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from largefedbench.errors import PrivacyError
from largefedbench.privacy import (
    GaussianEvent,
    PoissonGaussianEvent,
    PrivacyLedger,
    TreeAggregationEvent,
    event_from_dict,
)

sigmas = st.floats(0.3, 30.0)
poisson = st.builds(PoissonGaussianEvent, sigmas, st.floats(1e-4, 1.0), st.integers(1, 50))
small_poisson = st.builds(PoissonGaussianEvent, sigmas, st.floats(1e-4, 1.0), st.integers(1, 10))
tree = st.builds(TreeAggregationEvent, sigmas, st.integers(1, 200), st.integers(1, 30))
gaussian = st.builds(GaussianEvent, sigmas, st.integers(1, 5))
any_event = st.one_of(poisson, tree, gaussian)


def test_record_merges_consecutive_identical_releases():
    ledger = PrivacyLedger()
    for _ in range(3):
        ledger.record(noise_multiplier=1.0, sample_rate=0.1)
    ledger.record(noise_multiplier=1.0, sample_rate=0.2)
    ledger.record(noise_multiplier=1.0, sample_rate=0.1, steps=2)
    ledger.record_gaussian(noise_multiplier=10.0)
    ledger.record_gaussian(noise_multiplier=10.0)
    ledger.record_tree(noise_multiplier=5.0, rounds_per_epoch=10)
    ledger.record_tree(noise_multiplier=5.0, rounds_per_epoch=10)
    assert ledger.events == (
        PoissonGaussianEvent(1.0, 0.1, 3),
        PoissonGaussianEvent(1.0, 0.2, 1),
        PoissonGaussianEvent(1.0, 0.1, 2),
        GaussianEvent(10.0, 2),
        TreeAggregationEvent(5.0, 10, 2),
    )


def test_record_takes_keyword_arguments_only():
    with pytest.raises(TypeError):
        PrivacyLedger().record(1.0, 0.1)  # type: ignore[misc]


@settings(deadline=None, max_examples=50)
@given(st.lists(any_event, max_size=8))
def test_json_round_trip(events):
    ledger = PrivacyLedger(events)
    text = ledger.to_json()
    again = PrivacyLedger.from_json(text)
    assert again == ledger
    assert again.events == ledger.events
    assert json.loads(again.to_json()) == json.loads(text)
    for event in events:
        assert event_from_dict(json.loads(json.dumps(event.to_dict()))) == event


def test_from_json_rejects_damaged_ledgers():
    with pytest.raises(PrivacyError, match="not valid JSON"):
        PrivacyLedger.from_json("{")
    with pytest.raises(PrivacyError, match="format"):
        PrivacyLedger.from_json('{"events": []}')
    with pytest.raises(PrivacyError, match="type"):
        PrivacyLedger.from_dict({"format": "lfb-privacy-ledger/1", "events": [{"type": "laplace"}]})
    with pytest.raises(PrivacyError, match="fields"):
        event_from_dict({"type": "gaussian", "noise_multiplier": 1.0})


@settings(deadline=None, max_examples=15)
@given(st.lists(small_poisson, min_size=1, max_size=4), st.floats(1e-8, 1e-3))
def test_rdp_epsilon_equals_opacus_applied_step_by_step(events, delta):
    from opacus.accountants import RDPAccountant

    ledger = PrivacyLedger()
    direct = RDPAccountant()
    for event in events:
        for _ in range(event.steps):
            ledger.record(noise_multiplier=event.noise_multiplier, sample_rate=event.sample_rate)
            direct.step(noise_multiplier=event.noise_multiplier, sample_rate=event.sample_rate)
    assert ledger.epsilon(delta, accountant="rdp") == pytest.approx(direct.get_epsilon(delta), rel=1e-12)
    assert ledger.epsilon(delta) == ledger.epsilon(delta, accountant="rdp")  # auto -> rdp


@settings(deadline=None, max_examples=20)
@given(st.lists(any_event, min_size=1, max_size=5), st.floats(1e-8, 1e-3))
def test_tree_epsilon_equals_dp_accounting_applied_directly(events, delta):
    import dp_accounting as dpa

    direct = dpa.rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_SPECIAL)
    for e in events:
        if isinstance(e, PoissonGaussianEvent):
            inner = dpa.PoissonSampledDpEvent(e.sample_rate, dpa.GaussianDpEvent(e.noise_multiplier))
            direct.compose(inner, e.steps)
        elif isinstance(e, TreeAggregationEvent):
            direct.compose(dpa.SingleEpochTreeAggregationDpEvent(e.noise_multiplier, e.rounds_per_epoch), e.epochs)
        else:
            direct.compose(dpa.GaussianDpEvent(e.noise_multiplier), e.count)
    ledger = PrivacyLedger(events)
    assert ledger.epsilon(delta, accountant="tree") == pytest.approx(direct.get_epsilon(delta), rel=1e-12)


def test_pld_epsilon_equals_dp_accounting_applied_directly():
    import dp_accounting as dpa

    ledger = PrivacyLedger()
    ledger.record(noise_multiplier=1.2, sample_rate=0.05, steps=30)
    ledger.record_gaussian(noise_multiplier=10.0)
    direct = dpa.pld.PLDAccountant()
    direct.compose(dpa.PoissonSampledDpEvent(0.05, dpa.GaussianDpEvent(1.2)), 30)
    direct.compose(dpa.GaussianDpEvent(10.0))
    assert ledger.epsilon(1e-6) == pytest.approx(direct.get_epsilon(1e-6), rel=1e-12)


def test_empty_and_non_private_ledgers():
    assert PrivacyLedger().epsilon(1e-6) == 0.0
    ledger = PrivacyLedger()
    ledger.record(noise_multiplier=0.0, sample_rate=1.0)  # the non-private reference
    for accountant in ("rdp", "tree", "pld", "prv"):
        assert ledger.epsilon(1e-6, accountant) == float("inf")
