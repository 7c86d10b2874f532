"""math-defines: M_LOG2E is defined for MSVC in both selective_scan kernel headers.

Why: the kernels read `constexpr float kLog2e = M_LOG2E;`, a POSIX constant that MSVC's <cmath>
only defines under _USE_MATH_DEFINES, so nvcc on Windows stops with
    error: identifier "M_LOG2E" is undefined
(the same class of failure as flash-attention's softmax.h, mistral.rs#941). mamba's unmerged
PR #846 adds the same `#ifndef` guard. The value is glibc's spelling, so a later <math.h> on Linux
redefines it identically and stays silent.
"""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet

from mambawin.patch.base import Outcome, Patch, PatchContext, Tree, find_line

KERNELS = "csrc/selective_scan"
HEADERS = (f"{KERNELS}/selective_scan_fwd_kernel.cuh", f"{KERNELS}/selective_scan_bwd_kernel.cuh")

ANCHOR = "#pragma once"
_ANCHOR = re.compile(r"^#pragma once[ \t]*$", re.MULTILINE)
_GUARDED = re.compile(r"^#ifndef M_LOG2E[ \t]*$", re.MULTILINE)
GUARD = (
    "// mambawin math-defines: MSVC defines M_LOG2E only with _USE_MATH_DEFINES "
    '(error: identifier "M_LOG2E" is undefined).\n'
    "#ifndef M_LOG2E\n#define M_LOG2E 1.4426950408889634074\n#endif"
)


def _guard_header(tree: Tree, ctx: PatchContext, path: str) -> bool:
    """Insert the guard after `#pragma once`; False when the header already has one."""
    if not tree.exists(path):
        raise ctx.drift(path, ANCHOR)
    text = tree.read(path)
    if find_line(text, _GUARDED):
        return False
    anchor = find_line(text, _ANCHOR)
    if anchor is None:
        raise ctx.drift(path, ANCHOR)
    tree.write(path, f"{text[: anchor.end()]}\n\n{GUARD}{text[anchor.end() :]}")
    return True


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Guard-define M_LOG2E in both kernel headers."""
    changed = [_guard_header(tree, ctx, path) for path in HEADERS]
    return "applied" if any(changed) else "already-applied"


PATCH = Patch(
    id="math-defines",
    summary="#ifndef-guarded M_LOG2E in both selective_scan kernel headers",
    prevents='error: identifier "M_LOG2E" is undefined',
    versions=SpecifierSet(">=1.0.0"),
    why=(
        "MSVC's <cmath> hides M_LOG2E without _USE_MATH_DEFINES; same guard as mamba PR #846 "
        "(mistral.rs#941 shows the nvcc error text)"
    ),
    files=HEADERS,
    transform=transform,
)
