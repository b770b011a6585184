"""The method sandbox: the channel carries no pickle, the jail hides the home and the board, and the attack kit gets
nothing under `lfb eval` in the sandbox (and everything without it, so the test can fail)."""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import torch

from largefedbench.errors import InputError, MethodError
from largefedbench.sandbox.jail import JAIL, jail_available, jailed_command, kept_environment
from largefedbench.sandbox.wire import Channel, SealedFunction
from largefedbench.testing.attacks import ATTACKS, PATCHED_TOP1

needs_jail = pytest.mark.skipif(jail_available() is not None, reason=f"no namespaces here: {jail_available()}")


def _pipe_pair() -> tuple[Channel, io.BytesIO]:
    buf = io.BytesIO()
    return Channel(buf, buf), buf


def test_the_channel_carries_trees_of_tensors_and_arrays_and_refuses_a_pickle():
    channel, buf = _pipe_pair()
    message = {"op": "private_sum", "noisy": torch.arange(4.0), "indices": np.arange(3), "clip": 1.5, "shape": None}
    channel.send(message)
    buf.seek(0)
    got = channel.recv()
    assert torch.equal(got["noisy"], message["noisy"]) and np.array_equal(got["indices"], message["indices"])
    assert got["clip"] == 1.5 and got["shape"] is None
    evil = pickle.dumps({"op": "done"})
    buf2 = io.BytesIO(len(evil).to_bytes(8, "little") + evil)
    with pytest.raises(MethodError, match="not tensors and JSON"):
        Channel(buf2, buf2).recv()


def test_a_sealed_client_function_is_unpickled_only_by_a_worker():
    import cloudpickle

    sealed = SealedFunction(cloudpickle.dumps(lambda view: 2 * view))
    with pytest.raises(MethodError, match="worker processes"):
        sealed(1)
    assert pickle.loads(cloudpickle.dumps(sealed))(21) == 42  # what a worker does with the task it is sent


@needs_jail
def test_the_jail_hides_the_home_and_board_keeps_binds_read_only_and_has_no_network(tmp_path):
    home, board, code, out = tmp_path / "home", tmp_path / "board", tmp_path / "code", tmp_path / "method"
    for folder in (home / "snapshots" / "s" / "data" / "train", home / "models", board, code, out):
        folder.mkdir(parents=True)
    (home / "snapshots" / "s" / "data" / "train" / "state.json").write_text("{}")
    (home / "models" / "m.txt").write_text("weights")
    (code / "probe.py").write_text(
        "import json, os, socket, pathlib\n"
        "def can_write(p):\n"
        "    try:\n        pathlib.Path(p).write_text('x'); return True\n    except OSError:\n        return False\n"
        "try:\n    socket.create_connection(('127.0.0.1', 9), timeout=1); net = 'reached'\n"
        "except OSError as e:\n    net = str(e)\n"
        "def escape():\n"  # the classic chroot escape: chroot into a subfolder, climb out with '..', chroot there
        "    try:\n        os.makedirs('/tmp/e', exist_ok=True); os.chroot('/tmp/e')\n"
        "        for _ in range(64):\n            os.chdir('..')\n"
        "        os.chroot('.'); return os.listdir('/')\n    except OSError as e:\n        return str(e)\n"
        "def shm():\n"
        "    try:\n        import ctypes; return ctypes.CDLL(None).shmget(0x4c4642, 4096, 0o1666)\n"
        "    except OSError as e:\n        return str(e)\n"
        f"print(json.dumps({{'escape': escape(), 'shm': shm(), 'snapshot': os.path.exists('{home}/snapshots/s'), 'models': open('{home}/models/m.txt').read(),"
        f" 'board': os.listdir('{board}'), 'home_write': can_write('{home}/x'), 'code_write': can_write('{code}/x'),"
        f" 'out_write': can_write('{out}/x'), 'pids': len([p for p in os.listdir('/proc') if p.isdigit()]), 'net': net}}))\n")
    root = tempfile.mkdtemp()
    try:
        cmd = jailed_command([sys.executable, str(code / "probe.py")], root=root,
                             read_only=[sys.prefix, sys.base_prefix, code, home / "models"], writable=[out],
                             hidden=[home, board], env=kept_environment())
        seen = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout)
    finally:
        os.rmdir(root)
    assert seen["snapshot"] is False and seen["board"] == [] and seen["models"] == "weights"
    assert not seen["home_write"] and not seen["code_write"] and seen["out_write"]
    assert seen["pids"] <= 2 and "unreachable" in seen["net"].lower()
    assert (out / "x").read_text() == "x" and not (home / "x").exists()
    assert "Operation not permitted" in str(seen["escape"]), seen["escape"]  # no capability to chroot out
    # a SysV segment made inside is not among this namespace's: the jail has an IPC namespace of its own
    assert "0x004c4642" not in subprocess.run(["ipcs", "-m"], capture_output=True, text=True).stdout


def _attack(tiny, tmp_path, sandbox: str):
    """The attack kit under `lfb eval` in a process of its own, on a copy of the tiny home: without the sandbox the
    kit patches the scorer of the process it runs in and poisons the home's reference cache, so neither may be the
    test session's."""
    import shutil

    from largefedbench.leaderboard.schema import parse_entry

    _fd, _bundle, root = tiny
    home, out = tmp_path / f"home-{sandbox}", tmp_path / sandbox
    shutil.copytree(root, home)
    lfb = os.path.join(os.path.dirname(sys.executable), "lfb")
    done = subprocess.run([lfb, "eval", "--method", "largefedbench.testing.attacks:AttackKit", "--seeds", "0",
                           "--epsilon", "100", "--sandbox", sandbox, "--home", str(home), "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=900)
    (seed,) = out.glob(".runs/*/seed-0/result.json")
    if sandbox == "off":  # the patch also poisoned the references computed after it: the run may stop there
        return None, json.loads(seed.read_text())
    assert done.returncode == 0, done.stderr[-3000:]
    (entry,) = out.glob("entries/*/attack-kit/*.json")
    return parse_entry(json.loads(entry.read_text())), json.loads(seed.read_text())


@needs_jail
@pytest.mark.timeout(1500)  # two whole `lfb eval` runs in processes of their own, references included
def test_every_attack_of_the_kit_fails_in_the_sandbox_and_succeeds_without_it(tiny, tmp_path):
    entry, seed = _attack(tiny, tmp_path, "on")
    assert seed["sandbox"] == JAIL and set(seed["info"]["breaches"]) == set(ATTACKS)
    assert seed["info"]["breaches"] == {name: "" for name in ATTACKS}
    assert entry.metrics.next_token_accuracy.top1.mean < 0.9 < PATCHED_TOP1  # the patch did not reach the scorer
    _, seed = _attack(tiny, tmp_path, "off")  # the same method in the harness's process: the kit is not blunt
    breaches = seed["info"]["breaches"]
    assert seed["sandbox"] == "none" and seed["test"]["top1"] == pytest.approx(PATCHED_TOP1)
    assert "private rows" in breaches["read snapshot files"] and "Federation" in breaches["walk memory"]
    assert breaches["non-finite clients"] == ""  # zeroed rows: the door holds in either process
    assert "clients wrote to the home or reached a network" in breaches["client side channels"]
    assert "each sent what other clients left in their worker" in breaches["mix clients"]  # no probe without it


@needs_jail
def test_a_plugin_is_described_by_its_sandbox_and_never_imported_by_the_harness(tiny, tmp_path):
    import largefedbench.evaluation.accuracy as accuracy
    from largefedbench.config_overrides import config_to_dict
    from largefedbench.registry import file_module_name
    from largefedbench.run.eval import EvalRequest, prepare

    _fd, _bundle, root = tiny
    marker = f"LFB_TEST_IMPORTED_{os.getpid()}"
    plugin = tmp_path / "import_attack.py"
    plugin.write_text("import os\nfrom largefedbench.testing.attacks import AttackKit, patch_scorer\n"
                      f"os.environ[{marker!r}] = '1'\n"
                      "patch_scorer(None, None)  # on import: a process that imports this module scores 0.99\n"
                      "class Imported(AttackKit):\n    name = 'import-attack'\n")
    scorer = accuracy.next_token_accuracy

    def request(**overrides):
        return EvalRequest(method=f"{plugin}:Imported", dataset="demo", profile="tiny", seeds=(0,), epsilon=4.0,
                           home=root, out=tmp_path / "board", progress=False, overrides=overrides)

    prep = prepare(request())
    assert marker not in os.environ and accuracy.next_token_accuracy is scorer  # its import-time code never ran here
    assert file_module_name(plugin) not in sys.modules
    assert prep.method.target == f"{file_module_name(plugin)}:Imported" and prep.method_cls.name == "import-attack"
    assert prep.method.source == file_module_name(plugin) and prep.method_cls.output == "synthetic text"
    assert config_to_dict(prep.config) == {"n_texts": 16}  # the tiny preset, resolved in the sandbox
    with pytest.raises(InputError, match="n_texts"):  # a bad override is still the user's error, said plainly
        prepare(request(n_texts="many"))
    with pytest.raises(MethodError, match="method file"):
        prepare(EvalRequest(method=f"{tmp_path / 'missing.py'}:Imported", dataset="demo", profile="tiny",
                            home=root, out=tmp_path / "board", progress=False))


@needs_jail
def test_lfb_methods_shows_a_plugins_settings_from_its_sandbox_without_importing_it(tmp_path, capsys):
    import json

    import largefedbench.evaluation.accuracy as accuracy
    from largefedbench.cli import main
    from largefedbench.registry import file_module_name

    marker = f"LFB_TEST_IMPORTED_{os.getpid()}"
    plugin = tmp_path / "shown_attack.py"
    plugin.write_text("import os\nfrom largefedbench.testing.attacks import AttackKit, patch_scorer\n"
                      f"os.environ[{marker!r}] = '1'\npatch_scorer(None, None)\n"
                      "class Shown(AttackKit):\n    name = 'shown-attack'\n")
    scorer = accuracy.next_token_accuracy
    assert main(["methods", f"{plugin}:Shown", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert marker not in os.environ and accuracy.next_token_accuracy is scorer
    assert file_module_name(plugin) not in sys.modules
    assert info["name"] == "shown-attack" and info["source"] == file_module_name(plugin)
    assert info["settings"] == [{"setting": "n_texts", "type": "int", "paper": 64, "cpu": 64, "tiny": 16}]


def test_the_precision_settings_reach_the_methods_process(monkeypatch):
    """The entry records the precision the harness resolved: a sandboxed method (and its client workers) must run in
    it, so both settings pass into their environment."""
    from largefedbench.models.precision import ENV_VAR, TRAINING_ENV_VAR

    monkeypatch.setenv(ENV_VAR, "float32")
    monkeypatch.setenv(TRAINING_ENV_VAR, "float32")
    env = kept_environment()
    assert env[ENV_VAR] == "float32" and env[TRAINING_ENV_VAR] == "float32"


def test_a_checkpoint_cannot_name_a_federation_state_the_harness_did_not_save(tmp_path):
    from largefedbench.sandbox.server import _Server

    server = _Server(fed=None, selection=None, seed_dir=tmp_path, log=print)
    with pytest.raises(InputError, match="did not save"):
        server.handle({"op": "load_state", "token": "0" * 64})
    with pytest.raises(InputError, match="did not save"):
        server.handle({"op": "load_state", "token": "../../ledger"})


def test_the_harness_counts_the_held_out_queries_a_sandboxed_method_makes_whatever_it_reports(tmp_path):
    from types import SimpleNamespace

    from largefedbench.sandbox.server import SandboxRun, _Server

    selection = SimpleNamespace(_new_downstream=lambda: torch.nn.Linear(2, 2), accuracy=lambda model: {"top1": 0.5})
    server = _Server(fed=None, selection=selection, seed_dir=tmp_path, log=print)
    weights = {k: v.clone() for k, v in torch.nn.Linear(2, 2).state_dict().items()}
    for _ in range(7):
        assert server.handle({"op": "selection", "call": "accuracy", "weights": weights}) == {"top1": 0.5}
    claimed = [{"by": "method", "what": "round of rounds", "metric": "fid", "chosen": 1, "candidates": 2}]
    ran = SandboxRun(None, [], 0.0, {}, claimed, accuracy_queries=server.accuracy_queries)
    assert ran.selections[0] == claimed[0] and ran.selections[1]["candidates"] == 7
    assert "counted by the harness" in ran.selections[1]["what"] and ran.selections[1]["by"] == "harness"
    forged = {"op": "selection", "call": "record", "by": "harness", "what": "round", "metric": "top1", "chosen": 1,
              "candidates": 1}
    recorded = []
    selection.record = lambda **kw: recorded.append(kw)
    server.handle(forged)  # a method's record is the method's, whatever it says
    assert recorded == [{"by": "method", "what": "round", "metric": "top1", "chosen": 1, "candidates": 1}]
    with pytest.raises(InputError, match="the harness's own"):
        server.handle({**forged, "what": ran.selections[1]["what"]})
    assert SandboxRun(None, [], 0.0, {}, claimed).selections == claimed  # no query, nothing added


@needs_jail
@pytest.mark.parametrize("body, refused", [
    ("    name = 'popri'\n", "not a built-in method's name"),
    ("    name = 'x'\n    fixed_epsilon = float('inf')\n", "never a reference"),
    ("    name = 'x'\nImported.__module__, Imported.__qualname__ = 'largefedbench.methods.popri', 'POPri'\n",
     "__module__"),
    ("    name = '../../x'\n", "is not a plug-in's"),
])
def test_a_plugin_cannot_describe_itself_as_a_built_in_a_reference_or_a_path(tmp_path, body, refused):
    from largefedbench.run.described import describe_method

    plugin = tmp_path / "posing.py"
    plugin.write_text("from largefedbench.testing.attacks import AttackKit\nclass Imported(AttackKit):\n" + body)
    home = tmp_path / "home"
    with pytest.raises(MethodError, match=refused):
        describe_method(f"{plugin}:Imported", preset="tiny", overrides={}, home=home, hidden=[home])


@needs_jail
def test_a_plugin_is_described_once_per_process_until_its_file_changes(tmp_path, monkeypatch):
    """``lfb leaderboard reproduce`` resolves an entry's method more than once: the same question about the same code
    is answered from the first description; an edited method file is described again."""
    import dataclasses

    import largefedbench.sandbox.server as server
    from largefedbench.run.described import describe_method

    calls = []
    real = server.describe_sandboxed
    monkeypatch.setattr(server, "describe_sandboxed", lambda *a, **kw: calls.append(a) or real(*a, **kw))
    plugin = tmp_path / "cached.py"
    plugin.write_text("from largefedbench.testing.attacks import AttackKit\nclass Imported(AttackKit):\n"
                      "    name = 'cached-probe'\n")
    home = tmp_path / "home"
    first = describe_method(f"{plugin}:Imported", preset="tiny", overrides={}, home=home, hidden=[home])
    again = describe_method(f"{plugin}:Imported", preset="tiny", overrides={}, home=home, hidden=[home])
    assert len(calls) == 1 and again.cls.name == first.cls.name == "cached-probe"
    assert dataclasses.asdict(again.config) == dataclasses.asdict(first.config)
    plugin.write_text(plugin.read_text().replace("cached-probe", "cached-probe-2"))
    assert describe_method(f"{plugin}:Imported", preset="tiny", overrides={}, home=home,
                           hidden=[home]).cls.name == "cached-probe-2"
    assert len(calls) == 2


@needs_jail
def test_a_plugin_in_a_namespace_package_is_described_from_the_folders_it_spans(tmp_path, monkeypatch):
    """A namespace package (no ``__init__.py``) may span several folders: its process gets each one's parent on its
    ``sys.path``, not the folder of the module named."""
    from largefedbench.run.described import describe_method, plugin_code

    for root, body in (("one", "VALUE = 1\n"), ("two", "from largefedbench.testing.attacks import AttackKit\n"
                                                       "from lfb_ns_probe.helper import VALUE\n"
                                                       "class Imported(AttackKit):\n    name = 'ns-probe'\n")):
        (tmp_path / root / "lfb_ns_probe").mkdir(parents=True)
        (tmp_path / root / "lfb_ns_probe" / ("helper.py" if root == "one" else "method.py")).write_text(body)
        monkeypatch.syspath_prepend(str(tmp_path / root))
    _, folders, _ = plugin_code("lfb_ns_probe.method:Imported")
    assert sorted(folders) == sorted(str((tmp_path / r).resolve()) for r in ("one", "two"))
    home = tmp_path / "home"
    described = describe_method("lfb_ns_probe.method:Imported", preset="tiny", overrides={}, home=home, hidden=[home])
    assert described.cls.name == "ns-probe" and described.source == "lfb_ns_probe.method"


@needs_jail
def test_client_workers_behind_the_guard_cannot_write_the_home_or_reach_a_network(tmp_path):
    """A plug-in's client functions run where the private data is: confined like its method, they can neither keep a
    client's spans in the home nor send them, and the same function unconfined can (the test is not blunt)."""
    from test_federation_private_sum import small_split

    from largefedbench.executors import ProcessExecutor
    from largefedbench.federation import Federation
    from largefedbench.privacy.mechanisms import NoNoise
    from largefedbench.sandbox.server import worker_launcher
    from largefedbench.testing.attacks import _worker_escapes

    home = tmp_path / "home"
    home.mkdir()

    def leaks(view):
        escaped = _worker_escapes(str(home))
        (home / f"kept-{view.id}").write_text(" ".join(map(str, view.spans))) if escaped else None
        return np.array([float(len(escaped))])

    clients, emb = small_split(6, seed=2)
    executor = ProcessExecutor(workers=1)
    try:
        executor.confine(worker_launcher(home=home, hidden=[home], code=[]))
        fed = Federation(clients, embeddings=emb, seed=0, executor=executor)
        assert float(fed.private_sum(fed.everyone(), leaks, clip=10.0, mechanism=NoNoise())[0]) == 0
        assert not list(home.iterdir())
        executor.confine(None)
        fed = Federation(clients, embeddings=emb, seed=0, executor=executor)
        assert float(fed.private_sum(fed.everyone(), leaks, clip=10.0, mechanism=NoNoise())[0]) >= 6  # each wrote
        assert len(list(home.glob("kept-*"))) == 6
    finally:
        executor.shutdown()


@needs_jail
def test_confined_workers_share_the_cores_as_plain_ones_do(tmp_path, monkeypatch):
    """A sandboxed plug-in's harness has not loaded torch. Its confined workers must still get the harness's OpenMP
    wait policy (spinning threads on shared cores slow a release many times over) and a thread count that, times the
    workers, fits the cores."""
    from test_federation_private_sum import small_split

    from largefedbench import process_executor
    from largefedbench.federation import Federation
    from largefedbench.privacy.mechanisms import NoNoise
    from largefedbench.sandbox.server import worker_launcher

    monkeypatch.setattr(process_executor, "_driver_threads", lambda: None)  # the harness of a sandboxed plug-in
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    home = tmp_path / "home"
    home.mkdir()

    def settings(view):
        import torch

        return np.array([torch.get_num_threads(), float(os.environ.get("OMP_WAIT_POLICY") == "PASSIVE")])

    clients, emb = small_split(6, seed=2)
    executor = process_executor.ProcessExecutor()
    try:
        executor.confine(worker_launcher(home=home, hidden=[home], code=[]))
        fed = Federation(clients, embeddings=emb, seed=0, executor=executor)
        threads, passive = fed.private_sum(fed.everyone(), settings, clip=1e3, mechanism=NoNoise()) / 6
        workers = len(executor._procs)
    finally:
        executor.shutdown()
    assert passive == 1.0
    assert workers * threads <= max(os.cpu_count() or 1, threads)


@needs_jail
def test_a_confined_workers_reply_runs_nothing_in_the_harness_and_undone_clipping_is_caught(tmp_path):
    """A client function shares its worker with the code that clips and replies: it can undo the clipping or forge
    the reply. Neither reaches a release: the harness reads a confined worker's reply as arrays only (a forged pickle
    names a function that is refused), and a chunk's sum above its clients × clip is refused before any noise."""
    from test_federation_private_sum import small_split

    from largefedbench.errors import MethodError, PrivacyError
    from largefedbench.executors import ProcessExecutor
    from largefedbench.federation import Federation
    from largefedbench.privacy.mechanisms import Gaussian
    from largefedbench.sandbox.server import worker_launcher

    home, marker = tmp_path / "home", tmp_path / "ran-in-the-harness"
    home.mkdir()

    def unclipped(view):  # the worker's clipping replaced by the identity
        import largefedbench.client_views as views

        views._rows_clipped_sum = lambda rows, clip, n: (np.asarray(rows, dtype=np.float64).sum(axis=0), rows.shape[1])
        return np.full(4, 1e6)

    class Forged:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    def forges(view):  # answers for the worker with a pickle that would run a command where it is read
        import gc
        import pickle as pkl
        from multiprocessing.connection import Connection

        for conn in [o for o in gc.get_objects() if isinstance(o, Connection) and o.writable]:
            conn.send_bytes(pkl.dumps(("ok", Forged())))
        return np.zeros(4)

    clients, emb = small_split(6, seed=2)
    executor = ProcessExecutor(workers=1)
    try:
        executor.confine(worker_launcher(home=home, hidden=[home], code=[]))
        fed = Federation(clients, embeddings=emb, seed=0, executor=executor)
        with pytest.raises(PrivacyError, match="clipping was undone"):
            fed.private_sum(fed.everyone(), unclipped, clip=1.0, mechanism=Gaussian(1.0))
        executor.confine(worker_launcher(home=home, hidden=[home], code=[]))  # fresh workers
        fed = Federation(clients, embeddings=emb, seed=0, executor=executor)
        with pytest.raises(MethodError, match="not a chunk's sum"):
            fed.private_sum(fed.everyone(), forges, clip=1.0, mechanism=Gaussian(1.0))
        assert not marker.exists()
    finally:
        executor.shutdown()
