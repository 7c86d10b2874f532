"""`mambawin bench`: run the GPU benchmark runner in a throwaway environment holding the wheel."""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mambawin.errors import UsageError
from mambawin.verify.bench_report import BenchReport
from mambawin.verify.sandbox import import_check, prepare_env, run_module


@dataclass(frozen=True)
class BenchOptions:
    """`mambawin bench`: which wheel (or --installed) and which grid."""

    wheel: Path | None = None
    installed: bool = False
    quick: bool = False
    python: str = sys.executable
    timeout: float = 1800.0


def bench(options: BenchOptions) -> BenchReport:
    """Install the wheel in a throwaway venv (or use this env) and run the grid there."""
    if options.wheel is None and not options.installed:
        raise UsageError("nothing to benchmark: pass a WHEEL path, or --installed")
    if options.wheel is not None and not Path(options.wheel).is_file():  # before a venv is made
        # a folder or a FIFO was said not to exist
        what = "is not a file" if os.path.lexists(options.wheel) else "does not exist"
        msg = f"{options.wheel} {what}: pass the path of a built .whl (`mambawin build`)"
        raise UsageError(msg)
    with tempfile.TemporaryDirectory(prefix="mambawin-bench-") as scratch:
        wheels = [options.wheel] if options.wheel is not None else []
        env = prepare_env(wheels, options.python, Path(scratch))
        import_check(env)
        args = ["--json", *(["--quick"] if options.quick else [])]
        data = run_module(env, "mambawin.verify.runners.bench", args, options.timeout)
        return BenchReport.from_json(data)
