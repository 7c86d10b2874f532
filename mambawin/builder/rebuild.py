"""`mambawin rebuild`: a published wheel rebuilt from its own provenance, and the bytes compared.

builder/rebuild_target.py reads each wheel's record as the build that made it. Here
`machine_checks` says what this machine would have to change to give the same bytes (the torch,
CUDA and compilers the build records, the Python, mambawin itself), so a rebuild that could only
differ is refused before any fetch or compile; `rebuild` builds each wheel into a folder of
mambawin's own and compares it with the published one member by member (wheel/compare.py).

The build and the machine's facts are passed in (`Build`, `Probe`): the CLI hands in the
dispatcher and its backends' probes, tests hand in fakes.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from mambawin import __version__
from mambawin.builder.backends import Outcome
from mambawin.builder.faces import to_argv
from mambawin.builder.pipeline import run_doctor
from mambawin.builder.rebuild_target import MachineFacts, Target
from mambawin.builder.request import CROSS_WINDOWS, BuildRequest, Tools
from mambawin.builder.results import BuildResult
from mambawin.builder.workspace import publish
from mambawin.errors import BuildError, MachineDiffers, RebuildDiffers, UsageError, os_error
from mambawin.store.atomic import staging_dir
from mambawin.store.owned import cache_dir
from mambawin.wheel.compare import Comparison, compare_wheels


@dataclass(frozen=True)
class FactCheck:
    """One fact of the wheel's build against this machine's, and how to make them agree."""

    what: str  # "mambawin", "torch", "CUDA", "compiler", "Python"
    wheel: str
    machine: str
    fix: str

    @property
    def ok(self) -> bool:
        return self.wheel == self.machine

    def line(self) -> str:
        machine = self.machine or "none"
        return f"{self.what} {self.wheel} (this machine: {machine}; {self.fix})"

    def to_json(self) -> dict[str, object]:
        return {
            "what": self.what,
            "wheel": self.wheel,
            "machine": self.machine,
            "ok": self.ok,
            "fix": "" if self.ok else self.fix,
        }


@dataclass(frozen=True)
class Planned:
    """One wheel's rebuild as `--plan` shows it: the build command and the machine's checks."""

    target: Target
    checks: tuple[FactCheck, ...]

    @property
    def ready(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self) -> dict[str, object]:
        return {
            "wheel": str(self.target.wheel),
            "command": command_line(self.target),
            "source": self.target.pin.describe(),
            "checks": [c.to_json() for c in self.checks],
            "ready": self.ready,
        }


@dataclass(frozen=True)
class Rebuilt:
    """One wheel against its rebuild."""

    wheel: Path
    comparison: Comparison
    kept: Path | None = None  # where --keep put the rebuilt wheel

    def to_json(self) -> dict[str, object]:
        return {
            "wheel": str(self.wheel),
            "sha256": self.comparison.sha256,
            "rebuilt_sha256": self.comparison.other_sha256,
            "identical": self.comparison.identical,
            "differences": list(self.comparison.differences),
            "kept": str(self.kept) if self.kept else None,
        }


@dataclass(frozen=True)
class RebuildReport:
    """Every wheel against its rebuild."""

    wheels: tuple[Rebuilt, ...]

    @property
    def identical(self) -> bool:
        return all(w.comparison.identical for w in self.wheels)

    def to_json(self) -> dict[str, object]:
        return {"wheels": [w.to_json() for w in self.wheels], "identical": self.identical}


# What runs a request (the dispatcher) and what this machine has for one (its probes).
Build = Callable[[BuildRequest], Outcome]
Probe = Callable[[BuildRequest], MachineFacts]


# ---- this machine against the wheel's build -----------------------------------------------------


def this_python() -> str:
    """The Python a native build runs setup.py with."""
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def native_facts(request: BuildRequest, tools: Tools | None = None) -> MachineFacts:
    """What a native build on this machine records: the doctor's toolchain for its archs."""
    report = ((tools or Tools()).doctor or run_doctor)(request.archs)
    toolchain = report.toolchain
    return MachineFacts(
        mambawin=__version__,
        torch=toolchain.torch,
        cuda=toolchain.cuda,
        compiler=toolchain.compiler,
        python=this_python(),
    )


def machine_checks(target: Target, machine: MachineFacts) -> list[FactCheck]:
    """Each fact the wheel's build recorded against this machine's, with its fix."""
    cross = target.request.backend == CROSS_WINDOWS
    needs = target.needs
    fixes = {
        "mambawin": f"pip install mambawin=={needs.mambawin}",
        "torch": (
            f"mambawin toolchain windows --setup --torch {needs.torch}"
            if cross
            else f"pip install torch=={needs.torch}"
        ),
        "CUDA": (
            f"mambawin toolchain windows --setup --cuda {needs.cuda}"
            if cross
            else f"put CUDA {needs.cuda}'s nvcc first (CUDA_HOME)"
        ),
        "compiler": (
            "set up the Windows toolchain that has them (`mambawin toolchain windows --setup`)"
            if cross
            else "build with those tools (CC/CXX for the host compiler, CUDA_HOME for nvcc)"
        ),
        "Python": f"run mambawin with Python {needs.python}",
    }
    pairs = (
        ("mambawin", needs.mambawin, machine.mambawin),
        ("torch", needs.torch, machine.torch),
        ("CUDA", needs.cuda, machine.cuda),
        ("compiler", needs.compiler, machine.compiler),
        ("Python", needs.python, machine.python),
    )
    # a stable wheel is py3: any Python builds it, so none is checked
    return [
        FactCheck(what, wanted, have, fixes[what])
        for what, wanted, have in pairs
        if what != "Python" or needs.python
    ]


def machine_differences(target: Target, machine: MachineFacts) -> list[FactCheck]:
    """Each fact this machine has otherwise than the wheel's build had, with its fix."""
    return [c for c in machine_checks(target, machine) if not c.ok]


def command_line(target: Target) -> str:
    """The `mambawin build` command line that made the wheel, dated as it was (the pinned
    source aside: a build from the command line takes what its ref names)."""
    argv = ["mambawin", *to_argv(target.request)]
    return f"SOURCE_DATE_EPOCH={target.epoch} {shlex.join(argv)}"


def plan(targets: Sequence[Target], probe: Probe) -> tuple[Planned, ...]:
    """What `rebuild` would build for each wheel and how this machine checks against it;
    nothing is fetched or compiled."""
    # the doctor's probes run once per backend and archs, not once per wheel
    seen: dict[tuple[object, ...], MachineFacts] = {}
    planned = []
    for target in targets:
        asked = target.request
        key = (asked.backend, asked.archs, asked.windows_root)
        if key not in seen:
            seen[key] = probe(asked)
        planned.append(Planned(target, tuple(machine_checks(target, seen[key]))))
    return tuple(planned)


def check_machine(targets: Sequence[Target], probe: Probe) -> None:
    """MachineDiffers, one line naming every difference and its fix, when this machine cannot
    give some wheel's bytes; nothing is fetched or built before this passes."""
    refuse_machine(plan(targets, probe))


def refuse_machine(planned: Sequence[Planned]) -> None:
    """MachineDiffers naming every check that failed, with its fix, on one line."""
    problems = []
    for each in planned:
        found = [c for c in each.checks if not c.ok]
        target = each.target
        if found:
            listed = "; ".join(m.line() for m in found)
            problems.append(f"{target.wheel.name} needs {listed}")
    if problems:
        raise MachineDiffers(f"this machine cannot give the same bytes: {' | '.join(problems)}")


# ---- the rebuild ---------------------------------------------------------------------------------


@contextmanager
def source_date(epoch: int) -> Iterator[None]:
    """SOURCE_DATE_EPOCH set to the wheel's build date while the build runs (every member, and
    the provenance's build_date, are dated by it), then as it was."""
    before = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = str(epoch)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SOURCE_DATE_EPOCH", None)
        else:
            os.environ["SOURCE_DATE_EPOCH"] = before


def rebuild(
    targets: Sequence[Target],
    *,
    build: Build,
    probe: Probe,
    keep: Path | None = None,
) -> RebuildReport:
    """Check this machine against every wheel, then rebuild each into a folder of mambawin's own
    and compare it with the published one; keep: where the rebuilt wheels go (else removed)."""
    if keep is not None and keep.exists() and not keep.is_dir():
        # refused before the compile: the comparison would be lost with it
        raise UsageError(f"--keep {keep} is not a folder: pass a folder for the rebuilt wheels")
    check_machine(targets, probe)
    done = []
    for target in targets:
        with staging_dir(cache_dir() / "rebuild", ".rebuild-") as scratch:
            with source_date(target.epoch):
                outcome = build(replace(target.request, out=scratch / "wheelhouse"))
            rebuilt = _rebuilt_wheel(target, outcome)
            comparison = _named(compare_wheels(target.wheel, rebuilt), target.wheel, rebuilt)
            kept = _keep(rebuilt, keep) if keep is not None else None
        done.append(Rebuilt(target.wheel, comparison, kept))
    return RebuildReport(tuple(done))


def _rebuilt_wheel(target: Target, outcome: Outcome) -> Path:
    """The wheel the build wrote for the target's package."""
    for result in outcome.results:
        if isinstance(result, BuildResult) and result.wheel is not None:
            if result.package != target.request.package.name:
                continue
            return result.wheel
    raise BuildError(f"{target.wheel.name}: the rebuild wrote no wheel of its package")


def _named(comparison: Comparison, wheel: Path, rebuilt: Path) -> Comparison:
    """The comparison, with the file name first where the rebuild named its wheel otherwise."""
    if wheel.name == rebuilt.name:
        return comparison
    named = (f"file name: {rebuilt.name}", *comparison.differences)
    return replace(comparison, differences=named)


def _keep(rebuilt: Path, keep: Path) -> Path:
    try:
        keep.mkdir(parents=True, exist_ok=True)
        return publish(rebuilt, keep)
    except OSError as exc:
        raise os_error(exc, "keep the rebuilt wheel in") from None


def refuse_differences(report: RebuildReport) -> None:
    """RebuildDiffers naming each wheel that is not its rebuild (after the result is shown)."""
    differing = [w for w in report.wheels if not w.comparison.identical]
    if differing:
        names = ", ".join(w.wheel.name for w in differing)
        raise RebuildDiffers(f"the rebuild is not byte for byte the published wheel: {names}")
