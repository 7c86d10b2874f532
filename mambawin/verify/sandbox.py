"""The throwaway environment a wheel is tried in, shared by verify and bench.

A fresh venv that sees the base environment's torch holds the wheel under test; kernels run there
in child processes (`python -m mambawin.verify.runners.X`), so a crash in the extension is reported
instead of killing mambawin.
"""

from __future__ import annotations

import json
import os
import site
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mambawin
from mambawin import proc
from mambawin.errors import CommandError

EXTENSION = "selective_scan_cuda"
_IMPORT = """
import json, sys, torch, selective_scan_cuda
print(json.dumps({"torch": torch.__version__, "extension": selective_scan_cuda.__file__,
                  "prefix": sys.prefix}))
"""


@dataclass(frozen=True)
class InstallEnv:
    """The interpreter (and environment variables) that see the wheel under test."""

    python: str
    env: Mapping[str, str] | None
    venv: Path | None = None


def prepare_env(wheel: Path | None, python: str, scratch: Path) -> InstallEnv:
    """The environment the kernel runs in: a fresh venv holding the wheel, or `python`'s own."""
    if wheel is None:
        return InstallEnv(python, _child_env(), None)
    venv = scratch / "venv"
    venv_python = create_venv(venv, python)
    install_wheel(python, venv_python, Path(wheel))
    return InstallEnv(venv_python, _child_env(), venv)


def create_venv(root: Path, base_python: str) -> str:
    """A venv that sees the base environment's packages (torch), even when that is a venv."""
    proc.run([base_python, "-m", "venv", "--system-site-packages", "--without-pip", root],
             timeout=300)
    python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = proc.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                       timeout=120).stdout.strip()
    # --system-site-packages points at the *base* interpreter: when mambawin runs from a venv
    # (where torch lives), that venv's site-packages would be missing. A .pth appends them after
    # the new venv's own, so the wheel under test still wins.
    Path(purelib, "_mambawin_parent.pth").write_text(_parent_pth(), encoding="utf-8")
    return str(python)


def _parent_pth() -> str:
    dirs = [*site.getsitepackages()]
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    dirs += [user] if user and Path(user).is_dir() else []
    lines = [f"import site; site.addsitedir({d!r})" for d in dirs]
    return "\n".join([*lines, str(_mambawin_root())]) + "\n"


def _mambawin_root() -> Path:
    return Path(mambawin.__file__).resolve().parent.parent


def install_wheel(base_python: str, venv_python: str, wheel: Path) -> None:
    """pip install --no-deps --no-index the wheel into the venv, with the base env's pip."""
    flags = ["install", "--no-deps", "--no-index", "--ignore-installed", "--no-cache-dir",
             "--disable-pip-version-check", str(wheel.resolve())]
    try:
        proc.run([base_python, "-m", "pip", "--python", venv_python, *flags], timeout=900)
    except CommandError as exc:
        if "--python" not in exc.tail:  # pip < 22.3 has no --python: bootstrap the venv's own
            raise _pip_error(exc, wheel) from None
        proc.run([venv_python, "-m", "ensurepip", "--default-pip"], timeout=300)
        try:
            proc.run([venv_python, "-m", "pip", *flags], timeout=900)
        except CommandError as exc2:
            raise _pip_error(exc2, wheel) from None


def _pip_error(exc: CommandError, wheel: Path) -> CommandError:
    last = proc.last_line(exc.tail) or str(exc)
    msg = f"pip could not install {wheel.name}: {last} (check the wheel's tags)"
    return CommandError(msg, argv=exc.argv, returncode=exc.returncode, tail=exc.tail)


def import_check(env: InstallEnv) -> dict[str, Any]:
    """`import torch; import selective_scan_cuda` in the env, which must load the wheel's copy."""
    try:
        done = proc.run([env.python, "-c", _IMPORT], env=env.env, timeout=300)
    except CommandError as exc:
        last = proc.last_line(exc.tail) or str(exc)
        msg = (f"import {EXTENSION} failed: {last} (torch or CUDA runtime mismatch? "
               "run `mambawin doctor`)")
        raise CommandError(msg, argv=exc.argv, returncode=exc.returncode, tail=exc.tail) from None
    found: dict[str, Any] = json.loads(proc.last_line(done.stdout))
    if env.venv and not _inside(Path(found["extension"]), env.venv):
        msg = (f"{EXTENSION} was imported from {found['extension']}, not from the wheel under "
               "test: unset PYTHONPATH entries that hold another copy")
        raise CommandError(msg)
    return found


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # The runners must import in the child even when mambawin runs from a source checkout.
    extra = str(_mambawin_root())
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), extra) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def run_module(env: InstallEnv, module: str, args: Sequence[str], timeout: float,
               ) -> dict[str, Any]:
    """Run `python -m module args` in the env; its last stdout line is a JSON object."""
    done = proc.run([env.python, "-m", module, *args], env=env.env, timeout=timeout)
    try:
        data: dict[str, Any] = json.loads(proc.last_line(done.stdout))
    except ValueError:
        msg = f"{module} printed no JSON result: run `{env.python} -m {module}` to see why"
        raise CommandError(msg, argv=done.argv, tail=done.stderr) from None
    return data
