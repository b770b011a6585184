"""``lfb smoke``: a seconds-long check of a method (or of the attack kit) before ``lfb eval``."""

from __future__ import annotations

from largefedbench.cli.flags import _add_command, _add_home, _add_output_flags, _set_pairs
from largefedbench.cli.output import _progress, _show_report


def cmd_smoke(args) -> int:
    from largefedbench.errors import InputError
    from largefedbench.run.smoke import smoke

    log = _progress("smoke", args.quiet)
    if args.attacks:
        from largefedbench.run.attack_check import check_attacks

        if args.method:
            raise InputError("--attacks runs LargeFedBench's attack kit, not a method: drop METHOD")
        report = check_attacks(home=args.home, log=log)
        return _show_report(args, report)
    if not args.method:
        raise InputError("give METHOD (a name from `lfb methods`, module:Class or path/to/file.py:Class), or --attacks")
    report = smoke(args.method, epsilon=args.epsilon, delta=args.delta, overrides=_set_pairs(args.set or []),
                   seed=args.seed, home=args.home, log=log, sandbox=args.sandbox)
    return _show_report(args, report)


def add_smoke_parser(sub) -> None:
    """``lfb smoke``."""
    p = _add_command(sub, "smoke", cmd_smoke,
                     help="seconds-long check of a method before `lfb eval` (contract, ledger, determinism)",
                     description="Run METHOD twice with one seed on the demo snapshot with the tiny profile and check "
                     "the contract, that private data is reached only through the federation, that every DP release "
                     "is in the ledger (non-empty for a private method, ε within the target) and that the runs agree.")
    p.add_argument("method", nargs="?", help="a name from `lfb methods`, or module:Class / path/to/file.py:Class")
    p.add_argument("--attacks", action="store_true", help="instead of a method, run LargeFedBench's attack kit "
                   "(snapshot reads, memory walks, a scorer patch, non-finite clients, environment probes) under "
                   "lfb eval and report which got through this machine's sandbox")
    p.add_argument("--epsilon", type=float, help="target ε (default 1)")
    p.add_argument("--delta", type=float, help="δ (default 3e-6)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a Config.tiny() key (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="the run's seed (default 0)")
    p.add_argument("--sandbox", choices=["auto", "off"], default="auto", help="as lfb eval runs the method: auto "
                   "(default: a plug-in's train() in its sandbox, the two runs compared; a built-in in this process, "
                   "with a third run whose client functions share it), off (every method in this process)")
    _add_home(p)
    _add_output_flags(p)
