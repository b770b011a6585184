"""The `lfb` command line, run as a user runs it (a subprocess of the installed console script)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from biorxiv_replay import BiorxivApp, corpus, expected_clients
from replay_server import ReplayServer, refused_url

LFB = shutil.which("lfb", path=str(Path(sys.executable).parent)) or "lfb"


def lfb(*args: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([LFB, *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def test_help_does_not_import_torch():
    code = "import sys; from largefedbench.cli import main\ntry:\n main(['--help'])\nexcept SystemExit: pass\nprint('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().endswith("False"), out.stdout + out.stderr
    assert "refresh" in lfb("--help").stdout


def test_data_demo_list_and_info_json(lfb_home):
    out = lfb("data", "demo", "--quiet")
    assert out.returncode == 0, out.stderr
    assert "SYNTHETIC" in out.stdout and "spans per private client" in out.stdout
    info = json.loads(lfb("data", "info", "demo", "--json").stdout)
    for key in ("n_clients", "splits", "n_spans", "date_min", "date_max"):
        assert key in info
    assert info["n_clients"] == sum(info["splits"].values())
    assert info["synthetic"] is True
    by_path = json.loads(lfb("data", "info", str(lfb_home / "snapshots" / "demo"), "--json").stdout)
    assert by_path["content_sha256"] == info["content_sha256"]
    assert "demo" in lfb("data", "list").stdout


def test_home_writes_elsewhere(tmp_path, lfb_home):
    out = lfb("data", "demo", "--quiet", "--home", str(tmp_path / "elsewhere"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "elsewhere" / "snapshots" / "demo" / "manifest.json").is_file()
    assert not (lfb_home / "snapshots").exists()
    assert "demo" in lfb("data", "list", "--home", str(tmp_path / "elsewhere")).stdout


@pytest.mark.parametrize("argv, old", [
    (["eval", "--method", "public"], "--root"),
    (["audit", "--method", "dp-fedavg"], "--root"),
    (["smoke", "dp-fedavg"], "--root"),
    (["leaderboard", "reproduce", "e.json"], "--root"),
    (["refresh", "--since", "2024-09"], "--out"),
    (["data", "info", "demo"], "--out"),
])
def test_the_old_spellings_of_home_are_gone(argv, old, capsys):
    """Deprecated in 0.1.0 for one release and removed since (CHANGELOG.md): a usage error, --home is the flag."""
    from largefedbench.cli import build_parser

    assert build_parser().parse_args([*argv, "--home", "/y"]).home == Path("/y")
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args([*argv, old, "/x/lfb"])
    assert stop.value.code == 2 and f"unrecognized arguments: {old} /x/lfb" in capsys.readouterr().err


def test_out_is_the_board_folder_wherever_it_is_taken():
    from largefedbench.cli import build_parser

    parser = build_parser()
    for argv in (["eval", "--method", "public"], ["audit", "--method", "dp-fedavg"], ["leaderboard", "render"],
                 ["leaderboard", "reproduce", "e.json"]):
        args = parser.parse_args([*argv, "--out", "board"])
        assert args.out == Path("board") and getattr(args, "home", None) is None, argv


def test_the_rate_limit_reaches_the_scrapers_as_a_parameter(monkeypatch, capsys):
    from largefedbench.scrapers.biorxiv import BiorxivScraper

    from largefedbench.cli import main
    from largefedbench.errors import SourceError

    seen = {}

    def create(cls, **kwargs):
        seen.update(kwargs)
        raise SourceError("stopped by the test before any request")

    monkeypatch.setattr(BiorxivScraper, "create", classmethod(create))
    monkeypatch.delenv("LFB_RATE_LIMIT")
    assert main(["refresh", "--since", "2024-09", "--sources", "biorxiv", "--rate-limit", "3", "--quiet"]) == 2
    assert "stopped by the test" in capsys.readouterr().err
    assert seen["rate_limit"] == 3.0 and "LFB_RATE_LIMIT" not in os.environ  # a parameter, not the environment


def test_help_ends_with_an_example_of_every_command():
    from largefedbench.cli import EPILOG, build_parser

    def commands(parser, prefix=()):
        subs = parser._subparsers
        if subs is None:
            yield prefix
            return
        for name, sub in subs._group_actions[0].choices.items():
            yield from commands(sub, (*prefix, name))

    examples = [line.split() for line in EPILOG.splitlines() if line.startswith("  lfb ")]
    every = list(commands(build_parser()))
    assert len(every) >= 15
    for command in every:
        assert any(tuple(words[1:1 + len(command)]) == command for words in examples), f"no example of lfb {' '.join(command)}"
    assert EPILOG in lfb("--help").stdout


def test_cutoffs_lists_the_registry():
    rows = json.loads(lfb("cutoffs", "--json").stdout)
    llama = next(r for r in rows if r["model"] == "meta-llama/Meta-Llama-3-8B")
    assert llama["cutoff"] == "2023-03" and llama["window_start"] == "2023-04-01"
    assert "Phi-3" in lfb("cutoffs").stdout


def test_refresh_biorxiv_counts_match_the_replayed_responses(lfb_home):
    """Done-when of the foundation issue: refresh against a replay, then `data info --json` counts."""
    records = corpus(3)  # 78 real records re-dated into 2024-09: 3 pages of 30
    public = [{**r, "doi": r["doi"] + ".pub", "date": "2024-08-10"} for r in corpus(1)]
    with ReplayServer(BiorxivApp(records + public)) as srv:
        out = lfb("refresh", "--sources", "biorxiv", "--since", "2024-09", "--until", "2024-10", "--json", "--quiet",
                  env={"LFB_BIORXIV_URL": srv.url})
    assert out.returncode == 0, out.stderr
    (info,) = json.loads(out.stdout)
    assert info["n_private_clients"] == expected_clients(records)
    assert info["splits"]["public"] == expected_clients(public)
    assert info["rejected"]["biorxiv:license:cc_no"] == 4 * 4
    assert info["date_min"] == "2024-08-10" and info["date_max"] <= "2024-09-30"
    again = json.loads(lfb("data", "info", "biorxiv", "--json").stdout)
    assert again == info


@pytest.mark.parametrize(
    "args, message",
    [
        (["refresh", "--sources", "biorxiv"], "--since"),
        (["refresh", "--sources", "arxiv", "--since", "2024-09"], "no live scraper here: build it from a mirror folder"),
        (["refresh", "--since", "2024-13"], "not a calendar date"),
        (["refresh", "--since", "Sept"], "YYYY-MM"),
        (["refresh", "--since", "2024-09", "--splits", "1,1,1"], "sum to 1"),
        (["refresh", "--after-cutoff-of", "llama-9"], "no knowledge cutoff"),
        (["data", "info", "missing-snapshot"], "lfb data demo"),
        (["refresh", "--since", "2024-09", "--sources", "biorxiv", "--span-tokenizer", "bert"], "unknown span tokenizer"),
        # bad --base-url, --rate-limit or --name, or a window in the future: refused before any request
        (["refresh", "--since", "2024-09", "--sources", "biorxiv", "--base-url", "biorxiv=not a url"], "not an http(s) URL"),
        (["refresh", "--since", "2024-09", "--sources", "biorxiv", "--base-url", "nosuch=http://127.0.0.1:9"],
         "unknown source 'nosuch'"),
        (["refresh", "--since", "2024-09", "--sources", "biorxiv", "--rate-limit", "nan"], "--rate-limit nan"),
        (["refresh", "--since", "2024-09", "--sources", "biorxiv", "--rate-limit", "0"], "finite number > 0"),
        (["refresh", "--since", "2024-09", "--sources", "biorxiv", "--name", "../../x"], "not a snapshot name"),
        (["refresh", "--since", "2024-09", "--sources", "biorxiv", "--name", "/tmp/lfb-abs"], "not a snapshot name"),
        (["refresh", "--since", "2099-01", "--until", "2099-02", "--sources", "biorxiv"], "starts in the future"),
        (["refresh", "--since", "2099-01", "--sources", "biorxiv"], "starts in the future"),
    ],
)
def test_bad_input_gets_a_clear_error(args, message):
    dead = refused_url()  # bad input must stop before any request; if one slipped through it would fail here
    out = lfb(*args, env={f"LFB_{s}_URL": dead for s in ("BIORXIV", "GOVINFO", "TWFY", "OURCOMMONS")})
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "0", "fast"])
def test_a_bad_rate_limit_in_the_environment_is_refused_like_the_flag(value):
    dead = refused_url()  # refused before any request
    env = {f"LFB_{s}_URL": dead for s in ("BIORXIV", "GOVINFO", "TWFY", "OURCOMMONS")} | {"LFB_RATE_LIMIT": value}
    out = lfb("refresh", "--since", "2024-09", "--sources", "biorxiv", env=env)
    assert out.returncode == 2 and f"LFB_RATE_LIMIT={value!r}" in out.stderr and "finite number > 0" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "args, sigma",
    [
        # POPri Table 3 (delta 3e-6, T = 20): sigma_1 for N=72000, B=1000 at eps 1; sigma_2 (tree) for N=10000, B=500 at eps 7
        (["--epsilon", "1", "--clients", "72000", "--per-round", "1000"], 1.14),
        (["--epsilon", "7", "--clients", "10000", "--per-round", "500", "--mechanism", "tree"], 7.5),
    ],
)
def test_privacy_noise_reproduces_table_3(args, sigma):
    out = lfb("privacy", "noise", "--delta", "3e-6", "--steps", "20", "--json", *args)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert {"sigma", "epsilon", "delta", "accountant"} <= report.keys()
    assert abs(report["sigma"] - sigma) / sigma < 0.03


def test_privacy_epsilon_inverts_noise():
    noise = json.loads(lfb("privacy", "noise", "--epsilon", "2", "--delta", "1e-5", "--sample-rate", "0.01",
                           "--steps", "100", "--json").stdout)
    eps = json.loads(lfb("privacy", "epsilon", "--sigma", str(noise["sigma"]), "--delta", "1e-5", "--sample-rate",
                         "0.01", "--steps", "100", "--json").stdout)
    assert abs(eps["epsilon"] - 2) < 0.05 and eps["accountant"] == noise["accountant"]
    bad = lfb("privacy", "noise", "--epsilon", "0", "--delta", "1e-5", "--sample-rate", "0.01", "--steps", "10")
    assert bad.returncode == 2 and "epsilon must be > 0" in bad.stderr


# --- snapshots and eval refuse what they cannot use, with a message ------------------------------------------------
def _eval(*args: str, board: Path) -> subprocess.CompletedProcess:
    return lfb("eval", "--method", "dp-fedavg", *args, "--quiet", "--out", str(board))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--seeds", "-1"], "-1 is not a seed"),
        (["--seeds", str(2**70)], f"{2**70} is not a seed"),
        (["--method", "no.such.module:Cls"], "no module 'no.such.module'"),
        (["--set", "client_lr=inf"], "--set client_lr=inf: must be a finite number"),
        (["--set", "client_lr=nan"], "must be a finite number"),
    ],
)
def test_eval_bad_input_is_refused_before_any_work(args, message, lfb_home):
    out = _eval(*args, board=lfb_home / "board")
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert not (lfb_home / "models").exists() and not (lfb_home / "board").exists()


def test_out_pointing_at_a_file_is_refused_before_any_work(lfb_home, tmp_path):
    file = tmp_path / "a-file"
    file.write_text("x")
    for out in (_eval(board=file), lfb("data", "demo", "--quiet", "--home", str(file)),
                lfb("refresh", "--since", "2024-09", "--sources", "biorxiv", "--home", str(file / "sub"),
                    env={"LFB_BIORXIV_URL": refused_url()})):
        assert out.returncode == 2 and "is a file, not a folder" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert not (lfb_home / "snapshots").exists() and not (lfb_home / "models").exists()


@pytest.fixture(scope="module")
def built_demo(tmp_path_factory) -> Path:
    from largefedbench.data.demo import build_demo

    return build_demo(root=tmp_path_factory.mktemp("demo-root"), progress=False).path


@pytest.fixture
def demo(built_demo, lfb_home) -> Path:
    """A fresh copy of the demo snapshot in this test's LFB_HOME (tests damage it)."""
    return Path(shutil.copytree(built_demo, lfb_home / "snapshots" / "demo"))


def _run(capsys, *argv: str) -> tuple[int, str]:
    """``lfb ARGV`` in this process (an exception escaping main would fail the test like a traceback)."""
    from largefedbench.cli import main

    code = main(list(argv))
    return code, capsys.readouterr().err


def test_after_a_failed_data_verify_data_info_refuses_too(demo, capsys):
    code, _ = _run(capsys, "data", "info", "demo")
    assert code == 0  # verified once and remembered
    arrow = demo / "data" / "train" / "data-00000-of-00001.arrow"
    times, data = arrow.stat(), arrow.read_bytes()
    at = data.index(b" the ")
    arrow.write_bytes(data[:at] + b" thE " + data[at + 5:])  # same size, still valid Arrow
    os.utime(arrow, ns=(times.st_atime_ns, times.st_mtime_ns))  # and the same time: only hashing can tell
    code, err = _run(capsys, "data", "verify", "demo")
    assert code == 2 and "does not match its manifest" in err
    code, err = _run(capsys, "data", "info", "demo")
    assert code == 2 and "does not match its manifest" in err  # not answered from the earlier verification


def test_eval_refuses_a_snapshot_whose_data_no_longer_matches_its_hash(demo, lfb_home, capsys):
    arrow = demo / "data" / "train" / "data-00000-of-00001.arrow"
    data = arrow.read_bytes()
    at = data.index(b" the ")
    arrow.write_bytes(data[:at] + b" thE " + data[at + 5:])  # same size, still valid Arrow: only the hash can tell
    out = _eval(board=lfb_home / "board")  # the real console script
    assert out.returncode == 2 and "does not match its manifest" in out.stderr, out.stderr
    assert "`lfb data demo`" in out.stderr and "Traceback" not in out.stderr
    assert not (lfb_home / "models").exists()


def test_data_info_refuses_and_data_verify_rehashes_an_edited_snapshot(demo, lfb_home, capsys):
    assert _run(capsys, "data", "info", "demo")[0] == 0  # hashed once; later loads compare sizes and times
    assert _run(capsys, "data", "verify", "demo")[0] == 0
    arrow = demo / "data" / "train" / "data-00000-of-00001.arrow"
    data, stat = arrow.read_bytes(), arrow.stat()
    at = data.index(b" the ")
    arrow.write_bytes(data[:at] + b" thE " + data[at + 5:])  # same size, still valid Arrow
    os.utime(arrow, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same time: only a full hash can tell
    assert _run(capsys, "data", "info", "demo")[0] == 0  # the remembered check holds, as documented
    code, err = _run(capsys, "data", "verify", "demo")
    assert code == 2 and "does not match its manifest" in err and "Traceback" not in err
    manifest = demo / "manifest.json"  # a forged hash in the manifest is refused by info, not printed
    manifest.write_text(manifest.read_text().replace(json.loads(manifest.read_text())["content_sha256"], "0" * 64))
    code, err = _run(capsys, "data", "info", "demo")
    assert code == 2 and "does not match its manifest" in err


@pytest.mark.parametrize("damage", ["truncate", "empty", "state.json"])
def test_a_damaged_snapshot_is_named_with_how_to_rebuild_it(demo, lfb_home, damage, capsys):
    arrow = demo / "data" / "train" / "data-00000-of-00001.arrow"
    if damage == "truncate":
        os.truncate(arrow, arrow.stat().st_size // 3)
    elif damage == "empty":
        arrow.write_bytes(b"")
    else:
        (demo / "data" / "validation" / "state.json").write_text("")
    for argv in (["data", "info", "demo"], ["data", "demo", "--quiet"],
                 ["eval", "--method", "dp-fedavg", "--quiet", "--out", str(lfb_home / "board")]):
        code, err = _run(capsys, *argv)
        assert code == 2 and "snapshot 'demo'" in err and "damaged" in err, (argv, err)
        assert f"rm -r {demo}" in err and "`lfb data demo`" in err
    assert not (lfb_home / "models").exists()


def test_a_full_disk_is_a_message_and_no_temporary_folder_is_left(lfb_home, monkeypatch, capsys):
    import errno

    import largefedbench.data.snapshot as snap
    import largefedbench.run.eval as harness
    from largefedbench.cli import main

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(snap, "atomic_write_json", full)
    assert main(["data", "demo", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "the disk is full" in err and "run the same command again" in err
    assert "--home DIR" in err and "--out" not in err  # a snapshot is moved with --home (--out is the board)
    assert list((lfb_home / "snapshots").iterdir()) == []
    monkeypatch.setattr(harness, "run_eval", full)  # a full disk in the middle of a run (any write)
    assert main(["eval", "--method", "dp-fedavg", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "lfb eval failed: the disk is full" in err and "--home DIR" in err and "LFB_HOME/--out" not in err
    assert "--out DIR (the board)" in err  # eval writes the board too


def test_a_full_disk_in_refresh_names_home_not_its_deprecated_out(lfb_home, monkeypatch, capsys):
    import errno

    from biorxiv_replay import BiorxivApp, corpus
    from largefedbench.scrapers.cache import RawCache
    from replay_server import ReplayServer

    from largefedbench.cli import main

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(RawCache, "put", full)  # the first response stored raw hits the full disk
    with ReplayServer(BiorxivApp(corpus(1))) as srv:
        code = main(["refresh", "--sources", "biorxiv", "--since", "2024-09", "--until", "2024-09", "--quiet",
                     "--base-url", f"biorxiv={srv.url}"])
    err = capsys.readouterr().err
    assert code == 2 and "lfb refresh failed: the disk is full" in err and "Traceback" not in err
    assert "--home DIR" in err and "--out" not in err  # refresh's --out is only a deprecated spelling of --home


def test_a_board_that_is_a_file_is_named_as_board_before_any_check(lfb_home, tmp_path, capsys):
    from largefedbench.cli import main

    board = tmp_path / "board"
    board.write_text("not a folder")
    code = main(["leaderboard", "submit", str(tmp_path / "missing.json"), "--board", str(board), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and f"--board {board}: {board} is a file, not a folder" in err
    assert "--home" not in err and "--out" not in err


def test_a_failed_write_names_the_flags_of_its_command():
    from largefedbench.cli import _write_places, build_parser

    parser = build_parser()
    places = {" ".join(argv): _write_places(parser.parse_args(argv)) for argv in (
        ["leaderboard", "submit", "e.json"], ["data", "export", "demo", "--format", "flower", "--out", "x"],
        ["release", "r1", "--snapshots", "demo", "--out", "x"], ["refresh", "--since", "2024-09"],
        ["eval", "--method", "dp-fedavg"])}
    assert places["leaderboard submit e.json"].startswith("--board DIR")
    assert places["data export demo --format flower --out x"].startswith("--out DIR (the export")
    assert places["release r1 --snapshots demo --out x"].startswith("--out") and "--home" in places[
        "release r1 --snapshots demo --out x"]
    assert "--out" not in places["refresh --since 2024-09"]
    assert "--home DIR" in places["eval --method dp-fedavg"] and "--out DIR (the board)" in places[
        "eval --method dp-fedavg"]


def test_a_read_only_home_is_refused_before_any_work(lfb_home, monkeypatch, capsys):
    from largefedbench.cli import main

    lfb_home.chmod(0o500)
    try:
        if os.access(lfb_home, os.W_OK):  # running as root: mode bits do not bind, simulate what access(2) says
            real = os.access
            monkeypatch.setattr(os, "access", lambda p, mode, **k: False if Path(p) == lfb_home else real(p, mode, **k))
        assert main(["data", "demo", "--quiet"]) == 2
        assert f"LFB_HOME={lfb_home}: cannot write into {lfb_home}" in capsys.readouterr().err
        assert main(["eval", "--method", "dp-fedavg", "--quiet", "--out", str(lfb_home / "board")]) == 2
        assert "cannot write into" in capsys.readouterr().err
    finally:
        lfb_home.chmod(0o700)
    assert not (lfb_home / "snapshots").exists()


def test_refresh_of_a_window_without_records_writes_nothing_and_fails(lfb_home):
    with ReplayServer(BiorxivApp(corpus(1))) as srv:  # every record is dated 2024-09
        out = lfb("refresh", "--sources", "biorxiv", "--since", "2024-11", "--until", "2024-11", "--quiet",
                  env={"LFB_BIORXIV_URL": srv.url})
    assert out.returncode == 2 and "no biorxiv record is dated inside the window 2024-11-01..2024-11-30" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (lfb_home / "snapshots").exists() or list((lfb_home / "snapshots").iterdir()) == []


def test_a_reader_that_leaves_early_gets_no_traceback():
    """`lfb methods | head -1`: the pipe closes before lfb writes; lfb ends quietly with 141 (128 + SIGPIPE)."""
    proc = subprocess.Popen([LFB, "methods"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # before the command has imported anything, so its first write finds no reader
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err


def test_methods_name_shows_every_setting_with_its_value_in_each_preset(capsys):
    """`lfb methods NAME`: one row per Config field (the `--set` keys), the paper, cpu and tiny presets' values side by
    side as `lfb eval` resolves them; --json carries the same; an unknown name is a clear error."""
    import dataclasses

    from largefedbench.methods.fedbiscuit import FedBisConfig

    from largefedbench.cli import main

    assert main(["methods", "fedbis", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    rows = {r["setting"]: r for r in info["settings"]}
    assert list(rows) == [f.name for f in dataclasses.fields(FedBisConfig)] and info["config"] == "FedBisConfig"
    assert (rows["rounds"]["paper"], rows["rounds"]["cpu"], rows["rounds"]["tiny"]) == (500, 2, 4)
    assert rows["selector"]["cpu"] == "llm" and rows["client_betas"]["paper"] == [0.9, 0.95]
    assert main(["methods", "fedbis"]) == 0
    text = capsys.readouterr().out
    assert "lfb eval --set KEY=VALUE" in text and any(line.split()[:4] == ["rounds", "500", "2", "4"]
                                                      for line in text.splitlines())
    assert main(["methods", "fedbs"]) == 2
    assert "unknown method 'fedbs'. Did you mean 'fedbis'" in capsys.readouterr().err


def test_data_list_keeps_a_long_dataset_name_apart_from_its_window(monkeypatch, capsys):
    from argparse import Namespace

    from largefedbench.cli import data as data_cli
    from largefedbench.data import snapshot

    row = {"name": "arxiv-qbio-2025-11-01-2026-08-08-ea3ee8d2", "dataset": "arxiv-qbio-extended", "synthetic": False,
           "window": {"since": "2025-11-01", "until": "2026-08-08"}, "path": "/x", "created_at": "t",
           "counts": {"clients": {"train": 2}, "spans": {"train": 5}}}
    monkeypatch.setattr(snapshot, "list_snapshots", lambda home: [row])
    assert data_cli.cmd_data_list(Namespace(home=None, json=False)) == 0
    header, line = capsys.readouterr().out.splitlines()
    assert line.split() == [row["name"], "arxiv-qbio-extended", "2025-11-01..2026-08-08", "2", "5"]
    assert header.index("window") == line.index("2025-11-01..")
