"""One build environment per (Python, torch): made by uv when present, else venv + pip.

torch comes from the spec's index (download.pytorch.org/whl/cu130 and the like); the build tools
and mambawin itself from the default index, so `<env python> -m mambawin build` compiles against
exactly that torch. An environment is ready only once its marker file is written (the last step);
one without it is a half-made leftover of ours and is made again.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mambawin import __version__, proc
from mambawin.errors import CommandError, ToolchainError
from mambawin.store.owned import adopt, cache_dir, claim, marked_as, remove_tree
from mambawin.team.spec import TorchSpec
from mambawin.userfile import parse_json

MARKER = "mambawin-env.json"
OWNED_AS = "team-env"  # the kind in an environment's ownership marker (mambawin.store.owned)
BUILD_TOOLS = ("setuptools>=68", "wheel", "ninja", "packaging")
_PROBE = "import sys; print('%d.%d' % sys.version_info[:2])"


@dataclass(frozen=True)
class BuildEnv:
    """A ready environment: its folder, its interpreter and the tool that made it."""

    root: Path
    python: Path
    tool: str  # "uv" or "venv+pip"


def envs_root() -> Path:
    return cache_dir() / "envs"


def env_dir(python: str, torch: TorchSpec, root: Path | None = None) -> Path:
    """A short, stable folder per Python/torch/CUDA variant (MAX_PATH on Windows)."""
    return (root or envs_root()) / f"py{python}-torch{torch.version}-{torch.variant}"


def ensure_env(
    python: str,
    torch: TorchSpec,
    *,
    root: Path | None = None,
    on_line: Callable[[str], None] | None = None,
) -> BuildEnv:
    """The ready environment for python + torch, made (or remade) when needed."""
    target = env_dir(python, torch, root)
    uv = proc.which("uv")
    env = BuildEnv(target, env_python(target), "uv" if uv else "venv+pip")
    wanted = {
        "python": python,
        "torch": torch.version,
        "index": torch.index,
        "mambawin": __version__,
    }
    if _ready(env, wanted):
        return env
    if marked_as(target) is None:  # made before ownership markers: a venv of ours by its files
        adopt(target, OWNED_AS, _VENV_NAMES if _is_venv(target) else ())
    remove_tree(target)  # a half-made environment of ours, or one for other settings
    claim(target, OWNED_AS)  # marked before the venv is made in it (--allow-existing keeps it)
    for argv in _commands(env, python, torch, uv):
        proc.run(argv, timeout=3600, on_line=on_line, env=clean_environ())
    (target / MARKER).write_text(json.dumps(wanted, indent=2) + "\n", encoding="utf-8")
    return env


# What `venv` and `uv venv` make, and mambawin's own ready marker.
_VENV_NAMES = (
    "bin",
    "Scripts",
    "lib",
    "Lib",
    "lib64",
    "include",
    "Include",
    "share",
    "etc",
    "pyvenv.cfg",
    ".gitignore",
    "CACHEDIR.TAG",
    ".lock",
    MARKER,
)


def _is_venv(folder: Path) -> bool:
    return (folder / "pyvenv.cfg").is_file() and not (folder / "pyvenv.cfg").is_symlink()


def _commands(env: BuildEnv, python: str, torch: TorchSpec, uv: str | None) -> list[list[str]]:
    """Create, install torch from its index, then the build tools and mambawin."""
    pin = (
        f"torch=={torch.version}"
        if len(torch.version.split(".")) > 2
        else (f"torch=={torch.version}.*")
    )
    rest = [*BUILD_TOOLS, *mambawin_requirement()]
    if uv:
        install = [uv, "pip", "install", "--python", str(env.python)]
        return [
            [uv, "venv", "--allow-existing", "--python", python, str(env.root)],
            [*install, pin, "--index-url", torch.index],
            [*install, *rest],
        ]
    install = [str(env.python), "-m", "pip", "install", "--disable-pip-version-check"]
    return [
        [*find_python(python), "-m", "venv", str(env.root)],
        [*install, pin, "--index-url", torch.index],
        [*install, *rest],
    ]


def mambawin_requirement() -> list[str]:
    """This mambawin for the environment: its source tree (editable) when run from one."""
    root = Path(__file__).resolve().parents[2]
    project = root / "pyproject.toml"
    if project.is_file() and 'name = "mambawin"' in project.read_text(encoding="utf-8"):
        return ["-e", str(root)]
    return [f"mambawin=={__version__}"]


def find_python(version: str) -> list[str]:
    """A command that starts CPython version (X.Y); ToolchainError when none does."""
    candidates = [[sys.executable], [f"python{version}"]]
    if sys.platform == "win32":
        candidates.append(["py", f"-{version}"])
    candidates += [[str(path)] for path in pyenv_pythons(version)]
    for argv in candidates:
        if _runs_version(argv, version):
            return argv
    msg = (
        f"Python {version} not found (tried python{version}"
        f"{' and py -' + version if sys.platform == 'win32' else ''}): install it, or install "
        "uv (`pip install uv`), which fetches any Python itself"
    )
    raise ToolchainError(msg)


def pyenv_pythons(version: str) -> list[Path]:
    """pyenv's installs of X.Y, newest first. Its `pythonX.Y` shim on PATH refuses to run unless
    that version is selected (PYENV_VERSION or .python-version), so find_python asks pyenv's own
    folders too."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = [p for p in root.glob(f"{version}.*/bin/python{version}") if p.is_file()]
    return sorted(found, key=lambda p: _patch_number(p.parent.parent.name), reverse=True)


def _patch_number(name: str) -> int:
    tail = name.split(".")[2] if name.count(".") >= 2 else ""
    return int(tail) if tail.isascii() and tail.isdigit() else -1


def _runs_version(argv: list[str], version: str) -> bool:
    try:
        done = proc.run([*argv, "-c", _PROBE], timeout=60, check=False)
    except CommandError:
        return False
    return done.returncode == 0 and done.stdout.strip() == version


def _ready(env: BuildEnv, wanted: dict[str, str]) -> bool:
    try:
        found = parse_json((env.root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return found == wanted and env.python.is_file()


def env_python(root: Path) -> Path:
    return root / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def clean_environ() -> dict[str, str]:
    """This process's environment minus what would make the child see another Python's packages."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_TARGET")
    }


def child_environ(env: BuildEnv) -> dict[str, str]:
    """The environment `<env python> -m mambawin build` runs in: that venv first on PATH."""
    environ = clean_environ()
    bin_dir = str(env.python.parent)
    environ["PATH"] = bin_dir + os.pathsep + environ.get("PATH", "")
    environ["VIRTUAL_ENV"] = str(env.root)
    return environ
