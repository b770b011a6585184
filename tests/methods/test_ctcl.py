"""CTCL: c-TF-IDF keywords, the post-filter, topic assignment and the DP pipeline end to end."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import train_end_to_end
from largefedbench.methods.ctcl import (
    CTCL,
    CTCLConfig,
    TopicModel,
    ctfidf_keywords,
    keep_sample,
)

from largefedbench.privacy import PoissonGaussianEvent, PrivacyBudget, epsilon_of
from largefedbench.synthetic.histograms import fit_buckets

BUDGET = PrivacyBudget(4.0, 1e-5)


def test_ctfidf_keywords_rank_topic_specific_words_first():
    docs = ["apple banana apple", "apple cherry", "engine wheel engine", "engine road apple"]
    labels = np.array([0, 0, 1, 1])
    kw = ctfidf_keywords(docs, labels, 2, 2)
    # topic 0: apple 3/5, banana 1/5, cherry 1/5; apple is also in topic 1 (f=4, A=5) but still scores highest
    assert kw[0][0] == "apple" and set(kw[0][1:]) <= {"banana", "cherry"}
    assert kw[1][0] == "engine"
    assert ctfidf_keywords(["the and", "of"], np.array([0, 1]), 2, 3) == [[], []]  # stop words only


def test_keep_sample_is_the_released_post_filter():
    assert keep_sample("the cells divide quickly")
    assert not keep_sample("1234 5678 !!")  # no alphabetic word
    assert not keep_sample("a " + "x" * 26)  # a word longer than 25 characters
    assert not keep_sample(" ".join(["word"] * 21))
    assert keep_sample(" ".join(["word"] * 20))


def test_client_topic_is_the_nearest_centroid_of_its_mean_span():
    rng = np.random.default_rng(0)
    docs = np.concatenate([np.eye(4)[0] + 0.01 * rng.standard_normal((10, 4)), np.eye(4)[1] + 0.01 * rng.standard_normal((10, 4))])
    model = TopicModel(fit_buckets(docs, 2, seed=0, n_init=2), [["x"], ["y"]])
    spans = np.array([[1.0, 0.0, 0, 0], [0.6, 0.8, 0, 0], [0.0, 1.0, 0, 0]])
    topics = model.client_topics(spans, np.array([0, 0, 1]), 2)
    assert topics[0] == model.buckets.labels[0] and topics[1] == model.buckets.labels[10]
    assert model.condition(0) == "Keywords: x\n"


@pytest.mark.slow
def test_ctcl_end_to_end(tiny, tmp_path):
    cfg = CTCLConfig.tiny()
    fed, art = train_end_to_end(tiny, tmp_path, CTCL(), cfg, BUDGET)
    info = art.info

    planned = (PoissonGaussianEvent(info["noise_multiplier"], info["sample_rate"], cfg.dp_steps),
               PoissonGaussianEvent(cfg.histogram_noise_multiplier, 1.0, 1))
    assert fed.ledger.events == planned
    eps = fed.ledger.epsilon(BUDGET.delta)
    assert 0.97 * BUDGET.epsilon < eps <= BUDGET.epsilon + 1e-6
    assert eps == pytest.approx(epsilon_of(list(planned), BUDGET.delta), rel=1e-9)

    counts = np.asarray(info["generation_counts"])
    assert counts.sum() == cfg.n_synthetic and info["generated"] == cfg.n_synthetic
    # generation follows the noisy histogram: the largest noisy bin gets the most samples
    assert counts[int(np.argmax(info["noisy_histogram"]))] == counts.max()
    assert len(art.texts) == cfg.n_synthetic - info["filtered_out"]
    assert len(info["topic_keywords"]) == cfg.n_topics and all(info["topic_keywords"])
    assert info["public_pretraining"]["steps"] == cfg.public_pretrain_steps


@pytest.mark.slow
def test_ctcl_resumes_in_its_pretraining_and_in_its_dp_rounds(tiny, tmp_path):
    """Killed after a public-pretraining checkpoint, then after a DP round: the run ends with the texts, ledger and
    RNG of a run never killed (each stage resumes from its own checkpoint, in order)."""
    from conftest import Killed, killed_after

    budget = PrivacyBudget(4.0, 1e-5)
    cfg = dataclasses.replace(CTCLConfig.tiny(), public_pretrain_steps=30, public_pretrain_batch_size=4, dp_steps=2,
                              clients_per_round=20, n_synthetic=16, max_new_tokens=8)
    fed_a, straight = train_end_to_end(tiny, tmp_path / "a", CTCL(), cfg, budget)
    for dying in (killed_after(0, stage="public-pretraining"), killed_after(0)):
        with pytest.raises(Killed):
            train_end_to_end(tiny, tmp_path / "b", CTCL(), cfg, budget, resources=dying)
    fed_b, resumed = train_end_to_end(tiny, tmp_path / "b", CTCL(), cfg, budget)
    assert resumed.texts == straight.texts and resumed.info["public_pretraining"] == straight.info["public_pretraining"]
    a, b = fed_a.state_dict(), fed_b.state_dict()
    assert (a["ledger"], a["round"], a["rng"]) == (b["ledger"], b["round"], b["rng"])
