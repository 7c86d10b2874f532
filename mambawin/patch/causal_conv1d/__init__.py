"""causal-conv1d's patch set: one module per patch, ordered in patch/registry.py.

setup.py has the same shape as mamba's in every tag (arch block before `# HACK:`, `--threads 4`,
CachedWheelsCommand, a module-level `setup(`), so those four patches reuse mamba's transforms with
causal-conv1d's own versions and reasons. The kernels need what upstream PR #93 fixed in v1.6.1,
and every tag's SiLU backward needs a bounds fix (silu-bwd-tail); split-units splits the two
largest units so that they compile in parallel. With --abi stable (v1.5.0+), stable-kernels,
stable-shim, stable-functions, stable-binding and stable-setup port the extension to torch's
stable ABI (docs/stable-abi.md); stable_shapes.py holds what each version's binding exports.
"""

from mambawin.patch.causal_conv1d import (
    alt_tokens,
    arch_list,
    cached_wheels,
    compiler_flags,
    cuda_torch_check,
    nvcc_threads,
    rocm_directives,
    silu_bwd_tail,
    split_units,
    stable_binding,
    stable_functions,
    stable_kernels,
    stable_setup,
    stable_shim,
)

__all__ = [
    "alt_tokens",
    "arch_list",
    "cached_wheels",
    "compiler_flags",
    "cuda_torch_check",
    "nvcc_threads",
    "rocm_directives",
    "silu_bwd_tail",
    "split_units",
    "stable_binding",
    "stable_functions",
    "stable_kernels",
    "stable_setup",
    "stable_shim",
]
