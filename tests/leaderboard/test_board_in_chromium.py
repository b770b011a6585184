"""The HTML board in a real browser (Debian's headless Chromium, driven over the DevTools pipe): it loads from
file:// with its plots, sorts when a header is clicked, filters as the user types, and runs no entry text."""

from __future__ import annotations

import json

import pytest

from .chromium_cdp import Browser, find_chromium

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium found (Debian: `apt-get install chromium`; .ci/run installs it when it can; or set LFB_CHROMIUM)",
)

VISIBLE_ROWS = "Array.from(document.querySelectorAll('tr[data-search]')).filter(r => !r.hidden)"


@pytest.fixture()
def page(board, tmp_path):
    folder, _result, _roles = board
    browser = Browser(CHROMIUM, tmp_path / "chromium-profile")
    browser.open((folder / "index.html").as_uri())
    yield browser
    browser.close()


def _column(page: Browser, table: str, key: str) -> list:
    index = page.evaluate(f"document.querySelector({json.dumps(table)}).querySelector('th[data-key={key}]').cellIndex")
    return page.evaluate(f"Array.from(document.querySelector({json.dumps(table)}).tBodies[0].rows)"
                         f".map(r => r.cells[{index}].getAttribute('data-v'))")


def test_the_page_loads_with_its_tables_and_plots(page, board, tmp_path):
    _folder, result, roles = board
    shown = len(result.board.rows)
    assert page.evaluate("document.title") == "LargeFedBench leaderboard"
    assert page.evaluate("document.querySelectorAll('tr[data-search]').length") == shown
    assert page.evaluate("document.getElementById('shown').textContent") == f"{shown} of {shown} entries shown"
    assert page.evaluate("Array.from(document.querySelectorAll('[data-section]')).map(s => s.dataset.section)") == \
        ["ranked", "unranked", "contaminated"]
    images = page.evaluate("Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])")
    assert len(images) == 2 and all(ok and width > 300 for _src, ok, width in images), images
    assert page.evaluate("typeof window.__pwned") == "undefined", "entry text was executed"
    assert page.evaluate(f"document.body.textContent.includes({json.dumps(roles['invalid']['entry_id'])})") is False
    shot = page.screenshot(tmp_path / "leaderboard.png")
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 20_000
    print(f"screenshot: {shot}")


def test_clicking_a_header_sorts_the_table(page):
    table = '.section[data-section=ranked] .table-block[data-bucket="ε ≤ 1"] table'
    assert page.evaluate(f"document.querySelector({json.dumps(table)}).closest('.table-block')"
                         ".querySelector('.bucket').textContent") == "ε ≤ 1"
    assert [float(v) for v in _column(page, table, "rank")] == [1, 2]
    button = f"{table} th[data-key=top1] button"
    page.click(button)
    values = [float(v) for v in _column(page, table, "top1")]
    assert values == sorted(values) and values[0] < values[-1]
    assert page.evaluate(f"document.querySelector({json.dumps(button)}).closest('th').getAttribute('aria-sort')") \
        == "ascending"
    page.click(button)
    values = [float(v) for v in _column(page, table, "top1")]
    assert values == sorted(values, reverse=True)
    page.click(f"{table} th[data-key=method] button")
    assert _column(page, table, "method") == sorted(_column(page, table, "method"))


def test_typing_in_the_filter_box_filters_by_method_and_dataset(page, board):
    _folder, result, _roles = board
    total = len(result.board.rows)
    page.click("#filter")
    page.type_text("dp-unigram-b")
    rows = page.evaluate(f"{VISIBLE_ROWS}.map(r => r.getAttribute('data-search'))")
    assert len(rows) == 1 and "dp-unigram-b" in rows[0]
    assert page.evaluate("document.getElementById('shown').textContent") == f"1 of {total} entries shown"
    hidden = page.evaluate("Array.from(document.querySelectorAll('[data-section]')).map(s => s.hidden)")
    assert hidden == [False, True, True], "sections without a match are hidden"
    page.type_text(" zzz-no-such-method")
    assert page.evaluate(f"{VISIBLE_ROWS}.length") == 0
    assert page.evaluate("Array.from(document.querySelectorAll('section.group')).every(s => s.hidden)")
    page.open(page.evaluate("location.href"))
    page.click("#filter")
    page.type_text("DEMO")
    assert page.evaluate(f"{VISIBLE_ROWS}.length") == total
