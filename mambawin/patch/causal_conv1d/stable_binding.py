"""stable-binding: csrc/causal_conv1d.cpp on torch's stable C ABI (--abi stable only).

Why: upstream's binding is a pybind11 module on torch's C++ ABI (at::Tensor, c10::optional,
at::cuda::getCurrentCUDAStream, at::globalContext), so its wheel loads in exactly one torch minor
and one CPython ("undefined symbol: _ZN3c10..." / "DLL load failed while importing
causal_conv1d_cuda: The specified procedure could not be found" under any other). The stable
ABI's ops (torch/csrc/stable, STABLE_TORCH_LIBRARY) keep working in every later torch and hold no
Python C API (mambawin/abi.py). Upstream PR #102 (unmerged) ports it the same way; this file is
mambawin's own code (stable_binding_cpp.py), written from the ops' signatures.

The whole file is replaced, so the patch first checks that upstream's binding exports exactly the
functions and signatures the replacement implements for that version (stable_shapes.py); a binding
of any other shape is drift.
"""

from __future__ import annotations

from mambawin.packages import CAUSAL_CONV1D
from mambawin.patch.base import Outcome, Patch, PatchContext, Tree, stable_only
from mambawin.patch.causal_conv1d.stable_binding_cpp import binding
from mambawin.patch.causal_conv1d.stable_shapes import CPP, SHAPE_MARK, mismatch, shape_of

ID = "stable-binding"
NAMESPACE = "causal_conv1d_cuda"  # upstream's extension name: the ops are torch.ops.<it>.*
VERSIONS = CAUSAL_CONV1D.stable_versions


def stable_text(shape_name: str, *, deterministic: bool) -> str:
    """Our binding for a shape, its first line naming the shape (stable-shim reads it back)."""
    return f"{SHAPE_MARK} {shape_name}\n" + binding(NAMESPACE, deterministic=deterministic)


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Replace upstream's pybind11 binding with the stable one for its shape."""
    if not tree.exists(CPP):
        raise ctx.drift(CPP, "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)")
    text = tree.read(CPP)
    shape = shape_of(text)
    if shape is None:
        raise ctx.drift(CPP, mismatch(text))
    new = stable_text(shape.name, deterministic=shape.deterministic)
    if new == text:
        return "already-applied"
    tree.write(CPP, new)
    return "applied"


PATCH = Patch(
    id=ID,
    summary="causal_conv1d.cpp on torch's stable ABI: STABLE_TORCH_LIBRARY ops, no pybind11/Python",
    prevents="undefined symbol _ZN3c10... / DLL load failed while importing causal_conv1d_cuda "
    "under any torch or CPython but the one the wheel was built with",
    versions=VERSIONS,
    why="torch's stable ABI (torch/csrc/stable) survives torch upgrades; causal-conv1d PR #102 "
    "(unmerged) ports the binding the same way",
    files=(CPP,),
    transform=transform,
    skip_reason=stable_only,
)
