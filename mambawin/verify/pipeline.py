"""`mambawin verify`: trust a wheel, or a wheelhouse, in steps.

static, requirements (pip resolves them for the wheel's own platform) and fit per wheel, pair
(mamba-ssm with causal-conv1d), install (all wheels into one throwaway venv), then on the GPU:
smoke (selective scan vs float64), conv (causal-conv1d vs float64), calls (the public API reaches
the compiled kernels), blocks (Mamba/Mamba2 fast vs reference path), bench, and upstream-tests
(the packages' own tests from their upstream commit).

Each step returns ok / fail / skip with a one-line reason. The fit step decides from the wheel's
GPU code and provenance whether it can run here *before* any kernel is launched. Kernels run in
child processes inside the install environment (`verify.sandbox`), so a crash in the extension
is reported instead of killing mambawin: the runners in workers (`verify.workers`: torch imported
and CUDA started once per worker), upstream's tests beside them and pip's online resolve beside
the install (`verify.board` records every result in the documented order, each with its own
seconds), with Triton's and inductor's caches kept per wheels, torch and GPU
(`verify.kernel_cache`).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mambawin.errors import CommandError, UsageError
from mambawin.fetch.sdist import offline
from mambawin.packages import MAMBA
from mambawin.stage import Finished, QuietReporter, Reporter, Status, still_running
from mambawin.toolchain import wine
from mambawin.verify.bench import bench_step
from mambawin.verify.board import Board
from mambawin.verify.conflicts import EnvironmentCheck
from mambawin.verify.fit import fit_step, worst
from mambawin.verify.gpu import gpu_blocker, plan_gpu, upstream_tests_step
from mambawin.verify.kernel_cache import KernelCache
from mambawin.verify.options import SKIPPABLE, VerifyOptions, skipped
from mambawin.verify.packages import WheelRef, WheelUnderTest, find_wheels
from mambawin.verify.planned import Gather, Planned, Step
from mambawin.verify.report import StepResult, Target, VerifyReport, named
from mambawin.verify.sandbox import InstallEnv
from mambawin.verify.static import TAMPERED, foreign_platform, glibc_need, static_steps, tampered
from mambawin.verify.steps import (
    environment_check,
    install_step,
    pair_step,
    plan_ops,
    requirements_step,
)
from mambawin.verify.workers import Job, Lane, Outcome, lanes
from mambawin.wheel.info import sha256_file


def verify(options: VerifyOptions, *, reporter: Reporter | None = None) -> VerifyReport:
    """Run every step; reporter sees each result, in the documented order, as soon as it and
    every step before it are known."""
    shown = reporter or QuietReporter()
    began = time.monotonic()
    wheels = _check_options(options)
    hashes = {ref.path.name: sha256_file(ref.path) for ref in wheels}
    target = options.target or options.tools.probe_target(options.python)
    board = Board(step_finished, reporter=shown)
    record = board.record
    overlap = not options.serial

    def report(**profile: Any) -> VerifyReport:
        wheel = str(options.wheel) if options.wheel else None
        wall = round(time.monotonic() - began, 2)
        return VerifyReport(
            wheel,
            target,
            tuple(board.steps),
            hashes,
            {"wall_seconds": wall, "overlap": overlap, **profile},
        )

    elsewhere = _foreign(wheels)
    with tempfile.TemporaryDirectory(prefix="mambawin-verify-") as scratch:
        packages: list[WheelUnderTest] = []
        fits: list[StepResult] = []
        for static, package in static_steps(options, target, wheels):
            record(static)
            if tampered(static):
                # A wheel whose bytes disagree with its RECORD, or that writes outside
                # site-packages, never reaches pip: installing it could run or overwrite anything.
                for name in ("fit", "install", "smoke", *(("bench",) if options.bench else ())):
                    record(StepResult(name, Status.SKIP, TAMPERED))
                return report()
            fits.append(
                record(
                    StepResult(named("fit", package.project), Status.SKIP, _elsewhere(elsewhere))
                    if elsewhere
                    else fit_step(
                        package.code,
                        package.provenance,
                        target,
                        package.project,
                        glibc_need(static),
                    )
                )
            )
            packages.append(package)
        # pip resolves online while the wheels install and the GPU works; its results take
        # their place in the order when they come.
        board.later("requirements", lambda: _requirements(options, wheels, shown), overlap=overlap)
        if len(packages) == 2:
            record(pair_step(packages))
        if elsewhere is not None:
            _elsewhere_steps(options, wheels, packages, Path(scratch), elsewhere, record)
            board.drain()
            return report()
        unloadable = _glibc_blocker(fits)
        install, env = (
            (StepResult("install", Status.SKIP, unloadable), None)
            if unloadable
            else install_step(options, Path(scratch), [p.project for p in packages])
        )
        record(install)
        gpu = GpuPart(options, target, worst(fits), install, env, packages, Path(scratch))
        return report(**gpu.run(board, hashes, shown))


def _requirements(
    options: VerifyOptions, wheels: tuple[WheelRef, ...], shown: Reporter
) -> list[StepResult]:
    """The requirements step of each wheel, each timed on its own."""
    results = []
    for ref in wheels or [None]:
        began = time.monotonic()
        result = skipped("requirements", options, ref) or _resolving(options, ref, reporter=shown)
        results.append(replace(result, seconds=round(time.monotonic() - began, 2)))
    return results


def _elsewhere_steps(
    options: VerifyOptions,
    wheels: tuple[WheelRef, ...],
    packages: list[WheelUnderTest],
    scratch: Path,
    elsewhere: str,
    record: Callable[[StepResult], StepResult],
) -> None:
    """A wheel cross-built for another platform: its files, imports, GPU code and requirements
    are checked, a win_amd64 one is loaded under wine; what runs its kernels needs a machine of
    its platform."""
    for ref, package in zip(wheels, packages, strict=True):
        work = scratch / f"load-{ref.label}"
        record(
            skipped("load", options, ref)
            or options.tools.wine_load(
                ref.path, ref.project, package.provenance, work, options.windows_root
            )
        )
    for name in ("install", *(n for n in SKIPPABLE if n not in ("requirements", "load"))):
        record(StepResult(name, Status.SKIP, _elsewhere(elsewhere)))


@dataclass(frozen=True)
class GpuPart:
    """ops, the GPU steps, bench and upstream-tests, after the install."""

    options: VerifyOptions
    target: Target
    fit: StepResult
    install: StepResult
    env: InstallEnv | None
    packages: list[WheelUnderTest]
    scratch: Path

    def run(self, board: Board, hashes: Mapping[str, str], shown: Reporter) -> dict[str, Any]:
        """Decide first which steps run (verify.gpu's skips and conflicts, exactly as when each
        ran alone), then run the runners in workers (verify.workers) while upstream's tests
        run beside them, each result recorded in its place; bench last, on a quiet GPU.
        Returns the run's profile: the workers' shared setup, the kernel caches."""
        options, env = self.options, self.env
        overlap = not options.serial
        environment = environment_check(
            options, self.install, env, [p.project for p in self.packages]
        )
        steps = self._plan(environment)
        jobs = [s for s in steps if isinstance(s, Planned)]
        tests = options.upstream_tests and self._blocker() is None and env is not None
        cache = (
            options.tools.kernel_cache(hashes, self.target)
            if env is not None and (jobs or tests)
            else None
        )
        if cache is not None and cache.folder is None:
            shown.note(cache.summary())
        run_env = _cached(env, cache)
        for step in steps:  # every place first: a worker's result may come at once
            board.slot(step.name)
            if isinstance(step, StepResult):  # known without running: it took no time
                board.put(step.name, [replace(step, seconds=step.seconds or 0.0)])
        bench = options.bench and MAMBA.name in [p.project for p in self.packages]
        if bench:
            board.slot("bench")
        workers: list[Lane] = []
        whole = options.serial
        gather = Gather({p.name: p for p in jobs}, board, whole=whole)
        if run_env is not None:
            for lane in lanes([j for p in jobs for j in p.jobs(whole=whole)], whole):
                board.background(self._worker(run_env, lane, gather, workers), overlap=overlap)
        if options.upstream_tests:
            conflict = environment.failure("upstream-tests")
            board.later(
                "upstream-tests",
                lambda: [
                    upstream_tests_step(
                        options,
                        self._blocker(),
                        run_env,
                        self.packages,
                        self.scratch,
                        conflict,
                        together=overlap,
                    )
                ],
                overlap=overlap,
            )
        board.drain(but=("bench",))
        if bench:
            smoke = (board.filled("smoke") or [StepResult("smoke", Status.SKIP, "not run")])[0]
            board.put("bench", [bench_step(options, smoke, run_env)])
        return {
            "workers": [lane.to_json() for lane in workers],
            "parts": gather.parts(),
            "kernel_cache": cache.to_json() if cache is not None else None,
        }

    def _plan(self, environment: EnvironmentCheck) -> list[Step]:
        options = self.options
        ops = skipped("ops", options) or plan_ops(
            options, self.install, self.env, self.packages, environment
        )
        gpu = plan_gpu(
            options, self.target, self.fit, self.install, self.env, self.packages, environment
        )
        return [*([ops] if ops is not None else []), *gpu]

    def _blocker(self) -> str | None:
        return gpu_blocker(self.target, self.fit, self.install)

    def _worker(
        self, env: InstallEnv, jobs: list[Job], gather: Gather, workers: list[Lane]
    ) -> Callable[[], None]:
        """One lane's work: its worker, each outcome gathered into its step's result (a job the
        worker gave no outcome for fails, so the run never waits on it)."""

        def work() -> None:
            options = self.options
            tools = options.tools
            lane = tools.run_worker(env, jobs, options.timeout, gather.add, tools.run_module)
            workers.append(lane)
            for job in jobs:
                missing = CommandError(f"the runner worker gave no result for {job.key}")
                gather.add(Outcome(job.key, error=missing))

        return work


def _cached(env: InstallEnv | None, cache: KernelCache | None) -> InstallEnv | None:
    """The install env with the kernel caches' variables (the worker's and the tests')."""
    if env is None or cache is None or not cache.env():
        return env
    return replace(env, env={**(env.env if env.env is not None else os.environ), **cache.env()})


def _resolving(options: VerifyOptions, ref: WheelRef | None, *, reporter: Reporter) -> StepResult:
    """The requirements step, narrated: pip resolves online and may take a minute, so a note says
    what runs and a line every 15 s that it still does."""
    if options.wheel is None:
        return requirements_step(options, ref)
    wheel = ref.path.name if ref is not None else Path(options.wheel).name
    reporter.note(f"requirements: pip resolves {wheel}'s requirements for its platform (online)")
    with still_running(lambda s: reporter.note(f"requirements: pip still resolving ({s:.0f} s)")):
        return requirements_step(options, ref)


def step_finished(result: StepResult) -> Finished:
    """A step's result as the Reporter sees it; the result itself rides along for the view's
    tables (per dtype, per block, per upstream test file)."""
    return Finished(
        result.name, result.status, result.summary, seconds=result.seconds, subject=result
    )


def _glibc_blocker(fits: list[StepResult]) -> str | None:
    """Why nothing can be imported here: a library needs a newer glibc than this machine's (the
    loader would refuse it; installing would only repeat fit's finding as an import error)."""
    for fit in fits:
        glibc = (fit.details or {}).get("glibc")
        if glibc and not glibc.get("ok"):
            return f"not installed: {glibc['message']}"
    return None


def _elsewhere(platform: str) -> str:
    return f"a {platform} wheel: run `mambawin verify` on a {platform} machine"


def _foreign(wheels: tuple[WheelRef, ...]) -> str | None:
    """The platform of the wheels when every one is for another platform than this machine's."""
    found = [foreign_platform(ref.path) for ref in wheels]
    return found[0] if found and all(found) else None


def _check_options(options: VerifyOptions) -> tuple[WheelRef, ...]:
    offline()  # a MAMBAWIN_OFFLINE that is no yes/no stops here, not in the requirements step
    unknown = sorted(set(options.skip) - set(SKIPPABLE))
    if unknown:
        raise UsageError(f"--skip: unknown step {unknown[0]!r}; choose from {', '.join(SKIPPABLE)}")
    if options.windows_root is not None and options.installed:
        msg = "--windows-root does not apply to --installed: it serves the load step of a wheel"
        raise UsageError(msg + " (a win_amd64 WHEEL checked on Linux); drop it")
    if options.windows_root is not None:  # given: it must be a whole toolchain (exit 2 or 5)
        wine.whole_root(options.windows_root, "drop it")
    if options.wheel is None and not options.installed:
        raise UsageError("nothing to verify: pass a WHEEL path, or --installed for the current env")
    if options.wheel is None:
        return ()
    return find_wheels(Path(options.wheel))


# Steps a user may leave out: the checks that cost time or network. static, fit and install are
# what every later step stands on, so they always run.
