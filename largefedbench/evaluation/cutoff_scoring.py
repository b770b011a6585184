"""The model side of a knowledge-cutoff curve: the measurement's settings, the scoring model, and the windows of
each month sampled from its records and scored by their mean next-token loss."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from largefedbench.data.windows import get_cutoff
from largefedbench.errors import InputError
from largefedbench.evaluation.cutoff_records import DatedText

MIN_RECORDS = 3  # a month needs this many scored records for an interval
MAX_CHARS = 50_000  # a record's text is cut here before tokenizing (windows are drawn from this part)


@dataclass(frozen=True)
class CurveSettings:
    tokens: int = 128  # tokens per window (the model's tokenizer)
    windows_per_month: int = 200
    windows_per_record: int = 2
    topics: int = 8
    bootstrap: int = 2000
    seed: int = 0
    batch_size: int = 16
    allow_gaps: bool = False  # skip months with too few records instead of stopping

    def __post_init__(self) -> None:
        checks = {"--tokens": (self.tokens, 2), "--windows": (self.windows_per_month, 1),
                  "--per-record": (self.windows_per_record, 1), "--topics": (self.topics, 1),
                  "--bootstrap": (self.bootstrap, 100), "--batch-size": (self.batch_size, 1)}
        for flag, (value, least) in checks.items():
            if not isinstance(value, int) or value < least:
                raise InputError(f"{flag} {value} must be an integer >= {least}")



# --- the model -----------------------------------------------------------------------------------------------
def load_scoring_model(name: str, *, home: Path | None = None, device=None) -> tuple[Any, Any, dict[str, Any], Any]:
    """``(model, tokenizer, info, registry entry or None)`` for ``name``: a local Hugging Face folder, a model or alias
    of the cutoff registry (the ``cpu`` profile's SmolLM2 loads from its packaged GGUF, converted once), or another
    hub id the registry names (through ``from_pretrained``)."""
    from largefedbench.models.device import get_device
    from largefedbench.models.gguf import prepare_gguf_model
    from largefedbench.models.hub import hub_identity, load_hub_causal_lm, load_hub_tokenizer
    from largefedbench.models.identity import n_params
    from largefedbench.models.profiles import PROFILES, HubModel, PackagedGGUF

    dev = get_device(device)
    path = Path(name).expanduser()
    entry = None
    if path.is_dir():
        source, info = HubModel(str(path)), {"id": str(path.resolve())}
        marker = path / "lfb_conversion.json"  # a folder converted from a packaged GGUF names its model
        if marker.is_file():
            import json

            info["id"] = json.loads(marker.read_text()).get("model_id", info["id"])
            try:
                entry = get_cutoff(info["id"])
            except InputError:
                entry = None
    else:
        if name.startswith(("/", "./", "../", "~")):
            raise InputError(f"the model folder {path} does not exist; give a folder written by save_pretrained(), a "
                             "hub id or a name from `lfb cutoffs`")
        try:
            entry = get_cutoff(name)
        except InputError as exc:
            raise InputError(f"{exc} A local model folder also works as MODEL.") from None
        packaged = {p.generator.model_id.lower(): p.generator for p in PROFILES.values()
                    if isinstance(p.generator, PackagedGGUF)}
        # a short name of a namespaced model (smollm2-135m, llama-3-8b) means the registry's model; any other
        # name (a hub id: HuggingFaceTB/SmolLM2-360M-Instruct, gpt2-medium) means itself
        wanted = entry.model if "/" not in name and "/" in entry.model else name
        if wanted.lower() in packaged:
            gguf = packaged[wanted.lower()]
            folder, _, conv = prepare_gguf_model(gguf, root=home)
            source = HubModel(str(folder))
            info = {"id": gguf.model_id, "source": f"GGUF {conv['gguf_file']} ({conv['quantization']}) from the PyPI "
                    f"package {gguf.package} {conv['package_version']}, dequantized to float32", "sha256": conv["gguf_sha256"]}
        elif entry.kind == "trained-on-public-split":
            raise InputError(f"{entry.model} is trained per snapshot by LargeFedBench; give its model folder instead")
        else:
            source, info = HubModel(wanted), {"id": wanted}
    tokenizer = load_hub_tokenizer(source, role="tokenizer")
    model = load_hub_causal_lm(source, device=dev, role="model")
    if "sha256" not in info:
        info.update({k: v for k, v in hub_identity(source).items() if k not in ("id",)})
    info.update(n_params=n_params(model), architecture=type(model).__name__, device=str(dev))
    return model, tokenizer, info, entry


# --- sampling and scoring ------------------------------------------------------------------------------------
@dataclass
class MonthSample:
    month: str
    records: int  # records dated in the month
    examined: int = 0  # records tokenized
    too_short: int = 0  # of those, shorter than one window
    record_ids: list[str] = field(default_factory=list)  # the scored records, in sample order
    windows: list[tuple[int, list[int]]] = field(default_factory=list)  # (index into record_ids, token ids)


def sample_windows(docs: list[DatedText], tokenizer, settings: CurveSettings, month: str,
                   rng: np.random.Generator) -> MonthSample:
    """Up to ``windows_per_month`` windows of ``tokens`` ids from ``docs`` (one month's records), visiting records
    in a random order and taking at most ``windows_per_record`` non-overlapping windows from each, at random."""
    out = MonthSample(month, len(docs))
    order = rng.permutation(len(docs))
    T, want = settings.tokens, settings.windows_per_month
    for start in range(0, len(order), 64):
        chunk = [docs[i] for i in order[start:start + 64]]
        encoded = tokenizer([d.text[:MAX_CHARS] for d in chunk], add_special_tokens=False)["input_ids"]
        for doc, ids in zip(chunk, encoded):
            out.examined += 1
            n = len(ids) // T
            if n == 0:
                out.too_short += 1
                continue
            take = min(n, settings.windows_per_record, want - len(out.windows))
            out.record_ids.append(doc.id)
            for j in sorted(rng.choice(n, size=take, replace=False)):
                out.windows.append((len(out.record_ids) - 1, list(ids[j * T:(j + 1) * T])))
            if len(out.windows) >= want:
                return out
    return out


def window_losses(model, windows: list[list[int]], *, batch_size: int, dtype=None, progress: bool = True,
                  desc: str = "scoring windows") -> np.ndarray:
    """Each window's mean next-token cross-entropy (nats), in batches; ``dtype`` casts an inference copy."""
    import torch
    import torch.nn.functional as F
    from tqdm.auto import tqdm

    from largefedbench.models.device import model_device
    from largefedbench.models.precision import inference_copy

    scorer = inference_copy(model, dtype)
    dev = model_device(scorer)
    out = np.empty(len(windows), dtype=np.float64)
    bar = tqdm(total=len(windows), desc=desc, unit="window", disable=not progress)
    with torch.inference_mode():
        for lo in range(0, len(windows), batch_size):
            x = torch.tensor(windows[lo:lo + batch_size], dtype=torch.long, device=dev)
            logits = scorer(input_ids=x).logits[:, :-1].float()
            ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="none")
            out[lo:lo + len(x)] = ce.view(len(x), -1).mean(1).double().cpu().numpy()
            bar.update(len(x))
    bar.close()
    return out
