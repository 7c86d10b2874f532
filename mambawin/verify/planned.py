"""A step that runs a runner, planned before anything runs: verify decides first which steps
run (skips, conflicts), then runs the planned ones together (verify.workers) or one by one. A
step may run as parts at once (`in_parts`, runners/parts.py); `Gather` turns its jobs' outcomes,
from whichever worker each came, into the step's one result."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mambawin.errors import MambawinError
from mambawin.stage import Status
from mambawin.verify.board import Board
from mambawin.verify.options import VerifyOptions
from mambawin.verify.report import StepResult
from mambawin.verify.runners.parts import Merge, Split
from mambawin.verify.sandbox import InstallEnv
from mambawin.verify.workers import Job, Outcome, run_alone


@dataclass(frozen=True)
class Planned:
    """A step that runs a runner: the job, and how its report (or its failure) becomes the
    step's result. Where the job runs (a worker, its own process) is the caller's choice.

    parts: the same cases as job, split over jobs that can run at once (a block and dtype each),
    and merge: their reports, in parts' order, as the one report job would have given."""

    job: Job
    finish: Callable[[dict[str, Any]], StepResult]
    fail: Callable[[MambawinError], StepResult]
    parts: tuple[Job, ...] = ()
    merge: Merge | None = None

    @property
    def name(self) -> str:
        return self.job.name

    def jobs(self, *, whole: bool) -> tuple[Job, ...]:
        """The jobs to run: job alone when whole (--serial) or the step has no parts."""
        return (self.job,) if whole or not self.parts or self.merge is None else self.parts

    def result_of(self, outcomes: Sequence[Outcome]) -> StepResult:
        """The step's result from its jobs' outcomes (one, or one per part). A part that failed
        fails the step, naming the part; the seconds are the longest part's (they overlap)."""
        if len(outcomes) == 1:
            return self.result(outcomes[0])
        broken = [o for o in outcomes if o.error is not None or o.report is None]
        times = [o.seconds for o in outcomes if o.seconds is not None]
        if broken:
            why = "; ".join(f"{o.name}: {o.error or 'no report'}" for o in broken)
            result = self.fail(MambawinError(why))
        else:
            assert self.merge is not None  # parts run only with a merge
            result = self.finish(self.merge([o.report for o in outcomes if o.report is not None]))
        return replace(result, seconds=max(times)) if times else result

    def result(self, outcome: Outcome) -> StepResult:
        """The step's result from what became of its job, with the runner's own seconds."""
        if outcome.error is not None or outcome.report is None:
            error = outcome.error or MambawinError(f"{self.name} returned no report")
            result = self.fail(error)
        else:
            result = self.finish(outcome.report)
        return result if outcome.seconds is None else replace(result, seconds=outcome.seconds)


def in_parts(
    job: Job,
    finish: Callable[[dict[str, Any]], StepResult],
    fail: Callable[[MambawinError], StepResult],
    split: Split | None,
) -> Planned:
    """A step whose runner runs as split's parts (each job's arguments, then its part's), or
    whole when split is None."""
    if split is None:
        return Planned(job, finish, fail)
    jobs = tuple(Job(job.name, (*job.args, *args), label) for label, args in split.parts)
    return Planned(job, finish, fail, jobs, split.merge)


# A step either known before anything runs (a skip, a conflict) or a runner to run.
Step = StepResult | Planned


def run_planned(options: VerifyOptions, env: InstallEnv | None, step: Step) -> StepResult:
    """A planned step run in its own process (`run_module`), as each step ran before workers."""
    if isinstance(step, StepResult):
        return step
    assert env is not None  # a step is planned only with an install env
    return step.result(run_alone(env, step.job, options.timeout, options.tools.run_module))


def failed(name: str, what: str) -> Callable[[MambawinError], StepResult]:
    """The step's failure when its runner failed (crashed, printed no report): 'what: why'."""
    return lambda exc: StepResult(name, Status.FAIL, f"{what}: {exc}", error_details(exc))


def error_details(exc: MambawinError) -> dict[str, Any]:
    tail = getattr(exc, "tail", "")
    return {"error": str(exc), "tail": tail} if tail else {"error": str(exc)}


class Gather:
    """The jobs' outcomes, from every lane's thread, into their steps: a step's result is posted
    once each of its jobs (the whole step, or each part) has one; a job's first outcome counts."""

    def __init__(self, planned: Mapping[str, Planned], board: Board, *, whole: bool) -> None:
        self._planned = planned
        self._board = board
        self._step = {j.key: p.name for p in planned.values() for j in p.jobs(whole=whole)}
        self._keys = {p.name: [j.key for j in p.jobs(whole=whole)] for p in planned.values()}
        self._got: dict[str, dict[str, Outcome]] = {name: {} for name in planned}
        self._lock = threading.Lock()

    def add(self, outcome: Outcome) -> None:
        step = self._step.get(outcome.name)
        if step is None:
            return
        with self._lock:
            got = self._got[step]
            if outcome.name in got:
                return
            got[outcome.name] = outcome
            if len(got) < len(self._keys[step]):
                return
            ordered = [got[key] for key in self._keys[step]]
        self._board.post(step, [self._planned[step].result_of(ordered)])

    def parts(self) -> dict[str, dict[str, float | None]]:
        """{step: {part's key: its runner's seconds}} of each step that ran as parts: which
        part set the step's seconds (the report's profile)."""
        with self._lock:
            return {
                step: {key: got[key].seconds for key in self._keys[step] if key in got}
                for step, got in self._got.items()
                if len(self._keys[step]) > 1
            }
