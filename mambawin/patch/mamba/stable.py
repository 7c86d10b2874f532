"""What the stable-ABI patches of mamba-ssm share: the upstream versions they port, their gate.

Which versions (read across every tag, docs/stable-abi-mamba.md has the table): from v2.2.3 on,
upstream's binding `csrc/selective_scan/selective_scan.cpp` is one file, byte for byte, through
v2.3.2.post1 and main, and its Python (`mamba_ssm/utils/torch.py`, new in v2.2.3) calls
`torch.amp.custom_fwd(device_type="cuda")`. Older tags are refused, not guessed at: their binding
differs (v1.0.0 has other stride checks; up to v2.2.2 it includes ATen's CUDAContext), their
Python decorates with `torch.cuda.amp.custom_fwd`, deprecated since torch 2.4, and their CI never
ran a torch anywhere near the stable ABI's floor (2.10).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from mambawin.errors import PatchError
from mambawin.packages import MAMBA
from mambawin.patch.base import PatchContext, PatchOptions

KERNELS = "csrc/selective_scan"
SUPPORTED: SpecifierSet = MAMBA.stable_versions


def skip_reason(options: PatchOptions) -> str | None:
    """Every stable patch is off unless the build targets torch's stable ABI."""
    if options.abi == "stable":
        return None
    return "--abi torch keeps upstream's pybind11 binding and c10/ATen kernels"


def refuse_keep_complex(ctx: PatchContext) -> None:
    """PatchError for --keep-complex: the stable binding dispatches float weights only. (Versions
    outside SUPPORTED never get here: the engine refuses them, registry.check_stable.)"""
    if ctx.options.keep_complex:
        msg = (
            "--keep-complex cannot be combined with --abi stable: the stable binding dispatches "
            "float weights only (the complex<float> kernels are not ported); drop --keep-complex "
            "or build with --abi torch"
        )
        raise PatchError(msg)
