"""Vocabulary of the synthetic demo corpus: topics with their own words, and when each topic is talked about.

The words are data, in ``demo_lexicon.json`` beside this module. Each topic has a popularity curve over time
(``peak`` year and ``width`` in years, or ``start`` for topics that only exist from a date on), so text before the
demo window differs from text inside it in topics and vocabulary, as real text drifts. Abstracts (bioRxiv-like) fill
opening / methods / findings / closing templates with their topic's entities, systems, techniques and targets;
speeches (one per country and chamber) fill opening / body / closing templates with an issue, a measure, the people
affected and a place of the speaker's country.
"""

from __future__ import annotations

import json
from pathlib import Path

_LEXICON = json.loads((Path(__file__).with_name("demo_lexicon.json")).read_text(encoding="utf-8"))

ABSTRACT_TOPICS: dict[str, dict] = _LEXICON["abstract_topics"]
ABSTRACT_OPENINGS: list[str] = _LEXICON["abstract_openings"]
ABSTRACT_METHODS: list[str] = _LEXICON["abstract_methods"]
ABSTRACT_FINDINGS: list[str] = _LEXICON["abstract_findings"]
ABSTRACT_CLOSINGS: list[str] = _LEXICON["abstract_closings"]
SPEECH_TOPICS: dict[str, dict] = _LEXICON["speech_topics"]
#: (country, chamber) -> the speech openings said there
SPEECH_OPENINGS: dict[tuple[str, str], list[str]] = {
    (country, chamber): lines for country, chambers in _LEXICON["speech_openings"].items()
    for chamber, lines in chambers.items()
}
SPEECH_BODY: list[str] = _LEXICON["speech_body"]
SPEECH_CLOSINGS: list[str] = _LEXICON["speech_closings"]
PLACES: dict[str, list[str]] = _LEXICON["places"]
CHAMBERS: dict[str, list[str]] = _LEXICON["chambers"]
FIRST_NAMES: list[str] = _LEXICON["first_names"]
LAST_NAMES: list[str] = _LEXICON["last_names"]

#: Phrases that name a topic of the demo window (the topics with ``start``), lower case: what the private
#: clients of ``demo-prose`` talk about and its pre-window records rarely do. They measure how many synthetic samples
#: reach the window's topics (the harness's topic share on the demos) and check that the generic public corpus,
#: written for any domain, names none of them.
PRIVATE_TOPIC_MARKERS: dict[str, tuple[str, ...]] = {
    topic: tuple(markers) for topic, markers in _LEXICON["private_topic_markers"].items()
}


def private_topics_named(text: str) -> list[str]:
    """The demo-window topics whose marker phrases ``text`` contains."""
    low = text.lower()
    return [topic for topic, markers in PRIVATE_TOPIC_MARKERS.items() if any(m in low for m in markers)]


def private_topic_share(texts: list[str]) -> float:
    """The share of ``texts`` that name at least one demo-window topic."""
    return sum(1 for t in texts if private_topics_named(t)) / len(texts) if texts else 0.0
