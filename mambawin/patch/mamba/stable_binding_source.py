"""The text of mambawin's selective_scan.cpp for a stable-ABI build (patch stable-binding).

Written for mambawin from the two functions' signatures and the SSMParamsBase/SSMParamsBwd fields
in upstream's selective_scan.h; upstream's binding text is not reused. The schemas are the single
source of truth for the ops' signatures: the binding registers them and the shim's fakes follow
them (tests/test_patches_stable_mamba.py checks both against each other).
"""

from __future__ import annotations

from mambawin.abi import stable_library
from mambawin.patch.base import read_template

EXTENSION = "selective_scan_cuda"  # upstream's module name, the ops' namespace (mambawin.abi)
LIBRARY = stable_library(EXTENSION)
# Upstream's fwd returns [out, x] (+ out_z with z): a list whose length depends on z only.
FWD_SCHEMA = (
    "fwd(Tensor u, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor? z, "
    "Tensor? delta_bias, bool delta_softplus) -> Tensor[]"
)
# bwd writes into a caller's dz (mamba_inner_fn passes a slice of its dxz buffer), so dz is
# `(a!)`. torch.compile functionalizes a mutating op only when it returns plain Tensors (no list,
# no optional), so bwd returns nine: du, ddelta, dA, dB, dC, dD, ddelta_bias, dz, out_z, where an
# output the call does not produce (no D, no delta_bias, the caller's own dz, no recompute_out_z)
# is a 0-element tensor. None aliases an input. The shim rebuilds upstream's list from them.
BWD_SCHEMA = (
    "bwd(Tensor u, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor? z, "
    "Tensor? delta_bias, Tensor dout, Tensor? x, Tensor? out, Tensor(a!)? dz, "
    "bool delta_softplus, bool recompute_out_z) -> "
    "(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)"
)
MARK = "// mambawin stable-binding:"
# What a complex A gets, from the binding and, first, from the shim (stable_shim.py says why).
NO_COMPLEX = (
    "complex weights (A) are not supported by this build: its kernels are float-only "
    "(mambawin patches complex-removal and stable-binding; --keep-complex needs --abi torch)"
)
# The C++ itself is data/selective_scan_stable.cpp.in (package data), its @NAME@ slots filled here.
SOURCE = (
    read_template(__package__, "selective_scan_stable.cpp.in")
    .replace("@MARK@", MARK)
    .replace("@FWD_SCHEMA@", FWD_SCHEMA)
    .replace("@BWD_SCHEMA@", BWD_SCHEMA)
    .replace("@NO_COMPLEX@", NO_COMPLEX)
)
