"""`mambawin verify`: trust a wheel, or a wheelhouse, in steps.

static, requirements (pip resolves them for the wheel's own platform) and fit per wheel, pair
(mamba-ssm with causal-conv1d), install (all wheels into one throwaway venv), then on the GPU:
smoke (selective scan vs float64), conv (causal-conv1d vs float64), calls (the public API reaches
the compiled kernels), blocks (Mamba/Mamba2 fast vs reference path), bench, and upstream-tests
(the packages' own tests from their upstream commit).

Each step returns ok / fail / skip with a one-line reason. The fit step decides from the wheel's
GPU code and provenance whether it can run here *before* any kernel is launched. Kernels run in a
child process (`python -m mambawin.verify.runners.smoke`) inside the install environment
(`verify.sandbox`), so a crash in the extension is reported instead of killing mambawin.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path

from mambawin.errors import UsageError
from mambawin.fetch.sdist import offline
from mambawin.stage import Finished, QuietReporter, Reporter, Status, still_running
from mambawin.toolchain import wine
from mambawin.verify.fit import fit_step, worst
from mambawin.verify.gpu import gpu_steps
from mambawin.verify.options import SKIPPABLE, VerifyOptions, skipped
from mambawin.verify.packages import WheelRef, WheelUnderTest, find_wheels
from mambawin.verify.report import StepResult, VerifyReport, named
from mambawin.verify.static import TAMPERED, foreign_platform, glibc_need, static_steps, tampered
from mambawin.verify.steps import (
    environment_check,
    install_step,
    ops_step,
    pair_step,
    requirements_step,
)
from mambawin.wheel.info import sha256_file


def verify(options: VerifyOptions, *, reporter: Reporter | None = None) -> VerifyReport:
    """Run every step in order; reporter sees each result as soon as it is known."""
    shown = reporter or QuietReporter()
    wheels = _check_options(options)
    hashes = {ref.path.name: sha256_file(ref.path) for ref in wheels}
    target = options.target or options.tools.probe_target(options.python)
    steps: list[StepResult] = []
    # Steps run one after another, each just before it is recorded, so the time since the last
    # record is the step's own (what a user needs to budget a GPU machine's time).
    clock = [time.monotonic()]

    def record(result: StepResult) -> StepResult:
        now = time.monotonic()
        result = replace(result, seconds=round(now - clock[0], 2))
        clock[0] = now
        steps.append(result)
        shown.finished(step_finished(result))
        return result

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
                return VerifyReport(str(options.wheel), target, tuple(steps), hashes)
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
        for ref in wheels or [None]:
            record(
                skipped("requirements", options, ref) or _resolving(options, ref, reporter=shown)
            )
        if len(packages) == 2:
            record(pair_step(packages))
        if elsewhere is not None:
            # A wheel cross-built for another platform: its files, imports, GPU code and
            # requirements are checked above, a win_amd64 one is loaded under wine; what runs
            # its kernels needs a machine of its platform.
            for ref, package in zip(wheels, packages, strict=True):
                work = Path(scratch) / f"load-{ref.label}"
                record(
                    skipped("load", options, ref)
                    or options.tools.wine_load(
                        ref.path, ref.project, package.provenance, work, options.windows_root
                    )
                )
            for name in ("install", *(n for n in SKIPPABLE if n not in ("requirements", "load"))):
                record(StepResult(name, Status.SKIP, _elsewhere(elsewhere)))
            return VerifyReport(str(options.wheel), target, tuple(steps), hashes)
        unloadable = _glibc_blocker(fits)
        install, env = (
            (StepResult("install", Status.SKIP, unloadable), None)
            if unloadable
            else install_step(options, Path(scratch), [p.project for p in packages])
        )
        record(install)
        # Once for every step that imports upstream's Python: does this environment break the
        # wheels' own requirements? Those steps then name the conflict instead of running.
        environment = environment_check(options, install, env, [p.project for p in packages])
        ops = skipped("ops", options) or ops_step(options, install, env, packages, environment)
        if ops is not None:
            record(ops)
        for step in gpu_steps(
            options, target, worst(fits), install, env, packages, Path(scratch), environment
        ):
            record(step)
    wheel = str(options.wheel) if options.wheel else None
    return VerifyReport(wheel, target, tuple(steps), hashes)


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
