"""A replay of the bioRxiv /details API built from real recorded records (tests only).

The shared fixtures are real ``/details`` collection items (2013 bioRxiv, 2019 medRxiv) without their page
envelope; the replay wraps them into pages exactly as ``shared/reference/sources.md`` §1 documents the live
service: ``{"messages":[{"status":"ok",...,"cursor":N,"count":30,"total":"<string>"}],"collection":[...]}``,
30 records a page, ``{"messages":[{"status":"no posts found"}]}`` past the end. To place the real records
inside the test window their ``date`` is shifted (content, licences and quirks untouched).
"""

from __future__ import annotations

import copy
import json
import re

from conftest import fixture_path
from largefedbench.scrapers.biorxiv import LICENSE_ALLOWLIST
from replay_server import Reply

PAGE = 30
_DETAILS = re.compile(r"^/details/(biorxiv|medrxiv)/(\d{4}-\d{2}-\d{2})/(\d{4}-\d{2}-\d{2})/(\d+)(?:/json)?$")


def real_records() -> list[dict]:
    rows = []
    for name in ("esjournals_biorxiv_2013-01-01_2013-11-07.json", "esjournals_medrxiv_2019-01-01_2019-06-25.json"):
        for row in json.loads(fixture_path("bioRxiv", name).read_text()):
            # Drop the three fields es-journals added; keep the API's own.
            rows.append({k: v for k, v in row.items() if k not in ("node", "link_page", "link_pdf")})
    return rows


def corpus(n_copies: int = 3, day0: int = 2) -> list[dict]:
    """Real records re-dated into September 2024, copied with distinct DOIs to fill several pages."""
    out = []
    for copy_i in range(n_copies):
        for i, row in enumerate(real_records()):
            row = copy.deepcopy(row)
            row["doi"] = f"{row['doi']}.c{copy_i}"
            row["date"] = f"2024-09-{day0 + (i + copy_i) % 20:02d}"
            out.append(row)
    return out


class BiorxivApp:
    """Answers ``/details/{server}/{from}/{to}/{cursor}/json`` from a list of records."""

    def __init__(self, records: list[dict], page_size: int = PAGE) -> None:
        self.records = records
        self.page_size = page_size

    def __call__(self, path: str, query: dict) -> Reply:
        m = _DETAILS.match(path)
        if not m:
            return Reply(404, b"not found")
        start, end, cursor = m[2], m[3], int(m[4])
        rows = [r for r in self.records if start <= r["date"] <= end]
        page = rows[cursor : cursor + self.page_size]
        if not page:
            return Reply(200, json.dumps({"messages": [{"status": "no posts found"}]}).encode())
        message = {
            "status": "ok", "category": "all", "interval": f"{start}:{end}", "cursor": cursor,
            "count": len(page), "count_new_papers": str(sum(r["version"] == "1" for r in rows)), "total": str(len(rows)),
        }
        return Reply(200, json.dumps({"messages": [message], "collection": page}).encode(), {"Content-Type": "application/json"})


def expected_clients(records: list[dict]) -> int:
    best: dict[str, dict] = {}
    for r in records:
        if r["doi"] not in best or int(r["version"]) > int(best[r["doi"]]["version"]):
            best[r["doi"]] = r
    return sum(1 for r in best.values() if r["license"] in LICENSE_ALLOWLIST and r.get("abstract"))
