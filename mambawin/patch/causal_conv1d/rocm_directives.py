"""rocm-directives: no `#ifndef USE_ROCM` inside BOOL_SWITCH's macro argument in the launchers.

Why: from v1.3.0 to v1.6.0 the fwd and bwd launchers choose between the CUDA and the HIP call of
cudaFuncSetAttribute with `#ifndef USE_ROCM ... #else ... #endif` *inside* the lambda passed to
BOOL_SWITCH, i.e. inside a macro argument. That is undefined behaviour (C++ [cpp.replace]/11):
gcc accepts it, MSVC's preprocessor (cl.exe, which nvcc runs for the host pass on Windows) does
not. No Windows log of this is recorded here; the evidence is upstream's fix and flash-attention
PR #1698 hitting the same limit. Upstream PR #93 (fcf8672, first in v1.6.1) replaced the
directives with a `ROCM_ONLY(x)` macro; this patch produces the same code: for CUDA the HIP-only
cast and warning expand to nothing, so the compiled kernels and launch calls are unchanged.
"""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet

from mambawin.patch.base import Outcome, Patch, PatchContext, Tree, find_line

FWD = "csrc/causal_conv1d_fwd.cu"
BWD = "csrc/causal_conv1d_bwd.cu"
MARKER = "// mambawin rocm-directives:"
INCLUDE = re.compile(r'^#include "static_switch\.h"[ \t]*$', re.MULTILINE)
ANCHOR = "#ifndef USE_ROCM\n    C10_CUDA_CHECK(cudaFuncSetAttribute(\n        kernel, ..."
DEFINE = (
    f"{MARKER} ROCM_ONLY(x) replaces #ifndef USE_ROCM inside BOOL_SWITCH's\n"
    "// macro argument (undefined behaviour that MSVC rejects); causal-conv1d PR #93.\n"
    "#ifndef ROCM_ONLY\n#ifdef USE_ROCM\n#define ROCM_ONLY(x) x\n#else\n"
    "#define ROCM_ONLY(x)\n#endif\n#endif"
)
# The CUDA branch, `#else`, the HIP branch (optional comment, the cast call, a warning), `#endif`.
_BLOCK = re.compile(
    r"^(?P<indent>[ \t]+)#ifndef USE_ROCM[ \t]*\n"
    r"[ \t]*C10_CUDA_CHECK\(cudaFuncSetAttribute\([ \t]*\n"
    r"[ \t]*kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemSize\)\);[ \t]*\n"
    r"[ \t]*#else[ \t]*\n"
    r"(?P<comment>[ \t]*//[^\n]*\n)?"
    r"(?P<call>[ \t]*C10_CUDA_CHECK\(cudaFuncSetAttribute\([ \t]*\n)"
    r"(?P<args>[ \t]*)\(void \*\) ?kernel, "
    r"cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemSize\)\);[ \t]*\n"
    r"(?P<warn_indent>[ \t]*)(?P<warn>std::cerr << [^\n]*);[ \t]*\n"
    r"[ \t]*#endif[ \t]*\n",
    re.MULTILINE,
)
_NESTED = re.compile(r"^[ \t]+#(ifndef|ifdef|if|else|endif)\b", re.MULTILINE)


def _replacement(match: re.Match[str]) -> str:
    return (
        f"{match['indent']}{MARKER} HIP-only code through ROCM_ONLY (PR #93)\n"
        f"{match['comment'] or ''}{match['call']}"
        f"{match['args']}ROCM_ONLY((void *)) kernel, "
        "cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemSize));\n"
        f"{match['warn_indent']}ROCM_ONLY({match['warn']});\n"
    )


def _rewrite(tree: Tree, ctx: PatchContext, path: str) -> bool:
    """Rewrite one launcher file; False when it is already free of nested directives."""
    if not tree.exists(path):
        raise ctx.drift(path, ANCHOR)
    text = tree.read(path)
    new, count = _BLOCK.subn(_replacement, text)
    if count == 0:
        if "ROCM_ONLY((void *)) kernel" in text and not _NESTED.search(text):
            return False
        raise ctx.drift(path, ANCHOR)
    if _NESTED.search(new):  # a directive of a shape this patch does not know is left over
        raise ctx.drift(path, ANCHOR)
    include = find_line(new, INCLUDE)
    if include is None:
        raise ctx.drift(path, '#include "static_switch.h"')
    tree.write(path, f"{new[: include.end()]}\n{DEFINE}{new[include.end() :]}")
    return True


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Replace the nested directives in both launcher files and define ROCM_ONLY there."""
    changed = [_rewrite(tree, ctx, path) for path in (FWD, BWD)]
    return "applied" if any(changed) else "already-applied"


PATCH = Patch(
    id="rocm-directives",
    summary="fwd/bwd launchers: ROCM_ONLY(x) instead of #ifndef USE_ROCM inside BOOL_SWITCH",
    prevents="MSVC preprocessor errors on #ifndef USE_ROCM / #else / #endif inside the "
    "BOOL_SWITCH(...) macro argument of causal_conv1d_{fwd,bwd}_launch",
    versions=SpecifierSet(">=1.3.0,<1.6.1"),
    why="directives inside macro arguments are undefined behaviour and MSVC rejects them; "
    "causal-conv1d PR #93 (fcf8672, v1.6.1) introduced ROCM_ONLY",
    files=(FWD, BWD),
    transform=transform,
)
