"""arch-list for causal-conv1d: mamba's transform, since setup.py's arch block has the same shape.

Why: every tag hard-codes its `-gencode` pairs (70/80/90 up to v1.2.0.post2; 53..90 to v1.5.2,
then 62..121 behind nvcc-version checks) and never reads TORCH_CUDA_ARCH_LIST, so torch's own arch
flags are dropped too. nvcc 13 rejects the sm_53..72 entries of v1.0.0..v1.5.2 ("nvcc fatal:
Unsupported gpu architecture 'compute_53'"); v1.5.3+ builds 11 archs (sm_75..sm_121) for a GPU
that runs one. The `# HACK: The compiler flag -D_GLIBCXX_USE_CXX11_ABI` line follows the arch
block at 4-space indent in every tag, as in mamba, so the same anchor and block apply.
"""

from __future__ import annotations

from dataclasses import replace

from packaging.specifiers import SpecifierSet

from mambawin.patch.setup_py import arch_list as shared

PATCH = replace(
    shared.PATCH,
    prevents="nvcc fatal: Unsupported gpu architecture 'compute_53' (nvcc 13, v1.0.0..v1.5.2), "
    "and 11 archs compiled (v1.5.3+) for a GPU that runs one",
    versions=SpecifierSet(">=1.0.0"),
    why="setup.py never reads TORCH_CUDA_ARCH_LIST in any tag; upstream main 0d2252d drops "
    "sm<75 only for nvcc 13",
)
