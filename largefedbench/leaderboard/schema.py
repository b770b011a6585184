"""The leaderboard entry (DESIGN.md §8), schema version 3, as pydantic models with ``extra="forbid"``.

An entry is data only: nothing in it is executed. Numbers that cannot be JSON (ε = ∞) are the string ``"inf"``.
Version 1 is upgraded by :func:`migrate` before validation (it had one ledger for all seeds and called the
references ``eps0``/``epsinf``). Versions 2 and 3 have the same fields; a version-3 entry whose ledgers record a
release must carry its noise calibrations (``privacy.calibrations``), which version 2 entries may lack (made before
they were recorded: their σ is checked only by re-running them).
"""

from __future__ import annotations

import math
import re
import warnings
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from largefedbench.errors import InputError

SCHEMA_VERSION = 3
SUPPORTED_VERSIONS = (1, 2, 3)
CALIBRATED_SINCE = 3  # the first version that must carry the calibrations of every release it records
#: pydantic checks fields with Rust's regex, where ``$`` is the end of the text; Python's ``$`` also matches before a
#: final newline, so Python code checks with :func:`is_safe_id` (a full match)
ID_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,127}$"
_ID = re.compile(ID_PATTERN)

Unit = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Finite = Annotated[float, Field(allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
Epsilon = NonNegative | Literal["inf"]  # never NaN or negative; ∞ only as the string "inf"


def epsilon_value(eps: Epsilon) -> float:
    return math.inf if eps == "inf" else float(eps)


def epsilon_json(eps: float) -> Epsilon:
    return "inf" if math.isinf(eps) else float(eps)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def __getitem__(self, key: str) -> Any:
        """Deprecated: ``entry["metrics"]`` as code written against the entry's JSON dict did; read attributes
        (``entry.metrics``), or ``entry.to_json()`` for the dict. Goes away in the next release."""
        warnings.warn(f"{type(self).__name__}[{key!r}]: read the attribute (.{key}) instead; indexing an entry "
                      "goes away in the next release", DeprecationWarning, stacklevel=2)
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)


class RepositorySection(_Strict):
    """A plug-in's source checkout (or ``pip install git+URL@COMMIT``) when the entry was made."""

    url: str | None  # the git remote (credentials dropped); None: no remote others can reach
    commit: str = Field(pattern=r"^[0-9a-f]{7,64}$")
    dirty: bool  # the method's files differed from the commit


class MethodSection(_Strict):
    name: str = Field(pattern=ID_PATTERN)
    version: str  # a plug-in's: its distribution's version
    source: str  # "built-in", or a plug-in's module
    target: str  # "module:Class"
    paper: str
    output: Literal["synthetic text", "model"]
    distribution: str | None = None  # a plug-in's installed distribution (older entries have none)
    repository: RepositorySection | None = None


class WindowSection(_Strict):
    since: str
    until: str
    public_since: str | None = None


class DatasetSection(_Strict):
    name: str = Field(pattern=ID_PATTERN)  # "biorxiv", "congress", "demo", ...
    snapshot: str = Field(pattern=ID_PATTERN)
    content_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    synthetic: bool
    window: WindowSection
    clients: dict[str, int]
    spans: dict[str, int]


class ContaminationSection(_Strict):
    model: str  # the pretrained model whose knowledge matters (the generator, else the downstream)
    model_cutoff: str | None  # YYYY-MM, the binding cutoff
    cutoff_kind: str  # "reported", "release-bound", "pretrained on the snapshot's public split" (or "run's public corpus"), "unknown"
    window_start: str
    after_cutoff: bool | None


class PrivacySection(_Strict):
    epsilon: Epsilon  # the largest ε over the seeds' ledgers
    delta: Annotated[float, Field(ge=0.0, lt=1.0)]
    unit: Literal["user"] = "user"
    accountant: Literal["rdp", "tree", "pld", "prv", "declared"]  # declared: stated by the submitter, no ledger
    target_epsilon: Epsilon
    epsilon_per_seed: list[Epsilon]
    ledgers: list[dict[str, Any]]  # one PrivacyLedger.to_dict() per seed, in seed order
    n_train_clients: int = Field(ge=1)
    #: per seed, the method's noise calibrations (PrivacyBudget.calibrations); absent in entries made before them
    calibrations: list[list[dict[str, Any]]] | None = None


class Stat(_Strict):
    per_seed: list[Finite]
    mean: Finite
    std: NonNegative


class UnitStat(_Strict):
    per_seed: list[Unit]
    mean: Unit
    std: NonNegative


class AccuracySection(_Strict):
    top1: UnitStat
    top3: UnitStat
    top5: UnitStat


class WindowNovelSection(_Strict):
    """Next-token top-1 on the test positions whose target is a window-novel token: a token whose frequency in the
    private train clients is >= ``k`` × its frequency in ``reference`` (the run's public corpus; entries without
    ``reference`` compared with the domain's pre-window records, which no method under --public generic sees, and
    the board does not show them)."""

    k: Annotated[float, Field(gt=0.0)]
    min_count: int = Field(ge=1)
    n_tokens: int = Field(ge=0)  # the size of the novel-token list
    n_test_positions: int = Field(ge=0)  # test targets that are novel tokens
    reference: str | None = None  # the corpus the frequencies were compared with
    ci95: Finite | None = None  # half-width of one seed's 95 % interval at n_test_positions (positions as independent)
    top1: Stat  # NaN-free: a run whose test split has no novel target has no section
    reference_public: Finite
    reference_non_private: Stat
    reference_generator_only: Stat | None = None
    gap_closed: Stat | None = None


# the per-seed statistics of a synthetic-text run's final samples (a seed's result, the entry's metrics section)
SYNTHETIC_TEXT_STATS = ("topic_share", "unigram_jsd", "pairwise_cosine", "public_loss_vs_clients")


class MetricsSection(_Strict):
    next_token_accuracy: AccuracySection
    validation_top1: UnitStat
    reference_public: AccuracySection  # ε = 0
    reference_non_private: AccuracySection  # ε = ∞
    gap_closed: Stat
    fid: Stat | None = None  # synthetic-text methods only
    n_test_tokens: int = Field(ge=1)
    # the no-signal reference (synthetic-text methods): the untouched generator's samples, same pipeline, ε = 0
    reference_generator_only: AccuracySection | None = None
    gain_over_generator_only: Stat | None = None  # top-1 minus the generator-only row's, per seed
    gap_closed_over_generator_only: Stat | None = None  # (acc − acc_gen) / (acc∞ − acc_gen), per seed
    window_novel: WindowNovelSection | None = None
    topic_share: Stat | None = None  # demos: share of synthetic samples naming a private-only topic
    unigram_jsd: Stat | None = None  # synthetic texts vs validation spans on the downstream's token ids (base 2)
    pairwise_cosine: Stat | None = None  # mean cosine between two synthetic samples' sentence embeddings
    # the ε = 0 downstream's mean loss (nats/token) on the synthetic texts minus on the validation spans: < 0 when the
    # on-device model already predicts the texts better than the clients' text (they may have little to teach it)
    public_loss_vs_clients: Stat | None = None


class PublicSection(_Strict):
    """The public resources of the run (``--public``): Omega, public replay and the ε = 0 checkpoint came from them."""

    kind: Literal["generic", "c4", "split"]
    source: str
    documents: int = Field(ge=1)
    spans: int = Field(ge=1)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


SelectOn = Literal["private", "public"]


class SelectionRecord(_Strict):
    """One choice made on held-out data: ``chosen`` (an epoch or a round) among ``candidates`` by ``metric``."""

    by: Literal["harness", "method"]  # the harness (the downstream epoch) or the method (a round's state)
    what: str = Field(min_length=1)  # "downstream epoch", "round of <the rounds loop>"
    metric: str = Field(min_length=1)  # "top1" (next-token accuracy), "fid", …
    chosen: int  # -1 in the harness's count of a sandboxed method's held-out queries (a count, no choice)
    candidates: int = Field(ge=1)
    on: SelectOn


class SelectionSection(_Strict):
    """Model selection: what every choice was made on — ``private``, the validation clients, read
    without noise and outside the ledger, or ``public``, a held-out slice of the public corpus (``lfb eval
    --select-on public``) — and each seed's choices. Absent in entries made before it was recorded (they selected on
    the validation clients)."""

    on: SelectOn
    held_out: str = Field(min_length=1)  # what the held-out texts were (the validation spans, or the public slice)
    per_seed: list[list[SelectionRecord]]

    @model_validator(mode="after")
    def _records_on_the_same_data(self) -> SelectionSection:
        for records in self.per_seed:
            for rec in records:
                if rec.on != self.on:
                    raise ValueError(f"a choice made on {rec.on} data in an entry that selects on {self.on} data")
        return self


class CostsSection(_Strict):
    rounds: int = Field(ge=0)
    floats_down_per_client_per_round: NonNegative | None = None
    floats_up_per_client_per_round: NonNegative | None = None
    client_seconds_per_client_per_round: NonNegative | None = None
    server_seconds_per_round: NonNegative | None = None
    method_seconds: NonNegative  # per seed, mean over seeds; a resumed seed counts each completed round once
    downstream_seconds: NonNegative
    wall_seconds: NonNegative  # the entry's seeds (method + downstream) plus its last process's models and references
    peak_memory_mb: NonNegative
    stage_seconds: dict[str, NonNegative] | None = None  # per seed, mean over seeds: generation, embedding, clients, …


class EnvironmentSection(_Strict):
    lfb_version: str
    python: str
    platform: str
    packages: dict[str, str]
    git_commit: str | None
    hardware: dict[str, Any]
    #: where client functions ran: process (worker processes: isolated from the method), ray, or local (in the
    #: method's process; built-in methods only); None in older entries, which did not record it
    client_executor: Literal["process", "ray", "local"] | None = None
    #: the git commit each seed ran at, by seed, when one differs from ``git_commit`` (a run resumed from seeds that
    #: an earlier checkout finished, e.g. committed run folders continued on another machine); None otherwise
    seed_commits: dict[str, str | None] | None = None
    #: the dtypes the run sampled and trained in: {"generation": "bfloat16" | "float32" | "as loaded", "training":
    #: "bfloat16" | "float32"} (LFB_GENERATION_DTYPE, LFB_TRAINING_DTYPE, or the hardware's default); `lfb leaderboard
    #: reproduce` re-runs under the same; None in entries written before they were recorded
    precision: dict[str, str] | None = None
    #: how the method's train() was kept from the data and the scorer, over the seeds: "namespaces" (its own process
    #: in Linux namespaces: no snapshot, home caches, board or network), "process" (its own process, no namespaces on
    #: that platform), "none" (the harness's process: built-ins, --sandbox off); None in entries made before it
    sandbox: Literal["namespaces", "process", "none", "mixed"] | None = None


class RunConfig(_Strict):
    method: dict[str, Any]  # the resolved method Config
    preset: Literal["paper", "cpu", "tiny", "matched"]
    overrides: dict[str, str]
    profile: str
    downstream_training: dict[str, Any]
    command: str


class ScoreSummary(_Strict):
    n: int = Field(ge=0)
    mean: Finite | None
    std: NonNegative | None


class AuditSeed(_Strict):
    """One seed's audit: the canary scores and the best one-sided guess set (``guesses`` top-scored canaries
    guessed "in", ``correct`` of them right), its ε lower bound, and the one-shot estimate for model updates."""

    seed: int
    inserted: int = Field(ge=0)
    scores_in: ScoreSummary
    scores_out: ScoreSummary
    guesses: int = Field(ge=0)
    correct: int = Field(ge=0)
    thresholds: int = Field(ge=1)  # guess sets tried (the Bonferroni divisor)
    threshold: Finite | None
    epsilon_lower_bound: NonNegative
    one_shot_epsilon: float | Literal["inf"] | None = None
    one_shot: dict[str, Any] | None = None


class AuditSection(_Strict):
    """Empirical privacy audit (``lfb audit``): canary clients in the run, an ε lower bound beside the claimed ε."""

    canaries: int = Field(ge=2)
    leak_canaries: int = Field(default=0, ge=0)  # random-word clients searched for in every output (0: audits before them)
    kind: Literal["update", "text"]
    inclusion_seed: int
    score: str  # what a canary's membership score is
    estimator: str
    confidence: Annotated[float, Field(gt=0.0, lt=1.0)]
    delta: Annotated[float, Field(ge=0.0, lt=1.0)]
    epsilon_lower_bound: NonNegative  # the largest over the seeds (each seed's bound at (1 - confidence) / seeds)
    one_shot_epsilon: float | Literal["inf"] | None = None  # Andrew et al.'s estimate, the mean over seeds
    per_seed: list[AuditSeed] = Field(min_length=1)


class DiagnosticSection(_Strict):
    """An entry that shows something about a method rather than competing: never ranked."""

    kind: Literal["noise-free", "shuffled-releases"]  # σ = 0 (the ledger's ε is ∞); or every release permuted
    note: str


class DeclaredSection(_Strict):
    """Synthetic text made outside LargeFedBench (``lfb eval --synthetic``): its (ε, δ) is the submitter's statement,
    not computed; such an entry is shown apart and never ranked with computed claims."""

    made_with: str = Field(min_length=1)  # the tool, its version and how it was run, as the submitter states it
    file: str = Field(min_length=1)  # the file's name (not its folder)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    n_texts: int = Field(ge=1)
    note: str


class Entry(_Strict):
    schema_version: Literal[2, 3] = SCHEMA_VERSION  # version 1 is migrated to 2
    entry_id: str = Field(pattern=ID_PATTERN)
    created_at: str
    method: MethodSection
    dataset: DatasetSection
    contamination: ContaminationSection
    privacy: PrivacySection
    profile: dict[str, Any]
    metrics: MetricsSection
    costs: CostsSection
    environment: EnvironmentSection
    seeds: list[int] = Field(min_length=1)
    config: RunConfig
    artifacts: dict[str, str] = Field(default_factory=dict)  # plot name -> file name beside the entry
    history: list[list[dict[str, Any]]] = Field(default_factory=list)  # per seed, per round
    audit: AuditSection | None = None  # `lfb audit` entries only
    diagnostic: DiagnosticSection | None = None  # `lfb eval --noise-free` entries only
    declared: DeclaredSection | None = None  # `lfb eval --synthetic` entries only
    public: PublicSection | None = None  # absent in older entries: the snapshot's public split
    selection: SelectionSection | None = None  # absent in older entries: they selected on validation clients

    @model_validator(mode="after")
    def _selection_per_seed(self) -> Entry:
        if self.selection is not None and len(self.selection.per_seed) != len(self.seeds):
            raise ValueError(f"selection.per_seed has {len(self.selection.per_seed)} seeds' choices for "
                             f"{len(self.seeds)} seeds")
        return self

    @property
    def select_on(self) -> str:
        """What model selection ran on: ``private`` (the validation clients; every entry without this section) or
        ``public`` (a held-out public slice)."""
        return self.selection.on if self.selection is not None else "private"

    @property
    def selected_on_private(self) -> bool | None:
        """Did a choice (an epoch, a round) read the validation clients without noise? None where the entry predates
        the record (it selected on them wherever a choice was made: every synthetic-text method's epoch)."""
        if self.selection is None:
            return None
        return self.selection.on == "private" and any(self.selection.per_seed)

    @property
    def public_kind(self) -> str:
        """The kind of public resources the entry was run with (``split`` for entries that predate the choice)."""
        return self.public.kind if self.public is not None else "split"

    @property
    def public_model(self) -> str:
        """The ε = 0 model's weights hash (first 12 hex digits) where LargeFedBench built it (the tiny, cpu and
        cpu-wide downstreams, pretrained on the public corpus); "" for a hub model, named by its id alone."""
        downstream = self.profile.get("downstream") if isinstance(self.profile, dict) else None
        digest = downstream.get("sha256") if isinstance(downstream, dict) else None
        return digest[:12] if isinstance(digest, str) else ""

    def to_json(self) -> dict[str, Any]:
        """The entry as the JSON object it is written as: the fields it was given (an optional section it does not
        have is absent, not null), so an entry read from a file gives back exactly that file's object."""
        return self.model_dump(exclude_unset=True)

    @field_validator("artifacts")
    @classmethod
    def _plain_file_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value.values():
            if "/" in name or "\\" in name or name.startswith(".") or not name:
                raise ValueError(f"artifact {name!r} must be a plain file name beside the entry (no folders)")
        return value


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Upgrade an entry dict of any supported version to the current fields (a new dict): version 1 becomes version
    2; a version-2 entry keeps its version, which says it may lack the calibration records."""
    if not isinstance(data, dict):
        raise InputError(f"an entry is a JSON object, got {type(data).__name__}")
    version = data.get("schema_version")
    if version not in SUPPORTED_VERSIONS:
        raise InputError(f"unknown schema_version {version!r}: this lfb reads versions {SUPPORTED_VERSIONS}; "
                         "upgrade largefedbench or re-run `lfb eval`")
    out = dict(data)
    if version == 1:
        privacy = dict(out.get("privacy", {}))
        ledger = privacy.pop("ledger", None)
        seeds = out.get("seeds", [])
        if ledger is not None:
            privacy["ledgers"] = [ledger] * max(len(seeds), 1)
            privacy.setdefault("epsilon_per_seed", [privacy.get("epsilon")] * max(len(seeds), 1))
        out["privacy"] = privacy
        metrics = dict(out.get("metrics", {}))
        if "eps0" in metrics:
            metrics["reference_public"] = metrics.pop("eps0")
        if "epsinf" in metrics:
            metrics["reference_non_private"] = metrics.pop("epsinf")
        out["metrics"] = metrics
        out["schema_version"] = 2
    return out


def parse_entry(data: dict[str, Any] | Entry) -> Entry:
    """An :class:`Entry` from a dict of any supported version (pydantic ``ValidationError`` if malformed); an
    :class:`Entry` is returned as it is."""
    return data if isinstance(data, Entry) else Entry.model_validate(migrate(data))


def is_safe_id(value: str) -> bool:
    return isinstance(value, str) and bool(_ID.fullmatch(value)) and ".." not in value
