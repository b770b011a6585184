"""``lfb privacy``: the noise multiplier for a budget, or the epsilon of a noise multiplier."""

from __future__ import annotations

from typing import Any

from largefedbench.cli.flags import _add_command, _add_group, _add_output_flags
from largefedbench.cli.output import _print_json


def _privacy_inputs(args) -> dict[str, Any]:
    return dict(
        delta=args.delta, sample_rate=args.sample_rate, steps=args.steps, mechanism=args.mechanism,
        clients=args.clients, per_round=args.per_round, accountant=args.accountant,
    )


def _print_privacy(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _print_json(report)
        return
    print(f"sigma      {report['sigma']:.6g}")
    print(f"epsilon    {report['epsilon']:.6g}" + (f"  (achieved {report['epsilon_achieved']:.6g})" if "epsilon_achieved" in report else ""))
    print(f"delta      {report['delta']:.3g}")
    print(f"accountant {report['accountant']}: {report.get('accountant_detail', '')}")


def cmd_privacy_noise(args) -> int:
    from largefedbench.privacy import noise_report

    _print_privacy(noise_report(args.epsilon, **_privacy_inputs(args)), args.json)
    return 0


def cmd_privacy_epsilon(args) -> int:
    from largefedbench.privacy import epsilon_report

    _print_privacy(epsilon_report(args.sigma, **_privacy_inputs(args)), args.json)
    return 0


def add_privacy_parser(sub) -> None:
    """``lfb privacy noise`` and ``lfb privacy epsilon``."""
    psub = _add_group(sub, "privacy", help="calibrate noise (sigma) for a budget, or the epsilon of a noise level")
    for name, target, func, help_ in (
        ("noise", "--epsilon", cmd_privacy_noise, "sigma that meets (epsilon, delta) over the planned rounds"),
        ("epsilon", "--sigma", cmd_privacy_epsilon, "epsilon spent at delta by rounds with noise multiplier sigma"),
    ):
        p = _add_command(psub, name, func,
                         help=help_, description=help_ + ". POPri Table 3: lfb privacy noise --epsilon 1 "
                         "--delta 3e-6 --clients 10000 --per-round 1000 --steps 20 [--mechanism tree]")
        p.add_argument(target, dest=target.strip("-"), type=float, required=True,
                       help="the target ε" if target == "--epsilon" else "the noise multiplier σ (noise std / clip)")
        p.add_argument("--delta", type=float, required=True, help="δ of the guarantee (e.g. 3e-6, below 1/N)")
        p.add_argument("--sample-rate", type=float, help="Poisson sampling rate q (or give --clients and --per-round)")
        p.add_argument("--steps", type=int, required=True, help="rounds T (tree: epochs, as POPri Table 3 accounts)")
        p.add_argument("--mechanism", choices=["gaussian", "tree"], default="gaussian",
                       help="gaussian: Poisson-subsampled Gaussian (DP-FedAvg, POPri); tree: DP-FTRL tree aggregation")
        p.add_argument("--clients", type=int, help="number of clients N")
        p.add_argument("--per-round", type=int, help="clients per round B (q = B/N)")
        p.add_argument("--accountant", default="auto", help="auto, rdp, pld, prv (default auto)")
        _add_output_flags(p, quiet_help=None)
