"""Which wheels verify checks: one wheel, or a wheelhouse folder holding mamba-ssm and
causal-conv1d, told apart by their distribution name (never by a file-name guess); and whether
the two belong together.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from mambawin.errors import UsageError, WheelError, os_error
from mambawin.packages import (
    PACKAGE_NAMES,
    PairProblem,
    get_package,
    package_named,
    pair_problem,
)
from mambawin.userfile import kind_of
from mambawin.wheel.gpucode import GpuCode
from mambawin.wheel.naming import parse_file_name
from mambawin.wheel.provenance import Provenance
from mambawin.wheel.stable_wheel import is_stable

# Which causal-conv1d a mamba-ssm release needs: one table for build, verify and team specs,
# mambawin.packages.PAIR_RULES.


@dataclass(frozen=True)
class WheelRef:
    """One wheel to verify: its path, canonical project name and version."""

    path: Path
    project: str
    version: str

    @property
    def extension(self) -> str:
        """The compiled module this package ships."""
        return get_package(self.project).extension

    @property
    def label(self) -> str:
        """'mamba_ssm' / 'causal_conv1d': the import name, as users know the package."""
        return self.project.replace("-", "_")


@dataclass(frozen=True)
class WheelUnderTest:
    """One package as the static step found it (a wheel, or an installed package): what the
    steps after it (fit, pair, install, ops, the GPU steps) need to know of it."""

    project: str
    version: str | None  # None: an installed package whose version was not read
    # The provenance, parsed once where the wheel (or the installed package) was read; None when
    # it has none. `record` is the same, an empty record standing in for none.
    provenance: Provenance | None = None
    code: GpuCode | None = None  # the GPU code the static step read; None when unread

    @property
    def record(self) -> Provenance:
        """The typed provenance (an empty record when the wheel has none)."""
        return self.provenance or Provenance()


def find_wheels(path: Path, fits: Sequence[str] | None = None) -> tuple[WheelRef, ...]:
    """The wheel at `path`, or every mamba-ssm / causal-conv1d wheel in the folder `path`."""
    if not path.exists():
        msg = f"{path} does not exist: pass a built .whl or a folder of wheels (`mambawin build`)"
        raise UsageError(msg)
    files = sorted(path.glob("*.whl")) if path.is_dir() else [path]
    for file in files:
        _check_is_file(file)
    refs = [ref for ref in (_describe(f, strict=not path.is_dir()) for f in files) if ref]
    if not refs:
        msg = (
            f"{path} holds no mamba_ssm or causal_conv1d wheel: pass the folder "
            "`mambawin build` wrote its wheels to"
        )
        raise UsageError(msg)
    chosen = [
        _one_per_project([r for r in refs if r.project == p], fits)
        for p in PACKAGE_NAMES
        if any(r.project == p for r in refs)
    ]
    return tuple(chosen)


def _check_is_file(file: Path) -> None:
    """A wheel is a regular file: a FIFO would block the read, `/dev/zero` never end its hash."""
    try:
        kind = kind_of(os.stat(file).st_mode)
    except OSError as exc:
        raise os_error(exc, "read the wheel") from None
    if kind is not None:
        raise UsageError(f"{file} is {kind}, not a wheel: pass a .whl file")


def _describe(file: Path, *, strict: bool) -> WheelRef | None:
    try:
        name = parse_file_name(file.name)
    except WheelError as exc:
        raise UsageError(str(exc)) from None
    project = canonicalize_name(name.name)
    if package_named(project) is None:
        if strict:
            msg = (
                f"{file.name} is a {name.name} wheel: verify checks mamba_ssm and "
                "causal_conv1d wheels"
            )
            raise UsageError(msg)
        return None
    return WheelRef(file, project, name.version)


def _one_per_project(refs: list[WheelRef], fits: Sequence[str] | None) -> WheelRef:
    """Several wheels of one package: keep the one whose tags fit this Python, else refuse."""
    if len(refs) > 1:
        from packaging.tags import sys_tags

        supported = set(fits) if fits is not None else {str(t) for t in sys_tags()}
        refs = [r for r in refs if parse_file_name(r.path.name).tags & supported] or refs
    if len(refs) > 1:
        names = ", ".join(r.path.name for r in refs)
        msg = (
            f"the folder holds {len(refs)} {refs[0].label} wheels that fit this Python "
            f"({names}): keep one per package"
        )
        raise UsageError(msg)
    return refs[0]


def pair_problems(
    mamba: tuple[str, Provenance | None], conv: tuple[str, Provenance | None]
) -> list[str]:
    """Why a mamba-ssm and a causal-conv1d (version, provenance) do not belong together."""
    problems = []
    found = _pair_problem(mamba[0], conv[0])
    if found is not None:
        problems.append(
            f"mamba_ssm {mamba[0]} needs causal_conv1d{found.needed}, found {conv[0]}: "
            f"build causal-conv1d at a tag matching {found.needed}"
        )
    # A stable wheel fits every torch at or above its floor: the fit step judges each wheel
    # against the installed torch, so only the CUDA major must agree here.
    stable = is_stable(mamba[1]) or is_stable(conv[1])
    labels = (_local(mamba[0]), _local(conv[0]))
    if all(labels) and labels[0] != labels[1] and not stable:
        problems.append(
            f"local labels differ (+{labels[0]} vs +{labels[1]}): build both wheels "
            "against the same torch and CUDA"
        )
    keys = (("torch_version", "torch"),) * (not stable) + (("cuda_version", "CUDA"),)
    for key, what in keys:
        built = (_minor(_recorded(mamba[1], key)), _minor(_recorded(conv[1], key)))
        if all(built) and built[0] != built[1]:
            problems.append(
                f"built for different {what} ({built[0]} vs {built[1]}): rebuild "
                "both with the same toolchain"
            )
    return problems


def _pair_problem(mamba_version: str, conv_version: str) -> PairProblem | None:
    try:
        return pair_problem(Version(mamba_version), Version(conv_version))
    except InvalidVersion:
        return None


def _public(version: str) -> str:
    try:
        return Version(version).public
    except InvalidVersion:
        return version.split("+")[0]


def _local(version: str) -> str | None:
    try:
        return Version(version).local
    except InvalidVersion:
        return None


def _recorded(provenance: Provenance | None, key: str) -> str:
    return str(getattr(provenance or Provenance(), key))


def _minor(version: object) -> str | None:
    if not version:
        return None
    try:
        return ".".join(map(str, Version(str(version)).release[:2]))
    except InvalidVersion:
        return None
