"""stable-kernels: the CUDA sources use torch's header-only types and stable checks (--abi stable).

Why: the three .cu files include <c10/util/Half.h>, <c10/util/BFloat16.h> and
<c10/cuda/CUDAException.h>, name their template arguments at::Half / at::BFloat16 and check
launches with C10_CUDA_CHECK / C10_CUDA_KERNEL_LAUNCH_CHECK, which call c10::cuda's C++ functions:
a stable-ABI library would still import c10 C++ symbols ("undefined symbol:
_ZN3c104cuda29c10_cuda_check_implementation...") and fit one torch only. torch 2.10+ ships the
same types header-only (torch/headeronly/util/{Half,BFloat16}.h, torch::headeronly::Half is the
type c10::Half aliases, so the kernels are unchanged) and STD_CUDA_CHECK /
STD_CUDA_KERNEL_LAUNCH_CHECK (torch/csrc/stable/macros.h) over the stable C shim. Every tag from
v1.5.0 has exactly these three includes and spellings; anything else left over is drift.
Runs after rocm-directives, which anchors on the C10_CUDA_CHECK lines it rewrites.
"""

from __future__ import annotations

import re

from mambawin.packages import CAUSAL_CONV1D
from mambawin.patch.base import Outcome, Patch, PatchContext, Tree, stable_only

ID = "stable-kernels"
SOURCES = ("csrc/causal_conv1d_fwd.cu", "csrc/causal_conv1d_bwd.cu", "csrc/causal_conv1d_update.cu")
CHECK_INCLUDE = (
    "#include <c10/cuda/CUDAException.h>  // For C10_CUDA_CHECK and C10_CUDA_KERNEL_LAUNCH_CHECK"
)
INCLUDES = (
    ("#include <c10/util/BFloat16.h>", "#include <torch/headeronly/util/BFloat16.h>"),
    ("#include <c10/util/Half.h>", "#include <torch/headeronly/util/Half.h>"),
    (
        CHECK_INCLUDE,
        f"#include <torch/csrc/stable/macros.h>  // mambawin {ID}: STD_CUDA_CHECK, "
        "STD_CUDA_KERNEL_LAUNCH_CHECK",
    ),
)
SPELLINGS = (
    (re.compile(r"\bC10_CUDA_KERNEL_LAUNCH_CHECK\(\)"), "STD_CUDA_KERNEL_LAUNCH_CHECK()"),
    (re.compile(r"\bC10_CUDA_CHECK\("), "STD_CUDA_CHECK("),
    (re.compile(r"\bat::Half\b"), "torch::headeronly::Half"),
    (re.compile(r"\bat::BFloat16\b"), "torch::headeronly::BFloat16"),
)
# What must be gone afterwards: any c10/ATen include or C++ name from torch's unstable ABI.
LEFTOVER = re.compile(r"#include <(?:c10|ATen|torch/extension)|\bat::|\bc10::|\bC10_[A-Z_]+\(")


def _port(tree: Tree, ctx: PatchContext, path: str) -> bool:
    """Port one source; False when it is already ported."""
    if not tree.exists(path):
        raise ctx.drift(path, CHECK_INCLUDE)
    text = tree.read(path)
    if f"mambawin {ID}:" in text and LEFTOVER.search(text) is None:
        return False
    new = text
    for old, replacement in INCLUDES:
        if new.count(old) != 1:
            raise ctx.drift(path, old)
        new = new.replace(old, replacement)
    for pattern, replacement in SPELLINGS:
        new = pattern.sub(replacement, new)
    leftover = LEFTOVER.search(new)
    if leftover is not None:  # a torch C++ name this patch does not know how to port
        line = new[new.rfind("\n", 0, leftover.start()) + 1 : new.find("\n", leftover.start())]
        raise ctx.drift(path, f"nothing from c10/ATen beyond {CHECK_INCLUDE} (found {line!r})")
    tree.write(path, new)
    return True


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Port the three kernel sources."""
    changed = [_port(tree, ctx, path) for path in SOURCES]
    return "applied" if any(changed) else "already-applied"


PATCH = Patch(
    id=ID,
    summary="kernels on torch::headeronly Half/BFloat16 and STD_CUDA_CHECK (no c10/ATen)",
    prevents="undefined symbol _ZN3c104cuda29c10_cuda_check_implementation... from a stable "
    "build's kernels under another torch",
    versions=CAUSAL_CONV1D.stable_versions,
    why="c10's CUDA checks are C++ functions of one torch; torch 2.10+ has header-only types "
    "and STD_CUDA_CHECK on the stable C shim (causal-conv1d PR #102 uses the same)",
    files=SOURCES,
    transform=transform,
    skip_reason=stable_only,
)
