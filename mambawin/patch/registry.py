"""The ordered patch catalogue: applied in this order, and --export numbers them in it.

Order matters only where two patches touch the same file (setup.py): each later patch anchors on
upstream lines that earlier ones leave in place. Teammates add a patch by importing its module
here and listing its PATCH at its place in the order below.
"""

from __future__ import annotations

from mambawin.patch.base import Patch
from mambawin.patch.mamba import (
    arch_list,
    bool_switch,
    cached_wheels,
    compiler_flags,
    complex_removal,
    cuda13_cub,
    keep_cuda_build,
    mamba3_imports,
    math_defines,
    nvcc_threads,
)

PATCHES: tuple[Patch, ...] = (
    arch_list.PATCH,  # arch-list
    cached_wheels.PATCH,  # cached-wheels
    nvcc_threads.PATCH,  # nvcc-threads
    bool_switch.PATCH,  # bool-switch
    math_defines.PATCH,  # math-defines
    complex_removal.PATCH,  # complex-removal
    compiler_flags.PATCH,  # compiler-flags
    cuda13_cub.PATCH,  # cuda13-cub
    keep_cuda_build.PATCH,  # keep-cuda-build
    mamba3_imports.PATCH,  # mamba3-imports
)


def patch_ids() -> tuple[str, ...]:
    """Every known patch id, in apply order."""
    return tuple(patch.id for patch in PATCHES)


def get(patch_id: str) -> Patch | None:
    """The patch with this id, or None."""
    return next((patch for patch in PATCHES if patch.id == patch_id), None)
