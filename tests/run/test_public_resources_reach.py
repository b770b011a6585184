"""What a method is handed reaches nothing private.

Under ``--public generic`` no attribute path from ``PublicResources`` reaches the loaded snapshot, any of its splits
(the pre-window records included: they are not the run's public resources) or a span of them, walking every attribute,
container, closure and bound method as an attacker would; ``fed.selection`` holds the held-out texts it selects on and
nothing else of the snapshot (no split object, no train or test span); with ``--select-on public`` the held-out slice
is public and apart from what the methods get.
"""

from __future__ import annotations

import functools
import types

import numpy as np
import pytest
from conftest import built_once

from largefedbench.run.eval import EvalRequest, prepare
from largefedbench.run.evaluator import Evaluator

pytestmark = pytest.mark.slow
LIMIT = 3_000_000  # objects walked at most (the tiny bundle: models, tokenizers, embedder)


@pytest.fixture(scope="module")
def generic_run(shared_root, tmp_path_factory):
    """A prepared tiny-profile run on the demo with ``--public generic`` and its bundle."""
    import dataclasses

    from largefedbench.models import TinyGPT2, load_models
    from largefedbench.models.profiles import PROFILES

    out = tmp_path_factory.mktemp("board")
    tiny = PROFILES["tiny"]
    quick = dataclasses.replace(tiny, **{role: dataclasses.replace(getattr(tiny, role), pretrain_steps=3)
                                         for role in ("downstream", "generator")
                                         if isinstance(getattr(tiny, role), TinyGPT2)})  # what is held, not how good

    def evaluator(select_on: str) -> Evaluator:
        request = prepare(EvalRequest(method="dp-fedavg", public="generic", home=shared_root, out=out, seeds=(0,),
                                      profile=quick, select_on=select_on, progress=False))
        request.fd = prep.fd  # the snapshot the bundle was loaded for: the objects the walk must not meet
        return Evaluator(request, bundle, lambda msg: None)

    prep = prepare(EvalRequest(method="dp-fedavg", public="generic", home=shared_root, out=out, seeds=(0,),
                               profile=quick, progress=False))
    with built_once(shared_root, "tiny-generic"):
        bundle = load_models(prep.profile, prep.fd, device="cpu", progress=False, home=shared_root, public="generic")
    return evaluator


def walk(root) -> tuple[dict[int, str], set[str]]:
    """Every object reachable from ``root`` through instance attributes, slots, container items, closures, default
    arguments, partials and bound methods (not modules, classes or a function's globals): ``{id: path}`` and every
    string met."""
    seen: dict[int, str] = {}
    strings: set[str] = set()
    keep = []  # holds what was walked so that no id is reused
    stack = [(root, "public")]
    while stack:
        obj, path = stack.pop()
        if isinstance(obj, str):
            strings.add(obj)
            continue
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, int, float, bool, bytes, complex)) or obj is None:
            continue
        assert len(seen) < LIMIT, f"walked more than {LIMIT} objects"
        seen[id(obj)] = path
        keep.append(obj)
        if isinstance(obj, np.ndarray) or type(obj).__name__ in ("Tensor", "Parameter"):
            continue
        children: list[tuple[object, str]] = []
        if isinstance(obj, dict):
            children += [(k, f"{path}.key") for k in obj] + [(v, f"{path}[{k!r}]") for k, v in obj.items()]
        elif isinstance(obj, (list, tuple, set, frozenset)):
            children += [(v, f"{path}[{i}]") for i, v in enumerate(obj)]
        if isinstance(obj, types.FunctionType):
            cells = obj.__closure__ or ()
            children += [(c.cell_contents, f"{path}.<closure {i}>") for i, c in enumerate(cells)
                         if c.cell_contents is not c]  # an empty cell has no contents
            children += [(obj.__defaults__, f"{path}.__defaults__"), (obj.__kwdefaults__, f"{path}.__kwdefaults__")]
        elif isinstance(obj, types.MethodType):
            children += [(obj.__self__, f"{path}.__self__"), (obj.__func__, f"{path}.__func__")]
        elif isinstance(obj, functools.partial):
            children += [(obj.func, f"{path}.func"), (obj.args, f"{path}.args"), (obj.keywords, f"{path}.keywords")]
        for name, value in _attributes(obj):
            children.append((value, f"{path}.{name}"))
        stack.extend(children)
    return seen, strings


def _attributes(obj) -> list[tuple[str, object]]:
    out = list(vars(obj).items()) if hasattr(obj, "__dict__") and not isinstance(obj, types.FunctionType) else []
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if isinstance(slot, str) and slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                out.append((slot, getattr(obj, slot)))
    return out


def private_objects(fd) -> dict[int, str]:
    """The snapshot, its splits (the pre-window one included) and their tables, by id."""
    found = {id(fd): "the snapshot"}
    for split in ("train", "validation", "test", "public"):
        found[id(fd[split])] = f"the {split} split"
        found[id(fd[split].table)] = f"the {split} split's table"
    return found


def test_public_resources_under_generic_reach_no_snapshot_and_no_private_span(generic_run):
    ev = generic_run("private")
    fd = ev.prep.fd
    public = ev.public_resources(0, None)
    assert public.corpus.kind == "generic" and public.public_metadata() == [{}] * len(public.corpus.documents)
    assert id(fd.test) in walk(types.SimpleNamespace(peek=lambda: fd))[0]  # a closure over the snapshot is seen
    seen, strings = walk(public)
    reached = {what: seen[i] for i, what in private_objects(fd).items() if i in seen}
    assert not reached, reached  # e.g. {"the snapshot": "public._fd"} when it held the snapshot
    for split in ("train", "validation", "test", "public"):
        spans = set(fd[split].all_spans())
        assert not spans & strings, f"a span of the {split} split is reachable from PublicResources"
    names = set(vars(public))
    assert not names & {"public", "_fd", "_validation_accuracy", "_train_downstream"}


def test_a_seeds_selection_holds_the_held_out_texts_and_nothing_else_of_the_snapshot(generic_run):
    for select_on in ("private", "public"):
        ev = generic_run(select_on)
        fd = ev.prep.fd
        selection = ev.selection(0)
        seen, strings = walk(selection)
        reached = {what: seen[i] for i, what in private_objects(fd).items() if i in seen}
        assert not reached, (select_on, reached)
        for split in ("train", "test", "public"):
            assert not set(fd[split].all_spans()) & strings, (select_on, split)
        validation = set(fd.validation.all_spans())
        assert (validation <= strings) == (select_on == "private")  # the validation clients' only where selected on


def test_select_on_public_holds_out_a_slice_nothing_trains_on(generic_run):
    ev = generic_run("public")
    public, selection = ev.public_resources(0, None), ev.selection(0)
    held, kept = set(selection.texts), set(public.public_texts())
    corpus = ev.bundle.public_corpus
    assert selection.on == "public" and held and not held & kept  # whole documents apart
    assert len(held) + len(kept) == len(set(corpus.spans))
    n_docs = len(corpus.documents)
    assert len(public.public_documents()) == n_docs - round(0.1 * n_docs)
    assert set(selection.replay(10 ** 6, seed=0)) <= kept  # the public replay never draws a held-out span
    assert not held & walk(public)[1]  # and no path from what the method gets reaches a held-out span
    again = generic_run("public").selection(1)
    assert again.texts == selection.texts  # the same slice for every seed (drawn by the corpus hash)
    assert "held-out 10% of documents" in selection.source
