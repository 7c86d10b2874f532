"""The facts `build --plan` plans with: found on this machine, given as options, or assumed.

A plan must run where the build cannot (no torch, no CUDA, no GPU: a laptop planning a team's
wheels), so a fact the doctor could not find is assumed and said to be, and a failed doctor check
is listed as something the plan could not check instead of stopping it. The build itself still
stops on those checks.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Any

from mambawin.archs import Arch, format_archs
from mambawin.builder.options import BuildOptions, resolve_jobs
from mambawin.doctor.checks import DoctorReport
from mambawin.doctor.probes.gpu import portable
from mambawin.stage import Status
from mambawin.toolchain.cuda import CudaFacts
from mambawin.toolchain.native import Toolchain
from mambawin.wheel.naming import platform_tag

# The torch and CUDA a plan assumes where none is installed: those of the measured builds its
# time comes from (docs/benchmarks.md §22: torch 2.11.0+cu130, nvcc 13.0).
ASSUMED_TORCH = "2.11.0"
ASSUMED_CUDA = "13.0"
FOUND, GIVEN, ASSUMED = "found", "given", "assumed"
# A skipped doctor check whose `found` says an optional tool is absent (a compiler cache, the
# Windows toolchain): nothing the plan could not check, so not listed.
ABSENT_OPTIONAL = ("not found", "not set up")


@dataclass(frozen=True)
class Fact:
    """One input of the plan, where it came from, and what to know about it."""

    name: str  # torch | cuda | python | platform | archs | jobs
    value: str
    source: str  # found | given | assumed
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PlanFacts:
    """What the plan builds with, and what it could not check."""

    facts: tuple[Fact, ...]
    unchecked: tuple[str, ...]  # one line each: a failed or skipped doctor check
    toolchain: Toolchain  # the doctor's, its missing torch/CUDA filled with the assumed
    archs: tuple[Arch, ...]
    jobs: int


def gather(options: BuildOptions, report: DoctorReport) -> PlanFacts:
    """The plan's facts from the doctor's report and the options; never raises on a failed check."""
    tools = report.toolchain
    torch = _fact("torch", tools.torch_version, ASSUMED_TORCH, "no torch found by this Python")
    cuda = _fact("cuda", tools.cuda or None, ASSUMED_CUDA, "no nvcc and no CUDA torch found")
    python = Fact("python", f"{sys.version_info[0]}.{sys.version_info[1]}", FOUND)
    platform = Fact("platform", platform_tag(), FOUND)
    archs, arch_fact = _archs(options, report)
    jobs = resolve_jobs(options.jobs, report.recommended_jobs)
    jobs_fact = Fact("jobs", str(jobs), GIVEN if options.jobs else FOUND)
    toolchain = replace(
        tools,
        torch_version=tools.torch_version or ASSUMED_TORCH,
        cuda_version=tools.cuda or ASSUMED_CUDA,
    )
    unchecked = tuple(
        f"{c.name}: {c.hint or c.found or c.status.value}"
        + (" (the build stops here)" if c.stops_build else "")
        for c in report.checks
        if c.status is Status.FAIL or (c.status is Status.SKIP and c.found not in ABSENT_OPTIONAL)
    )
    return PlanFacts(
        (torch, cuda, python, platform, arch_fact, jobs_fact), unchecked, toolchain, archs, jobs
    )


def _fact(name: str, found: str | None, assumed: str, why: str) -> Fact:
    if found:
        return Fact(name, found, FOUND)
    return Fact(name, assumed, ASSUMED, f"{why}: the build needs one")


def _archs(options: BuildOptions, report: DoctorReport) -> tuple[tuple[Arch, ...], Fact]:
    if options.archs:
        return options.archs, Fact("archs", format_archs(options.archs), GIVEN)
    if report.recommended_archs:
        found = report.recommended_archs
        return found, Fact("archs", format_archs(found), FOUND, "this machine's GPUs")
    # No GPU: doctor's suggestion for every recent GPU; the build itself asks for --arch.
    assumed = portable(CudaFacts())
    note = "no CUDA GPU visible: the build needs --arch, the GPUs the wheel is for"
    return assumed, Fact("archs", format_archs(assumed), ASSUMED, note)
