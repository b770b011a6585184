"""CTCL — Tan, Xu, Xing, Hu & Wu, "Synthesizing Privacy-Preserving Text Data via Finetuning without Finetuning
Billion-Scale LLMs" (ICML 2025), App. H Algorithms 1–3, adapted to user-level DP over federated clients.

1. **Public pre-work (Alg. 1).** *CTCL-Topic*: a topic model over public documents — here the public (pre-window)
   clients of the snapshot, each embedded as the mean of its span embeddings, clustered by k-means (after a PCA to
   90% of the variance), each topic described by its top c-TF-IDF keywords (BERTopic's representation).
   *CTCL-Generator*: the profile's generator trained on public (condition → document) pairs whose condition is
   ``"Keywords: k1, k2, …\\n"`` of the document's topic (a LoRA merged into the weights).
2. **Private domain (Alg. 2).** Each client finds its topic on device (nearest topic centroid of its mean span
   embedding). (a) The generator is DP fine-tuned on the clients' spans conditioned on their topic keywords:
   DP-FedAvg on a new LoRA adapter, one local step of lr 1 and Adam on the server (= the paper's DP-Adam with one
   client as the unit). (b) The DP topic histogram: every client sends the one-hot of its topic through
   ``fed.private_sum`` (clip 1, the paper's σ = 10, ``fed.everyone()``).
3. **Synthesis (Alg. 3).** The number of samples per topic is proportional to the noisy histogram (clamped at 0,
   summing exactly to N_GEN as the released code tiles its generation list); each is generated from the topic's
   condition with nucleus sampling (top-p 0.95); the released code's post-filter drops samples with a word longer
   than 25 characters, without an alphabetic word, or with a word repeated more than 20 times.

Privacy: both releases are composed in one accountant; the calibration plan equals the ledger's events,
``[PoissonGaussianEvent(σ, q, rounds), PoissonGaussianEvent(10, 1, 1)]`` (the paper charges its fixed-σ histogram and
calibrates the DP-Adam σ for the rest, App. D).

Deviations from the paper: :data:`DEVIATIONS` (also in the artifact's ``info["deviations"]``).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
from largefedbench.methods._dp_generator import DPAdapterSettings, DPGeneratorMethod, histogram_release

from largefedbench.contract import Artifact
from largefedbench.fedtrain import FedAvgSettings, FlatParams, train_adapter
from largefedbench.fedtrain.generator import (
    conditional_prompt,
    generator_update,
    pretrain_on_public,
)
from largefedbench.models import embed
from largefedbench.synthetic.generation import generate, seed_for
from largefedbench.synthetic.histograms import (
    Buckets,
    fit_buckets,
    one_hot,
    proportional_counts,
)
from largefedbench.synthetic.lora import add_lora
from largefedbench.synthetic.scoring import client_embedding_sums

__all__ = ["CTCL", "DEVIATIONS", "CTCLConfig", "TopicModel", "ctfidf_keywords", "fit_topic_model", "keep_sample"]

DEVIATIONS = (
    ("user-level DP over clients instead of example-level DP-SGD: one client's averaged gradient is the DP-Adam unit "
     "(DP-FedAvg with one local step, Adam on the server, Poisson cohorts), and the topic histogram counts one "
     "document (client) per topic, as the paper's one example per topic"),
    ("CTCL-Topic is k-means over PCA-reduced all-MiniLM-L6-v2 embeddings of the run's public documents (--public: "
     "generic, c4 or the snapshot's pre-window split) with c-TF-IDF keywords, instead of BERTopic (UMAP + HDBSCAN) "
     "over Wikipedia"),
    ("CTCL-Generator is the profile's causal generator after public conditional training on the run's public "
     "documents (a merged LoRA), instead of a 140M seq2seq model pretrained on SlimPajama; the condition is "
     "'Keywords: ...' without the 'Document Type' line"),
    ("DP fine-tuning trains a LoRA adapter (not all weights) with a constant server lr (no warmup/linear decay, no "
     "weight decay); no repetition penalty in sampling; 64-token samples instead of 512"),
    "the two releases are composed by the benchmark's ledger accountant (RDP) instead of the PLD accountant",
)

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class CTCLConfig(DPAdapterSettings):
    """Defaults from Tan et al. (ICML 2025), §4.1.3 / App. D and the released code (tanyuqian/synthetic-private-data).

    DP finetuning (§4.1.3): DP-Adam, 2000 steps, batch 4096, clip 1.0; peak lr chosen from {1, 4}×{1e-3, 1e-4, 1e-5}
    (4e-4, the released code's default). Topic histogram: Gaussian noise multiplier 10 (§4.1.3). Generation:
    400K samples, nucleus top-p 0.95 (§4.1.3). Topic keywords: 10 per topic (BERTopic's default). The number of
    topics (BERTopic finds it with HDBSCAN) is set to 1000 here; the topic model uses every public document
    (``topic_corpus_size`` None); LoRA rank/α and the public conditional training steps are ours (the paper
    pretrains CTCL-Generator for ~24 h on 256 TPU cores).
    """

    # CTCL-Topic
    n_topics: int = 1000
    n_keywords: int = 10
    topic_pca_variance: float = 0.9
    topic_corpus_size: int | None = None
    # CTCL-Generator's public conditional training (ours)
    public_pretrain_steps: int = 1000
    public_pretrain_batch_size: int = 32
    public_pretrain_lr: float = 1e-4
    # DP fine-tuning (§4.1.3) and generation; the rest as DPAdapterSettings
    dp_steps: int = 2000
    clip: float = 1.0
    server_lr: float = 4e-4
    n_synthetic: int = 400_000

    @classmethod
    def tiny(cls) -> CTCLConfig:
        """About half a minute on a CPU with the tiny profile on the demo: 8 topics over 300 public documents, 60
        public steps, 3 DP rounds of ~100 clients, 120 samples."""
        return cls(n_topics=8, n_keywords=5, topic_corpus_size=300, public_pretrain_steps=60, public_pretrain_batch_size=16,
                   public_pretrain_lr=1e-2, dp_steps=3, clients_per_round=100, server_lr=1e-2, local_batch_size=8,
                   max_len=80, lora_rank=4, lora_alpha=8, n_synthetic=120, max_new_tokens=40)

    @classmethod
    def cpu(cls) -> CTCLConfig:
        """The ``cpu`` profile: 32 topics (5 keywords) over 3,000 public documents, 300 public conditional steps
        (batch 16, lr 1e-3), then DP-FedAvg's cpu cohorts (10 rounds of 300 clients, server Adam lr 5e-3) and 1,024
        samples of 48 new tokens (the cpu downstream's budget)."""
        return cls(n_topics=32, n_keywords=5, topic_corpus_size=3000, public_pretrain_steps=300, public_pretrain_batch_size=16,
                   public_pretrain_lr=1e-3, dp_steps=10, clients_per_round=300, server_lr=5e-3, local_batch_size=8,
                   max_len=80, lora_rank=4, lora_alpha=8, n_synthetic=1024, max_new_tokens=48, generation_batch_size=48)

    @classmethod
    def matched(cls) -> CTCLConfig:
        """The cpu preset at about POPri's compute (≈ 13 minutes a seed on 2 cores), scaled from its stage seconds
        measured on demo-prose (client updates 3,628 s, public conditional pretraining and topic model 2,198 s,
        generation 285 s of 6,273 s): 2 DP steps of 150 expected clients (a tenth of its client updates), 40 public
        conditional steps (from 300), the same 1,024 samples."""
        return dataclasses.replace(cls.cpu(), dp_steps=2, clients_per_round=150, public_pretrain_steps=40)

    def fedavg(self, n_clients: int) -> FedAvgSettings:
        """``dp_steps`` DP-Adam steps (§4.1.3)."""
        return self.fedavg_steps(self.dp_steps, n_clients)


# -- CTCL-Topic ---------------------------------------------------------------------------------------------
def ctfidf_keywords(documents: list[str], labels: np.ndarray, n_topics: int, n_words: int) -> list[list[str]]:
    """BERTopic's c-TF-IDF: the documents of each topic joined into one; score(t, w) = tf(t, w)/|t| · log(1 + A / f(w))
    with A the mean number of words per topic and f(w) the frequency of w over all topics; top ``n_words`` per topic
    (English stop words and one-letter tokens removed)."""
    from sklearn.feature_extraction.text import CountVectorizer

    joined = [" ".join(d for d, lab in zip(documents, labels) if lab == t) for t in range(n_topics)]
    vectorizer = CountVectorizer(stop_words="english", token_pattern=r"(?u)\b[^\W\d_][^\W\d_]+\b", lowercase=True)
    try:
        counts = vectorizer.fit_transform(joined).toarray().astype(np.float64)
    except ValueError:  # no words at all
        return [[] for _ in range(n_topics)]
    vocab = np.asarray(vectorizer.get_feature_names_out())
    tf = counts / np.maximum(counts.sum(1, keepdims=True), 1.0)
    freq = counts.sum(0)
    avg = counts.sum() / max(n_topics, 1)
    scores = tf * np.log(1.0 + avg / np.maximum(freq, 1.0))
    out = []
    for t in range(n_topics):
        order = np.argsort(-scores[t], kind="stable")
        out.append([str(vocab[i]) for i in order[:n_words] if scores[t, i] > 0])
    return out


@dataclass(frozen=True)
class TopicModel:
    """Topic centroids over document embeddings and each topic's keywords."""

    buckets: Buckets
    keywords: list[list[str]]

    @property
    def n_topics(self) -> int:
        return self.buckets.n_buckets

    def condition(self, topic: int) -> str:
        """The generator's condition for ``topic`` (CTCL's "Keywords: ..." line)."""
        return "Keywords: " + ", ".join(self.keywords[topic]) + "\n"

    def client_topics(self, span_vectors: np.ndarray, owner: np.ndarray, n_clients: int) -> np.ndarray:
        """Each client's topic: the nearest centroid of the mean of its span embeddings (inside a client function)."""
        return self.buckets.assign(client_embedding_sums(span_vectors, owner, n_clients))

    def broadcast(self) -> tuple[np.ndarray, ...]:
        """What a client downloads to find its own topic (the buckets' PCA and centroids)."""
        return self.buckets.broadcast()


def fit_topic_model(public, n_topics: int, n_keywords: int, *, variance: float, seed: int,
                    corpus_size: int | None = None) -> tuple[TopicModel, np.ndarray, list[list[str]]]:
    """CTCL-Topic on the public clients (all, or a seeded sample of ``corpus_size``): returns the model, each used
    public document's topic and those documents' spans."""
    spans = public.public_documents()
    if corpus_size is not None and corpus_size < len(spans):
        keep = np.sort(public.rng(0x70C).choice(len(spans), size=corpus_size, replace=False))
        spans = [spans[i] for i in keep]
        vectors = embed([x for s in spans for x in s], public.models.embedder)
    else:
        vectors = public.public_embeddings()
    counts = np.asarray([len(s) for s in spans])
    owner = np.repeat(np.arange(len(spans)), counts)
    docs = client_embedding_sums(vectors, owner, len(spans))
    buckets = fit_buckets(docs, min(n_topics, len(spans)), variance=variance, seed=seed, n_init=3, max_iter=300)
    keywords = ctfidf_keywords([" ".join(s) for s in spans], buckets.labels, buckets.n_buckets, n_keywords)
    return TopicModel(buckets, keywords), buckets.labels, spans


def keep_sample(text: str, *, max_word_chars: int = 25, max_repeats: int = 20) -> bool:
    """The released code's post-filter: no word longer than 25 characters, at least one alphabetic word, no word
    repeated more than 20 times."""
    words = _WORD.findall(text.lower())
    if not words or not any(w.isalpha() for w in words) or max(len(w) for w in words) > max_word_chars:
        return False
    return Counter(words).most_common(1)[0][1] <= max_repeats


class CTCL(DPGeneratorMethod):
    name = "ctcl"
    paper = ("Tan, Xu, Xing, Hu & Wu, 'Synthesizing Privacy-Preserving Text Data via Finetuning without Finetuning "
             "Billion-Scale LLMs', ICML 2025 (CTCL-Topic, CTCL-Generator, DP topic histogram)")
    Config = CTCLConfig

    def train(self, fed, public, cfg: CTCLConfig, budget) -> Artifact:
        settings, sigma, sigma_h = self.fedavg_beside_histogram(fed, cfg, budget)
        n = fed.n_clients
        topics, public_labels, public_spans = fit_topic_model(public, cfg.n_topics, cfg.n_keywords,
                                                              variance=cfg.topic_pca_variance, seed=public.seed,
                                                              corpus_size=cfg.topic_corpus_size)
        tok = public.models.generator_tokenizer
        model = add_lora(public.models.new_generator(), rank=cfg.lora_rank, alpha=cfg.lora_alpha)
        pretrain = pretrain_on_public(
            model, tok, [topics.condition(t) for t, s in zip(public_labels, public_spans) for _ in s],
            [x for s in public_spans for x in s], steps=cfg.public_pretrain_steps,
            batch_size=cfg.public_pretrain_batch_size, lr=cfg.public_pretrain_lr, seed=public.seed, max_len=cfg.max_len,
            progress=public.progress, fed=fed, public=public)
        model = add_lora(model.merge_and_unload(), rank=cfg.lora_rank, alpha=cfg.lora_alpha)

        def conditions(chunk) -> list[str]:  # on each client: its own topic from its own spans
            if len(chunk) == 0:
                return []
            return [topics.condition(int(t)) for t in topics.client_topics(chunk.embeddings, chunk.owner, len(chunk))]

        server = settings.server(FlatParams(model))
        update = generator_update(server.flat, tok, settings, seed=public.seed, prefixes=conditions)
        history = train_adapter(fed, public, settings, server, sigma, update, desc="ctcl: DP generator",
                                broadcast=topics.broadcast())

        votes = lambda chunk: one_hot(topics.client_topics(chunk.embeddings, chunk.owner, len(chunk)), topics.n_topics)  # noqa: E731
        cohort, noisy = histogram_release(fed, votes, sigma_h, broadcast=topics.broadcast())
        counts = proportional_counts(noisy, cfg.n_synthetic, exact_total=True)
        history.append({"phase": "topic histogram", "round": int(cohort.round), "noise_multiplier": sigma_h,
                        "topics": topics.n_topics, "topics_generated": int((counts > 0).sum())})

        wanted = np.flatnonzero(counts)
        prompts = [conditional_prompt(tok, topics.condition(int(t))) for t in wanted]
        texts: list[str] = []
        for i, (prompt, c) in enumerate(zip(prompts, counts[wanted])):
            out = generate(model, tok, [prompt], n_per_prompt=int(c), **cfg.generation_kwargs(),
                           seed=seed_for(public.seed, 0xC7C1, i), stop=())[0]
            texts += out
        kept = [t for t in texts if keep_sample(t)]
        info = {
            **settings.plan(sigma, n), "histogram_noise_multiplier": sigma_h, "topics": topics.n_topics,
            "topic_keywords": [", ".join(k) for k in topics.keywords], "public_pretraining": pretrain,
            "noisy_histogram": [round(float(x), 3) for x in noisy], "generation_counts": counts.tolist(),
            "generated": len(texts), "filtered_out": len(texts) - len(kept), "deviations": list(DEVIATIONS),
        }
        return Artifact.synthetic(kept, **info, history=history)
