"""A stable wheel's C++ checks come back to Python as RuntimeError, not as a dead process.

Run with `-m gpu` where the stable wheels are installed (`selective_scan_cuda` /
`causal_conv1d_cuda` are then shims over `torch.ops`). Each bad call runs in a child process: a
library carrying a static libstdc++ ended it with SIGSEGV on torch 2.11 (benchmarks.md §15), which
a test in this process could not report.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

# (module the call needs, the call on CUDA tensors, what the binding's check says)
BAD_CALLS = {
    "scan_2d_u": (
        "selective_scan_cuda",
        "u = torch.zeros(2, 8, device='cuda'); A = torch.zeros(8, 4, device='cuda'); "
        "B = torch.zeros(2, 4, 8, device='cuda'); "
        "torch.ops.selective_scan_cuda.fwd(u, u, A, B, B, None, None, None, False)",
        "u must be (batch, dim, seqlen)",
    ),
    "scan_complex_A": (
        "selective_scan_cuda",
        "u = torch.zeros(2, 8, 16, device='cuda'); "
        "A = torch.zeros(8, 4, device='cuda', dtype=torch.complex64); "
        "B = torch.zeros(2, 4, 16, device='cuda'); "
        "torch.ops.selective_scan_cuda.fwd(u, u, A, B, B, None, None, None, False)",
        "complex weights (A) are not supported",
    ),
    "conv_width_9": (
        "causal_conv1d_cuda",
        "x = torch.zeros(2, 8, 16, device='cuda'); w = torch.zeros(8, 9, device='cuda'); "
        "torch.ops.causal_conv1d_cuda.causal_conv1d_fwd("
        "x, w, None, None, None, torch.empty_like(x), None, False)",
        "only supports width between 2 and 4",
    ),
}


def _stable_module(name: str) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    module = pytest.importorskip(name)
    if not str(getattr(module, "__file__", "")).endswith(".py"):
        pytest.skip(f"{name} is a torch-ABI extension, not a stable wheel's shim")


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_a_failed_check_raises_runtime_error_in_python(case):
    module, call, message = BAD_CALLS[case]
    _stable_module(module)
    code = (
        f"import torch, {module}\n"
        f"try:\n    {call}\n"
        "except RuntimeError as exc:\n    print('RuntimeError:', exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "RuntimeError:" in done.stdout and message in done.stdout, done.stdout
