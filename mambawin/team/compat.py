"""Known facts that make a matrix cell impossible, each table with where it came from.

A cell is impossible when no torch wheel exists for its Python, when its CUDA cannot compile one of
its archs, or when the packages it pairs cannot work together. Each check returns the reason in
one line, or "" when the cell is possible (or the tables do not know: then nothing is claimed).
"""

from __future__ import annotations

from packaging.version import Version

from mambawin.archs import Arch
from mambawin.packages import pair_problem

# torch minor → (lowest, highest) CPython 3.x minor with a wheel. Source: `pip index versions
# torch --python-version 3.N --platform win_amd64 --only-binary=:all:` against PyPI for
# N = 9..15 (2026-11-23), cross-checked with --platform manylinux_2_28_x86_64 for 2.7+; the CUDA
# indexes (download.pytorch.org/whl/cuXYZ) carry the same Python set per release.
TORCH_PYTHONS: dict[str, tuple[int, int]] = {
    "2.0": (9, 11),
    "2.1": (9, 11),
    "2.2": (9, 12),
    "2.3": (9, 12),
    "2.4": (9, 12),
    "2.5": (9, 12),
    "2.6": (9, 13),
    "2.7": (9, 13),
    "2.8": (9, 13),
    "2.9": (10, 14),
    "2.10": (10, 14),
    "2.11": (10, 14),
    "2.12": (10, 14),
    "2.13": (10, 14),
    "2.14": (10, 14),
    "2.15": (11, 15),
}
# torch 2.5 shipped cp313 wheels for Linux only; Windows got 3.13 with 2.6.
TORCH_PYTHONS_LINUX = {**TORCH_PYTHONS, "2.5": (9, 13)}

# SASS arch → (first CUDA that compiles it, first CUDA that no longer does). Source: the CUDA
# Toolkit release notes (11.0: sm_80; 11.1: sm_86; 11.4: sm_87; 11.8: sm_89, sm_90; 12.0: sm_90a,
# drops sm_35/37; 12.8: sm_100, sm_101, sm_120; 12.9: sm_103, sm_121, family 'f' targets;
# 13.0: drops sm_50-sm_72, renames sm_101 to sm_110). `nvcc --list-gpu-code` is the ground truth
# on a machine; doctor checks that one.
ARCH_CUDA: dict[str, tuple[str, str | None]] = {
    "35": ("6.0", "12.0"),
    "37": ("6.0", "12.0"),
    "50": ("6.0", "13.0"),
    "52": ("7.0", "13.0"),
    "53": ("7.0", "13.0"),
    "60": ("8.0", "13.0"),
    "61": ("8.0", "13.0"),
    "62": ("8.0", "13.0"),
    "70": ("9.0", "13.0"),
    "72": ("10.0", "13.0"),
    "75": ("10.0", None),
    "80": ("11.0", None),
    "86": ("11.1", None),
    "87": ("11.4", None),
    "89": ("11.8", None),
    "90": ("11.8", None),
    "90a": ("12.0", None),
    "100": ("12.8", None),
    "100a": ("12.8", None),
    "101": ("12.8", "13.0"),
    "101a": ("12.8", "13.0"),
    "103": ("12.9", None),
    "103a": ("12.9", None),
    "110": ("13.0", None),
    "110a": ("13.0", None),
    "120": ("12.8", None),
    "120a": ("12.8", None),
    "121": ("12.9", None),
    "121a": ("12.9", None),
}
FAMILY_CUDA = "12.9"  # sm_XYf family-specific targets came with CUDA 12.9


def torch_python(torch: str, python: str, platform: str) -> str:
    """Why torch has no wheel for python on platform, or '' (also when the table does not know)."""
    release = Version(torch).release
    minor = f"{release[0]}.{release[1] if len(release) > 1 else 0}"
    table = TORCH_PYTHONS_LINUX if platform.startswith("linux") else TORCH_PYTHONS
    if minor not in table:
        return ""
    low, high = table[minor]
    wanted = Version(python).release[1]
    if low <= wanted <= high:
        return ""
    return (
        f"torch {torch} has no wheel for Python {python} (torch {minor} ships 3.{low}-"
        f"3.{high}): drop this Python or pick another torch"
    )


def cuda_arch(cuda: str, arch: Arch) -> str:
    """Why this CUDA's nvcc cannot compile arch, or '' (also for archs the table lacks)."""
    if arch.suffix == "f":
        first, last = FAMILY_CUDA, None
    elif arch.number in ARCH_CUDA:
        first, last = ARCH_CUDA[arch.number]
    else:
        return ""
    version = Version(cuda)
    if version < Version(first):
        return f"CUDA {cuda} cannot compile {arch.sm} (needs CUDA {first}+): drop it or use newer"
    if last is not None and version >= Version(last):
        return (
            f"CUDA {cuda} cannot compile {arch.sm} (removed in CUDA {last}): drop it or use "
            "an older CUDA"
        )
    return ""


def pair(mamba: str | None, conv: str | None) -> str:
    """Why this mamba-ssm version cannot use this causal-conv1d version, or ''."""
    if mamba is None or conv is None:
        return ""
    problem = pair_problem(Version(mamba), Version(conv))
    if problem is None:
        return ""
    return (
        f"mamba-ssm {mamba} needs causal-conv1d{problem.needed}, the spec has {conv}: {problem.why}"
    )
