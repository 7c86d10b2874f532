"""`build --with`: the mamba-ssm + causal-conv1d pair through the pipeline's steps, with both
compile steps at once in one job pool (job_pool.py: every nvcc unit asks it for a job; together.py:
the threads, the joint progress, the failure that names its package).

Each package is prepared in turn (doctor, fetch, patch, its build folder locked), then both
compile, each followed at once by its metadata and record steps (its wheel staged in its build
folder); when both are done, the wheels are moved into --out, mamba-ssm's first. Where no pool
can be shared (Windows, --jobs 1) they compile one after the other, as a note says.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack

from mambawin.archs import Arch
from mambawin.builder import job_policy, job_pool, pipeline, together
from mambawin.builder.compile import CompileResult
from mambawin.builder.compiler_cache import CacheStats
from mambawin.builder.options import BuildOptions
from mambawin.builder.request import Tools
from mambawin.builder.results import BuildResult, Prepared
from mambawin.doctor.checks import DoctorReport
from mambawin.stage import QuietReporter, Reporter, TimedSteps


def build_together(
    all_options: list[BuildOptions],
    *,
    tools: Tools | None = None,
    reporter: Reporter | None = None,
) -> list[BuildResult]:
    """Build several packages (the --with pair) with their compile steps at once, under one
    limit of jobs (job_pool.py); one after the other where no pool can be shared."""
    shown = reporter or QuietReporter()
    with ExitStack() as stack:
        given = tools or Tools()
        doctor = once(given.doctor or pipeline.run_doctor)
        started = [
            pipeline.start(o, TimedSteps(shown), stack, doctor, proofs=given.proofs)
            for o in all_options
        ]
        slots = min(s.prepared.jobs for s in started)
        why_not = _why_not_pooled(slots, len(started))
        if why_not is not None:
            shown.note(f"the packages compile one after the other: {why_not}")
            return [pipeline.build_started(s) for s in started]
        start = job_policy.shares(slots, len(started))
        pool = stack.enter_context(job_pool.job_pool(slots, start))
        shown.note(
            f"one job pool: {len(started)} packages compile at once, {slots} jobs in all "
            f"(at the start {' + '.join(map(str, start))})"
        )
        # each package's staging folder (in its build folder) lives until every wheel is published
        stages = [stack.enter_context(ExitStack()) for _ in started]
        with shown.step("build"):
            staged = together.compile_all(
                [(s.prepared.package.name, s.steps) for s in started],
                lambda i, to: _compile_in_pool(started[i].prepared, pool, i, reporter=to),
                lambda i, compiled, to: started[i].stage(
                    compiled, stages[i], reporter=to, in_out=False
                ),
                reporter=shown,
                watch=lambda i, status: pool.finished(i, status.unit),
            )
        return [s.publish() for s in staged]


def once(doctor: pipeline.Doctor) -> pipeline.Doctor:
    """doctor, its report asked once per set of archs: both packages build with one toolchain,
    and each probe run is ~0.3 s before any compile starts."""
    reports: dict[tuple[Arch, ...], DoctorReport] = {}

    def ask(archs: tuple[Arch, ...]) -> DoctorReport:
        if archs not in reports:
            reports[archs] = doctor(archs)
        return reports[archs]

    return ask


def _compile_in_pool(
    prepared: Prepared, pool: job_pool.PoolServer, index: int, *, reporter: Reporter
) -> tuple[CompileResult, CacheStats | None]:
    try:
        return pipeline.compile_prepared(
            prepared, lambda env: pool.client_env(env, index), reporter=reporter
        )
    finally:  # its ninja has ended (or never ran: a reused wheel): its share can all go
        pool.ended(index)


def _why_not_pooled(slots: int, builds: int) -> str | None:
    """Why the builds cannot share a job pool."""
    if slots < builds:  # each package needs a job of its own
        return f"{slots} job leaves none for a second package at the same time"
    return job_pool.why_not_pooled(windows=sys.platform == "win32")
