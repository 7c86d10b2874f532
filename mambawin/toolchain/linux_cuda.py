"""CUDA for native Linux builds from NVIDIA's manylinux wheels, unpacked into mambawin's cache.

The same pinned `nvidia-cuda-*` wheels as the Windows toolchain (wine_setup.CUDA_WHEELS), for
manylinux x86_64: nvcc, cudafe++, fatbinary, nvlink, ptxas, cicc, the headers, libcudart. The
folder is a CUDA_HOME as torch's cpp_extension wants one: bin/nvcc, include/cuda_runtime.h,
lib64/libcudart.so (the wheels ship lib/libcudart.so.13 only; the linker's -lcudart needs the
unversioned name, torch's -L points at lib64). doctor falls back to it when no toolkit is
installed, and `CUDA_HOME=<root>/cu13 mambawin build` names it.

CUDA 12 has none: NVIDIA's `-cu12` nvcc wheels carry no compiler (wine_setup.NO_COMPILER_WHEELS).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from mambawin.store.atomic import fill_dir, staging_dir
from mambawin.store.owned import cache_dir, check_refill, check_root, marked_as
from mambawin.toolchain import licenses, wheels
from mambawin.toolchain.download import DownloadStatus
from mambawin.toolchain.wine_setup import SETUP_CUDA, Downloader, cuda_wheels

OWNED_AS = "linux-cuda"  # the kind in the root's ownership marker
# What a build needs of the folder (torch links -L lib64 -lcudart)
PARTS = (
    "bin/nvcc",
    "bin/cudafe++",
    "nvvm/bin/cicc",
    "include/cuda_runtime.h",
    "lib64/libcudart.so",
)
# manylinux tags the pinned wheels carry (2010/2014 aliases included): pip needs them spelled out
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_12_x86_64",
    "manylinux2010_x86_64",
)


@dataclass(frozen=True)
class LinuxCuda:
    """A CUDA folder set up from the wheels: <root>/cu<major>."""

    root: Path
    cuda: str = SETUP_CUDA

    @property
    def home(self) -> Path:
        """The CUDA_HOME (`cu13`, as the wheels name their folder)."""
        return self.root / f"cu{self.cuda.split('.')[0]}"

    def missing(self) -> list[str]:
        """Each part a build needs that is not there, with the fix; empty when complete."""
        parts = PARTS
        return [
            f"{self.home / part} is missing: `mambawin toolchain linux --setup` fetches it"
            for part in parts
            if not (self.home / part).exists()
        ]


def default_root() -> Path:
    """The Linux CUDA's folder in mambawin's cache."""
    return cache_dir() / "linux-cuda"


def pip_download(
    requirements: Sequence[str],
    dest: Path,
    *,
    progress: Callable[[DownloadStatus], None] | None = None,
) -> None:
    """manylinux x86_64 wheels (no dependencies) of requirements into dest, with pip."""
    wheels.pip_download(requirements, dest, PLATFORMS, progress=progress)


def setup(
    root: Path,
    *,
    cuda: str = SETUP_CUDA,
    download: Downloader = pip_download,
    accept_license: bool = False,
) -> LinuxCuda:
    """Fetch the CUDA wheels into root (a new or empty folder, or one this made), once NVIDIA's
    CUDA EULA is accepted for it (accept_license, or an earlier setup's record in root); else
    UsageError, before anything is downloaded or changed."""
    wanted = cuda_wheels(cuda, "Linux")  # UsageError before anything is touched
    result = LinuxCuda(root, cuda)
    terms, command = licenses.LINUX_CUDA, licenses.LINUX_SETUP
    if not (accept_license or licenses.accepted(root, terms)):
        check_cuda_root(root)  # a root it may not fill is refused for that first
        raise licenses.refusal(root, terms, command)
    if _needs_fill(result):
        with staging_dir(root.parent, f".{root.name}.wheels.") as downloaded:
            download(wanted, downloaded)
            found = sorted(downloaded.glob("*.whl"))
            fill_dir(root, lambda tmp: _unpack_all(found, LinuxCuda(tmp, cuda)), what=OWNED_AS)
    if not licenses.accepted(root, terms) and marked_as(root) is not None:
        licenses.record(root, terms, command)
    return result


def check_cuda_root(root: Path) -> bool:
    """Whether root exists; UsageError for one mambawin's CUDA may not be in."""
    return check_root(root, OWNED_AS, "mambawin's CUDA")


def _needs_fill(target: LinuxCuda) -> bool:
    """Whether setup must (re)fill root; UsageError for a root that is not ours."""
    root = target.root
    if not check_cuda_root(root):
        return True
    if marked_as(root) == OWNED_AS and not target.missing():
        return False
    if marked_as(root) == OWNED_AS:
        check_refill(root, "mambawin's CUDA")  # repaired only once the download is whole
    return True


def _unpack_all(found: Sequence[Path], target: LinuxCuda) -> None:
    prefix = f"nvidia/{target.home.name}/"
    for wheel in found:
        wheels.extract(wheel, target.home, partial(_under, prefix), executables=True)
    _link_like_a_toolkit(target.home)


def _under(prefix: str, name: str) -> str | None:
    """name less prefix, for a member under it (the wheel's nvidia/cu13/...)."""
    return name[len(prefix) :] if name.startswith(prefix) else None


def _link_like_a_toolkit(home: Path) -> None:
    """lib64 -> lib and libcudart.so -> libcudart.so.<major>, as the installer lays them out."""
    (home / "lib64").symlink_to("lib", target_is_directory=True)
    versioned = sorted((home / "lib").glob("libcudart.so.[0-9]*"))
    if versioned and not (home / "lib" / "libcudart.so").exists():
        (home / "lib" / "libcudart.so").symlink_to(versioned[0].name)
