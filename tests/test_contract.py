"""The method contract (largefedbench/contract.py) with a dummy method: the Method defaults the harness relies on,
Artifact, PublicResources (public data, seeded streams, checkpoints for resume) and --set overrides of a Config."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from echo_method import Echo, EchoConfig

from largefedbench.contract import Artifact, Method, PublicResources, Selection, config_from_overrides, config_to_dict
from largefedbench.data.public_corpus import _corpus
from largefedbench.errors import InputError, MethodError
from largefedbench.registry import BUILTIN_METHODS, get_method

MANIFEST = {"name": "fake", "dataset": "d", "window": ["2024-01", "2024-02"], "content_sha256": "0" * 64}
PUBLIC_SPANS = ["a public span", "  ", "another"]


class FakeFederation:
    """The federation's resume interface only: a state that a checkpoint must restore."""

    def __init__(self, rounds_done=0):
        self.rounds_done = rounds_done

    def state_dict(self):
        return {"rounds_done": self.rounds_done}

    def load_state_dict(self, state):
        self.rounds_done = state["rounds_done"]


def resources(run_dir=None, **kwargs) -> PublicResources:
    return PublicResources(models=None, seed=7, run_dir=run_dir, progress=False, snapshot=MANIFEST,
                           corpus=_corpus("generic", "test", [tuple(PUBLIC_SPANS)]), **kwargs)


def test_method_gives_the_defaults_the_harness_reads():
    assert (Echo.status, Echo.fixed_epsilon, Echo.needs_span_embeddings) == ("runnable", None, False)
    with pytest.raises(NotImplementedError):
        Method().train(None, None, None, None)


def test_the_dummy_method_trains_through_the_contract():
    artifact = Echo().train(None, resources(), EchoConfig.tiny(), None)
    assert artifact.kind == "synthetic text"
    assert artifact.texts == ["a public span"]  # blank texts are dropped
    assert artifact.info == {"n": 2}


def test_artifacts_refuse_empty_output():
    with pytest.raises(MethodError, match="no synthetic text"):
        Artifact.synthetic(["", "  ", None])
    with pytest.raises(MethodError, match="returned no model"):
        Artifact.trained_model(None)
    assert Artifact.trained_model("m", sigma=1.5).info == {"sigma": 1.5}


def test_artifacts_carry_their_history_apart_from_info():
    rows = [{"round": 0, "fid": 1.0}]
    artifact = Artifact.synthetic(["a span"], history=rows, sigma=2.0)
    assert artifact.history == rows and artifact.info == {"sigma": 2.0}
    assert artifact.history is not rows  # a copy: the method's list may go on changing
    assert Artifact.trained_model("m", history=rows).history == rows
    assert Artifact.synthetic(["a span"]).history == []


def test_public_resources_streams_are_seeded_and_independent():
    a, b = resources(), resources()
    assert np.array_equal(a.rng(1).integers(0, 1 << 30, 8), b.rng(1).integers(0, 1 << 30, 8))
    assert not np.array_equal(a.rng(1).integers(0, 1 << 30, 8), a.rng(2).integers(0, 1 << 30, 8))
    assert a.snapshot["name"] == "fake" and a.public_texts() == PUBLIC_SPANS


def test_checkpoints_resume_the_method_and_the_federation(tmp_path):
    public = resources(tmp_path)
    assert public.resume(FakeFederation()) is None
    public.save_round(FakeFederation(rounds_done=3), 2, {"total": [1.0, 2.0]})
    fed = FakeFederation()
    assert public.resume(fed) == (2, {"total": [1.0, 2.0]}) and fed.rounds_done == 3
    public.clear_checkpoint()
    assert public.resume(FakeFederation()) is None and not list(tmp_path.iterdir())


def test_without_a_run_dir_nothing_is_checkpointed(tmp_path):
    public = resources(None)
    public.save_round(FakeFederation(), 0, {"x": 1})
    assert public.resume(FakeFederation()) is None


def test_a_bare_run_has_no_selection_and_no_private_access():
    from largefedbench.contract import selection_of

    with pytest.raises(MethodError, match="no held-out data to select on"):
        selection_of(FakeFederation())
    public = resources()
    for name in ("validation_accuracy", "validation_embeddings", "train_downstream", "public", "_fd"):
        assert not hasattr(public, name)  # model selection is fed.selection's, recorded
    with pytest.raises(MethodError, match="no public corpus"):
        PublicResources(models=None, seed=0).public_texts()


def test_selection_records_every_choice():
    sel = Selection(on="public", source="held-out", texts=["x"], tokenizer=None, embedder=None, training=None,
                    new_downstream=None, seed=0)
    sel.record(by="harness", what="downstream epoch", metric="top1", chosen=2, candidates=5)
    assert sel.records() == [{"by": "harness", "what": "downstream epoch", "metric": "top1", "chosen": 2,
                              "candidates": 5, "on": "public"}]
    with pytest.raises(MethodError, match="select_on"):
        Selection(on="validation", source="", texts=[], tokenizer=None, embedder=None, training=None,
                  new_downstream=None, seed=0)


def test_set_overrides_are_typed_from_the_config_fields():
    cfg = config_from_overrides(EchoConfig, EchoConfig.tiny(), {
        "n": "5", "lr": "0.1", "scoring": "l2", "shuffle": "yes", "sizes": "3, 4", "label": "none"})
    assert cfg == dataclasses.replace(EchoConfig.tiny(), n=5, lr=0.1, scoring="l2", shuffle=True, sizes=(3, 4))
    assert config_from_overrides(EchoConfig, cfg, {"label": "run-a"}).label == "run-a"
    assert config_to_dict(EchoConfig())["clip"] == "inf" and config_to_dict(EchoConfig())["sizes"] == [1, 2]


@pytest.mark.parametrize("overrides, message", [
    ({"m": "1"}, "unknown --set key m for EchoConfig; its keys are: clip, label, lr, n"),
    ({"n": "two"}, "--set n=two: expected int"),
    ({"scoring": "dot"}, "--set scoring=dot: must be one of cosine, l2"),
    ({"shuffle": "maybe"}, "--set shuffle=maybe: expected bool"),
    ({"lr": "nan"}, "--set lr=nan: must be a finite number"),
])
def test_bad_set_overrides_say_what_is_allowed(overrides, message):
    with pytest.raises(InputError) as info:
        config_from_overrides(EchoConfig, EchoConfig(), overrides)
    assert message in str(info.value)


def test_the_contract_re_exports_the_config_helpers_methods_import_from_it():
    from largefedbench import config_overrides, contract

    assert contract.config_to_dict is config_overrides.config_to_dict
    assert contract.config_from_overrides is config_overrides.config_from_overrides


@pytest.mark.parametrize("name", sorted(BUILTIN_METHODS))
def test_a_built_in_methods_introduced_settings_are_config_fields_that_each_preset_accepts(name):
    """``introduced_settings`` (what ``reproduce`` runs an older entry with) names fields of the method's Config, and
    every preset still builds a valid config with them applied."""
    cls = get_method(name)
    introduced = cls.introduced_settings
    fields = {f.name for f in dataclasses.fields(cls.Config)} if introduced else set()
    assert set(introduced) <= fields, set(introduced) - fields
    for preset in ("paper", "cpu", "tiny") if introduced else ():
        base = getattr(cls.Config, preset)() if preset != "paper" else cls.Config()
        dataclasses.replace(base, **introduced)
