"""Can FedBis's selector learn the clients' preference at all? Train it centrally, without noise, on the population's
majority labels, and measure on held-out pairs how often it agrees with that majority and with each client's own label
(docs/notes/history.md, "Can the selector learn the preference at all?"). Diagnostic only: it reads the private spans.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/fedbiscuit/selector_probe.py --model $LFB_HOME/models/gguf/<hash> \\
        --texts leaderboard/.runs/<fedbis run>/seed-0/synthetic.json --home $LFB_HOME \
        --spans $LFB_HOME/embeddings/<embedder>/<snapshot sha>/train.npy

The selector is the cpu preset's: a rank-4 LoRA in the top 4 layers of the generator, both presentation orders, 48
candidate tokens, bf16 training forward, AdamW at the clients' lr and betas. A federated round of the cpu preset
moves it by one averaged 2-step client update; here it takes ``--steps`` steps of ``--batch`` pairs. A logistic
regression on the pairs' embedding differences is the reference for "learnable from the text at all": the label is a
linear function of those embeddings.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from largefedbench.methods.fedbiscuit import SelectorTask

from largefedbench.synthetic.lora import add_lora, top_layer_indices


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="the generator's transformers folder")
    ap.add_argument("--texts", required=True, type=Path, help="synthetic.json of a run (the generator's samples; "
                    "its synthetic-embeddings.npy beside it)")
    ap.add_argument("--spans", required=True, type=Path, help="the train split's span embeddings (.npy, unit rows)")
    ap.add_argument("--home", required=True, type=Path, help="the LargeFedBench home holding the snapshot")
    ap.add_argument("--snapshot", default="demo-prose")
    ap.add_argument("--train-pairs", type=int, default=480)
    ap.add_argument("--test-pairs", type=int, default=240)
    ap.add_argument("--steps", type=int, default=240)
    ap.add_argument("--batch", type=int, default=8, help="pairs a step (each in both orders)")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--eval-every", type=int, default=40)
    args = ap.parse_args()
    from sklearn.linear_model import LogisticRegression
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from largefedbench.data.federated import load_snapshot

    texts = json.loads(args.texts.read_text())
    emb = np.load(args.texts.with_name("synthetic-embeddings.npy"))[: len(texts)]  # unit rows, in the texts' order
    counts = np.asarray(load_snapshot(args.snapshot, home=args.home).train.span_counts())
    span = np.load(args.spans)
    owner = np.repeat(np.arange(len(counts)), counts)
    sums = np.zeros((len(counts), span.shape[1])); np.add.at(sums, owner, span)

    rng = np.random.default_rng(0)
    n = args.train_pairs + args.test_pairs
    a, b = rng.choice(len(texts), n), rng.choice(len(texts), n)
    keep = a != b
    a, b = a[keep], b[keep]
    prefer_a = (sums @ (emb[a] - emb[b]).T) > 0  # (clients, pairs)
    share_a = prefer_a.mean(0)
    majority = (share_a >= 0.5).astype(np.int64)  # 1: A preferred
    tr, te = np.arange(len(a))[: args.train_pairs], np.arange(len(a))[args.train_pairs:]

    def with_clients(pred_a: np.ndarray, idx: np.ndarray) -> float:
        """Mean share of clients whose own label agrees with the prediction, over pairs ``idx``."""
        return float(np.mean(np.where(pred_a, share_a[idx], 1 - share_a[idx])))

    out = {"pairs_train": len(tr), "pairs_test": len(te), "steps": args.steps, "batch_pairs": args.batch, "lr": args.lr,
           "ceiling_with_clients": round(with_clients(majority[te] == 1, te), 4)}
    diff = emb[a] - emb[b]
    lr_model = LogisticRegression(max_iter=2000).fit(diff[tr], majority[tr])
    out["embedding_logreg_with_majority"] = round(float((lr_model.predict(diff[te]) == majority[te]).mean()), 4)

    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model = add_lora(model, rank=4, alpha=8, dropout=0.05, layers=top_layer_indices(model, 4)).eval()
    task = SelectorTask(tok, [texts[i] for i in a], [texts[j] for j in b], 48, "bfloat16")
    t0 = time.perf_counter()
    out["frozen_layers"] = task.freeze_prefix(model, 64, progress=True)
    out["prefix_seconds"] = round(time.perf_counter() - t0, 1)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    # labels as the method's: 0 where A is preferred
    label = 1 - majority
    curve = []

    def evaluate(step: int) -> None:
        odds = task.prefers_a(model, te, 64)
        pred_a = odds > 0
        curve.append({"step": step, "with_majority": round(float((pred_a == (majority[te] == 1)).mean()), 4),
                      "with_clients": round(with_clients(pred_a, te), 4),
                      "train_with_majority": round(float(((task.prefers_a(model, tr[:120], 64) > 0)
                                                          == (majority[tr[:120]] == 1)).mean()), 4),
                      "seconds": round(time.perf_counter() - t0, 1)})
        print(json.dumps(curve[-1]), flush=True)

    evaluate(0)
    t0 = time.perf_counter()
    for step in range(1, args.steps + 1):
        idx = rng.choice(tr, args.batch, replace=False)
        loss = task.loss(model, task.examples(idx, label[idx]))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % args.eval_every == 0 or step == args.steps:
            evaluate(step)
    out["curve"] = curve
    print(json.dumps(out))


if __name__ == "__main__":
    main()
