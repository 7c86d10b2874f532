"""stable-shim: `causal_conv1d_cuda.py`, the module upstream's Python imports (--abi stable only).

Why: with --abi stable the compiled library is `causal_conv1d_cuda_stable` (abi.stable_library),
a plain shared library with no PyInit_ function, so `import causal_conv1d_cuda` (in
causal_conv1d_interface.py, cpp_functions.py, and mamba_ssm's selective_scan_interface.py) would
fail with "ModuleNotFoundError: No module named 'causal_conv1d_cuda'". This module takes that
name: it loads the library next to it with torch.ops.load_library, registers a fake (meta)
implementation of each op so torch.compile(fullgraph=True) can trace them, and binds upstream's
function names, with that version's signatures (stable_shapes.py), to torch.ops.causal_conv1d_cuda.
Upstream's Python runs unmodified. Upstream decided determinism inside the C++ backward
(CAUSAL_CONV1D_DETERMINISTIC, else torch.are_deterministic_algorithms_enabled()); the stable ABI
has no access to that global, so the same rule is evaluated here on each call and passed in.
"""

from __future__ import annotations

from mambawin.abi import stable_library, stable_shim
from mambawin.packages import CAUSAL_CONV1D
from mambawin.patch.base import Outcome, Patch, PatchContext, Tree, stable_only
from mambawin.patch.causal_conv1d.stable_shapes import CPP, BindingShape, mismatch, shape_of
from mambawin.patch.stable_loader import loader_source

ID = "stable-shim"
EXTENSION = "causal_conv1d_cuda"
SHIM = stable_shim(EXTENSION)
VERSIONS = CAUSAL_CONV1D.stable_versions

_HEAD = '''\
"""{extension}: upstream's extension module name, bound to the stable-ABI library {library}.

Written by mambawin's stable-shim patch (`mambawin build --abi stable`, upstream binding shape
"{shape}"). The library holds no Python C API: torch.ops.load_library loads it and its
STABLE_TORCH_LIBRARY block registers torch.ops.{extension}.*; the functions below keep the
names and signatures upstream's pybind11 module exported, so upstream's Python runs unchanged.
"""

import os

import torch

{loader}_ops = torch.ops.{extension}


def _writes_its_arguments(*args, **kwargs):
    # Every op writes into arguments its schema marks (a!) and returns nothing: under FakeTensor
    # (torch.compile's tracing) there is nothing to compute.
    return None


for _op in ("causal_conv1d_fwd", "causal_conv1d_bwd", "causal_conv1d_update"):
    torch.library.register_fake("{extension}::" + _op)(_writes_its_arguments)
del _op

# The overloads themselves: calling one skips the packet's overload lookup on every call, which
# eager decoding (one causal_conv1d_update per layer and token) pays.
_FWD = _ops.causal_conv1d_fwd.default
_BWD = _ops.causal_conv1d_bwd.default
_UPDATE = _ops.causal_conv1d_update.default
'''

_DETERMINISTIC = """

def _deterministic():
    # Upstream's rule (v1.6.0+ binding): CAUSAL_CONV1D_DETERMINISTIC starting with 1 or 0 wins,
    # else torch.use_deterministic_algorithms decides.
    flag = os.environ.get("CAUSAL_CONV1D_DETERMINISTIC", "")
    if flag[:1] in ("0", "1"):
        return flag[:1] == "1"
    return torch.are_deterministic_algorithms_enabled()
"""

_OUT = """

def causal_conv1d_fwd(x, weight, bias, seq_idx, initial_states, out, final_states_out,
                      silu_activation):
    _FWD(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu_activation)


def causal_conv1d_bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight,
                      dbias, dinitial_states, silu_activation):
    _BWD(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias,
         dinitial_states, silu_activation{determinism})


def causal_conv1d_update(x, conv_state, weight, bias, out, silu_activation, cache_seqlens,
                         conv_state_indices):
    _UPDATE(x, conv_state, weight, bias, out, silu_activation, cache_seqlens, conv_state_indices)


# cpp_functions.py's three functions (v1.5.1+; its stable-functions patch imports these in place
# of its own). Upstream wraps each call in a torch.library.custom_op whose argument is named
# `out`, and torch.compile refuses an `out=` tensor that is not contiguous (mamba's x is a
# channel-major slice of xz): a graph break at every conv. Here the caller's allocations are the
# same and the op is called positionally; its schema marks what it writes (a!), so the compiled
# graph functionalizes it, and eager skips the custom_op layer.
"""

# The functions that allocate what the kernels write, as upstream's Python or binding did; named
# causal_conv1d_*_function for cpp_functions.py (v1.5.1+), plain for the v1.5.0.x binding's own
# names, which allocated its outputs in C++ and returned the backward's results as a list.
_ALLOCATING = """

def causal_conv1d_fwd{suffix}(x, weight, bias, seq_idx, initial_states, final_states_out,
                      silu_activation):
    out = torch.empty_like(x)
    _FWD(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu_activation)
    return out


def causal_conv1d_bwd{suffix}(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx,
                      return_dinitial_states, silu_activation):
    if dx is None:
        dx = torch.empty_like(x)
    # Accumulated in float32 by the kernels, returned in the weight's dtype.
    dweight = torch.zeros_like(weight, dtype=torch.float32)
    dbias = None if bias is None else torch.zeros_like(bias, dtype=torch.float32)
    dinitial_states = None
    if return_dinitial_states:
        batch, dim, width = x.size(0), x.size(1), weight.size(-1)
        dinitial_states = torch.empty(
            batch, width - 1, dim, device=x.device, dtype=x.dtype
        ).transpose(1, 2)
    _BWD(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias,
         dinitial_states, silu_activation{determinism})
    dweight = dweight.type_as(weight)
    if dbias is not None:
        dbias = dbias.type_as(bias)
    return {results}


def causal_conv1d_update{suffix}(x, conv_state, weight, bias, silu_activation, cache_seqlens,
                         conv_state_indices):
    out = torch.empty_like(x)
    _UPDATE(x, conv_state, weight, bias, out, silu_activation, cache_seqlens, conv_state_indices)
    return out
"""


def shim_text(shape: BindingShape) -> str:
    """The shim module for a binding shape."""
    head = _HEAD.format(
        extension=EXTENSION,
        library=stable_library(EXTENSION),
        shape=shape.name,
        loader=loader_source(EXTENSION, "causal-conv1d"),
    )
    if shape.returns_outputs:
        results = "[dx, dweight, dbias, dinitial_states]"
        return head + _ALLOCATING.format(suffix="", determinism="", results=results)
    determinism = ", _deterministic()" if shape.deterministic else ""
    functions = _ALLOCATING.format(
        suffix="_function", determinism=determinism, results="dx, dweight, dbias, dinitial_states"
    )
    deterministic = _DETERMINISTIC if shape.deterministic else ""
    return head + deterministic + _OUT.format(determinism=determinism) + functions


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Write causal_conv1d_cuda.py at the tree's root for the binding's shape."""
    if not tree.exists(CPP):
        raise ctx.drift(CPP, "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)")
    binding = tree.read(CPP)
    shape = shape_of(binding)
    if shape is None:
        raise ctx.drift(CPP, mismatch(binding))
    text = shim_text(shape)
    if tree.exists(SHIM) and tree.read(SHIM) == text:
        return "already-applied"
    tree.write(SHIM, text)
    return "applied"


PATCH = Patch(
    id=ID,
    summary="causal_conv1d_cuda.py: loads the stable library, binds upstream's names to its ops",
    prevents="ModuleNotFoundError: No module named 'causal_conv1d_cuda' (the stable build's "
    "library is causal_conv1d_cuda_stable, loaded by torch.ops.load_library)",
    versions=VERSIONS,
    why="a stable-ABI library has no PyInit_; upstream's Python imports causal_conv1d_cuda "
    "and calls its functions by name",
    files=(SHIM,),
    transform=transform,
    skip_reason=stable_only,
)
