"""Speed of parsing + cleaning the recorded House sittings, against a naive reference in this file.

The reference implements the same documented rules the straightforward way: BeautifulSoup over the whole
document, string/regex tests on each paragraph's serialised markup, the floor language looked up by scanning
every element before each intervention, and cleaning with regexes and per-character counting. Both must
produce the same clients (ids, speakers, languages, texts) before their speed is compared; the numbers are
printed and stored in the benchmark's ``extra_info`` (no timing assertion).
"""

from __future__ import annotations

import html
import re
import time
from collections import Counter

from bs4 import BeautifulSoup
from conftest import fixture_path
from largefedbench.scrapers.ca_hansard import CA_PATTERNS, parse_sitting, speech_records

FILES = {
    (44, 1, 303): "ourcommons_HAN303-E_44-1-303-en.xml",
    (42, 1, 2): "ourcommons_HAN002-E_42-1-2-en.xml",
}


def fast(bodies: dict) -> list[tuple]:
    out = []
    for coords, body in bodies.items():
        for r in speech_records(parse_sitting(body), *coords, Counter()):
            out.append((r.id, r.speaker, r.language, r.text))
    return out


# --- the naive reference ----------------------------------------------------------------------------------
_ABBREV = {
    "mr", "mrs", "ms", "dr", "st", "hon", "rt", "no", "nos", "vs", "v", "e.g", "i.e", "al", "fig", "figs",
    "approx", "ca", "cf", "etc", "u.s", "u.k", "jr", "sr", "prof", "sen", "rep", "gov", "gen", "col", "lt",
    "sgt", "mt", "ft", "inc", "ltd", "co", "corp", "dept", "univ", "vol", "pp", "eq", "ref", "refs", "resp",
    "min", "max", "sp", "spp", "var", "subsp", "chap", "art", "sec", "cl", "para", "op", "cit",
}
_TURN_MARKUP = r"<ParaText[^>]*>\s*<(B|Affiliation)[^>]*>([^<]*?)\s*(:?)\s*</\1>\s*(:?)(.*)</ParaText>$"
_COLLECTIVE = ("some hon. members", "an hon. member", "hon. members", "des voix", "une voix")


def naive_clean(text: str) -> str:
    text = html.unescape(text)
    for pattern in CA_PATTERNS:
        text = re.sub(pattern.pattern, " ", text, flags=pattern.flags)
    text = " ".join(text.split())
    kept, start = [], 0
    for m in re.finditer(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])", text):
        before = text[start : m.start()].rstrip("\"')]")
        words = before.split()
        word = words[-1] if words else ""
        stem = word.rstrip(".!?").lower()
        if word.endswith(".") and (stem in _ABBREV or re.fullmatch(r"[a-z]", stem)):
            continue
        kept.append(text[start : m.start()].strip())
        start = m.end()
    kept.append(text[start:].strip())
    good = []
    for sentence in (s for s in kept if s):
        chars = re.findall(r"\S", sentence)
        letters = [c for c in chars if c.isalpha()]
        if chars and (len(chars) - len(letters)) / len(chars) <= 0.30:
            good.append(sentence)
    return " ".join(good)


def naive_name(label: str) -> str:
    name = " ".join(label.split()).rstrip(":").strip()
    if not name.lower().startswith("the "):
        while name.endswith(")"):
            depth, i = 0, len(name) - 1
            while i >= 0:
                depth += 1 if name[i] == ")" else -1 if name[i] == "(" else 0
                if depth == 0:
                    break
                i -= 1
            name = name[:i].strip()
            break
    return name


def naive_key(label: str) -> str:
    honorific = r"^(?:(?:right\s+)?hon\.?|mr\.?|mrs\.?|ms\.?|miss|dr\.?)\s+"
    name = re.sub(honorific, "", naive_name(label), flags=re.IGNORECASE)
    return re.sub(r"[^a-z]", "", name.lower())


def naive_language(intervention, doc_language: str) -> str:
    language = doc_language
    for el in intervention.find_all_previous("FloorLanguage"):
        language = el["language"].lower()
        break
    return language


def naive(bodies: dict) -> list[tuple]:
    out = []
    for (parl, sess, num), body in bodies.items():
        soup = BeautifulSoup(body, "lxml-xml")
        doc_language = soup.find("Hansard")["xml:lang"].lower()
        for iv in soup.find_all("Intervention"):
            person = iv.find("PersonSpeaking")
            if person is None or not iv.get("id") or not person.get_text().strip().endswith(":"):
                continue
            label = person.find("Affiliation").get_text()
            language = naive_language(iv, doc_language)
            speeches = [[iv["id"], naive_name(label), {}]]
            current = speeches[0]
            content = iv.find("Content")
            for el in content.find_all(["ParaText", "FloorLanguage"]):
                if el.name == "FloorLanguage":
                    language = el["language"].lower()
                    continue
                if el.find_parent(["ProceduralText", "Division"]) is not None:
                    continue
                markup = str(el)
                m = re.match(_TURN_MARKUP, markup, re.DOTALL)
                if m and (m.group(3) or m.group(4)) and m.group(2).strip():
                    who = m.group(2).strip()
                    rest = BeautifulSoup(m.group(5), "lxml").get_text()
                    if who.lower() in _COLLECTIVE or who.lower().startswith("the clerk"):
                        continue
                    if naive_key(who) == naive_key(label):
                        current = speeches[0]
                    else:
                        current = [f"{iv['id']}.{el['id']}", naive_name(who), {}]
                        speeches.append(current)
                    text = rest
                else:
                    if re.fullmatch(r"<ParaText[^>]*>\s*<B>[^<]*</B>\s*</ParaText>", markup):
                        continue
                    text = el.get_text()
                flat = " ".join(text.split())
                if re.fullmatch(r"\(.*\)|\[.*\]", flat) or not flat:
                    continue
                current[2].setdefault("parts", []).append((text, language))
            for key, speaker, data in speeches:
                parts = data.get("parts", [])
                if not parts:
                    continue
                chars: dict = {}
                for text, lang in parts:
                    chars[lang] = chars.get(lang, 0) + len(text)
                lang = max(chars, key=lambda k: (chars[k], -list(chars).index(k)))
                cleaned = naive_clean(" ".join(t for t, _ in parts))
                if cleaned:
                    out.append((f"ca:{parl}-{sess}-{num}:{key}", speaker, lang, cleaned))
    return out


def best_of(fn, bodies, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(bodies)
        times.append(time.perf_counter() - start)
    return min(times)


def test_bench_parse_and_clean_speeches(benchmark):
    bodies = {coords: fixture_path("ca_hansard", name).read_bytes() for coords, name in FILES.items()}
    ours = benchmark.pedantic(fast, args=(bodies,), rounds=5, iterations=1, warmup_rounds=1)
    reference = naive(bodies)
    assert len(ours) == 196 + 40
    assert ours == reference  # same clients, speakers, languages and texts: the comparison is fair

    t_fast, t_naive = best_of(fast, bodies, 5), best_of(naive, bodies, 2)
    info = {
        "speeches": len(ours),
        "speeches_per_s": round(len(ours) / t_fast),
        "naive_speeches_per_s": round(len(ours) / t_naive),
        "speedup_vs_naive": round(t_naive / t_fast, 1),
    }
    benchmark.extra_info.update(info)
    print(f"\nca_hansard parse+clean: {info}")
