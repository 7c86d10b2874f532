"""Several packages' compile steps at once (`build --with`'s pair in one job pool, job_pool.py).

Each package compiles in its own thread, into its own log; its notes are named by its package,
the packages' ninja progress shows as one bar (units done of all units known so far), and each
package's "build" step records its own compile time. Then, in the same thread, what follows the
compile (`then`: the wheel's metadata and record, not yet in --out), so that a package done
first is packed while the other still compiles: on the GPU machine causal-conv1d's packing was
1.2 s after mamba-ssm's, with every core idle (docs/benchmarks.md §28). A failure names its
package; the other package compiles to its end first, so its objects are kept for the next build.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from typing import TypeVar

from mambawin.builder.compile import CompileFailed
from mambawin.stage import COMPILE_STEP, Finished, NinjaStatus, Reporter, TimedSteps

Outcome = TypeVar("Outcome")
Final = TypeVar("Final")
Compile = Callable[[int, Reporter], Outcome]  # (index of the package, its reporter) -> outcome
Then = Callable[[int, Outcome, Reporter], Final]  # what follows package i's compile
Watch = Callable[[int, NinjaStatus], None]  # package i's ninja finished a unit (the job pool)


def compile_all(
    packages: Sequence[tuple[str, TimedSteps]],
    compile_one: Compile[Outcome],
    then: Then[Outcome, Final],
    *,
    reporter: Reporter,
    watch: Watch | None = None,
) -> list[Final]:
    """Run compile_one, then `then`, for every package at once; their results in the packages'
    order."""
    joint = JointProgress(reporter.progress, len(packages), watch)
    with ThreadPoolExecutor(max_workers=len(packages), thread_name_prefix="compile") as pool:
        futures = [
            pool.submit(
                _one, steps, compile_one, then, i, NamedReporter(name, reporter, joint.part(i))
            )
            for i, (name, steps) in enumerate(packages)
        ]
    _raise_first_failure([name for name, _ in packages], futures)
    return [future.result() for future in futures]


def _one(
    steps: TimedSteps,
    compile_one: Compile[Outcome],
    then: Then[Outcome, Final],
    i: int,
    to: Reporter,
) -> Final:
    start = time.monotonic()
    try:
        outcome = compile_one(i, to)
    finally:
        steps.add(COMPILE_STEP, time.monotonic() - start)
    return then(i, outcome, to)


def _raise_first_failure(names: list[str], futures: list[Future[Final]]) -> None:
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

    def __init__(
        self, show: Callable[[NinjaStatus], None], count: int, watch: Watch | None = None
    ) -> None:
        self._show, self._watch = show, watch
        self._parts = [(0, 0)] * count
        self._lock = threading.Lock()

    def part(self, i: int) -> Callable[[NinjaStatus], None]:
        """The progress callback of package i."""

        def update(status: NinjaStatus) -> None:
            if self._watch is not None:
                self._watch(i, status)
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

    def finished(self, item: Finished) -> None:
        self._reporter.finished(item)
