"""``lfb methods`` (the registered methods, or one method's settings) and ``lfb new method`` (a plug-in package)."""

from __future__ import annotations

import json
from pathlib import Path

from largefedbench.cli.flags import _add_command, _add_group, _add_output_flags
from largefedbench.cli.output import _show


def cmd_methods(args) -> int:
    from largefedbench.registry import list_methods

    if args.name:
        return _method_settings(args)
    rows = [m.to_dict() for m in list_methods(describe=_described_class)]

    def line(r: dict) -> str:
        detail = r["paper"] if r["status"] != "broken" else f"cannot load: {r['error']}"
        src = "" if r["source"] == "built-in" else f" [{r['source']}]"
        return f"{r['name']:<20}{r['output'] or '-':<16}{r['status']:<10}{detail}{src}"

    return _show(args, rows, lambda: "\n".join([f"{'name':<20}{'output':<16}{'status':<10}paper", *map(line, rows)]))


def _described(name: str):
    """A plug-in as its own sandboxed process describes it (the home hidden, as under ``lfb eval``); never imported."""
    from largefedbench.paths import lfb_home
    from largefedbench.run.described import describe_method

    home = lfb_home()
    return describe_method(name, preset="paper", overrides={}, home=home, hidden=[home])


def _described_class(name: str) -> type:
    return _described(name).cls


def _method_settings(args) -> int:
    """``lfb methods NAME``: the method's paper, output and every setting with its value in each preset."""
    import inspect

    from largefedbench.registry import method_target, resolve_method
    from largefedbench.run.presets import PRESETS, settings_table

    if method_target(args.name)[1] == "built-in":
        method = resolve_method(args.name)
        cls, configs = method.cls, None
        doc = inspect.getdoc(cls.Config) or ""
    else:  # a plug-in is described by its own sandboxed process, never imported here
        method = _described(args.name)
        cls, configs, doc = method.cls, method.presets, method.config_doc
    info = {"name": cls.name, "paper": cls.paper, "output": cls.output, "source": method.source,
            "version": method.version, "config": cls.Config.__name__, "config_doc": doc,
            "settings": settings_table(cls, configs)}

    def text() -> str:
        def cell(v) -> str:
            return json.dumps(v) if isinstance(v, (str, list)) else str(v)

        rows = [[r["setting"], *(cell(r[p]) for p in PRESETS)] for r in info["settings"]]
        widths = [max(len(x) for x in col) for col in zip(["setting", *PRESETS], *rows)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        lines = [f"{cls.name} ({cls.output}; {method.source} {method.version}): {cls.paper}", "",
                 *(f"  {line}" for line in doc.split("\n\n")[0].splitlines()), "",
                 f"{cls.Config.__name__}: change one with `lfb eval --set KEY=VALUE`; `--preset` picks the column "
                 "(default: the profile's, cpu for the cpu profile)",
                 *([fmt.format("setting", *PRESETS), *(fmt.format(*r) for r in rows)] if rows else ["(no settings)"])]
        return "\n".join(line.rstrip() for line in lines)

    return _show(args, info, text)


def cmd_new_method(args) -> int:
    import shlex

    from largefedbench.run.scaffold import new_method

    folder = new_method(args.name, args.dir)
    shown = shlex.quote(str(folder))
    print(f"wrote the plug-in package {folder} (method {args.name!r}, the DP unigram template). Next:\n"
          f"  cd {shown} && pip install -e .     # registers {args.name} (README.md: largefedbench comes from its checkout)\n"
          f"  pytest tests/                      # the contract and the presets\n"
          f"  lfb smoke {args.name}               # the demo, tiny profile: about a minute the first time\n"
          f"  lfb eval --method {args.name} --seeds 0,1,2")
    return 0


def add_methods_parser(sub) -> None:
    """``lfb methods``."""
    p = _add_command(sub, "methods", cmd_methods,
                     help="the registered methods: name, paper, output kind, status; or one method's "
                     "settings", description="List the registered methods, or with NAME show one method's settings: "
                     "each `--set` key with its value in the paper, cpu and tiny presets.")
    p.add_argument("name", nargs="?", metavar="NAME", help="a method name (or module:Class): show its settings")
    _add_output_flags(p, quiet_help=None)


def add_new_parser(sub) -> None:
    """``lfb new method``."""
    nsub = _add_group(sub, "new", metavar="WHAT", help="start a plug-in package: `lfb new method NAME`")
    p = _add_command(nsub, "method", cmd_new_method,
                     help="write a plug-in package that installs and passes `lfb smoke`",
                     description="Write a method package (the DP unigram template under NAME): pyproject.toml with "
                     "the largefedbench.methods entry point, the module with its paper(), cpu() and tiny() presets, "
                     "tests/test_method.py and a README with the install and smoke commands.")
    p.add_argument("name", help="the method's registry name, a safe id (e.g. my-method)")
    p.add_argument("--dir", type=Path, default=None, help="the package folder to create (default ./lfb-NAME)")
