"""lfb: --executor/--ray-address on eval and bench, and the OMP_WAIT_POLICY default of the entry point."""

from __future__ import annotations

import os

import pytest

from largefedbench.cli import main


def test_eval_rejects_a_ray_address_without_the_ray_executor_before_any_work(tmp_path, capsys):
    code = main(["eval", "--method", "dp-fedavg", "--seeds", "0", "--out", str(tmp_path), "--ray-address", "auto"])
    assert code == 2 and "--ray-address is only for --executor ray" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_lfb_sets_a_passive_openmp_wait_policy_unless_the_user_chose_one(monkeypatch, capsys):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert main(["cutoffs", "--json"]) == 0
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert main(["cutoffs", "--json"]) == 0
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


def test_eval_rejects_a_bad_generation_dtype_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LFB_GENERATION_DTYPE", "fp16")
    code = main(["eval", "--method", "popri", "--seeds", "0", "--out", str(tmp_path)])
    assert code == 2 and "LFB_GENERATION_DTYPE='fp16'; choose one of float32, bfloat16" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_a_plugin_method_cannot_run_its_client_functions_in_process(tmp_path):
    """A method that is not built in gets worker processes; --executor local is refused before any work."""
    from pathlib import Path

    from largefedbench.errors import InputError
    from largefedbench.run.eval import EvalRequest, prepare

    broken = Path(__file__).parent / "leaderboard" / "broken_methods.py"
    with pytest.raises(InputError, match="is not a built-in method, so its client functions run in worker processes"):
        prepare(EvalRequest(method=f"{broken}:Silent", executor="local", out=tmp_path, progress=False))
