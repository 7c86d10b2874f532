"""`mambawin bench`: run the GPU benchmark runner in a throwaway environment holding the wheel;
and verify's bench step (`verify --bench`), which runs it in verify's install environment."""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mambawin.errors import MambawinError, UsageError
from mambawin.stage import Status
from mambawin.verify.bench_report import BenchReport
from mambawin.verify.options import VerifyOptions
from mambawin.verify.planned import error_details
from mambawin.verify.report import StepResult
from mambawin.verify.sandbox import InstallEnv, import_check, prepare_env, run_module


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


def bench_step(options: VerifyOptions, smoke: StepResult, env: InstallEnv | None) -> StepResult:
    """Benchmark in the install env once the smoke test passed."""
    if smoke.status is not Status.OK or env is None:
        reason = f"smoke did not pass ({smoke.summary.split(';')[0]})"
        return StepResult("bench", Status.SKIP, reason)
    try:
        data = options.tools.run_module(
            env, "mambawin.verify.runners.bench", ["--json", *options.bench_args], options.timeout
        )
    except MambawinError as exc:
        return StepResult("bench", Status.FAIL, f"benchmark failed: {exc}", error_details(exc))
    return StepResult("bench", Status.OK, BenchReport.from_json(data).headline(), data)
