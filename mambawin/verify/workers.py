"""The GPU steps' runners, run together in one child Python per lane (`runners.worker`): torch
is imported and CUDA started once per lane instead of once per step.

Each runner's result comes back on its own line as soon as it finishes, so verify records each
step as it ends. A worker that dies (a segfault in an extension, the time limit) fails the step
that was running, naming the crash; the steps it had not reached then run each in its own process
(`run_module`), as they would without a worker, so one crash costs one step.

Steps are spread over lanes, one worker each, run at the same time: the short steps share one
(SHARED), and each job of the steps that compile most gets a worker (and a core) of its own:
Triton's and inductor's kernel compiles are single-threaded in a process, so blocks and compile
run as parts (a block and dtype each, verify.planned), one worker a part. `--serial` runs every
step whole, one after another, in one worker.
"""

from __future__ import annotations

import json
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mambawin import proc
from mambawin.errors import CommandError, CommandTimeout, MambawinError
from mambawin.verify.runners.worker import MARK
from mambawin.verify.sandbox import InstallEnv

WORKER = "mambawin.verify.runners.worker"
# The steps that share one worker when steps overlap: the short ones. Any other job (a part of
# blocks or compile) gets a worker of its own.
SHARED = ("ops", "smoke", "conv", "calls")

RunModule = Callable[[InstallEnv, str, Sequence[str], float], dict[str, Any]]


@dataclass(frozen=True)
class Job:
    """One runner to run: its step name (a module of verify.runners) and its arguments; part
    names the share of the step's cases it runs when the step runs as several jobs."""

    name: str
    args: tuple[str, ...]
    part: str = ""

    @property
    def module(self) -> str:
        return f"mambawin.verify.runners.{self.name}"

    @property
    def key(self) -> str:
        """What names this job's outcome: the step, or `step[part]`."""
        return f"{self.name}[{self.part}]" if self.part else self.name


@dataclass(frozen=True)
class Outcome:
    """What became of one job: its report, or the error that stands for its failure."""

    name: str  # the job's key
    report: dict[str, Any] | None = None
    error: MambawinError | None = None
    seconds: float | None = None  # the runner's own time (the worker's setup not included)
    alone: bool = False  # ran in its own process (no worker, or after the worker crashed)


@dataclass
class Lane:
    """One worker's facts for the report: its steps and its shared setup."""

    steps: tuple[str, ...]
    setup_seconds: float | None = None
    torch: str | None = None
    crashed: str | None = None  # why the worker ended early, when it did
    alone: list[str] = field(default_factory=list)  # steps run in their own process after

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": list(self.steps),
            "setup_seconds": self.setup_seconds,
            "torch": self.torch,
            "crashed": self.crashed,
            "alone": list(self.alone),
        }


def lanes(jobs: Sequence[Job], serial: bool, cpus: int | None = None) -> list[list[Job]]:
    """The SHARED steps' jobs in one lane, every other job in a lane of its own (in their
    order), or all in one lane when serial. With fewer CPUs than lanes (cpus: those this process
    may use), the other jobs are dealt round-robin over one lane per CPU beside the shared one:
    more compiling processes than CPUs would only wait on each other."""
    if serial:
        return [list(jobs)] if jobs else []
    shared = [job for job in jobs if job.name in SHARED]
    others = [job for job in jobs if job.name not in SHARED]
    count = min(max(1, (cpus or proc.usable_cpus()) - 1), len(others))
    dealt = [others[i::count] for i in range(count)]
    return [lane for lane in (shared, *dealt) if lane]


def run_worker(
    env: InstallEnv,
    jobs: Sequence[Job],
    timeout: float,
    on_outcome: Callable[[Outcome], None],
    run_module: RunModule,
) -> Lane:
    """Run jobs in one worker, each outcome handed to on_outcome as it comes; after a crash the
    jobs not reached run each in its own process. timeout bounds each job (the worker gets
    one timeout per job)."""
    lane = Lane(tuple(job.key for job in jobs))
    reading = _Reader(lane, on_outcome)
    plan = json.dumps([_planned(job) for job in jobs])
    limit = timeout * len(jobs)
    with tempfile.TemporaryDirectory(prefix="mambawin-worker-") as results:
        argv = [env.python, "-m", WORKER, "--json", "--results", results, "--plan", plan]
        try:
            done = proc.run(argv, env=env.env, timeout=limit, check=False, on_line=reading.line)
            ended = None if done.returncode == 0 else _exit_reason(done.returncode, reading.last)
        except CommandTimeout:
            ended = f"the worker did not finish within {limit:g} s and was stopped"
        except CommandError as exc:  # the interpreter could not even start
            ended = str(exc)
    finished = set(reading.finished)
    if ended is not None or finished != set(lane.steps):
        lane.crashed = ended or "the worker ended before every step had run"
        for job in jobs:
            if job.key in finished:
                continue
            if job.key == reading.running:
                crash = CommandError(f"the runner worker crashed while {job.key} ran: {ended}")
                on_outcome(Outcome(job.key, error=crash, seconds=reading.running_for()))
                continue
            lane.alone.append(job.key)
        one_by_one(env, [j for j in jobs if j.key in lane.alone], timeout, on_outcome, run_module)
    return lane


def _planned(job: Job) -> dict[str, Any]:
    """A job as the worker's plan lists it (a part's key named, runners.worker)."""
    return {"name": job.name, "args": list(job.args), **({"key": job.key} if job.part else {})}


def one_by_one(
    env: InstallEnv,
    jobs: Sequence[Job],
    timeout: float,
    on_outcome: Callable[[Outcome], None],
    run_module: RunModule,
) -> Lane:
    """Each job in its own process, as verify ran them before workers (and as the jobs a
    crashed worker did not reach run)."""
    for job in jobs:
        on_outcome(run_alone(env, job, timeout, run_module))
    return Lane(tuple(job.key for job in jobs), alone=[job.key for job in jobs])


def run_alone(env: InstallEnv, job: Job, timeout: float, run_module: RunModule) -> Outcome:
    """One job in its own process (`python -m mambawin.verify.runners.NAME --json ...`), timed
    start to end (its own torch import included)."""
    began = time.monotonic()
    try:
        report = run_module(env, job.module, list(job.args), timeout)
    except MambawinError as exc:
        return Outcome(job.key, error=exc, seconds=_since(began), alone=True)
    return Outcome(job.key, report=report, seconds=_since(began), alone=True)


def _since(began: float) -> float:
    return round(time.monotonic() - began, 2)


class _Reader:
    """Reads the worker's lines: its setup, which runner runs, and each runner's result."""

    def __init__(self, lane: Lane, on_outcome: Callable[[Outcome], None]) -> None:
        self.lane = lane
        self.on_outcome = on_outcome
        self.running: str | None = None
        self.started = 0.0  # when the running runner started (monotonic)
        self.finished: list[str] = []
        self.last = ""  # the last line that was no message: what a crash printed

    def running_for(self) -> float | None:
        return round(time.monotonic() - self.started, 2) if self.running else None

    def line(self, text: str) -> None:
        if not text.startswith(MARK):
            if text.strip():
                self.last = text.strip()
            return
        try:
            message = json.loads(text[len(MARK) :])
        except ValueError:
            return  # a line cut by a crash mid-write: the crash is reported for the step
        if not isinstance(message, dict):
            return
        if "setup" in message:
            setup = message["setup"]
            self.lane.setup_seconds = setup.get("seconds")
            self.lane.torch = setup.get("torch")
        elif "start" in message:
            self.running, self.started = str(message["start"]), time.monotonic()
        elif "step" in message:
            self._finished(message)

    def _finished(self, message: dict[str, Any]) -> None:
        name = str(message["step"])
        if name not in self.lane.steps or name in self.finished:
            return
        self.finished.append(name)
        self.running = None
        seconds = message.get("seconds")
        report = message.get("report")
        if "report_file" in message:
            report = _read_report(str(message["report_file"]))
        if isinstance(report, dict):
            self.on_outcome(Outcome(name, report=report, seconds=seconds))
            return
        error = CommandError(str(message.get("error") or f"{name} returned no report"))
        self.on_outcome(Outcome(name, error=error, seconds=seconds))


def _read_report(path: str) -> dict[str, Any] | None:
    """A report the worker wrote to its results folder (None when unreadable: the step fails)."""
    try:
        found = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _exit_reason(returncode: int, last: str) -> str:
    """'killed by signal 11 (SIGSEGV): last line', 'exit 0xC0000005 (access violation)' (a
    crash on Windows) or 'exit 1: last line'."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown"
        how = f"killed by signal {-returncode} ({name})"
    elif returncode >= 0xC0000000:  # an NTSTATUS: Windows ended the process
        how = f"exit {returncode:#010X}".replace("0X", "0x")
        how += " (access violation)" if returncode == 0xC0000005 else ""
    else:
        how = f"exit {returncode}"
    return f"{how}: {last[:200]}" if last else how
