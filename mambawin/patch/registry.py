"""The ordered patch catalogues, one per upstream package: applied in this order, and --export
numbers them in it.

Order matters only where two patches touch the same file (setup.py): each later patch anchors on
upstream lines that earlier ones leave in place. Teammates add a patch by importing its module
here and listing its PATCH at its place in its package's order below.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from mambawin.errors import UsageError
from mambawin.packages import CAUSAL_CONV1D, MAMBA, Package
from mambawin.patch import causal_conv1d as conv
from mambawin.patch.base import Patch
from mambawin.patch.mamba import (
    bool_switch,
    complex_removal,
    cuda13_cub,
    keep_cuda_build,
    mamba3_imports,
    math_defines,
    split_units,
    ssd_custom_ops,
    stable_binding,
    stable_kernels,
    stable_setup,
    stable_shim,
)
from mambawin.patch.setup_py import arch_list, cached_wheels, compiler_flags, nvcc_threads

PATCHES: tuple[Patch, ...] = (
    arch_list.PATCH,  # arch-list
    cached_wheels.PATCH,  # cached-wheels
    nvcc_threads.PATCH,  # nvcc-threads
    bool_switch.PATCH,  # bool-switch
    math_defines.PATCH,  # math-defines
    complex_removal.PATCH,  # complex-removal
    split_units.PATCH,  # split-units (after complex-removal: it splits the units left)
    # --abi stable only. stable-binding replaces what complex-removal edited; stable-kernels ports
    # bool-switch's and math-defines' headers and split-units' parts too.
    stable_binding.PATCH,  # stable-binding
    stable_kernels.PATCH,  # stable-kernels
    stable_shim.PATCH,  # stable-shim
    compiler_flags.PATCH,  # compiler-flags
    stable_setup.PATCH,  # stable-setup (its block goes after compiler-flags')
    cuda13_cub.PATCH,  # cuda13-cub
    keep_cuda_build.PATCH,  # keep-cuda-build
    mamba3_imports.PATCH,  # mamba3-imports
    ssd_custom_ops.PATCH,  # ssd-custom-ops (--abi stable only)
)

CAUSAL_CONV1D_PATCHES: tuple[Patch, ...] = (
    conv.arch_list.PATCH,  # arch-list
    conv.cached_wheels.PATCH,  # cached-wheels
    conv.cuda_torch_check.PATCH,  # cuda-torch-check
    conv.nvcc_threads.PATCH,  # nvcc-threads
    conv.alt_tokens.PATCH,  # alt-tokens
    conv.rocm_directives.PATCH,  # rocm-directives
    conv.silu_bwd_tail.PATCH,  # silu-bwd-tail
    # --abi stable only (stable_only): after rocm-directives, which anchors on C10_CUDA_CHECK
    conv.stable_kernels.PATCH,  # stable-kernels
    conv.stable_shim.PATCH,  # stable-shim (reads upstream's binding, so before stable-binding)
    conv.stable_functions.PATCH,  # stable-functions (cpp_functions.py imports the shim's)
    conv.stable_binding.PATCH,  # stable-binding
    conv.split_units.PATCH,  # split-units (after every patch of the .cu files: parts copy them)
    conv.compiler_flags.PATCH,  # compiler-flags
    conv.stable_setup.PATCH,  # stable-setup (its block goes after compiler-flags')
)

# The upstream versions each package's --abi stable port supports (its stable_only patches
# anchor on every one).
STABLE_VERSIONS: dict[str, SpecifierSet] = {
    package.name: package.stable_versions for package in (MAMBA, CAUSAL_CONV1D)
}

# The newest upstream release the patch set is proven on, per package: patch and configure (both
# ABIs) ran on every release up to it, tagged in git or published as an sdist (docs/patches.md,
# "Proven releases"). A newer release is what `patches --check-new` reports. Raise it only once
# the new release passed those proofs (tests/test_patches_*_upstream.py, test_sdist_upstream.py).
PROVEN_THROUGH: dict[str, Version] = {
    MAMBA.name: Version("2.3.2.post1"),
    CAUSAL_CONV1D.name: Version("1.7.0"),
}

PATCH_SETS: dict[str, tuple[Patch, ...]] = {
    MAMBA.name: PATCHES,
    CAUSAL_CONV1D.name: CAUSAL_CONV1D_PATCHES,
}


def check_stable(package: Package, version: Version | None) -> None:
    """UsageError unless package (at version, when known) has an --abi stable port."""
    versions = STABLE_VERSIONS[package.name]
    if version is not None and not versions.contains(version, prereleases=True):
        msg = (
            f"--abi stable: {package.name} {version} is outside the versions its stable-ABI port "
            f"supports ({versions}): pick a --ref in that range, or build it with --abi torch"
        )
        raise UsageError(msg)


def patches_for(package: Package) -> tuple[Patch, ...]:
    """The ordered patch set of package."""
    return PATCH_SETS[package.name]


def patch_ids(package: Package) -> tuple[str, ...]:
    """Every known patch id of package, in apply order."""
    return tuple(patch.id for patch in patches_for(package))


def every_patch_id() -> frozenset[str]:
    """The ids of every package's patches (what a spec or a pair build may name)."""
    return frozenset(i for patches in PATCH_SETS.values() for i in (p.id for p in patches))


def unknown_ids(ids: Iterable[str], known: Iterable[str]) -> list[str]:
    """The ids that name no patch in known, sorted (the one validator of patch ids)."""
    return sorted(set(ids) - set(known))


def check_ids(ids: Iterable[str], known: Sequence[str], *, flag: str, owner: str) -> None:
    """UsageError naming every id no patch of owner (a package, or both) has, and the choices.

    owner: who the ids were checked against, as the message names it ("mamba-ssm").
    """
    unknown = unknown_ids(ids, known)
    if unknown:
        msg = (
            f"{flag}: unknown patch id {', '.join(repr(i) for i in unknown)} for {owner}: "
            f"use one of {', '.join(known)} (`mambawin patches --package NAME` lists each "
            "package's)"
        )
        raise UsageError(msg)


def own_ids(ids: Iterable[str], package: Package) -> tuple[str, ...]:
    """Those of ids that name one of package's patches, in the order given."""
    known = set(patch_ids(package))
    return tuple(i for i in ids if i in known)


def get(patch_id: str, package: Package) -> Patch | None:
    """The patch of package with this id, or None."""
    return next((patch for patch in patches_for(package) if patch.id == patch_id), None)
