"""``lfb refresh``: scrape the sources of a window and write one dated snapshot per dataset."""

from __future__ import annotations

import datetime as dt
import importlib
import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from largefedbench.data.snapshot import BuildResult, BuildSpec, build_snapshot, check_snapshot_name
from largefedbench.data.spans import SpanSettings
from largefedbench.data.splits import SplitRatios
from largefedbench.data.windows import Window, get_cutoff, parse_date
from largefedbench.errors import InputError, SnapshotError
from largefedbench.paths import check_writable_dir, lfb_home

log = logging.getLogger(__name__)

# CLI source name -> scraper class, imported only when used.
SOURCES: dict[str, str] = {
    "biorxiv": "largefedbench.scrapers.biorxiv:BiorxivScraper",
    "us": "largefedbench.scrapers.us_congress:UsCongressScraper",
    "uk": "largefedbench.scrapers.uk_hansard:UkHansardScraper",
    "ca": "largefedbench.scrapers.ca_hansard:CaHansardScraper",
}
DATASET_OF: dict[str, str] = {"biorxiv": "biorxiv", "us": "congress", "uk": "congress", "ca": "congress",
                              "arxiv": "arxiv-qbio"}
#: what a reader must be told wherever a dataset's results appear (the board's group titles and first line)
DATASET_NOTES: dict[str, str] = {"arxiv-qbio": "arXiv q-bio abstracts: a stand-in in the genre of bioRxiv abstracts, "
                                               "not bioRxiv"}
#: sources read from a mirror folder only (``--mirror``): no live scraper
MIRROR_ONLY = ("arxiv",)


def scraper_class(source: str):
    try:
        module, _, attr = SOURCES[source].partition(":")
    except KeyError:
        raise InputError(f"unknown source {source!r}; choose from {', '.join(SOURCES)}") from None
    return getattr(importlib.import_module(module), attr)


def parse_sources(text: str | None) -> list[str]:
    """``--sources us,uk,ca`` -> ['us', 'uk', 'ca']; None -> every live source."""
    if not text:
        return list(SOURCES)
    names = [s.strip().lower() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in DATASET_OF]
    if unknown:
        raise InputError(f"unknown source(s) {', '.join(unknown)}; choose from {', '.join(DATASET_OF)} "
                         f"({', '.join(MIRROR_ONLY)} with --mirror only)")
    return names


def parse_mirrors(values: list[str] | None, sources: list[str]) -> dict[str, Path]:
    """``--mirror DIR`` (one source) or ``--mirror SOURCE=DIR`` (repeatable) -> {source: folder}."""
    out: dict[str, Path] = {}
    for value in values or []:
        source, sep, folder = value.partition("=")
        if not sep:
            if len(sources) != 1:
                raise InputError(f"--mirror {value}: with several --sources say whose mirror it is, e.g. "
                                 f"--mirror {sources[0]}={value}")
            source, folder = sources[0], value
        source = source.strip().lower()
        if source not in sources:
            raise InputError(f"--mirror {value}: {source!r} is not one of --sources {','.join(sources)}")
        out[source] = Path(folder)
    return out


def _check_mirrors(plan: RefreshPlan) -> None:
    from largefedbench.scrapers.mirror import MIRRORS

    for source in plan.sources:
        if source in MIRROR_ONLY and source not in plan.mirrors:
            raise InputError(f"source {source} has no live scraper here: build it from a mirror folder with "
                             f"--mirror DIR (e.g. --mirror ../shared/real/arxiv-qbio)")
    for source, folder in plan.mirrors.items():
        if source not in MIRRORS:
            raise InputError(f"--mirror {folder}: no mirror reader for source {source!r}; mirrors exist for "
                             f"{', '.join(MIRRORS)}")
        if source in plan.base_urls:
            raise InputError(f"--mirror and --base-url both name source {source}: a mirror is read from disk, "
                             "drop one of them")


def window_for(
    since: str | None, until: str | None, after_cutoff_of: str | None, public_months: int,
    *, today: dt.date | None = None,
) -> Window:
    """The window from ``--since/--until`` and/or ``--after-cutoff-of``; it must start by ``today``."""
    if not since and not after_cutoff_of:
        raise InputError("say where the window starts: --since YYYY-MM[-DD] or --after-cutoff-of MODEL")
    start = None
    if after_cutoff_of:
        start = get_cutoff(after_cutoff_of).window_start()
        if start is None:
            raise InputError(f"{after_cutoff_of} has no dated cutoff; pass --since instead")
    today = today or dt.date.today()
    first = parse_date(since, flag="--since") if since else start
    if first > today:
        raise InputError(f"the window starts in the future ({first}; today is {today}): there is nothing to scrape "
                         "yet, so the snapshot would be empty. Pass a --since on or before today")
    window = Window.parse(since or start.isoformat(), until, public_months=public_months, today=today)
    if start is not None and window.since < start:
        raise InputError(
            f"--since {window.since} starts before the knowledge cutoff of {after_cutoff_of} (window must start on "
            f"or after {start}); drop --since or move it later"
        )
    return window


def check_base_urls(base_urls: dict[str, str]) -> None:
    """``--base-url SOURCE=URL``: SOURCE must be a known source and URL an http(s) URL with a host."""
    for source, url in base_urls.items():
        if source not in SOURCES:
            raise InputError(f"--base-url {source}={url}: unknown source {source!r}; choose from {', '.join(SOURCES)}")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in url):
            raise InputError(f"--base-url {source}={url!r} is not an http(s) URL; write it like "
                             f"--base-url {source}=http://127.0.0.1:8000")


def _check_private_records(dataset: str, records: list, rejected: Counter, window: Window) -> None:
    """Refuse to write a snapshot whose private window holds no record (it could not be evaluated on)."""
    if any(window.classify(rec.day) == "private" for rec in records):
        return
    why = ", ".join(f"{k} {v}" for k, v in sorted(rejected.items())) or "none"
    raise SnapshotError(
        f"no {dataset} record is dated inside the window {window.since}..{window.until} ({len(records)} kept records "
        f"fetched; rejected: {why}), so no snapshot was written. Widen the window or pick other --sources."
    )


@dataclass
class RefreshPlan:
    window: Window
    sources: list[str]
    span: SpanSettings = field(default_factory=SpanSettings)
    splits: SplitRatios = field(default_factory=SplitRatios)
    after_cutoff_of: str | None = None
    name: str | None = None
    base_urls: dict[str, str] = field(default_factory=dict)
    scraper_options: dict[str, dict] = field(default_factory=dict)
    refresh_cache: bool = False
    #: requests per second per source; None: $LFB_RATE_LIMIT, else 1 (GovInfo: its key's hourly limit)
    rate_limit: float | None = None
    #: source -> mirror folder read instead of the live source (``--mirror``)
    mirrors: dict[str, Path] = field(default_factory=dict)


def refresh(plan: RefreshPlan, *, home: Path | None = None, progress: bool = True) -> list[BuildResult]:
    """Fetch every source of the plan, then write one snapshot per dataset under the LargeFedBench ``home``
    (default ``$LFB_HOME``)."""
    from largefedbench.scrapers.cleaning import CLEANING_VERSION

    from largefedbench.data.spans import get_span_tokenizer

    get_span_tokenizer(plan.span.tokenizer)  # fail on a bad or unavailable tokenizer before any download
    datasets: dict[str, list[str]] = {}
    for source in plan.sources:
        datasets.setdefault(DATASET_OF[source], []).append(source)
    if plan.name and len(datasets) > 1:
        raise InputError("--name names one snapshot, but these sources build several datasets; pass --sources too")
    check_base_urls(plan.base_urls)
    _check_mirrors(plan)
    if plan.rate_limit is not None and not (math.isfinite(plan.rate_limit) and plan.rate_limit > 0):
        raise InputError(f"--rate-limit {plan.rate_limit}: give requests per second as a finite number > 0, e.g. 1")
    if plan.rate_limit is None:
        from largefedbench.scrapers.http import default_rate_limit

        default_rate_limit()  # a bad $LFB_RATE_LIMIT stops here, before any download
    if plan.name is not None:
        check_snapshot_name(plan.name)
    check_writable_dir(home or lfb_home(), f"--home {home}" if home else f"LFB_HOME={lfb_home()}")

    results = []
    for dataset, sources in datasets.items():
        records, rejected, described = [], Counter(), {}
        scraped_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        for source in sources:
            if source in plan.mirrors:
                from largefedbench.scrapers.mirror import open_mirror

                scraper = open_mirror(source, plan.mirrors[source])
                log.info("reading %s from the mirror %s", source, scraper.folder)
            else:
                scraper = scraper_class(source).create(
                    base_url=plan.base_urls.get(source), root=home, rate_limit=plan.rate_limit,
                    refresh=plan.refresh_cache, **plan.scraper_options.get(source, {}),
                )
                log.info("fetching %s from %s", source, scraper.client.base_url)
            got, why = scraper.fetch(plan.window, progress=progress)
            records += got
            rejected.update({f"{source}:{reason}": n for reason, n in why.items()})
            described[source] = scraper.describe()
        _check_private_records(dataset, records, rejected, plan.window)
        spec = BuildSpec(
            dataset=dataset,
            window=plan.window,
            span=plan.span,
            splits=plan.splits,
            sources=described,
            cleaning_version=CLEANING_VERSION,
            after_cutoff_of=plan.after_cutoff_of,
            name=plan.name,
            scraped_at=scraped_at,
        )
        results.append(build_snapshot(records, spec, rejected, root=home, progress=progress))
    return results
