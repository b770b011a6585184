"""The shape of ``lfb``'s command tree: every command runs something, lists its subcommands and explains its flags;
and its help texts, which stay as they are unless changed on purpose (the golden file, see
:func:`test_every_help_text_is_the_golden_one`)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import pytest

from largefedbench.cli import build_parser, main


def parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command words, parser) for ``parser`` and every parser below it."""
    yield path, parser
    for name, sub in subcommands(parser).items():
        yield from parsers(sub, (*path, name))


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name, sub in action.choices.items()}


def test_the_tree_is_walked():
    tree = dict(parsers(build_parser()))
    assert {("data", "export"), ("leaderboard", "submit"), ("cutoffs", "measure"), ("new", "method")} <= set(tree)
    assert len(tree) >= 25


def test_every_command_has_a_handler():
    """A command (or a group of them, which prints its help) runs a function of the cli package."""
    for path, parser in parsers(build_parser()):
        if path:
            func = parser.get_default("func")
            assert callable(func), f"lfb {' '.join(path)} has no handler: set_defaults(func=...)"
            assert func.__module__.startswith("largefedbench.cli"), (path, func.__module__)


def test_every_shown_flag_has_a_help_text():
    missing = set()
    for path, parser in parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
                continue
            if not (action.help or "").strip():
                missing.add((" ".join(path), action.option_strings[0] if action.option_strings else action.dest))
    assert not missing, f"flags without a help text: {sorted(missing)}"


def test_hidden_flags_stay_hidden():
    """Suppressed flags (refresh's --biorxiv-server) are parsed but not shown."""
    for path, parser in parsers(build_parser()):
        shown = parser.format_help()
        for action in parser._actions:
            if action.help == argparse.SUPPRESS and action.option_strings:
                assert not re.search(rf"(^|[\s\[]){re.escape(action.option_strings[0])}\b", shown), (path, action)


def test_every_help_lists_its_subcommands():
    """``lfb --help`` lists every top-level command, and each group's --help each of its commands."""
    top = build_parser()
    assert len(subcommands(top)) >= 12
    for path, parser in parsers(top):
        text = parser.format_help()
        for name in subcommands(parser):
            assert re.search(rf"^    {re.escape(name)}\s", text, re.MULTILINE), f"lfb {' '.join(path)} --help omits {name}"


@pytest.mark.parametrize("path", [path for path, _ in parsers(build_parser())], ids=lambda p: " ".join(p) or "lfb")
def test_every_help_prints_and_exits_zero(path, capsys):
    with pytest.raises(SystemExit) as stop:
        main([*path, "--help"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: lfb {' '.join(path)}".rstrip())


def test_a_group_without_a_command_prints_its_help_and_fails(capsys):
    assert main([]) == 2 and "COMMAND" in capsys.readouterr().out
    assert main(["data"]) == 2 and "export" in capsys.readouterr().out


#: every ``lfb ... --help`` at :data:`HELP_COLUMNS` columns, each after a ``$ lfb ... --help`` line
GOLDEN_HELP = Path(__file__).parent / "golden" / "lfb_help.txt"
HELP_COLUMNS = 100
REGENERATE = "LFB_REGENERATE_HELP"


def help_texts() -> str:
    """The golden file's content: a header naming the Python whose argparse formatted it, then every help text."""
    python = ".".join(map(str, sys.version_info[:2]))
    out = [f"# lfb's help texts, COLUMNS={HELP_COLUMNS}, Python {python}'s argparse; regenerate on purpose with\n"
           f"# {REGENERATE}=1 pytest tests/test_cli_help.py -k golden\n"]
    for path, parser in parsers(build_parser()):
        out.append(f"\n$ {' '.join(('lfb', *path, '--help'))}\n{parser.format_help()}")
    return "".join(out)


def test_every_help_text_is_the_golden_one(monkeypatch):
    """``lfb --help`` and every command's and subcommand's help, byte for byte, as tests/golden/lfb_help.txt holds
    them. A change to a help text (a flag, a description, an example) is made on purpose: regenerate the file with
    ``LFB_REGENERATE_HELP=1 pytest tests/test_cli_help.py -k golden`` (that run fails on purpose) and commit it with
    the change, so the diff shows what users will see. The width is fixed (argparse wraps at $COLUMNS); argparse's layout differs between Python
    versions, so on another Python than the file's the comparison is skipped."""
    monkeypatch.setenv("COLUMNS", str(HELP_COLUMNS))
    texts = help_texts()
    if os.environ.get(REGENERATE):  # rewritten on purpose; the run still fails, so a set variable never passes it
        GOLDEN_HELP.parent.mkdir(exist_ok=True)
        GOLDEN_HELP.write_text(texts, encoding="utf-8")
        pytest.fail(f"{GOLDEN_HELP} rewritten ({REGENERATE} is set): review its diff, commit it, and run without it")
    golden = GOLDEN_HELP.read_text(encoding="utf-8")
    if golden.splitlines()[0] != texts.splitlines()[0]:
        pytest.skip(f"{GOLDEN_HELP.name} was written on another Python: {golden.splitlines()[0]}")
    assert texts == golden, (f"a help text differs from {GOLDEN_HELP}: if the change is meant, run "
                             f"{REGENERATE}=1 pytest tests/test_cli_help.py -k golden and commit the file")
