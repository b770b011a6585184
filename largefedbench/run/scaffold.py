"""`lfb new method NAME [--dir DIR]`: a plug-in package that installs and passes `lfb smoke` as written.

The package is the DP unigram template (``largefedbench/templates/method/``, the CONTRIBUTING example) under the
new name: ``pyproject.toml`` with the ``largefedbench.methods`` entry point, ``MODULE/__init__.py`` with the method
and its ``paper()``, ``cpu()`` and ``tiny()`` presets, ``tests/test_method.py``, a README and a ``.gitignore``
(build outputs would mark a checkout's entries dirty). largefedbench is not on PyPI, so the pyproject does not
depend on it (a fresh environment could not resolve it): its comment and the README install it from this checkout
first (``pip install -e PATH``).
"""

from __future__ import annotations

import re
import tempfile
from importlib import resources
from pathlib import Path

from largefedbench.errors import InputError
from largefedbench.io import _umask, atomic_write_text, publish_dir

__all__ = ["TEMPLATE_FILES", "names_for", "new_method", "render_template"]

#: template file -> where it goes in the package (``{module}`` is the package's module)
TEMPLATE_FILES = {"pyproject.toml.tmpl": "pyproject.toml", "README.md.tmpl": "README.md",
                  "method.py.tmpl": "{module}/__init__.py", "test_method.py.tmpl": "tests/test_method.py",
                  "gitignore.tmpl": ".gitignore"}

_NAME = re.compile(r"[a-z][a-z0-9._-]{0,63}")


def names_for(name: str, *, module: str | None = None, distribution: str | None = None) -> dict[str, str]:
    """The names a method called ``name`` gets: its module, class and distribution (``my-method`` → ``lfb_my_method``,
    ``MyMethod``, ``lfb-my-method``)."""
    if not _NAME.fullmatch(name):
        raise InputError(f"method name {name!r}: use a safe id that starts with a letter, then lower-case letters, "
                         "digits, '.', '_' or '-' (at most 64), e.g. my-method")
    from largefedbench.registry import BUILTIN_METHODS

    if name in BUILTIN_METHODS:
        raise InputError(f"{name!r} is a built-in method and a plug-in cannot take its name: choose another")
    parts = [p for p in re.split(r"[._-]+", name) if p]
    module = module or "lfb_" + "_".join(parts)
    if not module.isidentifier():
        raise InputError(f"module {module!r} is not a Python identifier")
    return {"name": name, "module": module, "Class": "".join(p[:1].upper() + p[1:] for p in parts),
            "distribution": distribution or "lfb-" + "-".join(parts)}


def _lfb_source() -> tuple[str, str]:
    """(what `pip install -e` takes to install this largefedbench, its version): the checkout's path, if it is one."""
    import largefedbench

    root = Path(largefedbench.__file__).resolve().parent.parent
    project = root / "pyproject.toml"
    path = str(root) if project.is_file() and 'name = "largefedbench"' in project.read_text() else \
        "PATH/TO/LARGEFEDBENCH-CHECKOUT"
    return path, largefedbench.__version__


def render_template(template: str, values: dict[str, str]) -> str:
    """One template file with every ``{{key}}`` replaced; an unknown key is a bug in the template."""
    text = resources.files("largefedbench").joinpath("templates", "method", template).read_text(encoding="utf-8")
    return re.sub(r"\{\{(\w+)\}\}", lambda m: values[m.group(1)], text)


def new_method(name: str, dest: Path | None = None, *, module: str | None = None, distribution: str | None = None,
               paper: str | None = None) -> Path:
    """Write the package for method ``name`` into ``dest`` (default ``./DISTRIBUTION``), which must not exist or be
    empty; returns the folder. The folder appears whole or not at all."""
    values = names_for(name, module=module, distribution=distribution)
    paper = paper or f"{name}: DP word histograms over Poisson cohorts (the lfb template; name your paper here)"
    if any(c in paper for c in '"\\\n'):
        raise InputError("the paper text may not contain quotes, backslashes or newlines")
    values["paper"] = paper
    values["lfb_source"], values["lfb_version"] = _lfb_source()
    dest = Path(dest) if dest is not None else Path(values["distribution"])
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise InputError(f"{dest} exists and is not an empty folder: give another --dir")
    if dest.exists():
        dest.rmdir()  # an empty folder is replaced by the written one
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    tmp.chmod(0o777 & ~_umask())  # mkdtemp's 0700 would outlive the rename
    for template, target in TEMPLATE_FILES.items():
        atomic_write_text(tmp / target.format(module=values["module"]), render_template(template, values))
    publish_dir(tmp, dest)
    return dest
