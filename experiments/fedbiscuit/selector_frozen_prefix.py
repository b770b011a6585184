"""FedBis' selector local step with the layers under its LoRA run every step or once per row (``freeze_prefix``):
seconds a step, what the once-per-row states cost, and how far a client's update moves (docs/speed.md).

    OMP_NUM_THREADS=1 .venv/bin/python experiments/fedbiscuit/selector_frozen_prefix.py --model $LFB_HOME/models/gguf/<hash>

``--model``: a transformers causal LM folder (the cpu profile's SmolLM2 after its first run). As the cpu preset: a
rank-4 LoRA in the top 4 layers, bf16 autocast, 2 AdamW steps (lr 2e-3, betas 0.9/0.95) of 4 generic-corpus pairs
in both orders (8 rows) from the same start, candidates cut to 48 tokens.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from largefedbench.methods.fedbiscuit import SelectorTask
from selector_bf16 import client_delta  # this folder is on sys.path when a script in it runs

from largefedbench.data.public_corpus import read_generic
from largefedbench.synthetic.lora import add_lora, top_layer_indices


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a transformers causal LM folder")
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=64, help="pool pairs (the cpu preset has 1,024)")
    args = ap.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model)
    texts = read_generic()[: 2 * args.pairs]
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model = add_lora(base, rank=4, alpha=8, layers=top_layer_indices(base, 4)).eval()
    params = [p for p in model.parameters() if p.requires_grad]
    with torch.no_grad():  # B off 0, as after a round, so the scores depend on the adapter
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.01)
    start = [p.detach().clone() for p in params]
    full = SelectorTask(tok, texts[: args.pairs], texts[args.pairs :], 48, "bfloat16")
    cached = SelectorTask(tok, texts[: args.pairs], texts[args.pairs :], 48, "bfloat16")
    print(f"layers run once per row: {cached.freeze_prefix(model, 64)}")
    rows = 2 * args.pairs
    for autocast in (True, False):
        t = time.perf_counter()
        cached.prefix.states(autocast)
        print(f"states of {rows} rows (autocast {autocast}): {time.perf_counter() - t:.1f} s, "
              f"{(time.perf_counter() - t) / rows * 1000:.0f} ms a row")
    for c in range(args.clients):
        (a, ta), (b, tb) = (client_delta(model, params, start, task, c, lr=2e-3) for task in (full, cached))
        cos = torch.nn.functional.cosine_similarity(a, b, dim=0).item()
        print(f"client {c}: s/step whole model {ta:.2f}, once per row {tb:.2f} ({ta / tb:.2f}x) | cosine {cos:.6f} "
              f"| relative difference {((a - b).norm() / a.norm()).item():.2e}")
    pairs = np.arange(min(16, args.pairs))
    t = time.perf_counter()
    s_full = full.prefers_a(model, pairs, 8)
    t_full = time.perf_counter() - t
    t = time.perf_counter()
    s_cached = cached.prefers_a(model, pairs, 8)
    print(f"scores of {len(pairs)} pairs: {t_full:.2f} s / {time.perf_counter() - t:.2f} s, "
          f"max |Δ log-odds| {np.abs(s_full - s_cached).max():.2e}")


if __name__ == "__main__":
    main()
