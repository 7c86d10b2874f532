"""`mambawin bench`: the compiled selective scan against an eager pure-torch scan on the GPU.

The baseline is `reference.selective_scan_parallel`: a vectorised log-depth (Hillis-Steele) scan
computed in the input dtype, i.e. the best a torch user gets without a custom kernel (upstream's
`selective_scan_ref`, a Python loop over time steps, would be far slower and an unfair target).
Times are medians of CUDA-event timings after warm-up. Effective bandwidth counts the bytes the
kernel must at least read and write once, against a measured device-to-device copy.
Run `python -m mambawin.verify.runners.bench --json` inside the environment holding the wheel.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mambawin.verify.bench_report import (
    DTYPES,
    QUICK_SHAPES,
    SHAPES,
    BenchConfig,
    BenchReport,
    BenchRow,
)
from mambawin.verify.runners.reference import selective_scan_parallel

# (batch, dim, seqlen, dstate): Mamba-130m/370m-like widths; sized so the reference's autograd
# graph (about 3 (b, d, n, L) tensors per log2(L) step) stays well inside an 80 GB H100.


# ---- in the install environment ------------------------------------------------------------


def run_bench(config: BenchConfig, kernel: Any = None) -> BenchReport:
    """Time every (shape, dtype, mode) of the grid on the GPU."""
    import torch

    if kernel is None:
        kernel = importlib.import_module("selective_scan_cuda")
    report = BenchReport(
        torch.cuda.get_device_name(config.device), torch.__version__, copy_bandwidth(config.device)
    )
    for shape in config.shapes:
        for dtype in config.dtypes:
            for mode in config.modes:
                report.rows.append(bench_one(kernel, shape, dtype, mode, config, report))
    return report


def bench_one(
    kernel: Any,
    shape: tuple[int, int, int, int],
    dtype: str,
    mode: str,
    config: BenchConfig,
    report: BenchReport,
) -> BenchRow:
    """Kernel and reference for one point of the grid (the reference may run out of memory)."""
    import torch

    inputs = make_inputs(shape, dtype, config.device)
    run_kernel = _kernel_fn(kernel, inputs, mode == "fwd+bwd")
    kernel_ms, kernel_mb = time_cuda(run_kernel, config)
    ref_ms: float | None = None
    ref_mb: float | None = None
    note = ""
    try:
        ref_ms, ref_mb = time_cuda(_reference_fn(inputs, mode == "fwd+bwd"), config)
    except torch.cuda.OutOfMemoryError:
        note = "reference ran out of GPU memory"
    torch.cuda.empty_cache()
    nbytes = traffic_bytes(shape, dtype, mode)
    gbps = nbytes / (kernel_ms * 1e-3) / 1e9
    return BenchRow(
        dtype,
        *shape,
        mode,
        kernel_ms,
        ref_ms,
        ref_ms / kernel_ms if ref_ms else None,
        nbytes,
        gbps,
        gbps / report.copy_gbps,
        kernel_mb,
        ref_mb,
        note,
    )


def make_inputs(shape: tuple[int, int, int, int], dtype: str, device: str) -> dict[str, Any]:
    """A typical Mamba call: variable B/C, D, z, delta_bias and softplus, random values."""
    import torch

    b, d, L, n = shape
    itype = getattr(torch, dtype)

    def randn(*size: int, dt: Any = itype) -> Any:
        return torch.randn(*size, device=device, dtype=dt)

    return {
        "u": randn(b, d, L),
        "delta": 0.5 * torch.rand(b, d, L, device=device, dtype=itype),
        "A": -torch.rand(d, n, device=device),
        "B": randn(b, 1, n, L),
        "C": randn(b, 1, n, L),
        "D": randn(d, dt=torch.float32),
        "z": randn(b, d, L),
        "delta_bias": 0.5 * torch.rand(d, device=device),
        "dout": randn(b, d, L),
    }


def _kernel_fn(kernel: Any, x: dict[str, Any], backward: bool) -> Callable[[], None]:
    args = (x["u"], x["delta"], x["A"], x["B"], x["C"], x["D"], x["z"], x["delta_bias"])

    def run() -> None:
        out, scan, *_ = kernel.fwd(*args, True)
        if backward:
            kernel.bwd(*args, x["dout"], scan, out, None, True, False)

    return run


def _reference_fn(x: dict[str, Any], backward: bool) -> Callable[[], None]:
    import torch

    names = ("u", "delta", "A", "B", "C", "D", "z", "delta_bias")
    leaves = [x[k].detach().clone().requires_grad_(backward) for k in names]

    def run() -> None:
        with torch.set_grad_enabled(backward):
            u, delta, A, B, C, D, z, bias = leaves
            out = selective_scan_parallel(u, delta, A, B, C, D, z, bias, delta_softplus=True)
            if backward:
                torch.autograd.backward(out, x["dout"])

    return run


def time_cuda(fn: Callable[[], None], config: BenchConfig) -> tuple[float, float]:
    """(median ms over config.reps CUDA-event timings after warm-up, peak extra MiB)."""
    import torch

    for _ in range(config.warmup):
        fn()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(config.reps):
        event: Callable[..., Any] = torch.cuda.Event  # untyped in some torch releases
        start, end = event(enable_timing=True), event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    return statistics.median(times), peak


def copy_bandwidth(device: str, nbytes: int = 1 << 30) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written."""
    import torch

    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)

    def copy() -> None:
        dst.copy_(src)

    ms, _ = time_cuda(copy, BenchConfig(warmup=3, reps=10))
    return 2 * nbytes / (ms * 1e-3) / 1e9


def traffic_bytes(shape: tuple[int, int, int, int], dtype: str, mode: str) -> int:
    """Bytes the kernel must read and write at least once (inputs, outputs, saved chunk states)."""
    b, d, L, n = shape
    item = 4 if dtype == "float32" else 2
    chunks = (L + 2047) // 2048  # the kernel's chunk: x holds (b, d, chunks, 2n) fp32
    acts, bc, weights, states = b * d * L, b * n * L, d * n + 2 * d, b * d * chunks * 2 * n
    # fwd reads u, delta, z, B, C (+ A, D, delta_bias) and writes out, out_z and x.
    fwd = item * (5 * acts + 2 * bc) + 4 * (weights + states)
    if mode == "fwd":
        return fwd
    # bwd reads u, delta, z, dout, out, B, C, x and writes du, ddelta, dz, dB, dC and the weights'.
    bwd = item * (8 * acts + 4 * bc) + 4 * (states + 2 * weights)
    return fwd + bwd


def plot(report: BenchReport, path: Path) -> Path | None:
    """Speedup and bandwidth bars as a PNG; None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    labels = [
        f"{r.dtype[:4]} {r.batch}x{r.dim}x{r.seqlen}x{r.dstate} {r.mode}" for r in report.rows
    ]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(8, len(labels) * 0.5), 8), sharex=True)
    ax1.bar(labels, [r.speedup or 0 for r in report.rows])
    ax1.set_ylabel("speedup vs eager scan (x)")
    ax1.set_yscale("log")
    ax2.bar(labels, [r.kernel_gbps for r in report.rows])
    ax2.axhline(report.copy_gbps, color="red", linestyle="--", label="device copy")
    ax2.set_ylabel("effective GB/s")
    ax2.legend()
    ax2.tick_params(axis="x", rotation=90)
    fig.suptitle(f"selective scan on {report.device}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def parse_args(argv: Sequence[str] | None = None) -> tuple[BenchConfig, bool]:
    """(grid, print JSON) from the runner's command line."""
    parser = argparse.ArgumentParser(prog="python -m mambawin.verify.runners.bench")
    parser.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    parser.add_argument("--quick", action="store_true", help="one small shape, for a quick look")
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args(argv)
    dtypes = tuple(d for d in args.dtypes.split(",") if d)
    if set(dtypes) - set(DTYPES) or args.reps < 1:
        parser.error(f"--dtypes must be among {', '.join(DTYPES)} and --reps >= 1")
    shapes = QUICK_SHAPES if args.quick else SHAPES
    return BenchConfig(shapes=shapes, dtypes=dtypes, reps=args.reps), args.json


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m mambawin.verify.runners.bench` (where the kernel imports)."""
    config, as_json = parse_args(argv)
    found = bench_report(config)
    if as_json:
        print(json.dumps(found.to_json()))
    return 0


def report(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The runner's report for its command line (what `verify.runners.worker` calls)."""
    return bench_report(parse_args(argv)[0]).to_json()


def bench_report(config: BenchConfig) -> BenchReport:
    report = run_bench(config)
    for row in report.rows:
        print(
            f"{row.dtype} {row.batch}x{row.dim}x{row.seqlen}x{row.dstate} {row.mode}: "
            f"kernel {row.kernel_ms:.3f} ms, reference {row.reference_ms} ms",
            file=sys.stderr,
        )
    return report


if __name__ == "__main__":
    raise SystemExit(main())
