"""stable-setup for mamba-ssm: the shared setup.py transform for `selective_scan_cuda`.

Why: see patch/setup_py/stable_setup.py. Every tag from v2.2.3 appends
`CUDAExtension(name="selective_scan_cuda", ...)` to `ext_modules`, passes
`"build_ext": BuildExtension` in cmdclass and calls `setup(` at column 0.
"""

from __future__ import annotations

from mambawin.patch.mamba.stable import SUPPORTED
from mambawin.patch.setup_py.stable_setup import patch_for

PATCH = patch_for(
    "selective_scan_cuda",
    versions=SUPPORTED,
    why="a stable-ABI library has no PyInit_ and no CPython tag; mamba PR #1042 ports "
    "selective_scan to torch's stable ABI the same way",
)
