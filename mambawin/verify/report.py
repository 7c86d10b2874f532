"""What verify reports: the target it ran on, the options, each step's result, the whole report."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from mambawin.packages import (
    MAMBA,
)
from mambawin.stage import Status


@dataclass(frozen=True)
class Target:
    """What a wheel must run on here: the torch the install env sees, and its GPU."""

    torch_version: str | None = None
    torch_cuda: str | None = None
    gpu_name: str | None = None
    capability: tuple[int, int] | None = None
    error: str | None = None
    installed_extension: str | None = None  # selective_scan_cuda already importable here
    installed_provenance: Mapping[str, object] | None = None
    # Every package importable here, by project: {"extension", "version", "provenance"}.
    installed_packages: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # The C library's version ("2.36") when it is glibc; None on musl, Windows and macOS.
    glibc: str | None = None


@dataclass(frozen=True)
class StepResult:
    """One step's outcome: ok / fail / skip, a one-line summary, and machine-readable details."""

    name: str
    status: Status  # ok / fail / skip (the doctor's check outcomes; never warn)
    summary: str
    details: Mapping[str, Any] = field(default_factory=dict)
    seconds: float | None = None  # wall time of the step, set as verify records it

    def __post_init__(self) -> None:
        # Accept the plain strings too ("ok"), as JSON and older callers spell them.
        object.__setattr__(self, "status", Status(self.status))


@dataclass(frozen=True)
class VerifyReport:
    """Every step of one verification, in order."""

    wheel: str | None
    target: Target
    steps: tuple[StepResult, ...]
    # file name -> sha256 of each wheel verified: `mambawin index` shows a record beside a wheel
    # only when it names that wheel's bytes.
    sha256: Mapping[str, str] = field(default_factory=dict)
    # How the run went: wall_seconds (the whole run), overlap, workers (each GPU worker's
    # steps and shared setup seconds: torch's import and CUDA's start), parts (each part's
    # seconds, per step that ran as parts), kernel_cache.
    profile: Mapping[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """No step failed (skipped steps say why in their summary)."""
        return all(step.status is not Status.FAIL for step in self.steps)

    @property
    def gpu_verified(self) -> bool:
        """The kernels really ran on a GPU and matched the reference."""
        # blocks (fast path vs upstream's reference path) and upstream's own tests also run the
        # kernels on the GPU against a reference; calls alone compares nothing.
        return any(
            s.name in ("smoke", "conv", "blocks", "upstream-tests") and s.status == "ok"
            for s in self.steps
        )

    def step(self, name: str) -> StepResult | None:
        """The step called `name`, if it ran."""
        return next((s for s in self.steps if s.name == name), None)

    def summary(self) -> str:
        """One line: the first failure, or whether a GPU really ran the kernels."""
        failed = [s for s in self.steps if s.status is Status.FAIL]
        if failed:
            return f"FAILED at {failed[0].name}: {failed[0].summary}"
        if self.gpu_verified:
            return f"verified on {self.target.gpu_name} ({_cc(self.target.capability)})"
        smoke = self.step("smoke") or self.step("conv")
        return f"passed, but not verified on a GPU: {smoke.summary if smoke else 'no GPU step'}"

    def to_json(self) -> dict[str, Any]:
        """A stable JSON object: wheel, sha256, target, passed, gpu_verified, summary, steps."""
        document: dict[str, Any] = _finite(
            {
                "wheel": self.wheel,
                "sha256": dict(self.sha256),
                "target": asdict(self.target),
                "passed": self.passed,
                "gpu_verified": self.gpu_verified,
                "summary": self.summary(),
                "steps": [{**asdict(s), "status": s.status.value} for s in self.steps],
                "profile": dict(self.profile),
            }
        )
        return document


def named(step: str, project: str) -> str:
    """'static' for mamba-ssm (as before the wheelhouse), 'static causal_conv1d' otherwise."""
    return step if project == MAMBA.name else f"{step} {project.replace('-', '_')}"


def _cc(capability: tuple[int, int] | None) -> str:
    return f"sm_{capability[0]}{capability[1]}" if capability else "no GPU"


def _finite(value: Any) -> Any:
    """Replace inf/nan (a kernel that produced garbage) with None: JSON has no infinity."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


@dataclass(frozen=True)
class Row:
    """One check of the static step: its verdict, its message, and more details for --json.
    An advisory row that fails warns (the wheel works); any other failed row fails the step."""

    name: str
    ok: bool
    message: str
    details: Mapping[str, object] = field(default_factory=dict)
    advisory: bool = False


def rows_result(name: str, rows: Sequence[Row]) -> StepResult:
    """One step's result from its rows: each row's verdict and details under its name; failed
    if a row that is not advisory failed, a warning if only advisory ones did."""
    details: dict[str, dict[str, object]] = {}
    for row in rows:
        advisory = {"advisory": True} if row.advisory else {}
        details[row.name] = {"ok": row.ok, "message": row.message, **advisory, **row.details}
    failed = [row.message for row in rows if not row.ok and not row.advisory]
    if failed:
        return StepResult(name, Status.FAIL, "; ".join(failed), details)
    warned = [row.message for row in rows if not row.ok]
    if warned:
        return StepResult(name, Status.WARN, "; ".join(warned), details)
    return StepResult(name, Status.OK, "; ".join(row.message for row in rows), details)
