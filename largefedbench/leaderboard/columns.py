"""The columns of the board, shared by the markdown table and the HTML page: header, help text, the value a
column sorts by and the text it shows. Costs are the POPri paper's Table 2 columns."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from largefedbench.leaderboard.board import REFERENCES, Row, cpu_text, gain_over_control
from largefedbench.leaderboard.check_privacy import sigma_checked_only_by_rerun
from largefedbench.leaderboard.ranks import rank_text, significantly_better
from largefedbench.leaderboard.reproduced import outside_seed_spread, seeds_text


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    help: str
    value: Callable[[Row], float | str | None]
    text: Callable[[Row], str]
    numeric: bool = True


def _num(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "–"
    if math.isinf(x):
        return "∞"
    if x == 0:
        return "0"
    return f"{x:.{digits}g}"


def no_gain_over_public(row: Row) -> bool:
    """Do the row's seeds fail to put its top-1 above its ε = 0 public model's (a private method's row only)?"""
    if row.bucket == REFERENCES or getattr(row.entry, "diagnostic", None) is not None:
        return False
    public = getattr(row.entry.metrics, "reference_public", None)
    if public is None or not public.top1.per_seed:
        return False
    return not significantly_better(row.entry.metrics.next_token_accuracy.top1.per_seed, public.top1.per_seed)


def _gap_text(r: Row) -> str:
    text = f"{r.entry.metrics.gap_closed.mean:.3f} ± {r.entry.metrics.gap_closed.std:.3f}"
    return text + " · no gain over ε=0" if no_gain_over_public(r) else text


def _pct(mean: float, std: float) -> str:
    return f"{100 * mean:.2f} ± {100 * std:.2f}"


def noise_summary(row: Row) -> str:
    """σ, T and q of the first seed's ledger, and each release's signal-to-noise bound q·n / σ (clip × expected
    cohort over the noise std): the answer to "why does ε change nothing?"."""
    ledgers = row.entry.privacy.ledgers
    events = ledgers[0].get("events", []) if ledgers and isinstance(ledgers[0], dict) else []
    n = row.entry.privacy.n_train_clients
    parts = []
    for e in events:
        sigma = float(e.get("noise_multiplier", 0.0))
        if e.get("type") == "poisson_gaussian":
            q = float(e.get("sample_rate", 1.0))
            snr = f"{q * n / sigma:.3g}" if sigma > 0 and n else "∞"
            parts.append(f"σ = {sigma:.4g}, T = {e.get('steps')}, q = {q:.3g}: SNR bound per release {snr}")
        elif e.get("type") == "tree_aggregation":
            parts.append(f"tree: σ = {sigma:.4g}, {e.get('rounds_per_epoch')} rounds × {e.get('epochs')} epochs")
        else:
            parts.append(f"σ = {sigma:.4g} × {e.get('count')} release(s) without sampling")
    return "; ".join(parts) or "no release"


#: the mark beside a row's rank: what `lfb leaderboard reproduce` found (the Reproduced column says more)
REPRODUCTION_MARKS = {"ok": "✓", "failed": "✗", "none": "○"}
REPRODUCTION_LEGEND = ("beside the rank, ✓: re-run by `lfb leaderboard reproduce` within tolerance, ✗: re-run "
                       "outside it, ○: never re-run (or not since the entry changed)")


def reproduction_state(row: Row) -> str:
    """none, ok or failed: a record judged at an old fixed tolerance fails where today's rule would fail it."""
    r = row.reproduction
    if r is None:
        return "none"
    return "ok" if r.ok and not outside_seed_spread(r, row.entry) else "failed"


def reproduction_mark(row: Row) -> str:
    return REPRODUCTION_MARKS[reproduction_state(row)]


def _rank(row: Row) -> str:
    if row.rank is not None:
        text = rank_text(row.rank, row.rank_to if row.rank_to is not None else row.rank)
    else:
        text = "ref" if row.bucket == REFERENCES else "–"
    return f"{text} {reproduction_mark(row)}"


def _cost(name: str) -> Callable[[Row], float | None]:
    return lambda row: getattr(row.entry.costs, name)


def _reproduced(row: Row) -> str:
    r = row.reproduction
    if r is None:
        return "not re-run"
    tol = r.tolerances
    which = "" if r.seeds is None else f" · {seeds_text(r.seeds)} of {len(row.entry.seeds)}"
    acc = (f"±{tol['accuracy']:g}" if "accuracy" in tol else  # a fixed tolerance (records made before reproduce used the seed spread)
           f"±{tol.get('accuracy_spread_sds', 0):g} SD of seeds, ≥ {100 * tol.get('accuracy_floor', 0):g} pt")
    now = outside_seed_spread(r, row.entry)
    later = f" · NO by the seed spread ({now} outside)" if now else ""
    return (f"{'yes' if r.ok else f'NO ({r.failed} outside)'}{which} · {r.day} · acc {acc}, "
            f"ε {tol.get('epsilon_relative', 0):g} rel.{later}")


def _minutes(row: Row, whole: bool) -> float:
    """Minutes per seed (mean over seeds): the method's, or the whole seed's (method + downstream and evaluation)."""
    c = row.entry.costs
    return (c.method_seconds + (c.downstream_seconds if whole else 0.0)) / 60


def _threads(row: Row) -> int | None:
    return (row.entry.environment.hardware or {}).get("torch_threads")


def _audited(row: Row) -> float | None:
    return row.entry.audit.epsilon_lower_bound if row.entry.audit is not None else None


def _audited_text(row: Row) -> str:
    if row.entry.audit is None:
        return "–"
    flag = " ⚠ exceeds ε" if row.entry.audit.epsilon_lower_bound > row.epsilon else ""
    return f"≥ {_num(row.entry.audit.epsilon_lower_bound)}{flag}"


def _metric(name: str) -> Callable[[Row], float | None]:
    """The mean of an optional per-seed metric (None where the entry has none)."""
    return lambda row: getattr(row.entry.metrics, name).mean if getattr(row.entry.metrics, name) is not None else None


def _novel_section(row: Row):
    """The window-novel section when it is measured against the run's public corpus (older entries compared with
    the domain's pre-window records, which no method under --public generic sees: not shown)."""
    w = row.entry.metrics.window_novel
    return w if w is not None and w.reference is not None else None


def _novel(row: Row) -> float | None:
    w = _novel_section(row)
    return w.top1.mean if w is not None else None


def _novel_text(row: Row) -> str:
    w = _novel_section(row)
    if w is None:
        return "–"
    ci = f" (±{100 * w.ci95:.1f})" if w.ci95 is not None else ""
    return _pct(w.top1.mean, w.top1.std) + ci


def novel_separates(rows: list[Row]) -> bool:
    """Whether two rows' window-novel top-1 differ by more than their combined 95 % intervals: where none do, the
    column cannot tell the rows apart and a table leaves it out."""
    points = [(w.top1.mean, w.ci95) for w in map(_novel_section, rows) if w is not None and w.ci95 is not None]
    return any(abs(a - b) > math.hypot(ca, cb) for i, (a, ca) in enumerate(points) for b, cb in points[i + 1:])


#: marks a row whose generator-only numbers disagree with its group's majority (the footnote under the group)
OTHER_GENERATOR_ONLY = "†"
OTHER_GENERATOR_ONLY_NOTE = ("† its generator-only numbers (a generator-only entry's own, or those its gain is "
                             "over) differ, on some seed, from those most of the group's entries have: another code "
                             "version or environment wrote them, so that gain does not compare with the others' "
                             "(re-run the entry)")


#: marks an ε whose σ only a re-run can check against its plan (the footnote under the group)
SIGMA_BY_RERUN = "‡"
SIGMA_BY_RERUN_NOTE = ("‡ σ checked only by re-running: the entry records no noise calibration for its releases (made "
                       "before entries recorded them, or its method chose σ without budget.calibrate), so validation "
                       "recomputes ε from its ledgers but cannot check that σ is the calibration of its plan for its "
                       "target; `lfb leaderboard reproduce` re-runs it")


def sigma_by_rerun(row: Row) -> bool:
    return sigma_checked_only_by_rerun(row.entry)


def _epsilon_text(row: Row) -> str:
    return _num(row.epsilon, 4) + (f" {SIGMA_BY_RERUN}" if sigma_by_rerun(row) else "")


def _gain(row: Row) -> float | None:
    g = row.entry.metrics.gain_over_generator_only
    return g.mean if g is not None else None


def _gain_text(row: Row) -> str:
    g = row.entry.metrics.gain_over_generator_only
    text = "–" if g is None else f"{100 * g.mean:+.2f} ± {100 * g.std:.2f}"
    return text + (f" {OTHER_GENERATOR_ONLY}" if row.other_generator_only else "")


def _control(row: Row) -> float | None:
    g = gain_over_control(row)
    return g[0] if g is not None else None


def _control_text(row: Row) -> str:
    g = gain_over_control(row)
    return "–" if g is None else f"{100 * g[0]:+.2f} ± {100 * g[1]:.2f}"


UNSANDBOXED = "⚠ unsandboxed"


def unsandboxed(row: Row) -> bool:
    """A plug-in whose train() ran without the namespaces sandbox (or before the entry recorded it)."""
    e = row.entry
    return e.method.source != "built-in" and e.declared is None and e.environment.sandbox != "namespaces"


def _selected_on(row: Row) -> str:
    private = row.entry.selected_on_private
    if private is None:
        return "private?"  # an entry without a selection section: its choices were made on the validation clients, unrecorded
    return "private" if private else "public" if row.entry.select_on == "public" else "–"


COLUMNS: tuple[Column, ...] = (
    Column("rank", "#", "rank within the ε bucket as far as the seeds support it: 1 + the rows significantly better "
           "(mean top-1 more than the floor higher and Welch's 95 % interval above 0), to the rows not significantly "
           f"worse; a range (2–4) where the seeds do not order the rows; {REPRODUCTION_LEGEND}",
           lambda r: r.rank, _rank),
    Column("method", "Method", "method name and version; where the group runs a method in more than one "
           "configuration, the settings that differ; ⚠ unsandboxed: a plug-in whose train() did not run in the "
           "namespaces sandbox (its own process without the snapshot, the home's caches, the board or the network)",
           lambda r: r.label,
           lambda r: f"{r.entry.method.name} {r.entry.method.version}" + (f" [{r.variant}]" if r.variant else "")
           + (f" {UNSANDBOXED}" if unsandboxed(r) else ""), numeric=False),
    Column("epsilon", "ε", "user-level ε: the largest over the seeds, recomputed from the ledgers; ‡ σ checked only by "
           "re-running (no calibration record)", lambda r: r.epsilon, _epsilon_text),
    Column("audited", "Audited ε", "empirical ε lower bound from canary clients (`lfb audit`, Steinke et al. 2023), "
           "flagged when it exceeds the claimed ε", _audited, _audited_text),
    Column("delta", "δ", "δ of the (ε, δ) guarantee", lambda r: r.entry.privacy.delta,
           lambda r: f"{r.entry.privacy.delta:.0e}" if r.entry.privacy.delta else "0"),
    Column("accountant", "Accountant", "the accountant ε was computed with", lambda r: r.entry.privacy.accountant,
           lambda r: r.entry.privacy.accountant, numeric=False),
    Column("selected_on", "Selected on", "what the kept epoch or round was chosen on: private (the validation "
           "clients, read without noise and outside ε; private? where the entry predates the record), public (a "
           "held-out public slice, `lfb eval --select-on public`) or – (no choice made)", _selected_on,
           _selected_on, numeric=False),
    Column("top1", "Top-1 acc. %", "next-token accuracy on the test clients: mean ± sample std over seeds",
           lambda r: r.top1, lambda r: _pct(r.top1, r.entry.metrics.next_token_accuracy.top1.std)),
    Column("top3", "Top-3 acc. %", "top-3 next-token accuracy: mean ± std over seeds",
           lambda r: r.entry.metrics.next_token_accuracy.top3.mean,
           lambda r: _pct(r.entry.metrics.next_token_accuracy.top3.mean, r.entry.metrics.next_token_accuracy.top3.std)),
    Column("gap", "Gap closed", "(acc − acc at ε=0) / (acc at ε=∞ − acc at ε=0): mean ± std; \"no gain over ε=0\": "
           "the seeds do not put the row's top-1 above the ε = 0 public model's (the rank test) — at this budget the "
           "method taught the on-device model nothing the public model lacks: a measured result, not a failed run",
           lambda r: r.entry.metrics.gap_closed.mean, _gap_text),
    Column("novel", "Novel top-1 %", "top-1 on the test positions whose target is a window-novel token (its train "
           "frequency ≥ k × its frequency in the run's public corpus): what the window adds beyond what public data "
           "teaches; mean ± std over seeds (± one seed's 95 % interval over the scored positions); a table leaves the "
           "column out where no two rows differ by more than their intervals", _novel, _novel_text),
    Column("control", "vs its control", "top-1 minus its own matched no-signal control's, in points: the same "
           "method, settings, noise and ledger run with --shuffled-releases (every noised sum permuted before the "
           "method saw it: feedback of the same size and noise that says nothing about the clients), mean ± std of "
           "the per-seed differences; – where no control was run", _control, _control_text),
    Column("gain", "vs generator-only", "top-1 minus the generator-only row's (the untouched generator's samples from "
           "POPri's final prompts, no client consulted), in points: mean ± std over seeds. It is the same pipeline "
           "only for POPri, PE+SFT and FedBis; for the other methods read 'vs its control'; † its generator-only "
           "numbers disagree with the group's majority", _gain, _gain_text),
    Column("fid", "FID", "Fréchet distance of synthetic vs validation embeddings (synthetic-text methods)",
           _metric("fid"), lambda r: _num(_metric("fid")(r), 4)),
    Column("jsd", "Token JSD", "unigram Jensen–Shannon divergence (base 2) of the synthetic texts' downstream token ids "
           "to the validation spans': how far their vocabulary is from the clients' (lower is closer)",
           _metric("unigram_jsd"), lambda r: _num(_metric("unigram_jsd")(r), 3)),
    Column("pair_cos", "Pairwise cos", "mean cosine between two synthetic samples' sentence embeddings: 1 when the "
           "set collapsed into one text (real spans: about 0.1)", _metric("pairwise_cosine"),
           lambda r: _num(_metric("pairwise_cosine")(r), 3)),
    Column("public_loss", "ε=0 loss vs clients", "the ε = 0 model's mean next-token loss (nats) on the synthetic "
           "texts minus on the validation spans: below 0 it already predicts the texts better than the clients' text, "
           "so they may have little to teach it", _metric("public_loss_vs_clients"),
           lambda r: _num(_metric("public_loss_vs_clients")(r), 3)),
    Column("down", "Floats ↓ /client/round", "floats downloaded per client per round (POPri Table 2)",
           _cost("floats_down_per_client_per_round"), lambda r: _num(r.entry.costs.floats_down_per_client_per_round)),
    Column("up", "Floats ↑ /client/round", "floats uploaded per client per round (POPri Table 2)",
           _cost("floats_up_per_client_per_round"), lambda r: _num(r.entry.costs.floats_up_per_client_per_round)),
    Column("client_s", "Client s /client/round", "client compute seconds per client per round (POPri Table 2)",
           _cost("client_seconds_per_client_per_round"),
           lambda r: _num(r.entry.costs.client_seconds_per_client_per_round)),
    Column("server_s", "Server s /round", "server compute seconds per round (POPri Table 2): each round's wall time "
           "less the clients' side, with the server work a method runs after its last round (e.g. choosing the "
           "lowest-FID state) in the last round's; a final synthetic set generated after the rounds is not recorded "
           "apart by the entries, so it is not in here (it is in Method min /seed)",
           _cost("server_seconds_per_round"), lambda r: _num(r.entry.costs.server_seconds_per_round)),
    Column("rounds", "Rounds", "federated rounds", lambda r: r.entry.costs.rounds, lambda r: str(r.entry.costs.rounds)),
    Column("method_min", "Method min /seed", "minutes the method ran per seed, mean over seeds (rounds, generation, "
           "everything before its artifact; a resumed seed counts each completed round once)",
           lambda r: _minutes(r, False), lambda r: f"{_minutes(r, False):.3g}"),
    Column("seed_min", "Seed min", "minutes per seed, mean over seeds: the method, then the downstream training on "
           "its artifact and the evaluation (the references and model loads, shared by seeds, are not in here)",
           lambda r: _minutes(r, True), lambda r: f"{_minutes(r, True):.3g}"),
    Column("threads", "Threads", "torch threads the run used (environment.hardware.torch_threads)", _threads,
           lambda r: "–" if _threads(r) is None else str(_threads(r))),
    Column("cpu", "CPU", "the CPU model the run recorded and its native bf16 kernels (no native bf16: emulated, "
           "much slower); a GPU where there was one", lambda r: cpu_text(r.entry), lambda r: cpu_text(r.entry),
           numeric=False),
    Column("seeds", "Seeds", "number of seeds (ranking needs at least three)", lambda r: len(r.entry.seeds),
           lambda r: str(len(r.entry.seeds))),
    Column("reproduced", "Reproduced", "re-run by `lfb leaderboard reproduce`: whether every number landed within "
           "tolerance, which seeds when not all (a spot check), when, and the accuracy and ε tolerances (the record "
           "is beside the entry); a record judged at an old fixed accuracy tolerance also says how many of its "
           "accuracies lie outside today's rule (2 SD of the entry's seeds, at least 0.2 points)",
           lambda r: r.reproduction.reproduced_at if r.reproduction else "", _reproduced, numeric=False),
    Column("entry", "Entry", "the entry file (all numbers, the ledgers, the environment)", lambda r: r.entry.entry_id,
           lambda r: r.entry.entry_id, numeric=False),
)
NOTE = Column("why", "Why apart", "why the entry is not ranked", lambda r: "; ".join(r.notes),
              lambda r: "; ".join(r.notes) or f"{len(r.entry.seeds)} seed(s)", numeric=False)


TARGET = Column("target", "Target ε", "the ε the run's noise was calibrated for (a noise-free run then switched the noise off)",
                lambda r: r.target_epsilon, lambda r: _num(r.target_epsilon, 4))


def columns_for(status: str, rows: list[Row] | None = None) -> tuple[Column, ...]:
    """The ranked table's columns; other sections add why an entry is apart, diagnostics their target ε. Given the
    table's ``rows``, the window-novel column is left out where it separates none of them."""
    cols = COLUMNS if status == "ranked" else COLUMNS + (NOTE,)
    if status == "diagnostic":
        at = next(i for i, c in enumerate(cols) if c.key == "epsilon") + 1
        cols = cols[:at] + (TARGET,) + cols[at:]
    if rows is not None and not novel_separates(rows):
        cols = tuple(c for c in cols if c.key != "novel")
    return cols
