"""What the build pipeline reports to: a protocol, and the reporter that shows nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from mambawin.builder.ninja import NinjaStatus


class Reporter(Protocol):
    """Where the pipeline narrates: steps, notes and compile progress (ui.progress draws them)."""

    def step(self, name: str) -> AbstractContextManager[None]: ...

    def note(self, text: str) -> None: ...

    def progress(self, status: NinjaStatus) -> None: ...


class QuietReporter:
    """A reporter that shows nothing (`--json`, tests, library use)."""

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        yield

    def note(self, text: str) -> None:
        return None

    def progress(self, status: NinjaStatus) -> None:
        return None


class TimedSteps:
    """Runs named steps through the reporter and remembers how long each took."""

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

    def add(self, name: str, seconds: float) -> None:
        """Count seconds to step name (a step timed elsewhere: the pair's joint compile)."""
        self.durations[name] = round(self.durations.get(name, 0.0) + seconds, 1)

    def note(self, text: str) -> None:
        self.reporter.note(text)
