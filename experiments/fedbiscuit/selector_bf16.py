"""FedBis' selector local step in float32 and in bf16 autocast (``selector_dtype``): seconds a step and how far a
client's update moves (docs/speed.md, "FedBis' selector steps in bf16 autocast").

    OMP_NUM_THREADS=1 .venv/bin/python experiments/fedbiscuit/selector_bf16.py --model $LFB_HOME/models/gguf/<hash>

``--model``: a transformers causal LM folder (the cpu profile's SmolLM2 after its first run). Each client takes the cpu
preset's 2 AdamW steps (lr 5e-4, betas 0.9/0.95) of 4 generic-corpus pairs in both orders from the same start.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from largefedbench.methods.fedbiscuit import SelectorTask

from largefedbench.data.public_corpus import read_generic
from largefedbench.synthetic.lora import add_lora


def client_delta(model, params, start, task: SelectorTask, seed: int, steps: int = 2,
                 lr: float = 5e-4) -> tuple[torch.Tensor, float]:
    """A client's 2 AdamW steps of 4 random pairs in both orders from ``start``: its Δ and seconds a step."""
    with torch.no_grad():
        for p, s in zip(params, start):
            p.copy_(s)
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    rng = np.random.default_rng(seed)
    t = time.perf_counter()
    for _ in range(steps):
        idx = rng.choice(len(task.ab), 4, replace=False)
        grads = torch.autograd.grad(task.loss(model, task.examples(idx, rng.integers(0, 2, 4))), params)
        for p, g in zip(params, grads):
            p.grad = g
        opt.step()
        opt.zero_grad(set_to_none=True)
    return torch.cat([(p.detach() - s).flatten() for p, s in zip(params, start)]), (time.perf_counter() - t) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a transformers causal LM folder")
    ap.add_argument("--clients", type=int, default=3)
    args = ap.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model)
    texts = read_generic()[:64]
    torch.manual_seed(0)
    model = add_lora(AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32), rank=4, alpha=8).eval()
    params = [p for p in model.parameters() if p.requires_grad]
    start = [p.detach().clone() for p in params]
    runs = {dtype: [client_delta(model, params, start, SelectorTask(tok, texts[:32], texts[32:], 48, dtype), c)
                    for c in range(args.clients)] for dtype in ("float32", "bfloat16")}
    for c in range(args.clients):
        (a, ta), (b, tb) = runs["float32"][c], runs["bfloat16"][c]
        cos = torch.nn.functional.cosine_similarity(a, b, dim=0).item()
        print(f"client {c}: s/step float32 {ta:.2f} bf16 {tb:.2f} ({ta / tb:.2f}x) | norm {a.norm():.4f} {b.norm():.4f} "
              f"| cosine {cos:.4f} | relative difference {((a - b).norm() / a.norm()).item():.3f}")


if __name__ == "__main__":
    main()
