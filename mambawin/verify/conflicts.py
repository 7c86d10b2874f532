"""The requirements-conflict check: do the packages installed where the run steps import upstream's
Python satisfy the wheels' own Requires-Dist?

verify installs the wheels with --no-deps into a venv that sees the base environment's packages
(sandbox.py), or uses this environment as it is (--installed). When an installed package violates
a requirement (transformers 5.1.0 beside mamba-ssm 2.2.5, which requires transformers<5), every
step that imports upstream's Python fails for the environment's sake, with an ImportError that
names neither ("cannot import name 'GreedySearchDecoderOnlyOutput' from
'transformers.generation'"). The check runs once, after install (steps.environment_check), and
each step that imports upstream's Python reports the conflict instead of running.

Requirements are evaluated as pip evaluates them for this install: markers with the install
environment's own values and no extra requested (a requirement under `extra == "dev"` does not
apply); an installed version is compared with prereleases admitted (it is what is installed). A
requirement whose package is not installed at all blocks nothing: its import fails naming the
module ("No module named 'einops'"), which already says what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from mambawin.stage import Status
from mambawin.verify.report import StepResult

FIX = (
    "verify in a fresh environment (`python -m venv`, then the CUDA torch), or `pip install` the "
    "wheel there to let pip resolve its requirements"
)


@dataclass(frozen=True)
class Conflict:
    """One requirement of a package under test that the installed version violates."""

    project: str  # the package under test, canonical: "mamba-ssm"
    version: str  # its installed version: "2.2.5+cu130torch2.11"
    requirement: str  # what it requires, without its marker: "transformers<5"
    installed: str  # the installed package's name: "transformers"
    found: str  # its installed version: "5.1.0"

    @property
    def line(self) -> str:
        """'transformers 5.1.0 installed; mamba-ssm 2.2.5 requires transformers<5'"""
        found = (
            self.found if _version(self.found) else f"{self.found or '?'} (not a PEP 440 version)"
        )
        own = _version(self.version)
        shown = own.public if own else self.version
        wanted = f"{self.project} {shown} requires {self.requirement}"
        return f"{self.installed} {found} installed; {wanted}"

    def to_json(self) -> dict[str, str]:
        return {**asdict(self), "line": self.line}


@dataclass(frozen=True)
class EnvironmentCheck:
    """The check's verdict, computed once and asked by each step that imports upstream code."""

    conflicts: tuple[Conflict, ...] = ()

    def failure(self, step: str, projects: Iterable[str] | None = None) -> StepResult | None:
        """The step's failure when a package it imports (`projects`; None: every package under
        test) conflicts with the environment, else None (the step runs)."""
        wanted = None if projects is None else set(projects)
        found = [c for c in self.conflicts if wanted is None or c.project in wanted]
        if not found:
            return None
        lines = "; ".join(c.line for c in found)
        summary = (
            f"{lines}: {step} not run (upstream's Python may fail here for the "
            f"environment's sake, not the wheel's); {FIX}"
        )
        return StepResult(step, Status.FAIL, summary, {"conflicts": [c.to_json() for c in found]})


def check_environment(snapshot: Mapping[str, Any], projects: Sequence[str]) -> EnvironmentCheck:
    """The conflicts of each package under test (installed there) with what is installed beside
    it; snapshot is what runners/environment.py read in the install environment."""
    try:
        markers = {**snapshot["markers"], "extra": ""}
        installed: Mapping[str, Mapping[str, str]] = snapshot["distributions"]
        requires: Mapping[str, Sequence[str]] = snapshot["requires"]
        found = [
            conflict
            for project in projects
            if project in requires and project in installed
            for conflict in _conflicts(project, installed, requires[project], markers)
        ]
    except (KeyError, TypeError, AttributeError):
        return EnvironmentCheck()  # a snapshot of another shape blocks nothing, as an unread one
    return EnvironmentCheck(tuple(found))


def _conflicts(
    project: str,
    installed: Mapping[str, Mapping[str, str]],
    requires: Sequence[str],
    markers: Mapping[str, str],
) -> Iterable[Conflict]:
    for text in requires:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue  # verify's static step names an unparsable Requires-Dist
        if requirement.marker is not None and not _applies(requirement.marker, markers):
            continue
        row = installed.get(str(canonicalize_name(requirement.name)))
        if row is None or satisfied(requirement.specifier, str(row["version"])):
            continue
        yield Conflict(
            project,
            str(installed[project]["version"]),
            _without_marker(requirement),
            str(row["name"]),
            str(row["version"]),
        )


def satisfied(specifier: SpecifierSet, version: str) -> bool:
    """Whether an installed version meets a specifier, prereleases admitted; a version that is no
    PEP 440 version meets only an empty specifier or `===` with its exact text."""
    if not specifier:
        return True
    parsed = _version(version)
    if parsed is None:
        return all(s.operator == "===" and s.version == version for s in specifier)
    return specifier.contains(parsed, prereleases=True)


def _applies(marker: Marker, markers: Mapping[str, str]) -> bool:
    try:
        return marker.evaluate(dict(markers))
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return False  # a marker pip cannot evaluate either: it installs nothing for it


def _without_marker(requirement: Requirement) -> str:
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    if requirement.url:
        return f"{requirement.name}{extras} @ {requirement.url}"
    return f"{requirement.name}{extras}{requirement.specifier}"


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None
