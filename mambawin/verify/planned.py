"""A step that runs a runner, planned before anything runs: verify decides first which steps
run (skips, conflicts), then runs the planned ones together (verify.workers) or one by one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from mambawin.errors import MambawinError
from mambawin.stage import Status
from mambawin.verify.options import VerifyOptions
from mambawin.verify.report import StepResult
from mambawin.verify.sandbox import InstallEnv
from mambawin.verify.workers import Job, Outcome, run_alone


@dataclass(frozen=True)
class Planned:
    """A step that runs a runner: the job, and how its report (or its failure) becomes the
    step's result. Where the job runs (a worker, its own process) is the caller's choice."""

    job: Job
    finish: Callable[[dict[str, Any]], StepResult]
    fail: Callable[[MambawinError], StepResult]

    @property
    def name(self) -> str:
        return self.job.name

    def result(self, outcome: Outcome) -> StepResult:
        """The step's result from what became of its job, with the runner's own seconds."""
        if outcome.error is not None or outcome.report is None:
            error = outcome.error or MambawinError(f"{self.name} returned no report")
            result = self.fail(error)
        else:
            result = self.finish(outcome.report)
        return result if outcome.seconds is None else replace(result, seconds=outcome.seconds)


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
