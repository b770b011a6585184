"""The evaluator of a run: validation and test texts, downstream training, the metrics of a synthetic set and the
cached reference rows (public, non-private, generator-only). Its source is part of the reference rows' cache key
(``run/reference_code.py``), as is that of ``run/seed.py``, whose run of a reference method (``lfb eval --method
non-private``) stores its rows for later runs."""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from largefedbench import __version__
from largefedbench.config_overrides import config_to_dict
from largefedbench.contract import PublicResources, Selection
from largefedbench.data.public_corpus import held_out_slice
from largefedbench.io import atomic_write_json
from largefedbench.paths import lfb_home
from largefedbench.privacy import PrivacyBudget
from largefedbench.run.presets import preset_config
from largefedbench.run.reference_code import reference_code_fingerprint
from largefedbench.run.seed_result import jsonable

if TYPE_CHECKING:
    from largefedbench.run.request import Prepared

__all__ = ["LOSS_TEXTS", "REFERENCE_ROWS", "Evaluator"]

REFERENCE_ROWS = ("public", "non-private", "generator-only")  # the rows every entry carries (cached per seed)
LOSS_TEXTS = 4096  # synthetic texts the ε = 0 model's loss is measured on (the paper preset writes 1,000,000)


class Evaluator:
    """The harness's side of a run: validation/test texts, downstream training, cached references."""

    def __init__(self, prep: Prepared, bundle, log: Callable[[str], None]) -> None:
        self.prep, self.bundle, self.log = prep, bundle, log
        fd = prep.fd
        self.validation_texts = fd.validation.all_spans()
        self.test_texts = fd.test.all_spans()
        self.training = prep.profile.downstream_training
        self._novel = None
        self.select_on = getattr(prep.request, "select_on", "private")
        corpus = bundle.public_corpus
        # --select-on public: a held-out slice of the public corpus selects; the methods and replay get the rest
        self.public_corpus, self.held_out = (held_out_slice(corpus) if self.select_on == "public" else (corpus, None))

    def accuracy(self, model, texts: list[str], targets=None) -> dict[str, float]:
        from largefedbench.evaluation import next_token_accuracy

        return next_token_accuracy(model, self.bundle.tokenizer, texts, max_len=self.training.max_len,
                                   batch_size=self.training.eval_batch_size, targets=targets)

    @property
    def novel(self):
        """The window-novel tokens of the run (train clients against the methods' public corpus), computed once."""
        if self._novel is None:
            from largefedbench.evaluation.novel_tokens import window_novel_tokens

            corpus = self.public_corpus
            self._novel = window_novel_tokens(self.bundle.tokenizer, self.prep.fd.train.all_spans(), corpus.spans,
                                              reference=f"{corpus.kind}: {corpus.source} ({corpus.n_spans} spans)")
        return self._novel

    def test_metrics(self, model) -> dict[str, float]:
        """Next-token accuracy on the test clients, and top-1 on their window-novel targets (``novel_top1``)."""
        metrics = self.accuracy(model, self.test_texts)
        novel = self.accuracy(model, self.test_texts, targets=self.novel.ids) if self.novel.ids else {"top1": math.nan, "n_tokens": 0}
        return {**metrics, "novel_top1": novel["top1"], "novel_n_tokens": novel["n_tokens"]}

    def token_counts(self, texts: list[str]) -> np.ndarray:
        """The downstream tokenizer's id counts over ``texts``."""
        from largefedbench.evaluation import token_counts

        tok = self.bundle.tokenizer
        return token_counts(tok(list(texts), add_special_tokens=False)["input_ids"], len(tok))

    @functools.cached_property
    def validation_counts(self) -> np.ndarray:
        return self.token_counts(self.validation_texts)

    @property
    def held_out_description(self) -> str:
        """What model selection runs on, as the entry states it."""
        if self.held_out is None:
            return f"the validation clients' spans ({len(self.validation_texts)}), read without noise"
        return f"{self.held_out.source}: {self.held_out.n_spans} spans, never trained on"

    def replay_texts(self, n_texts: int, seed: int) -> list[str]:
        """The public spans mixed into a fine-tuning set of ``n_texts`` texts (:meth:`Selection.replay`)."""
        return self.selection(seed).replay(n_texts, seed)

    def selection(self, seed: int) -> Selection:
        """Model selection for ``seed`` (``fed.selection``): on the validation clients (``--select-on private``) or
        on the held-out public slice (``public``); the public replay is drawn from the methods' part of the corpus."""
        from largefedbench.models.embedder import corpus_embedding_path, embedding_cache_path

        b = self.bundle
        if self.held_out is None:
            on, texts, source = "private", self.validation_texts, "the validation clients' spans"
            cache = embedding_cache_path(self.prep.fd, "validation", b.embedder_id, b.root)
        else:
            on, texts, source = "public", self.held_out.spans, self.held_out.source
            cache = corpus_embedding_path(self.held_out, b.embedder_id, b.root)
        return Selection(on=on, source=source, texts=texts, tokenizer=b.tokenizer, embedder=b.embedder,
                         training=self.training, new_downstream=b.new_downstream, seed=seed,
                         replay_pool=self.public_corpus.spans, embeddings_cache=cache,
                         progress=self.prep.request.progress)

    def fine_tune(self, texts: list[str], seed: int, selection: Selection | None = None):
        """The ε = 0 downstream model fine-tuned on ``texts`` and the public replay, at its best epoch on the held-out
        texts (:class:`~largefedbench.evaluation.downstream.DownstreamResult`); ``selection`` records the choice."""
        selection = selection or self.selection(seed)
        return selection.fine_tune(texts, seed, progress=self.prep.request.progress)

    def train_on(self, texts: list[str], seed: int):
        return self.fine_tune(texts, seed).model

    def public_resources(self, seed: int, run_dir: Path | None) -> PublicResources:
        """What the method gets besides the federation: the public corpus (less the held-out slice under
        ``--select-on public``), the models and the seed; nothing of the snapshot but its name, window and hash."""
        models = self.bundle
        if self.held_out is not None:  # the bundle names its corpus too: the method's copy names the methods' part
            models = copy.copy(self.bundle)
            models.public_corpus = self.public_corpus
        return PublicResources(models=models, seed=seed, run_dir=run_dir, progress=self.prep.request.progress,
                               corpus=self.public_corpus, snapshot=self.prep.fd.manifest)

    @property
    def executor(self):
        """The run's executor, made on first use and kept for every seed (one Ray cluster, one set of workers)."""
        from largefedbench.executors import make_executor

        if getattr(self, "_executor", None) is None:
            self._executor = make_executor(self.prep.request.executor, address=self.prep.request.ray_address)
        return self._executor

    def federation(self, method_cls: type, seed: int):
        from largefedbench.federation import Federation, SpanEmbeddings

        embeddings = None
        if getattr(method_cls, "needs_span_embeddings", False):
            offsets = np.concatenate([[0], np.cumsum(self.prep.fd.train.span_counts())])
            if self.prep.request.executor == "ray":  # block by block into the object store, never whole on the driver
                from largefedbench.executors import BLOCK_BYTES

                vectors = self.executor.stage_rows(self.bundle.span_embedding_blocks(
                    self.prep.fd, "train", block_bytes=BLOCK_BYTES, progress=self.prep.request.progress))
            else:
                vectors = self.bundle.span_embeddings(self.prep.fd, "train", progress=self.prep.request.progress)
            embeddings = SpanEmbeddings(vectors, offsets)
        fed = Federation(self.prep.fd.train, seed=seed, embeddings=embeddings, executor=self.executor,
                         noise_free=self.prep.request.noise_free,
                         shuffle_releases=self.prep.request.shuffled_releases)
        fed.selection = self.selection(seed)
        return fed

    # references, cached per (snapshot, public corpus, profile models, downstream training, config, seed, the code)
    def _reference_path(self, name: str, seed: int | None, config: dict[str, Any] | None = None) -> Path:
        info = self.bundle.describe()
        corpus = self.bundle.public_corpus
        key = {"snapshot": self.prep.fd.manifest["content_sha256"], "profile": self.prep.profile.name,
               "downstream": info.get("downstream", {}).get("sha256") or info.get("downstream", {}).get("id"),
               "training": dataclasses.asdict(self.training), "lfb": __version__, "metrics": 2,
               "code": reference_code_fingerprint(name)}
        if corpus.kind != "split":
            key["public"] = corpus.sha256
        if self.select_on != "private":  # only when set, so rows cached before --select-on keep their keys
            key["select_on"] = self.select_on
        if config is not None:  # the generator-only row: also the generator's weights and the dtype it samples in
            from largefedbench.models.precision import generation_dtype

            key["config"] = config
            key["generator"] = info.get("generator", {}).get("sha256") or info.get("generator", {}).get("id")
            key["sampling"] = [self.bundle.device.type, str(generation_dtype(self.bundle.device))]
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
        home = self.prep.request.home or lfb_home()
        return Path(home) / "references" / digest / (f"{name}-seed{seed}.json" if seed is not None else f"{name}.json")

    def reference(self, name: str, seed: int) -> dict[str, float]:
        """The test metrics of the reference ``name`` (``public``, ``non-private`` or ``generator-only``) for
        ``seed``, computed once and cached; the generator-only row runs with the run's preset."""
        cls = self._reference_class(name)
        config = self.reference_config(name)
        path = self.reference_path(name, seed)
        if path.exists():
            return json.loads(path.read_text())
        on_board = self.board_reference_path(name, seed)
        if on_board.is_file():  # committed with the board (another machine or session computed it): same key
            metrics = json.loads(on_board.read_text())
            atomic_write_json(path, metrics)
            return metrics
        self.log(f"computing the {name} reference (ε = {cls.fixed_epsilon:g}, seed {seed}); cached for later runs")
        fed = self.federation(cls, seed)
        artifact = cls().train(fed, self.public_resources(seed, None), config, PrivacyBudget(cls.fixed_epsilon, 0.0))
        model = self.train_on(artifact.texts, seed) if artifact.kind == "synthetic text" else artifact.model
        metrics = jsonable(self.test_metrics(model))
        if artifact.kind == "synthetic text":
            metrics.update(self.synthetic_stats(artifact.texts))
        atomic_write_json(path, metrics)
        atomic_write_json(on_board, metrics)
        return metrics

    def reference_path(self, name: str, seed: int) -> Path:
        """Where the reference row ``name`` of ``seed`` is cached (the public row: one file for every seed)."""
        config = config_to_dict(self.reference_config(name)) if name == "generator-only" else None
        return self._reference_path(name, None if name == "public" else seed, config)

    def reference_config(self, name: str) -> Any:
        """The config a reference row runs with: the run's preset for the generator-only row, else the default."""
        cls = self._reference_class(name)
        return preset_config(cls, self.prep.preset) if name == "generator-only" else cls.Config()

    def board_reference_path(self, name: str, seed: int) -> Path:
        """The copy of :meth:`reference_path` kept with the board's run folders (``<out>/.runs/references/``, same
        key): git does not ignore it, so committed with the board's finished seeds it spares another machine or a
        later session the row's computation (the non-private row is the longest training of a run)."""
        home = Path(self.prep.request.home or lfb_home()) / "references"
        path = self.reference_path(name, seed)
        return self.prep.request.out / ".runs" / "references" / path.relative_to(home)

    def remember_reference(self, name: str, seed: int, metrics: dict[str, Any]) -> None:
        """Store a reference's metrics that a run of the reference method itself computed (same settings)."""
        for path in (self.reference_path(name, seed), self.board_reference_path(name, seed)):
            if not path.exists():
                atomic_write_json(path, jsonable(metrics))

    @staticmethod
    def _reference_class(name: str) -> type:
        from largefedbench.registry import resolve_method

        return resolve_method(name).cls

    @functools.cached_property
    def public_validation_loss(self) -> float:
        """The ε = 0 downstream model's mean loss on the validation spans."""
        return self.accuracy(self.bundle.new_downstream(), self.validation_texts)["loss"]

    def public_loss_vs_clients(self, texts: list[str]) -> float | None:
        """The ε = 0 downstream's mean loss on the non-blank ``texts`` (``LOSS_TEXTS`` of them, evenly spaced, where
        there are more) minus its loss on the validation spans: how much in the texts the on-device model cannot
        already predict, against the clients' text (below 0: they are more familiar to it than the clients' are);
        None when every text is blank."""
        texts = [t for t in texts if t.strip()]
        if not texts:
            return None
        picks = np.linspace(0, len(texts) - 1, min(len(texts), LOSS_TEXTS)).round().astype(int)
        sample = [texts[i] for i in picks]
        return self.accuracy(self.bundle.new_downstream(), sample)["loss"] - self.public_validation_loss

    def synthetic_stats(self, texts: list[str], embeddings: np.ndarray | None = None) -> dict[str, float]:
        """FID of synthetic texts (or of their ``embeddings``, when already computed) to the validation spans, their
        unigram JSD to the validation spans, mean pairwise cosine (``evaluation.text_stats``) and the ε = 0 model's
        loss on them against the clients' (:meth:`public_loss_vs_clients`) and, on the demos, the share naming a
        private-only topic."""
        from largefedbench.evaluation import fid, mean_pairwise_cosine, unigram_jsd
        from largefedbench.models import embed

        synth = embed(texts, self.bundle.embedder) if embeddings is None else embeddings
        stats = {"fid": float(fid(synth, self.bundle.span_embeddings(self.prep.fd, "validation", progress=False))),
                 "pairwise_cosine": mean_pairwise_cosine(synth)}
        counts = self.token_counts(texts)
        if counts.sum() > 0:
            stats["unigram_jsd"] = unigram_jsd(counts, self.validation_counts)
        familiarity = self.public_loss_vs_clients(texts)
        if familiarity is not None:
            stats["public_loss_vs_clients"] = familiarity
        if self.prep.fd.synthetic:
            from largefedbench.data.demo_lexicon import private_topic_share

            stats["topic_share"] = private_topic_share(texts)
        return stats
