"""The stage contract: how a stage narrates and how its work came out.

The Reporter protocol and the reporter that shows nothing, the records it carries (Finished,
NinjaStatus) and the one status vocabulary (Status). It sits at the package root, below every
stage, so verify and the views narrate without importing the build stage.

Every stage that narrates (build, the wine backends' front half and compile, `build --spec`,
verify) takes a keyword-only `reporter=` of this one protocol; ui.progress.ConsoleReporter draws
it for people, QuietReporter drops it (`--json`, tests, library use). A core module never imports
its view.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Protocol

COMPILE_STEP = "build"  # the step whose output carries ninja's status lines (progress)


class Status(str, enum.Enum):
    """How a check or a step came out: a doctor check, a verify step and the views that draw
    them share this one vocabulary."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class NinjaStatus:
    """One ninja status line: `done` of `total` units finished; `unit` is the file it built
    (builder/ninja.py reads it from ninja's output)."""

    done: int
    total: int
    unit: str

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0


@dataclass(frozen=True)
class Finished:
    """One piece of work that finished with a verdict: a unit compiled under wine, a verify
    step, a cell of `build --spec`."""

    name: str
    status: Status
    summary: str = ""
    seconds: float | None = None
    count: tuple[int, int] | None = None  # (finished so far, of total) when the work is counted
    # The stage's own result, for a view that draws more of it (verify's per-dtype tables).
    subject: object = None


class Reporter(Protocol):
    """Where a stage narrates: named steps (✓/✗ and their time), notes, compile progress, and
    each finished piece of work."""

    def step(self, name: str) -> AbstractContextManager[None]: ...

    def note(self, text: str) -> None: ...

    def progress(self, status: NinjaStatus) -> None: ...

    def finished(self, item: Finished) -> None: ...


class QuietReporter:
    """A reporter that shows nothing (`--json`, tests, library use)."""

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        yield

    def note(self, text: str) -> None:
        return None

    def progress(self, status: NinjaStatus) -> None:
        return None

    def finished(self, item: Finished) -> None:
        return None


class TimedSteps:
    """A Reporter that runs named steps through another and remembers how long each took."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter
        self.durations: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            with self.reporter.step(name):
                yield
        finally:
            self.add(name, time.monotonic() - start)

    def step(self, name: str) -> AbstractContextManager[None]:
        return self(name)

    def through(self, *, reporter: Reporter) -> TimedSteps:
        """These steps shown by another reporter, their seconds kept in the same record."""
        other = TimedSteps(reporter)
        other.durations = self.durations
        return other

    def add(self, name: str, seconds: float) -> None:
        """Count seconds to step name (a step timed elsewhere: the pair's joint compile)."""
        self.durations[name] = round(self.durations.get(name, 0.0) + seconds, 1)

    def note(self, text: str) -> None:
        self.reporter.note(text)

    def progress(self, status: NinjaStatus) -> None:
        self.reporter.progress(status)

    def finished(self, item: Finished) -> None:
        self.reporter.finished(item)


def timed(reporter: Reporter | None) -> TimedSteps:
    """reporter (quiet when None) with its steps timed; a TimedSteps is used as it is."""
    if isinstance(reporter, TimedSteps):
        return reporter
    return TimedSteps(reporter or QuietReporter())


HEARTBEAT_S = 15.0  # a CI log that stays silent longer looks hung (and some CIs kill it)


@contextmanager
def still_running(
    say: Callable[[float], None],
    *,
    every: float = HEARTBEAT_S,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[None]:
    """While the body runs, say(seconds so far) every `every` seconds: a long silent wait (pip
    resolving online, say) shows it is alive."""
    start = clock()
    stopped = threading.Event()

    def tick() -> None:
        while not stopped.wait(every):
            say(clock() - start)

    ticker = threading.Thread(target=tick, name="still-running", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        stopped.set()
        ticker.join()
