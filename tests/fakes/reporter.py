"""A Reporter (mambawin/stage.py) that records what a stage narrates, for asserts."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mambawin.stage import Finished, NinjaStatus


class RecordingReporter:
    """Every step opened, note, progress line and finished item, in order."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.notes: list[str] = []
        self.progressed: list[NinjaStatus] = []
        self.done: list[Finished] = []

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        self.steps.append(name)
        yield

    def note(self, text: str) -> None:
        self.notes.append(text)

    def progress(self, status: NinjaStatus) -> None:
        self.progressed.append(status)

    def finished(self, item: Finished) -> None:
        self.done.append(item)
