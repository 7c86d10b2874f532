"""Verify's results, recorded in the documented step order whatever order they finish in.

Work that overlaps (pip's online resolve, the GPU workers, upstream's tests) runs in threads and
posts its results here; the main thread records them (the Reporter sees each in order, as soon as
every step before it is known). Each result keeps its own seconds, measured from its own start to
its own end; a result that comes without them is timed on the main thread, from the last result
put there (the steps before the overlap run one after another).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from mambawin.stage import Finished, Reporter
from mambawin.verify.report import StepResult


class Board:
    """Slots in the documented order; each filled by one or more results (per wheel)."""

    def __init__(self, shown: Callable[[StepResult], Finished], *, reporter: Reporter) -> None:
        self.steps: list[StepResult] = []  # recorded, in order
        self._shown = shown
        self._reporter = reporter
        self._slots: list[str] = []  # keys not recorded yet, in order
        self._ready: dict[str, list[StepResult]] = {}
        self._filled: dict[str, list[StepResult]] = {}
        self._events: queue.Queue[tuple[str, list[StepResult] | BaseException]] = queue.Queue()
        self._mark = time.monotonic()
        self._threads: list[threading.Thread] = []  # background work, joined by drain

    def record(self, result: StepResult) -> StepResult:
        """A result known now, on the main thread, in the next slot of its own."""
        key = f"{result.name}#{len(self.steps) + len(self._slots)}"
        self.slot(key)
        return self.put(key, [result])[0]

    def slot(self, key: str) -> None:
        """Keep a place in the order for results that come later."""
        self._slots.append(key)

    def put(self, key: str, results: Sequence[StepResult]) -> list[StepResult]:
        """Fill a slot (main thread); results without seconds are timed from the last put."""
        now = time.monotonic()
        timed = [
            r if r.seconds is not None else replace(r, seconds=round(now - self._mark, 2))
            for r in results
        ]
        self._mark = now
        self._ready[key] = timed
        self._filled[key] = timed
        self._flush()
        return timed

    def filled(self, key: str) -> list[StepResult] | None:
        return self._filled.get(key)

    def later(self, key: str, work: Callable[[], Sequence[StepResult]], *, overlap: bool) -> None:
        """A slot filled by work: in a thread when steps overlap, else now."""
        self.slot(key)
        if not overlap:
            self.put(key, _timed(work))
            return

        def run() -> None:
            try:
                self._events.put((key, _timed(work)))
            except BaseException as exc:  # re-raised on the main thread: a bug is not lost
                self._events.put((key, exc))

        thread = threading.Thread(target=run, name=f"verify-{key}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def background(self, work: Callable[[], None], *, overlap: bool) -> None:
        """work that posts its own results (a worker): in a thread when steps overlap."""
        if not overlap:
            work()
            return

        def run() -> None:
            try:
                work()
            except BaseException as exc:
                self._events.put(("", exc))

        thread = threading.Thread(target=run, name="verify-worker", daemon=True)
        self._threads.append(thread)
        thread.start()

    def post(self, key: str, results: Sequence[StepResult]) -> None:
        """Fill a slot from any thread (a worker's result as it comes)."""
        if threading.current_thread() is threading.main_thread():
            self.put(key, results)
        else:
            self._events.put((key, list(results)))

    def drain(self, *, but: Sequence[str] = ()) -> None:
        """Wait on the main thread until every slot but those named is filled, recording each
        result as its turn comes."""
        while any(k not in self._filled and k not in but for k in self._slots):
            key, value = self._events.get()
            if isinstance(value, BaseException):
                raise value
            self.put(key, value)
        # A worker's thread posts its last result before it records its lane (the profile):
        # wait for the threads, so the profile names every worker that ran.
        for thread in self._threads:
            thread.join()

    def _flush(self) -> None:
        while self._slots and self._slots[0] in self._ready:
            for result in self._ready.pop(self._slots.pop(0)):
                self.steps.append(result)
                self._reporter.finished(self._shown(result))


def _timed(work: Callable[[], Sequence[StepResult]]) -> list[StepResult]:
    """work's results, each without its own seconds given work's whole time."""
    began = time.monotonic()
    results = list(work())
    took = round(time.monotonic() - began, 2)
    return [r if r.seconds is not None else replace(r, seconds=took) for r in results]
