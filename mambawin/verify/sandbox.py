"""The throwaway environment a wheel is tried in, shared by verify and bench.

A fresh venv that sees the base environment's torch holds the wheels under test; kernels run there
in child processes (`python -m mambawin.verify.runners.X`), so a crash in the extension is reported
instead of killing mambawin. The child finds mambawin's runners in a private copy of the
`mambawin` package (never through mambawin's own site-packages on PYTHONPATH: that folder may hold
an installed mamba-ssm or causal-conv1d, which would then shadow the wheel under test).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import site
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mambawin
from mambawin import proc
from mambawin.errors import CommandError
from mambawin.packages import (
    MAMBA,
    PACKAGES,
)

RUNTIME_DIR = "mambawin-runtime"
_IMPORT = """
import importlib, json, sys, torch
found = {name: importlib.import_module(name).__file__ for name in sys.argv[1:]}
print(json.dumps({"torch": torch.__version__, "extensions": found, "prefix": sys.prefix}))
"""


@dataclass(frozen=True)
class InstallEnv:
    """The interpreter (and environment variables) that see the wheels under test."""

    python: str
    env: Mapping[str, str] | None
    venv: Path | None = None


def prepare_env(wheels: Sequence[Path], python: str, scratch: Path) -> InstallEnv:
    """The environment the kernels run in: a fresh venv holding the wheels, or `python`'s own."""
    child = _child_env(stage_runtime(scratch))
    if not wheels:
        return InstallEnv(python, child, None)
    venv = scratch / "venv"
    venv_python = create_venv(venv, python)
    install_wheels(python, venv_python, [Path(w) for w in wheels])
    # site.py puts the user site-packages *before* a venv's own; a `pip install --user` copy
    # would shadow the wheel. The .pth still appends the user site, after the venv.
    return InstallEnv(venv_python, {**child, "PYTHONNOUSERSITE": "1"}, venv)


def stage_runtime(scratch: Path) -> Path:
    """Copy the `mambawin` package alone into scratch: the child's only extra import path."""

    target = scratch / RUNTIME_DIR
    shutil.copytree(
        Path(mambawin.__file__).resolve().parent,
        target / "mambawin",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    return target


def create_venv(root: Path, base_python: str) -> str:
    """A venv that sees the base environment's packages (torch), even when that is a venv."""
    proc.run(
        [base_python, "-m", "venv", "--system-site-packages", "--without-pip", root], timeout=300
    )
    python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = proc.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], timeout=120
    ).stdout.strip()
    # --system-site-packages points at the *base* interpreter: when mambawin runs from a venv
    # (where torch lives), that venv's site-packages would be missing. A .pth appends them after
    # the new venv's own, so the wheels under test still win over copies installed there.
    Path(purelib, "_mambawin_parent.pth").write_text(_parent_pth(), encoding="utf-8")
    return str(python)


def _parent_pth() -> str:
    dirs = [*site.getsitepackages()]
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    dirs += [user] if user and Path(user).is_dir() else []
    return "".join(f"import site; site.addsitedir({d!r})\n" for d in dirs)


def install_wheels(base_python: str, venv_python: str, wheels: Sequence[Path]) -> None:
    """pip install --no-deps --no-index the wheels together into the venv (base env's pip)."""
    flags = [
        "install",
        "--no-deps",
        "--no-index",
        "--ignore-installed",
        "--no-cache-dir",
        "--disable-pip-version-check",
        *(str(w.resolve()) for w in wheels),
    ]
    names = ", ".join(w.name for w in wheels)
    try:
        proc.run([base_python, "-m", "pip", "--python", venv_python, *flags], timeout=900)
    except CommandError as exc:
        if "--python" not in exc.tail:  # pip < 22.3 has no --python: bootstrap the venv's own
            raise _pip_error(exc, names) from None
        proc.run([venv_python, "-m", "ensurepip", "--default-pip"], timeout=300)
        try:
            proc.run([venv_python, "-m", "pip", *flags], timeout=900)
        except CommandError as exc2:
            raise _pip_error(exc2, names) from None


def _pip_error(exc: CommandError, names: str) -> CommandError:
    last = proc.last_line(exc.tail) or str(exc)
    msg = f"pip could not install {names}: {last} (check the wheel's tags)"
    return CommandError(msg, argv=exc.argv, returncode=exc.returncode, tail=exc.tail)


def import_check(env: InstallEnv, modules: Sequence[str] = (MAMBA.extension,)) -> dict[str, Any]:
    """`import torch` and each extension in the env; in a venv, each must load the wheel's copy."""
    try:
        done = proc.run([env.python, "-c", _IMPORT, *modules], env=env.env, timeout=300)
    except CommandError as exc:
        last = proc.last_line(exc.tail) or str(exc)
        msg = not_installed(last, env) or (
            f"import {', '.join(modules)} failed: {last} (torch or CUDA runtime "
            "mismatch? run `mambawin doctor`)"
        )
        raise CommandError(msg, argv=exc.argv, returncode=exc.returncode, tail=exc.tail) from None
    found: dict[str, Any] = json.loads(proc.last_line(done.stdout))
    for name, origin in found["extensions"].items():
        if env.venv and not _inside(Path(origin), env.venv):
            msg = (
                f"{name} was imported from {origin}, not from the wheel under test: unset "
                "PYTHONPATH entries that hold another copy"
            )
            raise CommandError(msg)
    found["extension"] = next(iter(found["extensions"].values()), None)
    return found


_NO_MODULE = re.compile(r"No module named '([^'.]+)")


def not_installed(last_line: str, env: InstallEnv) -> str | None:
    """What to say when the import failed because a package is simply absent (not a torch or
    CUDA mismatch): which one, and how to install it; None for any other failure."""
    found = _NO_MODULE.search(last_line)
    if found is None:
        return None
    module = found.group(1)
    where = "the throwaway venv" if env.venv else f"this environment ({env.python})"
    if module == "torch":
        return f"torch is not installed in {where}: install torch first (`pip install torch`)"
    for package in PACKAGES:
        if module in package.extensions or module == package.import_name:
            return (
                f"{package.name} is not installed in {where}: install a wheel of it (`pip "
                f"install --no-index --find-links wheelhouse {package.name}`, after "
                "`mambawin build`), or pass the wheel's path instead of --installed"
            )
    return None


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def _child_env(runtime: Path) -> dict[str, str]:
    env = dict(os.environ)
    # Only the private copy of mambawin goes first; the user's own PYTHONPATH stays behind it.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(runtime), env.get("PYTHONPATH")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def run_module(
    env: InstallEnv,
    module: str,
    args: Sequence[str],
    timeout: float,
) -> dict[str, Any]:
    """Run `python -m module args` in the env; its last stdout line is a JSON object."""
    done = proc.run([env.python, "-m", module, *args], env=env.env, timeout=timeout)
    try:
        data: dict[str, Any] = json.loads(proc.last_line(done.stdout))
    except ValueError:
        msg = f"{module} printed no JSON result: run `{env.python} -m {module}` to see why"
        raise CommandError(msg, argv=done.argv, tail=done.stderr) from None
    return data


def read_environment(env: InstallEnv, projects: Sequence[str], timeout: float) -> dict[str, Any]:
    """What the env holds (runners/environment.py): its marker values, every distribution, and
    the requirements of the projects under test, for verify's requirements-conflict check."""
    return run_module(env, "mambawin.verify.runners.environment", ["--json", *projects], timeout)
