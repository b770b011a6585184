"""Checkpoints are tensors (safetensors) and JSON, never a pickle. Every supported type comes back
exactly; an unsupported one stops the write naming where it is; a pickle in a run folder is refused unread."""

from __future__ import annotations

import dataclasses
import enum
import math
import pickle
import random
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch

from largefedbench.contract import Artifact
from largefedbench.errors import InputError, MethodError
from largefedbench.rounds.checkpoints import CHECKPOINT_NAME, checkpoint_files, load_round, save_round
from largefedbench.rounds.state_file import read_state, state_bytes, state_from_bytes, write_state
from largefedbench.run.seed import METHOD_OUTPUT, load_method_output, save_method_output


@dataclasses.dataclass(frozen=True)
class Inner:
    weights: torch.Tensor
    note: str = "x"


@dataclasses.dataclass
class Outer:
    inner: Inner
    counts: np.ndarray
    derived: int = dataclasses.field(init=False, default=0)


class Colour(enum.IntEnum):
    RED = 1


def _rich_state() -> dict:
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    shared = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    outer = Outer(Inner(torch.ones(2, dtype=torch.bfloat16)), np.arange(4, dtype=np.int32))
    outer.derived = 7
    outer.extra = ["set besides the fields"]  # kept, as pickle keeps an instance's __dict__
    return {
        "numbers": [0, -3, 2**100, 1.5, -0.0, math.nan, math.inf, -math.inf, True, False, None],
        "text": ["", "ünïcode ✓", "a\nb"],
        "tuple": (1, ("nested", 2.0), ()),
        "int keys": {0: "a", (1, 2): "tuple key", None: 3},
        "ordered": OrderedDict([("b", 1), ("a", 2)]),
        "tensors": {str(dtype): torch.arange(5).to(dtype) for dtype in (torch.bool, torch.uint8, torch.int8, torch.int16,
                                                                   torch.int32, torch.int64, torch.float16,
                                                                   torch.bfloat16, torch.float32, torch.float64)},
        "odd tensors": [torch.tensor(2.5), torch.zeros(0, 4), shared.T, shared[1], torch.randn(3, 4)[:, 1:3]],
        "same tensor twice": [shared, shared],
        "grad": [torch.nn.Parameter(torch.ones(2)), torch.ones(2, requires_grad=True), torch.nn.Parameter(
            torch.ones(1), requires_grad=False)],
        "arrays": {np.dtype(dt).name: np.arange(6).astype(dt).reshape(2, 3) for dt in
                   (np.bool_, np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64,
                    np.float16, np.float32, np.float64)},
        "odd arrays": [np.zeros((0, 3)), np.array(4.0), np.asfortranarray(np.arange(6.0).reshape(2, 3)),
                       np.arange(5.0)[::2], np.arange(3, dtype=">f8")],
        "numpy scalars": [np.float32(0.1), np.float64(0.2), np.int64(-5), np.uint8(200), np.bool_(True), np.str_("s")],
        "dtypes": [torch.float32, torch.bfloat16],
        "numpy rng": np.random.default_rng(7).bit_generator.state,
        "legacy numpy rng": np.random.RandomState(3).get_state(),
        "torch rng": torch.Generator().manual_seed(11).get_state(),
        "python rng": random.Random(5).getstate(),
        "optimizer": opt.state_dict(),
        "dataclass": outer,
    }


def _same(a, b) -> None:
    """Equal in value, type, dtype, shape and flags (NaN equal to NaN, -0.0 apart from 0.0)."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and a.requires_grad == b.requires_grad
        assert torch.equal(a.detach(), b.detach())
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype.newbyteorder("=") == b.dtype.newbyteorder("=") and np.shape(a) == np.shape(b)
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, float):
        assert (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif dataclasses.is_dataclass(a):
        assert vars(a).keys() == vars(b).keys()
        for k in vars(a):
            _same(getattr(a, k), getattr(b, k))
    else:
        assert a == b


def test_every_supported_type_comes_back_exactly(tmp_path):
    state = _rich_state()
    write_state(tmp_path / "s.safetensors", state)
    back = read_state(tmp_path / "s.safetensors", fix="")
    _same(state, back)
    assert back["same tensor twice"][0] is back["same tensor twice"][1]  # one object, as torch.save kept it
    assert isinstance(back["grad"][0], torch.nn.Parameter) and not back["grad"][2].requires_grad
    assert back["dataclass"].derived == 7 and back["dataclass"].extra == ["set besides the fields"]
    assert back["arrays"]["float32"].flags.writeable


def test_restored_rng_states_and_optimizer_continue_exactly():
    rng, legacy, gen, py = (np.random.default_rng(1), np.random.RandomState(2), torch.Generator().manual_seed(3),
                            random.Random(4))
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)

    def step(m, o):
        m(torch.ones(2, 4)).sum().backward()
        o.step()
        o.zero_grad()

    step(model, opt)
    back = state_from_bytes(state_bytes({"rng": rng.bit_generator.state, "legacy": legacy.get_state(),
                                         "gen": gen.get_state(), "py": py.getstate(), "opt": opt.state_dict(),
                                         "weights": model.state_dict()}))
    rng2, legacy2, gen2, py2 = np.random.default_rng(), np.random.RandomState(), torch.Generator(), random.Random()
    rng2.bit_generator.state, _ = back["rng"], legacy2.set_state(back["legacy"])
    gen2.set_state(back["gen"])
    py2.setstate(back["py"])
    model2 = torch.nn.Linear(4, 1)
    model2.load_state_dict(back["weights"])
    opt2 = torch.optim.AdamW(model2.parameters(), lr=0.1)
    opt2.load_state_dict(back["opt"])
    np.testing.assert_array_equal(rng.random(5), rng2.random(5))
    np.testing.assert_array_equal(legacy.random(5), legacy2.random(5))
    assert torch.equal(torch.rand(5, generator=gen), torch.rand(5, generator=gen2)) and py.random() == py2.random()
    step(model, opt)
    step(model2, opt2)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), model2.parameters()))


def _local_dataclass():
    @dataclasses.dataclass
    class Local:
        x: int = 1

    return Local()


@pytest.mark.parametrize(("value", "message"), [
    (lambda: 0, r"checkpoint\['method'\]\['fn'\] is a builtins.function"),
    ({1, 2}, r"\['fn'\] is a builtins.set"),
    (Colour.RED, r"\['fn'\] is a .*Colour"),
    (torch.Generator(), r"\['fn'\] is <class 'torch._C.Generator'>"),
    (torch.Size([2]), r"\['fn'\] is <class 'torch.Size'>"),
    ([0, torch.zeros(2, dtype=torch.complex64)], r"\['fn'\]\[1\] is a torch.strided tensor of torch.complex64"),
    (np.array(["a", None], dtype=object), r"\['fn'\] is a numpy ndarray of dtype object"),
    (_local_dataclass(), r"\['fn'\] is a .*<locals>.Local, a dataclass that cannot be found"),
    ({"deep": (1, {"x": open})}, r"\['fn'\]\['deep'\]\[1\]\['x'\] is a builtins.builtin_function_or_method"),
])
def test_a_type_that_cannot_be_stored_safely_stops_the_write_naming_its_field(tmp_path, value, message):
    path = tmp_path / CHECKPOINT_NAME
    with pytest.raises(MethodError, match=message) as err:
        save_round(path, _Fed(), 0, {"fn": value})
    assert str(err.value).startswith("checkpoint['method']")
    assert not path.exists() and not list(tmp_path.iterdir())  # nothing written, not even a temp file


class _Fed:
    def __init__(self) -> None:
        self.loaded = None

    def state_dict(self):
        return {"round": 2, "rng": np.random.default_rng(0).bit_generator.state}

    def load_state_dict(self, state):
        self.loaded = state


class _Plant:
    """A pickle whose unpickling writes ``path`` (what a malicious checkpoint would do, harmlessly)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return Path.write_text, (self.path, "code ran")


def test_a_planted_pickle_is_refused_and_never_unpickled(tmp_path):
    marker = tmp_path / "pwned.txt"
    planted = tmp_path / "planted.pt"
    torch.save({"round": 0, "method": _Plant(marker)}, planted)
    pickle.loads(pickle.dumps(_Plant(tmp_path / "live.txt")))  # the plant is live: unpickling it does write
    assert (tmp_path / "live.txt").read_text() == "code ran"
    run = tmp_path / "seed-0"
    run.mkdir()
    data = planted.read_bytes()
    cases = [(run / "round-checkpoint.pt", CHECKPOINT_NAME, "old pickle format"),  # a legacy checkpoint
             (run / CHECKPOINT_NAME, CHECKPOINT_NAME, "looks like a pickle"),  # a pickle under the new name
             (run / "round-checkpoint-selectors.pt", "round-checkpoint-selectors.safetensors", "old pickle format")]
    for plant, name, why in cases:
        plant.write_bytes(data)
        with pytest.raises(InputError, match=why) as err:
            load_round(run / name, _Fed())
        assert str(plant) in str(err.value) and f"Delete {plant}" in str(err.value)  # which file, what to do
        assert "run code" in str(err.value)  # why
        assert plant in checkpoint_files(run)  # a stopped seed's checkpoint: the precision check and clear see it
        plant.unlink()
    pickle.dumps(data)  # (the bytes themselves are inert)
    for plant in (run / "method-output.pt", run / METHOD_OUTPUT):
        plant.write_bytes(data)
        with pytest.raises(InputError, match=r"Delete .* to run the method of that seed again"):
            load_method_output(run / METHOD_OUTPUT, _Fed(), {}, "cpu")
        plant.unlink()
    (run / CHECKPOINT_NAME).write_bytes(b"not a checkpoint at all")
    with pytest.raises(InputError, match="not a safetensors file"):
        load_round(run / CHECKPOINT_NAME, _Fed())
    assert not marker.exists()


def test_round_checkpoints_keep_their_text_readable_for_the_canary_search(tmp_path):
    """`lfb smoke` searches binary files for its canary words: a checkpoint's strings are stored as UTF-8, as they
    were in the pickle format."""
    fed = _Fed()
    save_round(tmp_path / CHECKPOINT_NAME, fed, 4, {"population": ["zqxcanaryword ünï"], "w": torch.ones(3)})
    assert "zqxcanaryword ünï".encode() in (tmp_path / CHECKPOINT_NAME).read_bytes()
    last, state = load_round(tmp_path / CHECKPOINT_NAME, fed)
    assert last == 4 and state["population"] == ["zqxcanaryword ünï"] and torch.equal(state["w"], torch.ones(3))
    assert fed.loaded == _Fed().state_dict()


def test_a_model_artifact_is_kept_as_its_weights_and_loaded_into_a_new_model(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)).train(False)
    artifact = Artifact.trained_model(model, history=[{"round": 0, "fid": np.float64(0.5)}], sigma=1.2)
    artifact.selections = [{"by": "method", "chosen": 3}]  # set by the harness besides the fields: kept too
    stamp = {"lfb": "1", "method": "2"}
    path = tmp_path / METHOD_OUTPUT
    save_method_output(path, _Fed(), artifact, [{"sigma": 1.2}], 3.5, {"generation": 1.0}, stamp)

    def fresh():
        return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))

    fed = _Fed()
    kept, calibrations, seconds, stages = load_method_output(path, fed, stamp, "cpu", new_model=fresh)
    assert kept.model is not model and not kept.model.training
    for a, b in zip(model.parameters(), kept.model.parameters()):
        assert torch.equal(a, b)
    assert kept.info == {"sigma": 1.2} and kept.history == artifact.history and kept.kind == "model"
    assert kept.selections == [{"by": "method", "chosen": 3}] and artifact.model is model  # the caller's untouched
    assert (calibrations, seconds, stages) == ([{"sigma": 1.2}], 3.5, {"generation": 1.0}) and fed.loaded
    other = lambda: torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Linear(5, 2))  # noqa: E731
    assert load_method_output(path, _Fed(), stamp, "cpu", new_model=other) is None  # does not fit: run it again
