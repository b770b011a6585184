"""`lfb leaderboard render`: the board (README.md, index.html, plots/) from ``<board>/entries`` and nothing else.

Every entry is validated first; invalid entries are not shown and are returned for the caller to report. Output
is deterministic (no timestamps), so ``check=True`` can tell whether the committed board is up to date.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from largefedbench.errors import InputError
from largefedbench.io import atomic_write_text
from largefedbench.leaderboard.board import Board, Group, build_board
from largefedbench.leaderboard.files import ENTRIES, inside
from largefedbench.leaderboard.findings import EntryReport
from largefedbench.leaderboard.html_page import render_html
from largefedbench.leaderboard.markdown import render_markdown
from largefedbench.leaderboard.project_readme import with_board_lines
from largefedbench.leaderboard.validate import validate_paths

PLOTS = "plots"
PAGES = ("README.md", "index.html")
_PLOT_SUFFIXES = (".frontier.png", ".costs.png")


@dataclass
class RenderResult:
    board: Board
    reports: list[EntryReport]
    written: list[Path] = field(default_factory=list)
    stale: list[Path] = field(default_factory=list)  # check mode: pages that differ from what the entries give
    seconds: float = 0.0

    @property
    def invalid(self) -> list[EntryReport]:
        return [r for r in self.reports if not r.valid]


def _plot_paths(group: Group) -> dict[str, str]:
    paths = {"frontier": f"{PLOTS}/{group.slug}.frontier.png"}
    if any(r.entry.costs.rounds > 0 for r in group.rows):
        paths["costs"] = f"{PLOTS}/{group.slug}.costs.png"
    return paths


def _write_plots(out: Path, board: Board, plots: dict[str, dict[str, str]]) -> list[Path]:
    from largefedbench.leaderboard.plots import costs_plot, frontier_plot

    folder = out / PLOTS
    written = []
    for group in board.groups:
        for name, rel in plots[group.slug].items():
            path = out / rel
            if not inside(path.parent, folder):
                raise ValueError(f"refusing to write {path} outside {folder}")
            made = frontier_plot(group, path) if name == "frontier" else costs_plot(group, path)
            if made is not None:
                written.append(made)
    keep = {p.name for p in written}
    if folder.is_dir():
        for old in folder.iterdir():
            if old.name.endswith(_PLOT_SUFFIXES) and old.name not in keep and old.is_file() and not old.is_symlink():
                old.unlink()
    return written


def render_board(out: Path = Path("leaderboard"), *, check: bool = False) -> RenderResult:
    """Validate ``out/entries`` and write ``out/README.md``, ``out/index.html`` and ``out/plots/*.png``.

    With ``check``, write nothing and list in ``stale`` the pages that differ from what the entries give.
    """
    start = time.perf_counter()
    out = Path(out)
    entries = out / ENTRIES
    if not entries.is_dir():
        raise InputError(f"{out} has no {ENTRIES}/ folder, so there is no board to render there; pass --out the board "
                         f"folder (the one holding {ENTRIES}/, default ./leaderboard), or create {entries} for a new board")
    reports = validate_paths([entries])
    if not any(r.valid for r in reports):
        found = (f"none of its {len(reports)} entries is valid (`lfb leaderboard validate {entries}` says why)"
                 if reports else "it holds no entry")
        raise InputError(f"{entries}: {found}, so the board would be empty; nothing was written. Put an entry there "
                         f"(`lfb eval --out {out}` writes one, `lfb leaderboard submit` copies one in) and render again")
    board = build_board(reports)
    plots = {g.slug: _plot_paths(g) for g in board.groups}
    pages = {"README.md": render_markdown(board, plots), "index.html": render_html(board, plots)}
    result = RenderResult(board, reports)
    project = out.resolve().parent / "README.md"  # the project README beside the board, if it has a board block
    lines = with_board_lines(project.read_text(encoding="utf-8"), board.data_statement(), out.resolve().name) \
        if project.is_file() else None
    if lines is not None:
        pages[project] = lines
    if check:
        for name, text in pages.items():
            path = out / name
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                result.stale.append(path)
    else:
        result.written = _write_plots(out, board, plots)
        for name, text in pages.items():
            atomic_write_text(out / name, text)
            result.written.append(out / name)
        for path in result.written:
            path.chmod(0o644)  # a published board is world-readable, whatever the umask
    result.seconds = time.perf_counter() - start
    return result
