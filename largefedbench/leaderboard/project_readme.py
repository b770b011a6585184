"""The project README's lines about the board, rendered with it: the block between ``<!-- board:data -->`` and
``<!-- /board:data -->`` in the README beside the board folder says what data the results are on (never typed)."""

from __future__ import annotations

import re

__all__ = ["BEGIN", "END", "with_board_lines"]

BEGIN, END = "<!-- board:data -->", "<!-- /board:data -->"
_BLOCK = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)


def with_board_lines(readme: str, statement: str, board_folder: str) -> str | None:
    """``readme`` with its board block holding ``statement`` and a link to the board; None when it has no block."""
    if not _BLOCK.search(readme):
        return None
    block = f"{BEGIN}\n**{statement}** The board: [{board_folder}/README.md]({board_folder}/README.md).\n{END}"
    return _BLOCK.sub(lambda _m: block, readme, count=1)
