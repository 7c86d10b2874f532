"""stable-binding: selective_scan.cpp becomes mambawin's own binding on torch's stable C ABI.

Why: upstream's binding is a pybind11 module over at::Tensor (`#include <torch/python.h>`,
`PYBIND11_MODULE`), so its binary imports CPython and libtorch's C++ symbols and fits one Python
and one torch minor. Editing it line by line would touch nearly every line, so the file is
replaced by our own code (stable_binding_source.SOURCE): the same two functions, `fwd` and `bwd`,
registered as torch ops `selective_scan_cuda::fwd/bwd` with STABLE_TORCH_LIBRARY, their checks,
allocations (torch::stable::empty_like/new_empty/new_zeros/zero_), device guard and current stream
from the stable shims, and no pybind11 or Python.h.

Before it writes, the transform checks that upstream's binding is the one it replaces: exactly two
`m.def` entries, `fwd` and `bwd`, with the argument lists the schemas mirror, the kernel entry
points it calls, and every SSMParams field it sets; anything else is drift. Its version range is
wider than the stable ports' (all of mamba-ssm) so that an older tag built with --abi stable, or
--keep-complex with --abi stable, stops with a one-line reason instead of a torch-ABI binding.
"""

from __future__ import annotations

import re

from mambawin.patch.base import Outcome, Patch, PatchContext, Tree
from mambawin.patch.mamba.stable import KERNELS, SUPPORTED, refuse_keep_complex, skip_reason
from mambawin.patch.mamba.stable_binding_source import MARK, SOURCE

ID = "stable-binding"
CPP = f"{KERNELS}/selective_scan.cpp"
PARAMS = f"{KERNELS}/selective_scan.h"
_OPTIONAL = "const c10::optional<at::Tensor> &"
_TENSOR = "const at::Tensor &"
# Upstream's two functions as pybind11 exposes them (v2.2.3 to main; whitespace normalised).
FWD_SIGNATURE = (
    f"std::vector<at::Tensor> selective_scan_fwd({_TENSOR}u, {_TENSOR}delta, {_TENSOR}A, "
    f"{_TENSOR}B, {_TENSOR}C, {_OPTIONAL}D_, {_OPTIONAL}z_, {_OPTIONAL}delta_bias_, "
    "bool delta_softplus)"
)
BWD_SIGNATURE = (
    f"std::vector<at::Tensor> selective_scan_bwd({_TENSOR}u, {_TENSOR}delta, {_TENSOR}A, "
    f"{_TENSOR}B, {_TENSOR}C, {_OPTIONAL}D_, {_OPTIONAL}z_, {_OPTIONAL}delta_bias_, "
    f"{_TENSOR}dout, {_OPTIONAL}x_, {_OPTIONAL}out_, c10::optional<at::Tensor> &dz_, "
    "bool delta_softplus, bool recompute_out_z)"
)
MODULE_DEFS = ('m.def("fwd", &selective_scan_fwd,', 'm.def("bwd", &selective_scan_bwd,')
# Every SSMParamsBase/SSMParamsBwd field the binding assigns (`p.NAME =`, `params.NAME =`).
ASSIGNED_FIELDS = tuple(sorted(set(re.findall(r"\b(?:p|params)\.(\w+) =", SOURCE))))
ENTRY_POINTS = (
    "void selective_scan_fwd_cuda(SSMParamsBase &params, cudaStream_t stream);",
    "void selective_scan_bwd_cuda(SSMParamsBwd &params, cudaStream_t stream);",
)


def normalise(code: str) -> str:
    """code with whitespace runs as one space and none around ( ) , & (signatures compare)."""
    return re.sub(r"\s*([(),&])\s*", r"\1", re.sub(r"\s+", " ", code)).strip()


def check_upstream_binding(text: str, ctx: PatchContext) -> None:
    """Drift unless text declares exactly upstream's fwd and bwd, as the replacement expects."""
    flat = normalise(text)
    for anchor in (FWD_SIGNATURE, BWD_SIGNATURE, *ENTRY_POINTS, *MODULE_DEFS):
        if normalise(anchor) not in flat:
            raise ctx.drift(CPP, anchor)
    if text.count("m.def(") != len(MODULE_DEFS):
        raise ctx.drift(CPP, "PYBIND11_MODULE(...) { " + " ".join(MODULE_DEFS) + " }")


def check_params(tree: Tree, ctx: PatchContext) -> None:
    """Drift unless selective_scan.h declares every SSMParams field the binding assigns."""
    if not tree.exists(PARAMS):
        raise ctx.drift(PARAMS, "struct SSMParamsBwd: public SSMParamsBase {")
    declared = set(re.findall(r"\w+", tree.read(PARAMS)))
    for field in ASSIGNED_FIELDS:
        if field not in declared:
            raise ctx.drift(PARAMS, f"index_t {field};")


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Replace upstream's pybind11 binding with the stable-ABI one (anchors checked first)."""
    refuse_keep_complex(ctx)
    if not tree.exists(CPP):
        raise ctx.drift(CPP, FWD_SIGNATURE)
    text = tree.read(CPP)
    if text == SOURCE:
        return "already-applied"
    if MARK not in text:  # an older mambawin's binding is replaced without upstream's anchors
        check_upstream_binding(text, ctx)
    check_params(tree, ctx)
    tree.write(CPP, SOURCE)
    return "applied"


PATCH = Patch(
    id=ID,
    summary="selective_scan.cpp: our own STABLE_TORCH_LIBRARY binding of fwd/bwd (--abi stable)",
    prevents=(
        "a binary that imports CPython (PyInit_selective_scan_cuda, pybind11) and libtorch's "
        "C++ symbols, so it fits one Python and one torch minor"
    ),
    versions=SUPPORTED,
    why=(
        "upstream's own port is unmerged (state-spaces/mamba PR #1042); "
        "causal-conv1d PR #102 ports its binding the same way"
    ),
    files=(CPP,),
    transform=transform,
    skip_reason=skip_reason,
)
