"""The CUDA toolkit each cell builds with: the one matching its torch's CUDA variant.

torch's BuildExtension refuses an nvcc whose CUDA major differs from torch's
("The detected CUDA version (12.8) mismatches the version that was used to compile PyTorch
(13.0)") and only warns on a minor difference. A team spec may mix cu128 and cu130 torch, so each
cell gets CUDA_HOME of a toolkit of its own version: `CUDA_PATH_V12_8` (what NVIDIA's Windows
installer sets for every toolkit), the default install folders, or the toolkit already in use.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from mambawin import proc
from mambawin.toolchain.cuda import is_toolkit, nvcc_version


@dataclass(frozen=True)
class Toolkit:
    """A CUDA toolkit folder and its nvcc's version."""

    home: Path
    version: Version


def find_toolkit(cuda: str, environ: Mapping[str, str]) -> tuple[Toolkit | None, str]:
    """The toolkit for CUDA X.Y (same major.minor, else same major with a note), or why none."""
    wanted = Version(cuda)
    found = [t for t in _toolkits(cuda, environ) if t.version.major == wanted.major]
    exact = [t for t in found if t.version.release[:2] == wanted.release[:2]]
    if exact:
        return exact[0], ""
    if found:
        return found[0], (
            f"no CUDA {cuda} toolkit found; building with CUDA {found[0].version} "
            "(same major: torch accepts it)"
        )
    return None, (
        f"no CUDA {wanted.major}.x toolkit found for torch's cu"
        f"{cuda.replace('.', '')}: install CUDA {cuda} (on Windows its installer sets "
        f"CUDA_PATH_V{cuda.replace('.', '_')}) or set CUDA_HOME to one"
    )


def toolkit_environ(toolkit: Toolkit, environ: Mapping[str, str]) -> dict[str, str]:
    """environ with CUDA_HOME/CUDA_PATH naming toolkit and its bin/ first on PATH."""
    result = dict(environ)
    result["CUDA_HOME"] = result["CUDA_PATH"] = str(toolkit.home)
    result["PATH"] = str(toolkit.home / "bin") + os.pathsep + result.get("PATH", "")
    return result


def _toolkits(cuda: str, environ: Mapping[str, str]) -> list[Toolkit]:
    """Candidate toolkits in order of preference, each with the version its nvcc reports."""
    platform = sys.platform
    seen: set[Path] = set()
    found = []
    for home in _candidates(cuda, environ):
        if home in seen or not is_toolkit(home, platform):
            continue
        seen.add(home)
        version = nvcc_version(home)
        if version is not None:
            found.append(Toolkit(home, version))
    return found


def _candidates(cuda: str, environ: Mapping[str, str]) -> list[Path]:
    named = environ.get(f"CUDA_PATH_V{cuda.replace('.', '_')}")
    paths = [Path(named)] if named else []
    if sys.platform == "win32":
        base = Path(
            environ.get("ProgramFiles", "C:/Program Files"), "NVIDIA GPU Computing Toolkit", "CUDA"
        )
        paths.append(base / f"v{cuda}")
    else:
        paths.append(Path(f"/usr/local/cuda-{cuda}"))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if environ.get(var):
            paths.append(Path(environ[var]))
    nvcc = proc.which("nvcc", path=environ.get("PATH"))
    if nvcc:  # torch's own fallback: the toolkit of the nvcc on PATH (a symlink: resolve it)
        paths.append(Path(nvcc).resolve().parent.parent)
    paths += [Path(v) for k, v in sorted(environ.items()) if k.upper().startswith("CUDA_PATH_V")]
    if sys.platform != "win32":
        paths.append(Path("/usr/local/cuda"))
    return paths
