"""Benchmark the installed selective_scan_cuda against the eager torch scan (thin wrapper).

Run where the wheel is installed: `python benchmarks/kernel_bench.py [--quick] [--json]`.
To benchmark a wheel file in a throwaway venv instead, use `mambawin bench WHEEL`.
"""

from __future__ import annotations

from mambawin.verify.runners.bench import main

if __name__ == "__main__":
    raise SystemExit(main())
