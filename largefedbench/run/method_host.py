"""The method's process (``python -m largefedbench.run.method_host``, started by :mod:`largefedbench.sandbox.server`): it reads its run description from the channel on
stdin/stdout, loads the public corpus and the profile's models, resolves and configures the method, runs ``train()``
against :class:`~.proxy.FederationProxy`, writes the artifact as tensors and JSON into its own folder and says so.
It never sees a private split: the federation, the held-out texts and the scorer stay in the harness."""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any


def _channel():
    from largefedbench.sandbox.wire import Channel

    reader = os.fdopen(os.dup(0), "rb", buffering=0)
    writer = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # the method's prints go to stderr; stdout carries only messages
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    sys.stdout = sys.stderr
    return Channel(reader, writer)


#: the class attributes of a method the harness reads (the contract's, with their defaults on Method)
DESCRIBED = ("name", "paper", "output", "status", "fixed_epsilon", "needs_span_embeddings", "audit_by_releases",
             "retired_settings", "introduced_settings", "version")


def describe(init: dict[str, Any]) -> dict[str, Any]:
    """The method ``init["method"]`` names as the harness records it, imported here so the harness never imports it:
    its contract attributes, its class's module and name, its Config's fields and docstring, the configuration of
    ``init["preset"]`` with ``init["overrides"]`` (checked here: a bad override is the user's error) and each preset's
    (for ``lfb methods NAME``)."""
    import dataclasses
    import inspect

    from largefedbench.config_overrides import config_from_overrides, config_json
    from largefedbench.registry import get_method
    from largefedbench.run.presets import PRESETS, preset_config, preset_or_none
    from largefedbench.run.seed_result import jsonable

    sys.path[:0] = [p for p in init.get("sys_path", []) if p not in sys.path]
    cls = get_method(init["method"])
    config = config_from_overrides(cls.Config, preset_config(cls, init["preset"]), dict(init["overrides"]))
    fields = [[f.name, f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))]
              for f in dataclasses.fields(cls.Config)]
    module = sys.modules.get(cls.__module__)
    return {"op": "described", "module": cls.__module__, "qualname": cls.__qualname__,
            "file": getattr(module, "__file__", None), "attributes": jsonable({a: getattr(cls, a) for a in DESCRIBED}),
            "config_class": cls.Config.__name__, "fields": fields, "config": config_json(config),
            "config_doc": inspect.getdoc(cls.Config) or "",
            "presets": {p: None if (c := preset_or_none(cls, p)) is None else config_json(c) for p in PRESETS}}


def run(channel, init: dict[str, Any]) -> dict[str, Any]:
    """Run the method ``init`` describes; the ``done`` message's fields."""
    from largefedbench.config_overrides import config_from_overrides, config_json
    from largefedbench.contract import PublicResources
    from largefedbench.data.public_corpus import PublicCorpus
    from largefedbench.errors import MethodError
    from largefedbench.models import load_models
    from largefedbench.privacy import PrivacyBudget
    from largefedbench.registry import resolve_method
    from largefedbench.rounds.artifact_state import split_model
    from largefedbench.rounds.state_file import write_state
    from largefedbench.run.presets import preset_config
    from largefedbench.run.seed_result import jsonable
    from largefedbench.sandbox.proxy import FederationProxy, SelectionProxy
    from largefedbench.sandbox.server import ARTIFACT_FILE

    sys.path[:0] = [p for p in init.get("sys_path", []) if p not in sys.path]
    cls = resolve_method(init["method"]).cls
    config = config_from_overrides(cls.Config, preset_config(cls, init["preset"]), dict(init["overrides"]))
    if config_json(config) != init["config"]:
        raise MethodError("the method's configuration in its own process differs from the harness's "
                          f"({config_json(config)} vs {init['config']}): its presets must not depend on the process")
    c = init["corpus"]
    corpus = PublicCorpus(c["kind"], c["source"], tuple(tuple(d) for d in c["documents"]), c["sha256"],
                          tuple(dict(m) for m in c["metadata"]))
    stub = SimpleNamespace(manifest=dict(init["manifest"]), name=init["manifest"].get("name"))
    bundle = load_models(init["profile"], stub, device=init["device"], progress=init["progress"],
                         home=init["home"], public=corpus)
    method_dir = Path(init["method_dir"])
    public = PublicResources(models=bundle, seed=init["seed"], corpus=corpus, snapshot=init["manifest"],
                             run_dir=method_dir, progress=init["progress"])
    s = init["selection"]
    selection = SelectionProxy(channel, on=s["on"], source=s["source"], new_downstream=bundle.new_downstream,
                               texts=s.get("texts"))
    fed = FederationProxy(channel, n_clients=init["n_clients"], client_ids=tuple(init["client_ids"]), selection=selection)
    budget = PrivacyBudget(float(init["epsilon"]), float(init["delta"]))
    fed.clock.start()
    artifact = cls().train(fed, public, config, budget)
    artifact, weights = split_model(artifact)
    write_state(method_dir / ARTIFACT_FILE, {"artifact": artifact, "model": weights}, what="the method's output")
    return {"op": "done", "calibrations": jsonable(budget.calibrations), "method_seconds": fed.clock.seconds(),
            "method_stages": fed.clock.stages(), "carried_seconds": fed.clock.before_seconds,
            "selections": jsonable(selection.loop_records())}


def main() -> int:
    channel = _channel()
    try:
        init = channel.recv()
        channel.send(describe(init) if init.get("op") == "describe" else run(channel, init))
        return 0
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the harness as a message
        from largefedbench.errors import LfbError

        trace = "" if isinstance(exc, LfbError) else traceback.format_exc(limit=-8)
        try:
            channel.send({"op": "failed", "error": f"{type(exc).__name__}: {exc}", "kind": type(exc).__name__,
                          "traceback": trace})
        except Exception:  # noqa: BLE001 - the harness is gone
            pass
        return 1


if __name__ == "__main__":
    sys.exit(main())
