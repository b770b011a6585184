"""`lfb refresh --mirror`: snapshots from folders of real records (a few files of ``../shared/real``, linked into a
temporary folder), through the live scrapers' parsing and cleaning."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import SHARED
from largefedbench.scrapers.mirror import open_mirror, read_upstream
from largefedbench.scrapers.refresh import RefreshPlan, refresh
from largefedbench.scrapers.us_congress import parse_article, parse_granule
from largefedbench.scrapers.us_congress_mirror import _ARTICLE, UsCongressMirror

from largefedbench.cli import main
from largefedbench.data.snapshot import read_manifest
from largefedbench.data.spans import OFFLINE_SPAN_TOKENIZER, SpanSettings
from largefedbench.data.windows import Window
from largefedbench.errors import InputError, SnapshotError
from largefedbench.paths import snapshots_dir

REAL = SHARED / "real"
CREC = REAL / "us-congress-crec-170"
ARXIV = REAL / "arxiv-qbio"
DEC = Window.parse("2024-12-01", "2025-01-03", public_months=1)


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is not present (tests read ../shared/real beside the repo)")
    return path


def mirror_of(tmp_path: Path, src: Path, names: list[str], *, with_readme: bool = True) -> Path:
    """A mirror folder holding links to a few of ``src``'s files (and the README that names its upstream)."""
    folder = tmp_path / src.name
    folder.mkdir()
    for name in names:
        (folder / name).symlink_to(_need(src / name))
    if with_readme:
        (tmp_path / "README.md").symlink_to(_need(REAL / "README.md"))
    return folder


def plan(**kw) -> RefreshPlan:
    return RefreshPlan(span=SpanSettings(tokenizer=OFFLINE_SPAN_TOKENIZER), **kw)


def crec(n: int) -> str:
    return f"congressional_record_170_{n}.txt"


def test_congress_mirror_builds_a_dated_snapshot_through_the_live_parser(tmp_path, lfb_home):
    # 167: 2024-11-13 (public month), 189 and 191: 2024-12-19 and 2024-12-23 (window; 190 left out = a gap)
    folder = mirror_of(tmp_path, CREC, [crec(167), crec(189), crec(191)])
    (built,) = refresh(plan(window=DEC, sources=["us"], mirrors={"us": folder}), progress=False)
    m = read_manifest(built.path)
    assert m["dataset"] == "congress"
    assert m["counts"]["clients"]["public"] > 10 and m["counts"]["clients"]["train"] > 100
    mirror = m["sources"]["us"]["mirror"]
    assert mirror["upstream"]["repository"] == "b-d055/us-congressional-records"
    assert mirror["upstream"]["commit"] == "b56cbb34751f9c92ff43fab2a4d8d12543c02b8d"
    assert set(mirror["files_sha256"]) == {crec(167), crec(189), crec(191)}
    assert any("NUL" in note for note in mirror["notes"])
    assert any("issue 190" in note for note in mirror["notes"])  # the gap between 189 and 191
    assert m["sources"]["us"]["base_url"].startswith("mirror:")
    # the live scraper's rejection reasons, prefixed with the source
    for reason in ("presiding_officer", "extensions_granule", "daily_digest_granule"):
        assert m["rejected"][f"us:{reason}"] > 0
    card = (built.path / "README.md").read_text()
    assert "Mirror-derived" in card and "b-d055/us-congressional-records" in card

    from datasets import load_from_disk

    rows = [r for split in load_from_disk(str(built.path / "data")).values() for r in split]
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"us:CREC-2024-1[12]-\d\d-pt1-Pg[SH]\d+(-\d+)?:\d+", i) for i in ids)
    assert {r["date"] for r in rows} <= {"2024-11-13", "2024-12-19", "2024-12-23"}
    assert {r["chamber"] for r in rows} == {"House", "Senate"}
    assert all("\0" not in r["text"] and not r["speaker"].startswith("The ") for r in rows)


def test_an_article_parses_as_the_granule_it_was_cut_from(tmp_path):
    """The mirror's article equals a GovInfo granule's <pre> text less the volume line: wrapped back into a
    granule page, the live parser reads the same speeches."""
    text, _ = UsCongressMirror.text_of(_need(CREC / crec(189)).read_bytes())
    starts = [m for m in _ARTICLE.finditer(text) if m["first"] in "SH"]
    checked = 0
    for m, nxt in zip(starts, starts[1:]):
        article = text[m.start():nxt.start()]
        page = "<html><body><pre>\n[Congressional Record Volume 170, Number 189 (Thursday, December 19, 2024)]\n" \
               f"[{'Senate' if m['first'] == 'S' else 'House'}]\n" + article.replace("&", "&amp;").replace("<", "&lt;") \
               + "</pre></body></html>"
        live, mirrored = parse_granule(page.encode()), parse_article(article)
        assert [(s.speaker, s.paragraphs) for s in live.speeches] == [(s.speaker, s.paragraphs) for s in mirrored.speeches]
        assert live.pages == mirrored.pages
        checked += bool(live.speeches)
    assert checked > 20


def test_bad_congress_mirrors_get_a_clear_message_and_no_snapshot(tmp_path, lfb_home):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="holds no Congressional Record issue files"):
        open_mirror("us", empty).fetch(DEC)
    with pytest.raises(InputError, match="no such folder"):
        open_mirror("us", tmp_path / "nowhere")

    junk = mirror_of(tmp_path, CREC, [crec(191)], with_readme=False)
    (junk / crec(192)).write_text("this is not the Congressional Record\n")
    with pytest.raises(InputError, match=r"congressional_record_170_192\.txt is not a Congressional Record issue"):
        refresh(plan(window=DEC, sources=["us"], mirrors={"us": junk}), progress=False)

    # a window with no House or Senate speech (191 is a pro forma day): refused, nothing written
    only_pro_forma = tmp_path / "pro-forma"
    only_pro_forma.mkdir()
    (only_pro_forma / crec(191)).symlink_to(_need(CREC / crec(191)))
    with pytest.raises(SnapshotError, match="no congress record is dated inside the window"):
        refresh(plan(window=DEC, sources=["us"], mirrors={"us": only_pro_forma}), progress=False)
    assert not any(snapshots_dir().glob("*")) if snapshots_dir().exists() else True


def test_arxiv_mirror_one_client_per_abstract_cc0(tmp_path, lfb_home):
    days = ["2025-12-01.jsonl", "2026-01-05.jsonl", "2026-01-06.jsonl", "2026-01-08.jsonl"]
    folder = mirror_of(tmp_path, ARXIV, days)
    window = Window.parse("2026-01-01", "2026-01-31", public_months=1)
    mirror = open_mirror("arxiv", folder)
    records, rejected = mirror.fetch(window, progress=False)
    raw_ids = [json.loads(line)["id"] for day in days for line in (folder / day).read_text().splitlines() if line]
    assert len(records) == len(set(raw_ids)) and rejected["duplicate_listing"] == len(raw_ids) - len(set(raw_ids)) > 0
    assert {r.license for r in records} == {"cc0 (arXiv metadata, CC0 1.0)"}
    assert all(r.id.startswith("arxiv:") and r.url.startswith("https://arxiv.org/abs/") for r in records)
    primary = {"arxiv:" + row["id"]: row["categories"][0] for day in days
               for row in map(json.loads, (folder / day).read_text().splitlines())}
    assert all(r.category == primary[r.id] for r in records) and any(r.category.startswith("q-bio") for r in records)
    # an id listed on two days is one client, dated by its first listing
    first_day = {}
    for day in days:
        for line in (folder / day).read_text().splitlines():
            first_day.setdefault("arxiv:" + json.loads(line)["id"], day[:10])
    assert all(r.date == first_day[r.id] for r in records)

    (built,) = refresh(plan(window=window, sources=["arxiv"], mirrors={"arxiv": folder}), progress=False)
    m = read_manifest(built.path)
    assert m["dataset"] == "arxiv-qbio" and m["counts"]["clients"]["public"] > 0
    assert m["sources"]["arxiv"]["mirror"]["upstream"]["repository"] == "yukari502/Daily-Bio-Arxiv"
    assert "not bioRxiv" in (built.path / "README.md").read_text()


def test_bad_arxiv_mirrors(tmp_path, lfb_home):
    folder = tmp_path / "arxiv"
    folder.mkdir()
    with pytest.raises(InputError, match="holds no arXiv listing files"):
        open_mirror("arxiv", folder).fetch(DEC)
    (folder / "2024-12-02.jsonl").write_text("<html>not json</html>\n")
    with pytest.raises(InputError, match=r"2024-12-02\.jsonl is not an arXiv listing"):
        open_mirror("arxiv", folder).fetch(DEC)
    # one bad line among good ones is counted, not fatal
    (folder / "2024-12-02.jsonl").write_text('{"id": "2412.00001", "summary": "Cells divide. They grow in the dish."}\n'
                                              '{"id": 7}\nnot json\n')
    records, rejected = open_mirror("arxiv", folder).fetch(DEC)
    assert [r.id for r in records] == ["arxiv:2412.00001"] and rejected["malformed_listing_line"] == 2


def test_cli_mirror_flags(tmp_path, lfb_home, capsys):
    assert main(["refresh", "--sources", "arxiv", "--since", "2026-01"]) == 2
    assert "--mirror DIR" in capsys.readouterr().err
    assert main(["refresh", "--sources", "us,uk", "--mirror", str(tmp_path), "--since", "2024-12"]) == 2
    assert "say whose mirror it is" in capsys.readouterr().err

    folder = mirror_of(tmp_path, CREC, [crec(189)])
    assert main(["refresh", "--sources", "us", "--mirror", str(folder), "--since", "2024-12-01", "--until",
                 "2025-01-03", "--public-months", "0", "--quiet", "--json"]) == 0
    (info,) = json.loads(capsys.readouterr().out)
    assert info["n_private_clients"] > 100 and "mirror-derived" in json.dumps(read_manifest(Path(info["path"])))


def test_upstream_is_read_from_the_readme_beside_the_folder(tmp_path):
    folder = mirror_of(tmp_path, ARXIV, [])
    assert read_upstream(folder)["commit"] == "d5e5174b13678ef93fecc56393ce27d653c51628"
    assert read_upstream(tmp_path) is None
