"""stable-shim: a Python module `selective_scan_cuda` that loads the stable-ABI library.

Why: upstream's Python does `import selective_scan_cuda` and calls `selective_scan_cuda.fwd(...)`
and `.bwd(...)` (mamba_ssm/ops/selective_scan_interface.py, every tag). In a stable-ABI build that
name is no extension module any more (an extension module would import CPython), so this patch
writes `selective_scan_cuda.py` at the tree root (the setup.py patch packages it with py_modules).
It loads `selective_scan_cuda_stable*` beside it with torch.ops.load_library, keeps fwd/bwd with
upstream's positional signatures and return lists, and registers a fake kernel per op so
torch.compile(fullgraph=True) traces selective_scan_fn without running CUDA.

The anchor is upstream's Python: the module must still be imported under that name and called
with the argument lists the shim keeps; anything else is drift.
"""

from __future__ import annotations

from mambawin.abi import stable_shim
from mambawin.patch.base import Outcome, Patch, PatchContext, Tree
from mambawin.patch.mamba.stable import SUPPORTED, skip_reason
from mambawin.patch.mamba.stable_binding_source import EXTENSION, LIBRARY, NO_COMPLEX
from mambawin.patch.stable_loader import loader_source

ID = "stable-shim"
SHIM = stable_shim(EXTENSION)
INTERFACE = "mamba_ssm/ops/selective_scan_interface.py"
# What upstream's Python relies on (every supported tag): the import and the positional calls.
ANCHORS = (
    f"import {EXTENSION}",
    f"{EXTENSION}.fwd(u, delta, A, B, C, D, z, delta_bias, delta_softplus)",
    f"{EXTENSION}.bwd(",
)

LOADER = loader_source(EXTENSION, "mamba-ssm")
SOURCE = f'''"""{EXTENSION}: mamba-ssm's selective-scan kernels on torch's stable C ABI.

Written by mambawin (patch {ID}). The kernels live in {LIBRARY}*, a plain shared
library beside this file that registers torch.ops.{EXTENSION}.fwd and .bwd when it is
loaded; it imports no CPython and no libtorch C++ symbol, so one build serves every Python and
every torch from 2.10 on. fwd() and bwd() keep upstream's signatures and return lists, so
mamba_ssm runs unmodified; the fake kernels let torch.compile trace both ops.
"""

from __future__ import annotations

import os

import torch

_OPS = "{EXTENSION}"
_CHUNK = 2048  # sequence positions per saved scan state: x has ceil(seqlen / 2048) chunks


{LOADER}

# The overloads themselves: calling one skips the packet's overload lookup on every call.
_FWD = torch.ops.{EXTENSION}.fwd.default
_BWD = torch.ops.{EXTENSION}.bwd.default


def _warm_einops():
    """Fill einops' backend cache for the tensor types a model hands it, before any trace.

    einops caches the backend of each tensor type on first use (`_type2backend[type] = ...`, a
    write to a module-level dict). The first rearrange torch.compile meets inside an
    autograd.Function's forward (mamba_inner_fn's `rearrange(conv1d_weight, "d 1 w -> d w")`, a
    Parameter) is then a side effect, and dynamo drops every saved tensor that aliases an input
    (that weight, `conv1d_bias.contiguous()`), so tracing the backward fails ("An intermediate
    tensor ... aliases an input or output"). Once the cache is warm there is no side effect."""
    try:
        import einops
    except ImportError:  # upstream's requirement; its own import reports it
        return
    for tensor in (torch.empty(1), torch.nn.Parameter(torch.empty(1), requires_grad=False)):
        einops.rearrange(tensor, "n -> n")


_warm_einops()


def _float_weights(A, op):
    """A complex A is refused here, before the op: an exception thrown inside a stable-ABI
    kernel took the whole process down (SIGSEGV, torch 2.11 on an H100) instead of raising."""
    if A.is_complex():
        raise RuntimeError(f"{{op}}: {NO_COMPLEX}")


def fwd(u, delta, A, B, C, D_, z_, delta_bias_, delta_softplus):
    """Selective scan forward: [out, x], and out_z after them when z_ is given."""
    _float_weights(A, "selective_scan_fwd")
    return _FWD(u, delta, A, B, C, D_, z_, delta_bias_, delta_softplus)


def bwd(u, delta, A, B, C, D_, z_, delta_bias_, dout, x_, out_, dz_, delta_softplus,
        recompute_out_z):
    """Selective scan backward, as upstream returns it.

    [du, ddelta, dA, dB, dC, dD, ddelta_bias] (dD, ddelta_bias: None without D, delta_bias),
    then dz with z_ (the caller's dz_, written in place, when given), then out_z with
    recompute_out_z (None without z_). The op returns nine tensors, 0-element where it has none.
    """
    du, ddelta, dA, dB, dC, dD, ddelta_bias, dz, out_z = _BWD(
        u, delta, A, B, C, D_, z_, delta_bias_, dout, x_, out_, dz_, delta_softplus,
        recompute_out_z)
    result = [du, ddelta, dA, dB, dC]
    result.append(dD if D_ is not None else None)
    result.append(ddelta_bias if delta_bias_ is not None else None)
    if z_ is not None:
        result.append(dz_ if dz_ is not None else dz)
    if recompute_out_z:
        result.append(out_z if z_ is not None else None)
    return result


@torch.library.register_fake(_OPS + "::fwd")
def _fwd_fake(u, delta, A, B, C, D, z, delta_bias, delta_softplus):
    batch, dim, seqlen = u.shape
    n_chunks = (seqlen + _CHUNK - 1) // _CHUNK
    outs = [
        torch.empty_like(delta),
        u.new_empty((batch, dim, n_chunks, 2 * A.shape[1]), dtype=A.dtype),
    ]
    if z is not None:
        outs.append(torch.empty_like(z))
    return outs


@torch.library.register_fake(_OPS + "::bwd")
def _bwd_fake(u, delta, A, B, C, D, z, delta_bias, dout, x, out, dz, delta_softplus,
              recompute_out_z):
    # The binding's allocations: empty_like keeps layouts; a time-variant dB/dC is made
    # contiguous (float32, then cast to B's/C's dtype); an output it has none of: 0 elements.
    def none():
        return u.new_empty((0,))

    outs = [torch.empty_like(u), torch.empty_like(delta), torch.empty_like(A)]
    outs += [t.new_empty(t.shape) if t.dim() >= 3 else torch.empty_like(t) for t in (B, C)]
    outs += [torch.empty_like(t) if t is not None else none() for t in (D, delta_bias)]
    with_z = z is not None
    outs.append(torch.empty_like(z) if with_z and dz is None else none())
    outs.append(torch.empty_like(out) if with_z and recompute_out_z else none())
    return tuple(outs)
'''


def _check_interface(tree: Tree, ctx: PatchContext) -> None:
    """Drift unless upstream's Python imports the module and calls it as the shim expects."""
    if not tree.exists(INTERFACE):
        raise ctx.drift(INTERFACE, ANCHORS[0])
    text = tree.read(INTERFACE)
    for anchor in ANCHORS:
        if anchor not in text:
            raise ctx.drift(INTERFACE, anchor)


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Write selective_scan_cuda.py at the tree root (anchored on upstream's Python)."""
    _check_interface(tree, ctx)
    if tree.exists(SHIM) and tree.read(SHIM) == SOURCE:
        return "already-applied"
    tree.write(SHIM, SOURCE)
    return "applied"


PATCH = Patch(
    id=ID,
    summary="selective_scan_cuda.py: loads the stable library, keeps fwd/bwd, fakes for compile",
    prevents=(
        "ModuleNotFoundError: No module named 'selective_scan_cuda' (the stable build ships a "
        "library, not an extension module), and torch.compile graph breaks on the ops"
    ),
    versions=SUPPORTED,
    why="upstream's mamba_ssm imports selective_scan_cuda and must run unmodified",
    files=(SHIM,),
    transform=transform,
    skip_reason=skip_reason,
)
