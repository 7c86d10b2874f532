"""Several packages' compile steps at once (`build --with`'s pair in one job pool, jobserver.py).

Each package compiles in its own thread, into its own log; its notes are named by its package,
the packages' ninja progress shows as one bar (units done of all units known so far), and each
package's "build" step records its own compile time. A failure names its package; the other
package compiles to its end first, so its objects are kept for the next build.

The first package (mamba-ssm, the one with the most units) gets a head start: the others start
once its setup.py runs build_ext (`HeadStart`). A ninja takes every free token of the pool for
its ready units the moment it starts, so whichever starts first fills the pool: measured on 16
cores (docs/benchmarks.md §16), causal-conv1d's setup.py reached ninja first, took 13 of 15
tokens for its 14 units, and mamba-ssm's long bwd parts waited 28-35 s for jobs, which made the
pair's compile 85 s where its work over the cores was 62 s. With mamba-ssm's ninja first, its
long parts start at once; causal-conv1d's starts with the tokens the server held for it
(jobserver.job_server: 4 of 16) and its own implicit job, which takes its binding (its longest
unit); the rest share the tokens as they come back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from typing import TypeVar

from mambawin.builder.compile import CompileFailed
from mambawin.builder.ninja import COMPILE_STEP, NinjaStatus
from mambawin.builder.reporter import Reporter, TimedSteps

Outcome = TypeVar("Outcome")
# (index of the package, its reporter, a hook for every line its setup.py prints) -> outcome
Compile = Callable[[int, Reporter, Callable[[str], None] | None], Outcome]
BUILD_EXT = "running build_ext"  # setuptools' line right before torch writes and runs ninja
HEAD_START_WAIT_S = 120.0  # at most: a first package that never says BUILD_EXT holds no one up
HEAD_START_GRACE_S = 2.0  # from BUILD_EXT to ninja: torch's compiler check and build.ninja


def compile_all(
    packages: Sequence[tuple[str, TimedSteps]],
    compile_one: Compile[Outcome],
    reporter: Reporter,
    head: HeadStart | None = None,
) -> list[Outcome]:
    """Run compile_one for every package at once (the first with a head start); its outcomes in
    the packages' order."""
    head = head or HeadStart()
    joint = JointProgress(reporter.progress, len(packages))
    with ThreadPoolExecutor(max_workers=len(packages), thread_name_prefix="compile") as pool:
        futures = [
            pool.submit(
                _timed, steps, compile_one, i, NamedReporter(name, reporter, joint.part(i)), head
            )
            for i, (name, steps) in enumerate(packages)
        ]
    _raise_first_failure([name for name, _ in packages], futures)
    return [future.result() for future in futures]


def _timed(
    steps: TimedSteps, compile_one: Compile[Outcome], i: int, to: Reporter, head: HeadStart
) -> Outcome:
    if i > 0:
        head.wait()
    start = time.monotonic()
    try:
        return compile_one(i, to, head.seen if i == 0 else None)
    finally:
        steps.add(COMPILE_STEP, time.monotonic() - start)
        if i == 0:
            head.release()  # a first package that failed early holds no one up


class HeadStart:
    """The first package's ninja starts before the others' (see the module docstring)."""

    def __init__(
        self, wait_s: float = HEAD_START_WAIT_S, grace_s: float = HEAD_START_GRACE_S
    ) -> None:
        self._wait_s, self._grace_s = wait_s, grace_s
        self._ran = threading.Event()
        self._ran_at: float | None = None

    def seen(self, line: str) -> None:
        """A line of the first package's setup.py."""
        if line.strip() == BUILD_EXT and not self._ran.is_set():
            self._ran_at = time.monotonic()
            self._ran.set()

    def release(self) -> None:
        self._ran.set()

    def wait(self) -> None:
        """Until the first package's ninja runs (or it ended, or HEAD_START_WAIT_S passed)."""
        self._ran.wait(self._wait_s)
        if self._ran_at is not None:
            time.sleep(max(0.0, self._ran_at + self._grace_s - time.monotonic()))


def _raise_first_failure(names: list[str], futures: list[Future[Outcome]]) -> None:
    """The first package's failure, its message named by the package (and any other's log)."""
    failed = [(name, exc) for name, f in zip(names, futures, strict=True) if (exc := f.exception())]
    if not failed:
        return
    name, first = failed[0]
    also = "".join(
        f" ({other} failed too: {exc.log if isinstance(exc, CompileFailed) else exc})"
        for other, exc in failed[1:]
    )
    if isinstance(first, CompileFailed):
        raise CompileFailed(
            f"{name}: {first}{also}", diagnostic=first.diagnostic, log=first.log
        ) from None
    raise first


class JointProgress:
    """Several ninjas' `[N/M]` as one: the sum of units done over the sum of units known."""

    def __init__(self, show: Callable[[NinjaStatus], None], count: int) -> None:
        self._show = show
        self._parts = [(0, 0)] * count
        self._lock = threading.Lock()

    def part(self, i: int) -> Callable[[NinjaStatus], None]:
        """The progress callback of package i."""

        def update(status: NinjaStatus) -> None:
            with self._lock:
                self._parts[i] = (status.done, status.total)
                done = sum(d for d, _ in self._parts)
                total = sum(t for _, t in self._parts)
                self._show(NinjaStatus(done, total, status.unit))

        return update


class NamedReporter:
    """One package's reporter inside the joint compile: notes say whose they are."""

    def __init__(
        self, name: str, reporter: Reporter, progress: Callable[[NinjaStatus], None]
    ) -> None:
        self.name = name
        self._reporter = reporter
        self._progress = progress

    def step(self, name: str) -> AbstractContextManager[None]:
        return nullcontext()  # the joint compile is one step, opened by the caller

    def note(self, text: str) -> None:
        self._reporter.note(f"{self.name}: {text}")

    def progress(self, status: NinjaStatus) -> None:
        self._progress(status)
