"""stable-kernels: the selective_scan kernels compile against torch::headeronly, not c10/ATen.

Why: a stable-ABI build defines TORCH_TARGET_VERSION, and under it every c10/ header torch ships
stops the compile (`#error "This file should not be included when either TORCH_STABLE_ONLY or
TORCH_TARGET_VERSION is defined."`); the kernels' c10 types and macros would also leave c10
symbols for the library to import from a torch it must not depend on. Each upstream construct has
a header-only or stable twin:
- `c10::complex<float>` / `at::Half` / `at::BFloat16` -> `torch::headeronly::` (same layout, the
  same class under a stable name), in selective_scan_common.h and every unit's instantiations;
- `C10_CUDA_CHECK` / `C10_CUDA_KERNEL_LAUNCH_CHECK` -> `STD_CUDA_CHECK` /
  `STD_CUDA_KERNEL_LAUNCH_CHECK` (torch/csrc/stable/macros.h, torch >= 2.10);
- `ATen/cuda/Atomic.cuh` (gpuAtomicAdd) -> two overloads of our own for the float and
  complex<float> accumulations the bwd kernel makes;
- `std::conj` on c10::complex (defined by c10's complex.h only) -> the conjugate written out.
static_switch.h, reverse_scan.cuh, uninitialized_copy.cuh and selective_scan.h use none of c10 or
ATen; the transform checks that every kernel file is left without any, so a construct a newer
upstream adds is refused instead of compiled into a broken library.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from mambawin.errors import PatchError
from mambawin.patch.base import (
    MARK_BEGIN,
    MARK_END,
    Outcome,
    Patch,
    PatchContext,
    Tree,
    marked_block,
)
from mambawin.patch.mamba import split_units
from mambawin.patch.mamba.stable import KERNELS, SUPPORTED, skip_reason

ID = "stable-kernels"
COMMON = f"{KERNELS}/selective_scan_common.h"
FWD = f"{KERNELS}/selective_scan_fwd_kernel.cuh"
BWD = f"{KERNELS}/selective_scan_bwd_kernel.cuh"
# Kernel files upstream has that need no edit: checked for c10/ATen all the same.
CLEAN = tuple(
    f"{KERNELS}/{name}"
    for name in (
        "static_switch.h",
        "reverse_scan.cuh",
        "uninitialized_copy.cuh",
        "selective_scan.h",
    )
)
UNITS = tuple(f"{KERNELS}/{unit}.cu" for unit in split_units.UNITS)
PARTS = tuple(
    f"{KERNELS}/{split_units.part_name(unit, k)}.cu"
    for unit in split_units.UNITS
    for k in range(1, split_units.MAX_PARTS + 1)
)
NOTE = f"// mambawin {ID}:"


@dataclass(frozen=True)
class Swap:
    """One upstream construct (a regex) and its stable-ABI replacement."""

    old: re.Pattern[str]
    new: str
    anchor: str  # the construct as a drift message names it
    required: bool = True  # False: a token some files have and others do not


def _line(text: str) -> re.Pattern[str]:
    """A whole line starting with text (upstream's trailing comment included)."""
    return re.compile(rf"^{re.escape(text)}[^\n]*$", re.MULTILINE)


def _token(name: str) -> re.Pattern[str]:
    return re.compile(rf"\b{re.escape(name)}\b")


HALF_TYPES = (
    Swap(_token("at::Half"), "torch::headeronly::Half", "at::Half", required=False),
    Swap(_token("at::BFloat16"), "torch::headeronly::BFloat16", "at::BFloat16", required=False),
)
COMMON_SWAPS = (
    Swap(
        _line("#include <c10/util/complex.h>"),
        f"{NOTE} torch::headeronly's complex (c10/ headers stop a TORCH_TARGET_VERSION build);\n"
        "// <algorithm> for std::max(initializer_list), which c10's complex.h used to bring in.\n"
        "#include <torch/headeronly/util/complex.h>\n"
        "#include <algorithm>\n"
        "#include <initializer_list>",
        "#include <c10/util/complex.h>",
    ),
    Swap(
        re.compile(r"^using complex_t = c10::complex<float>;", re.MULTILINE),
        "using complex_t = torch::headeronly::complex<float>;",
        "using complex_t = c10::complex<float>;",
    ),
    *HALF_TYPES,
)
CHECK_SWAPS = (
    Swap(
        _line("#include <c10/util/BFloat16.h>"),
        "#include <torch/headeronly/util/BFloat16.h>",
        "#include <c10/util/BFloat16.h>",
    ),
    Swap(
        _line("#include <c10/util/Half.h>"),
        "#include <torch/headeronly/util/Half.h>",
        "#include <c10/util/Half.h>",
    ),
    Swap(
        _line("#include <c10/cuda/CUDAException.h>"),
        "#include <torch/csrc/stable/macros.h>  // STD_CUDA_CHECK, STD_CUDA_KERNEL_LAUNCH_CHECK",
        "#include <c10/cuda/CUDAException.h>",
    ),
    Swap(_token("C10_CUDA_CHECK"), "STD_CUDA_CHECK", "C10_CUDA_CHECK("),
    Swap(
        re.compile(r"\bC10_CUDA_KERNEL_LAUNCH_CHECK\(\)"),
        "STD_CUDA_KERNEL_LAUNCH_CHECK()",
        "C10_CUDA_KERNEL_LAUNCH_CHECK();",
    ),
)
ATOMIC_INCLUDE = re.compile(r"^#include <ATen/cuda/Atomic\.cuh>[^\n]*\n", re.MULTILINE)
LAST_INCLUDE = _line('#include "static_switch.h"')
# Between markers, so a later mambawin finds and replaces its own block (base.marked_block).
ATOMIC = f"""// {MARK_BEGIN} {ID}: torch's CUDA atomics header is no stable API. The bwd kernel adds
// float (dA, dB, dC, dD, ddelta_bias) and complex<float> (complex A) values atomically.
__device__ __forceinline__ void gpuAtomicAdd(float *address, float value) {{
    atomicAdd(address, value);
}}
__device__ __forceinline__ void gpuAtomicAdd(complex_t *address, complex_t value) {{
    float *parts = reinterpret_cast<float *>(address);  // complex<float> is {{real, imag}}
    atomicAdd(parts, value.real());
    atomicAdd(parts + 1, value.imag());
}}
// {MARK_END} {ID}
"""
BWD_SWAPS = (
    *CHECK_SWAPS,
    Swap(
        re.compile(r"\{ return std::conj\(x\); \}"),
        "{ return complex_t(x.real(), -x.imag()); }",
        "complex_t conj<complex_t>(complex_t x) { return std::conj(x); }",
    ),
)
# What no kernel file may keep (comments aside): the c10/ATen API, or a torch header that is not
# header-only. `\b` keeps STD_TORCH_CHECK( from matching TORCH_CHECK(.
LEFTOVER = re.compile(
    r"\b(?:at|c10)::\w+|#\s*include\s*[<\"](?:ATen|c10)/[^>\"]*|\bC10_\w+|\bAT_\w+\(|"
    r"\bTORCH_CHECK\(|torch/(?:extension|python)\.h|\bpybind11\b|\bPYBIND11_\w+|\bPython\.h"
)
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def leftover(text: str) -> str | None:
    """The first c10/ATen/pybind11 construct in text's code (comments skipped), or None."""
    match = LEFTOVER.search(_COMMENTS.sub("", text))
    return match.group(0) if match else None


def _literal(new: str) -> Callable[[re.Match[str]], str]:
    """A re.sub replacement that inserts new as it is (no backslash escapes)."""
    return lambda _: new


def _apply(text: str, swaps: tuple[Swap, ...], path: str, ctx: PatchContext) -> str:
    """text with every swap made; drift when a required construct is neither old nor ported."""
    for swap in swaps:
        if swap.old.search(text):
            text = swap.old.sub(_literal(swap.new), text)
        elif swap.required and swap.new not in text:
            raise ctx.drift(path, swap.anchor)
    return text


def _port_common(text: str, ctx: PatchContext) -> str:
    return _apply(text, COMMON_SWAPS, COMMON, ctx)


def _port_fwd(text: str, ctx: PatchContext) -> str:
    return _apply(text, (*CHECK_SWAPS, *HALF_TYPES), FWD, ctx)


def _port_bwd(text: str, ctx: PatchContext) -> str:
    """bwd header: the checks and conj swaps, and gpuAtomicAdd instead of ATen's Atomic.cuh."""
    text = _apply(text, (*BWD_SWAPS, *HALF_TYPES), BWD, ctx)
    ours = marked_block(text, ID, "//")
    if ours is not None:
        return text[: ours.start()] + ATOMIC + text[ours.end() :]
    text, dropped = ATOMIC_INCLUDE.subn("", text)
    if not dropped:
        raise ctx.drift(BWD, "#include <ATen/cuda/Atomic.cuh>")
    anchor = LAST_INCLUDE.search(text)
    if anchor is None:
        raise ctx.drift(BWD, '#include "static_switch.h"')
    after = anchor.end() + 1  # past the include line's newline
    return f"{text[:after]}\n{ATOMIC}{text[after:]}"


def _port_unit(text: str, ctx: PatchContext) -> str:
    return _apply(text, HALF_TYPES, "", ctx)  # optional swaps only: never drift


HEADERS: dict[str, Callable[[str, PatchContext], str]] = {
    COMMON: _port_common,
    FWD: _port_fwd,
    BWD: _port_bwd,
}


def _port(
    tree: Tree, ctx: PatchContext, path: str, port: Callable[[str, PatchContext], str]
) -> bool:
    """Port one file; False when it was already ported."""
    if not tree.exists(path):
        raise ctx.drift(path, "#pragma once")
    text = tree.read(path)
    new = port(text, ctx)
    if new == text:
        return False
    tree.write(path, new)
    return True


def _refuse_leftovers(tree: Tree, ctx: PatchContext, paths: tuple[str, ...]) -> None:
    """PatchError naming the first c10/ATen construct a ported file still holds."""
    for path in paths:
        found = leftover(tree.read(path)) if tree.exists(path) else None
        if found is not None:
            msg = (
                f"patch {ID!r} cannot port {path} of upstream {ctx.version} to torch's stable "
                f"ABI: it still uses {found!r}, which this patch does not know; pin --ref to a "
                "release mambawin supports or build with --abi torch"
            )
            raise PatchError(msg)


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Port the kernel headers and every unit (split parts included) to torch::headeronly."""
    units = tuple(p for p in (*UNITS, *PARTS) if tree.exists(p))
    if UNITS[0] not in units:
        raise ctx.drift(UNITS[0], "template void selective_scan_fwd_cuda<float, float>")
    changed = [_port(tree, ctx, path, port) for path, port in HEADERS.items()]
    changed += [_port(tree, ctx, path, _port_unit) for path in units]
    _refuse_leftovers(tree, ctx, (*HEADERS, *units, *CLEAN))
    return "applied" if any(changed) else "already-applied"


PATCH = Patch(
    id=ID,
    summary="selective_scan kernels on torch::headeronly types and STD_CUDA_CHECK (--abi stable)",
    prevents=(
        '#error "This file should not be included when either TORCH_STABLE_ONLY or '
        'TORCH_TARGET_VERSION is defined." (c10/util/Half.h and every c10/ header)'
    ),
    versions=SUPPORTED,
    why=(
        "a stable-ABI library imports no c10/ATen symbol; torch::headeronly and "
        "torch/csrc/stable/macros.h hold the same types and checks (torch >= 2.10)"
    ),
    files=(COMMON, FWD, BWD, *UNITS, *PARTS),
    transform=transform,
    skip_reason=skip_reason,
)
