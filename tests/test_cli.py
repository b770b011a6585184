"""The `lfb` command line, run as a user runs it (a subprocess of the installed console script)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from replay_server import ReplayServer, refused_url
from biorxiv_replay import BiorxivApp, corpus, expected_clients

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


def test_out_writes_elsewhere(tmp_path, lfb_home):
    out = lfb("data", "demo", "--quiet", "--out", str(tmp_path / "elsewhere"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "elsewhere" / "snapshots" / "demo" / "manifest.json").is_file()
    assert not (lfb_home / "snapshots").exists()


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
        (["refresh", "--sources", "arxiv", "--since", "2024-09"], "unknown source"),
        (["refresh", "--since", "2024-13"], "not a calendar date"),
        (["refresh", "--since", "Sept"], "YYYY-MM"),
        (["refresh", "--since", "2024-09", "--splits", "1,1,1"], "sum to 1"),
        (["refresh", "--after-cutoff-of", "llama-9"], "no knowledge cutoff"),
        (["data", "info", "missing-snapshot"], "lfb data demo"),
        (["refresh", "--since", "2024-09", "--sources", "biorxiv", "--span-tokenizer", "bert"], "unknown span tokenizer"),
    ],
)
def test_bad_input_gets_a_clear_error(args, message):
    dead = refused_url()  # bad input must stop before any request; if one slipped through it would fail here
    out = lfb(*args, env={f"LFB_{s}_URL": dead for s in ("BIORXIV", "GOVINFO", "TWFY", "OURCOMMONS")})
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


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
