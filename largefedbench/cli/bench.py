"""``lfb bench``: POPri's client side at paper scale, and the cpu profile's LLM against this machine's limit."""

from __future__ import annotations

from largefedbench.cli.flags import _add_command, _add_executor_flags, _add_group, _add_output_flags
from largefedbench.cli.output import _progress, _show


def cmd_bench_scale(args) -> int:
    from largefedbench.bench.scale import format_report, run_scale

    log = _progress("bench", args.quiet or args.json)
    report = run_scale(args.clients, args.samples, dim=args.dim, executor=args.executor, ray_address=args.ray_address,
                       seed=args.seed, path=args.path, progress=not args.quiet, log=log)
    return _show(args, report.to_dict(), lambda: format_report(report))


def cmd_bench_llm(args) -> int:
    from largefedbench.bench.backends import parse_backends
    from largefedbench.bench.llm import format_table, run_llm_bench
    from largefedbench.errors import InputError

    log = _progress("bench", args.quiet or args.json)
    for name in ("prompts", "new_tokens", "fid_samples", "dpo_pairs", "clients"):
        if getattr(args, name) < (1 if name in ("prompts", "new_tokens") else 0):
            raise InputError(f"--{name.replace('_', '-')}={getattr(args, name)} is too small")
    report = run_llm_bench(prompts=args.prompts, new_tokens=args.new_tokens, batch_sizes=_batch_sizes(args.batch_sizes),
                           fid_samples=args.fid_samples, dpo_pairs=args.dpo_pairs, clients=args.clients,
                           cases=_choices("cases", args.cases, ("continuation", "few_shot", "instruction"), none=True),
                           dtypes=_choices("dtypes", args.dtypes, ("float32", "bfloat16")),
                           backends=parse_backends(args.backend), root=args.home, log=log)
    return _show(args, report, lambda: format_table(report))


def _choices(flag: str, text: str, allowed: tuple[str, ...], none: bool = False) -> list[str]:
    """A comma-separated subset of ``allowed`` (``-`` and ``_`` alike; ``none`` for the empty set where allowed)."""
    from largefedbench.errors import InputError

    names = [x.strip().replace("-", "_") for x in text.split(",") if x.strip()]
    if none and names == ["none"]:
        return []
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        shown = ", ".join(a.replace("_", "-") for a in allowed) + (", or none" if none else "")
        raise InputError(f"--{flag}={text!r}: give a comma-separated list of {shown}")
    return names


def _batch_sizes(text: str) -> list[int]:
    from largefedbench.errors import InputError

    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--batch-sizes={text!r}: give comma-separated integers, e.g. 8,32,64") from None
    if not sizes or min(sizes) < 1:
        raise InputError(f"--batch-sizes={text!r}: give at least one batch size >= 1")
    return sizes


def add_bench_parser(sub) -> None:
    """``lfb bench scale`` and ``lfb bench llm``."""
    bsub = _add_group(sub, "bench", help="benchmarks: scale, llm")
    p = _add_command(bsub, "scale", cmd_bench_scale,
                     help="POPri's client side through the federation at paper scale (synthetic)",
                     description="Release POPri's noised score sum once on a synthetic federation (random unit "
                     "embeddings, ~6.6 spans per client): per-stage times, peak RSS, this machine's fp32 GEMM rate, "
                     "the naive matrix-product limit (clients x samples x dim MACs at that rate) and the ratio.")
    p.add_argument("--clients", type=int, default=133_000, help="clients (default 133000, Congressional Speeches)")
    p.add_argument("--samples", type=int, default=18_000, help="synthetic samples (default 18000)")
    p.add_argument("--dim", type=int, default=384, help="embedding width (default 384)")
    p.add_argument("--path", choices=["shortcut", "general"], default="shortcut",
                   help="shortcut: POPri's exact algebraic clipped sum (default); general: streamed score rows")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic federation and the noise (default 0)")
    _add_executor_flags(p, default="local")  # library client functions only: nothing to isolate
    _add_output_flags(p, json_help="print one JSON document (with a checksum of the noised sum)",
                      quiet_help="no progress bar")
    p = _add_command(bsub, "llm", cmd_bench_llm,
                     help="the cpu profile's LLM: sampling tokens/s and a DPO step against this machine's limit",
                     description="SmolLM2-135M (the cpu profile's generator): new tokens/s by batch size for continuation, "
                     "few-shot and instruction prompts in float32 and bf16 (and HF generate, the naive reference), a DPO "
                     "step's seconds, each against 2 x params FLOPs/token (6 x for DPO) at the GEMM rate measured in the "
                     "same run; one cohort's DP client step (LoRA fine-tuning of the generator, 4 x params FLOPs/token); the "
                     "bf16-vs-float32 quality check (teacher-forced agreement, KL, FID shift); and, with --backend, other "
                     "generation backends (CTranslate2, ONNX Runtime GenAI) against our loop.")
    p.add_argument("--prompts", type=int, default=64, help="samples per case (default 64)")
    p.add_argument("--new-tokens", type=int, default=48, help="new tokens per sample (default 48, the cpu presets')")
    p.add_argument("--batch-sizes", default="16,64", help="comma-separated batch sizes (default 16,64)")
    p.add_argument("--fid-samples", type=int, default=256, help="samples per FID of the quality check (0: skip it)")
    p.add_argument("--dpo-pairs", type=int, default=8, help="preference pairs of the DPO timing (0: skip it)")
    p.add_argument("--clients", type=int, default=16, help="clients of the DP client step's timing (dp-resample's cpu "
                   "preset, 5 spans each; 0: skip it)")
    p.add_argument("--cases", default="continuation,few-shot,instruction",
                   help="sampling cases to time (default all three; none: skip them)")
    p.add_argument("--dtypes", default="float32,bfloat16", help="dtypes the cases sample in (default float32,bfloat16; "
                   "the bf16 quality check runs only with bfloat16: leave it out where bf16 is emulated)")
    p.add_argument("--backend", action="append", default=None, metavar="NAME[,NAME]",
                   help="generation backends to run beside our torch loop on the continuation prompts: torch, ct2, "
                   "ort-genai (repeatable or comma-separated; default torch only). Each installed one reports new "
                   "tokens/s per batch size, the fraction of the limit, its one-off conversion seconds (LoRA merged, "
                   "converted, loaded), its speed-up over our loop and the quality rule against float32; one not "
                   "installed gets a row saying so")
    p.add_argument("--home", default=None, help="where the converted GGUF is cached (default $LFB_HOME)")
    _add_output_flags(p, json_help="print one JSON document", quiet_help="no progress lines")
