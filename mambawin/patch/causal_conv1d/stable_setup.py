"""stable-setup for causal-conv1d: the shared setup.py transform for `causal_conv1d_cuda`.

Why: see patch/setup_py/stable_setup.py. Every tag from v1.5.0 appends
`CUDAExtension(name="causal_conv1d_cuda", ...)` to `ext_modules`, passes
`"build_ext": BuildExtension` in cmdclass and calls `setup(` at column 0.
"""

from __future__ import annotations

from mambawin.packages import CAUSAL_CONV1D
from mambawin.patch.setup_py.stable_setup import patch_for

PATCH = patch_for(
    "causal_conv1d_cuda",
    versions=CAUSAL_CONV1D.stable_versions,
    why="a stable-ABI library has no PyInit_ and no CPython tag; causal-conv1d PR #102 sets "
    "py_limited_api, -DUSE_CUDA and TORCH_TARGET_VERSION the same way",
)
