"""Checkpoint files that reading cannot turn into code: tensors in a safetensors file, the rest as JSON.

A run folder can come from someone else (a shared or downloaded run), and ``torch.load(weights_only=False)`` or
pickle runs whatever code the file names. :func:`write_state` stores a tree of

- ``None``, ``bool``, ``int``, ``float`` (NaN and ±inf too), ``str``;
- lists, tuples and dicts (``OrderedDict`` too; keys of any type here);
- torch tensors (strided, of bool, integer or float dtype: dtype, shape, ``requires_grad`` and ``nn.Parameter``
  kept) and torch dtypes, numpy arrays and scalars (bool, integer or float dtype) and ``numpy.str_``;
- dataclass instances (their fields and any other attribute set on them), set one by one as pickle would (no
  ``__init__`` runs on a file's values); reading looks the class up among the modules already imported, never imports;

which covers RNG states (numpy's bit generator dicts, torch's ``get_state()`` tensors, ``random.getstate()``) and
optimizer ``state_dict``s. A tensor or array stored in two places comes back as one object, as ``torch.save``'s do.
Any other type stops the write with an error naming where it is. Every tensor and array is a safetensors tensor; the
JSON tree that names them is one more (U8) tensor, since safetensors' header is limited to 100 MB and a population of
texts can be more. :func:`read_state` refuses a file in any other format, a pickle included, without unpickling it.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from largefedbench.errors import InputError, MethodError
from largefedbench.io import atomic_write_bytes

__all__ = ["FORMAT", "read_state", "refuse_legacy", "state_bytes", "state_from_bytes", "write_state"]

FORMAT = "largefedbench-state/1"
_TREE = "__state_json__"  # the U8 tensor holding the JSON tree
_UNSUPPORTED = ("a checkpoint stores None, bool, int, float, str, lists, tuples, dicts, torch tensors and numpy arrays "
                "of bool, integer or float dtype, torch dtypes, numpy scalars and dataclasses of these")


class _Writer:
    def __init__(self) -> None:
        self.tensors: dict[str, Any] = {}
        self.names: dict[int, str] = {}  # id of a tensor or array already stored -> its name
        self.storages: set[int] = set()  # safetensors refuses two tensors on one storage: a view is copied
        self.keep: list[Any] = []  # what ``names`` refers to stays alive, so no id is reused

    def _blob(self, value: Any, tensor: Any) -> str:
        """The name ``value`` (a tensor or array, as the torch tensor ``tensor``) is stored under."""
        name = self.names.get(id(value))
        if name is None:
            tensor = tensor.detach().cpu().contiguous()
            if tensor.untyped_storage().data_ptr() in self.storages:
                tensor = tensor.clone()
            self.storages.add(tensor.untyped_storage().data_ptr())
            name = self.names[id(value)] = f"t{len(self.tensors)}"
            self.tensors[name] = tensor
            self.keep.append(value)
        return name

    def node(self, value: Any, where: str) -> Any:
        kind = type(value)
        if value is None or kind in (bool, str):
            return value
        if kind is int or kind is float:  # exact types: a subclass (an IntEnum) would come back as its base
            return value
        if kind is list:
            return [self.node(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if kind is tuple:
            return {"$tuple": [self.node(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if kind is dict or kind is OrderedDict:
            tag = "$dict" if kind is dict else "$odict"
            if all(type(k) is str for k in value):
                return {tag: {k: self.node(v, f"{where}[{k!r}]") for k, v in value.items()}}
            return {tag + "_pairs": [[self.node(k, f"{where} key {k!r}"), self.node(v, f"{where}[{k!r}]")]
                                     for k, v in value.items()]}
        if isinstance(value, np.str_):
            return {"$np_str": str(value)}
        if isinstance(value, (np.ndarray, np.generic)):
            import torch

            array = np.asarray(value)
            if array.dtype.kind not in "biuf":
                raise MethodError(f"{where} is a numpy {type(value).__name__} of dtype {array.dtype}, which a "
                                  f"checkpoint cannot store: {_UNSUPPORTED}")
            try:
                tensor = torch.from_numpy(np.asarray(array, dtype=array.dtype.newbyteorder("="), order="C"))
            except TypeError as err:  # a dtype this torch has no tensor of
                raise MethodError(f"{where} is a numpy array of dtype {array.dtype}, which this torch cannot store "
                                  f"({err})") from None
            return {"$scalar" if isinstance(value, np.generic) else "$array": self._blob(value, tensor)}
        if kind.__module__.split(".")[0] == "torch":
            import torch

            if isinstance(value, torch.dtype):
                return {"$torch_dtype": str(value).removeprefix("torch.")}
            return self._tensor(value, where)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            name = f"{kind.__module__}:{kind.__qualname__}"
            if _dataclass_named(name) is not kind:
                raise MethodError(f"{where} is a {name}, a dataclass that cannot be found by its module and name (one "
                                  "defined inside a function?): define it at the top level of its module")
            names = [f.name for f in dataclasses.fields(value)]
            names += [k for k in getattr(value, "__dict__", {}) if k not in names]  # attributes set besides, as pickle
            return {"$dataclass": name, "fields": {k: self.node(getattr(value, k), f"{where}.{k}") for k in names}}
        raise MethodError(f"{where} is a {kind.__module__}.{kind.__qualname__}, which a checkpoint cannot store "
                          f"safely: {_UNSUPPORTED}")

    def _tensor(self, value: Any, where: str) -> dict[str, Any]:
        import torch

        if not isinstance(value, torch.Tensor) or value.layout != torch.strided or value.is_complex() \
                or value.is_quantized or value.is_meta:
            what = f"a {value.layout} tensor of {value.dtype}" if isinstance(value, torch.Tensor) else type(value)
            raise MethodError(f"{where} is {what}, which a checkpoint cannot store: {_UNSUPPORTED}")
        node: dict[str, Any] = {"$tensor": self._blob(value, value)}
        if value.requires_grad:
            node["requires_grad"] = True
        if isinstance(value, torch.nn.Parameter):
            node["parameter"] = True
        return node


def state_bytes(state: Any, *, what: str = "state") -> bytes:
    """``state`` as the bytes of a safetensors file (see the module docstring); ``what`` names it in errors."""
    import torch
    from safetensors.torch import save

    writer = _Writer()
    tree = json.dumps({"format": FORMAT, "root": writer.node(state, what)}, ensure_ascii=False).encode()
    writer.tensors[_TREE] = torch.frombuffer(bytearray(tree), dtype=torch.uint8)
    return save(writer.tensors, metadata={"format": FORMAT})


def write_state(path: Path, state: Any, *, what: str = "state") -> None:
    """Write ``state`` to ``path`` atomically (temporary file and rename)."""
    atomic_write_bytes(path, state_bytes(state, what=what))


class _Reader:
    def __init__(self, tensors: dict[str, Any], device: Any) -> None:
        self.tensors, self.device = tensors, device
        self.made: dict[str, Any] = {}

    def value(self, node: Any) -> Any:
        if not isinstance(node, (dict, list)):
            return node
        if isinstance(node, list):
            return [self.value(v) for v in node]
        (tag, body), *_ = node.items()
        if tag == "$tuple":
            return tuple(self.value(v) for v in body)
        if tag in ("$dict", "$odict"):
            pairs = ((k, self.value(v)) for k, v in body.items())
        elif tag in ("$dict_pairs", "$odict_pairs"):
            pairs = ((self.value(k), self.value(v)) for k, v in body)
        elif tag == "$np_str":
            return np.str_(body)
        elif tag == "$torch_dtype":
            import torch

            dtype = getattr(torch, body, None)
            if not isinstance(dtype, torch.dtype):
                raise ValueError(f"unknown torch dtype {body!r}")
            return dtype
        elif tag in ("$array", "$scalar", "$tensor"):
            return self._blob(tag, body, node)
        elif tag == "$dataclass":
            return self._dataclass(body, node["fields"])
        else:
            raise ValueError(f"unknown node {tag!r}")
        return dict(pairs) if tag.startswith("$dict") else OrderedDict(pairs)

    def _blob(self, tag: str, name: str, node: dict[str, Any]) -> Any:
        if name not in self.made:
            out = self.tensors[name]
            if tag != "$tensor":
                out = out.numpy()[()] if tag == "$scalar" else out.numpy()
            else:
                out = out.to(self.device) if self.device is not None else out
                if node.get("parameter"):
                    import torch

                    out = torch.nn.Parameter(out, requires_grad=bool(node.get("requires_grad")))
                elif node.get("requires_grad"):
                    out.requires_grad_(True)
            self.made[name] = out
        return self.made[name]

    def _dataclass(self, name: str, fields: dict[str, Any]) -> Any:
        cls = _dataclass_named(name)
        if cls is None:
            raise ValueError(f"the dataclass {name} is not one this process has imported")
        missing = {f.name for f in dataclasses.fields(cls)} - set(fields)
        if missing:
            raise ValueError(f"the file's {name} lacks the fields {sorted(missing)}")
        obj = cls.__new__(cls)  # as pickle does: no __init__ or __post_init__ runs on the file's values
        for k, v in fields.items():
            object.__setattr__(obj, k, self.value(v))
        return obj


def _dataclass_named(name: str) -> Any:
    """The dataclass ``module:qualname`` among the modules already imported (none is imported here), or None."""
    module_name, _, qualname = name.partition(":")
    cls: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        cls = getattr(cls, part, None)
    return cls if isinstance(cls, type) and dataclasses.is_dataclass(cls) else None


def state_from_bytes(data: bytes, *, device: Any = None) -> Any:
    """The state :func:`state_bytes` wrote (tensors moved to ``device`` when given); ``ValueError`` for anything
    else, read without unpickling anything."""
    from safetensors.torch import load

    try:
        tensors = load(bytes(data))
    except Exception as err:  # noqa: BLE001 - any parse failure means: not this format
        if data[:1] == b"\x80" or data[:4] == b"PK\x03\x04":  # pickle's protocol 2+ opcode; torch.save's zip
            raise ValueError("it looks like a pickle (torch.save or pickle.dump), which can run code when read") \
                from None
        raise ValueError(f"it is not a safetensors file ({err})") from None
    try:
        tree = json.loads(tensors.pop(_TREE).numpy().tobytes().decode())
    except (KeyError, ValueError) as err:
        raise ValueError(f"it holds no LargeFedBench state ({err})") from None
    if not isinstance(tree, dict) or tree.get("format") != FORMAT:
        raise ValueError(f"its format is {tree.get('format') if isinstance(tree, dict) else None!r}, not {FORMAT!r}")
    try:
        return _Reader(tensors, device).value(tree["root"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"its contents are not what this version writes ({type(err).__name__}: {err})") from None


def read_state(path: Path, *, fix: str, device: Any = None) -> Any:
    """The state :func:`write_state` wrote to ``path``. Any other file (a pickle, a legacy ``.pt``) is refused with
    an :class:`InputError` that says why and what to do (``fix``), and is never unpickled."""
    try:
        return state_from_bytes(Path(path).read_bytes(), device=device)
    except ValueError as err:
        raise InputError(f"{path} was not read: {err}. LargeFedBench reads checkpoints only as tensors and JSON "
                         f"(safetensors), never by unpickling: a run folder may come from someone else. {fix}") from None


def refuse_legacy(path: Path, *, fix: str) -> None:
    """Refuse a checkpoint of the pickle format (``torch.save``, the old format) without opening it."""
    raise InputError(f"{path} is a checkpoint in the old pickle format (torch.save); LargeFedBench no longer unpickles "
                     f"checkpoints, since unpickling a file can run code and a run folder may come from someone else. "
                     f"{fix}")
