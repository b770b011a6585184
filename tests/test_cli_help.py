"""The shape of ``lfb``'s command tree: every command runs something, lists its subcommands and explains its flags."""

from __future__ import annotations

import argparse
import re

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
    """The old spellings of --home (and other suppressed flags) are parsed but not shown."""
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
