"""What the build pipeline reports to: a protocol, and the reporter that shows nothing."""

from __future__ import annotations

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
