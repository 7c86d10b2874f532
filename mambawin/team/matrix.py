"""A spec expanded into cells: one wheel each (package × Python × torch × platform).

With `abi = "stable"` the Python and torch axes collapse: one py3-none wheel per package × CUDA
major × platform, built against the oldest of the spec's torches at or above the stable floor for
that CUDA major and serving them all (and every later torch); a torch below the floor gets an
impossible cell saying so.

Each cell knows the exact file name its build will produce
(`mamba_ssm-2.2.6+cu130torch2.11-cp312-cp312-win_amd64.whl`), whether that wheel is already in the
wheelhouse or the team's index, and, when it cannot be built, why in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from packaging.version import Version

from mambawin import dispatch
from mambawin.abi import DEFAULT_ABI, STABLE_FLOOR, STABLE_PYTHON_TAG, Abi
from mambawin.archs import Arch, format_archs
from mambawin.builder.pair import NONE as NO_COMPANION
from mambawin.builder.request import CROSS_WINDOWS, NATIVE, WINDOWS, BuildRequest
from mambawin.index.reader import index_files
from mambawin.packages import get_package
from mambawin.patch.registry import own_ids
from mambawin.team import compat
from mambawin.team.spec import PackageSpec, Spec, TorchSpec
from mambawin.team.versions import package_version
from mambawin.versions import release
from mambawin.wheel import naming
from mambawin.wheel.provenance import local_version_label
from mambawin.wheel.provenance import stable_label as wheel_stable_label

TODO, BUILT, INDEXED, IMPOSSIBLE = "todo", "built", "indexed", "impossible"


@dataclass(frozen=True)
class Cell:
    """One wheel of the matrix and what is known about it."""

    package: PackageSpec
    python: str
    torch: TorchSpec
    platform: str
    archs: tuple[Arch, ...]
    keep_complex: bool
    version: str | None  # the wheel's public version; None when it cannot be known yet
    wheel: str | None  # the file name the build will produce
    status: str = TODO  # todo | built | indexed | impossible
    reason: str = ""  # why impossible
    note: str = ""  # how the version was found, when it is a guess
    skip_patches: tuple[str, ...] = ()  # the spec's left-out patch ids this package has
    abi: Abi = DEFAULT_ABI  # "stable": one py3-none wheel for every Python and torch >= floor
    serves: tuple[str, ...] = ()  # stable: the spec's torches ("2.11.0 cu130") the wheel serves

    @property
    def stable(self) -> bool:
        return self.abi == "stable"

    @property
    def torch_floor(self) -> str | None:
        """The oldest torch a stable cell's wheel loads in; None for a cell of one torch."""
        return str(STABLE_FLOOR) if self.stable else None

    @property
    def id(self) -> str:
        """A short stable name, also usable as a CI job name."""
        if self.stable:
            return (
                f"{self.package.name}-{self.package.ref}-stable-torch{self.torch.version}"
                f"-{self.torch.variant}-{self.platform}"
            )
        return (
            f"{self.package.name}-{self.package.ref}-py{self.python}-torch{self.torch.version}"
            f"-{self.torch.variant}-{self.platform}"
        )

    @property
    def python_tag(self) -> str:
        return STABLE_PYTHON_TAG if self.stable else "cp" + self.python.replace(".", "")

    @property
    def local_label(self) -> str:
        """The local version label the build gets (`--local-version`)."""
        if self.stable:
            return stable_label(self.torch.cuda)
        return local_version_label(self.torch.cuda, self.torch.version)

    def to_json(self) -> dict[str, Any]:
        """The stable `matrix --json` form of one cell."""
        return {
            "id": self.id,
            "package": self.package.name,
            "ref": self.package.ref,
            "repo": self.package.repo,
            "version": self.version,
            "python": self.python,
            "torch": self.torch.version,
            "cuda": self.torch.cuda,
            "variant": self.torch.variant,
            "torch_index": self.torch.index,
            "platform": self.platform,
            "archs": format_archs(self.archs),
            "keep_complex": self.keep_complex,
            "skip_patches": list(self.skip_patches),
            "abi": self.abi,
            "torch_floor": self.torch_floor,
            "serves": list(self.serves),
            "wheel": self.wheel,
            "status": self.status,
            "reason": self.reason,
            "note": self.note,
        }


Resolver = Callable[[PackageSpec], tuple[str | None, str]]


def expand(spec: Spec, *, resolve: Resolver | None = None) -> list[Cell]:
    """Every cell of the spec, in spec order, marked built/indexed/impossible where known."""
    resolve = resolve or package_version
    versions = {p.name: resolve(p) for p in spec.packages}
    existing = _existing(spec, [p.name for p in spec.packages])
    cells: dict[tuple[Any, ...], Cell] = {}
    for package in spec.packages:
        version, note = versions[package.name]
        if spec.options.abi == "stable":
            for cell in stable_cells(spec, package, version, note):
                cells.setdefault((cell.id,), _mark(cell, spec, versions, existing))
            continue
        for number, torch in enumerate(spec.torches, 1):
            for platform in spec.platforms:
                for python in spec.pythons:
                    cell = _cell(spec, package, python, torch, platform, version, note)
                    key = (package, python, torch, platform)
                    if key in cells:
                        # `cuda = "13.0"` and `cuda = "cu130"` name one torch: one wheel, one job.
                        cells[key] = _noted(
                            cells[key],
                            f"[[torch]] #{number} is the same "
                            f"torch {torch.version} {torch.variant}: merged",
                        )
                        continue
                    cells[key] = _mark(cell, spec, versions, existing)
    return list(cells.values())


def stable_cells(spec: Spec, package: PackageSpec, version: str | None, note: str) -> list[Cell]:
    """The stable cells of one package: per platform and CUDA major, one wheel built against the
    oldest spec torch at or above the floor; an impossible cell per torch below it."""
    majors: dict[int, list[TorchSpec]] = {}
    for torch in dict.fromkeys(spec.torches):
        majors.setdefault(release(torch.cuda, 1)[0], []).append(torch)
    cells = []
    for platform in spec.platforms:
        for torches in majors.values():
            fitting = [t for t in torches if release(t.version, 3) >= release(STABLE_FLOOR, 3)]
            for torch in (t for t in torches if t not in fitting):
                cell = _cell(spec, package, spec.pythons[0], torch, platform, None, note)
                why = (
                    f"torch {torch.version} is older than the stable floor {STABLE_FLOOR}: drop "
                    'it, or build it in a spec with abi = "torch"'
                )
                cells.append(replace(cell, abi="stable", status=IMPOSSIBLE, reason=why))
            if fitting:
                cells.append(_stable_cell(spec, package, fitting, platform, version, note))
    return cells


def _stable_cell(
    spec: Spec,
    package: PackageSpec,
    fitting: list[TorchSpec],
    platform: str,
    version: str | None,
    note: str,
) -> Cell:
    torch = min(fitting, key=lambda t: Version(t.version))
    python = build_python(spec, torch, platform)
    serves = tuple(f"{t.version} {t.variant}" for t in fitting)
    served = (
        f"stable ABI: {package.name} for CUDA {release(torch.cuda, 1)[0]}.x on {platform} is one "
        f"wheel for any Python and torch >= {STABLE_FLOOR} (the spec's {', '.join(serves)}), "
        f"built with torch {torch.version} and Python {python}"
    )
    cell = _cell(
        spec, package, python, torch, platform, None, "; ".join(filter(None, (note, served)))
    )
    wheel = stable_wheel_name(package, version, torch, platform) if version else None
    return replace(cell, abi="stable", serves=serves, version=version, wheel=wheel)


def build_python(spec: Spec, torch: TorchSpec, platform: str) -> str:
    """The Python a stable wheel is built (or checked) with: the first of the spec's that torch
    has a wheel for on platform, else the spec's first (the cell then says why it is impossible)."""
    return next(
        (p for p in spec.pythons if not compat.torch_python(torch.version, p, platform)),
        spec.pythons[0],
    )


def stable_label(cuda: str) -> str:
    """The local version label of a stable wheel, as `build --abi stable` writes it
    (wheel.provenance.stable_label: its CUDA variant and the floor, `cu130.stable.torch2.10`)."""
    return wheel_stable_label(cuda, str(STABLE_FLOOR))


def stable_wheel_name(package: PackageSpec, version: str, torch: TorchSpec, platform: str) -> str:
    """The file name of a stable cell's wheel: py3-none-<platform>, the stable label."""
    return naming.wheel_name(
        package.upstream, version, stable_label(torch.cuda), "", "stable", platform
    )


def _noted(cell: Cell, note: str) -> Cell:
    return (
        cell
        if note in cell.note
        else replace(cell, note=f"{cell.note}; {note}" if cell.note else note)
    )


def wheel_name(
    package: PackageSpec, version: str, python: str, torch: TorchSpec, platform: str
) -> str:
    """The file name mambawin build writes for this cell (local label as `build` sets it)."""
    label = local_version_label(torch.cuda, torch.version)
    return naming.wheel_name(package.upstream, version, label, python, "torch", platform)


def _cell(
    spec: Spec,
    package: PackageSpec,
    python: str,
    torch: TorchSpec,
    platform: str,
    version: str | None,
    note: str,
) -> Cell:
    wheel = wheel_name(package, version, python, torch, platform) if version else None
    own = own_ids(spec.options.skip_patches, get_package(package.name))
    return Cell(
        package,
        python,
        torch,
        platform,
        spec.archs,
        spec.options.keep_complex,
        version,
        wheel,
        note=note,
        skip_patches=own,
    )


def _mark(
    cell: Cell, spec: Spec, versions: dict[str, tuple[str | None, str]], existing: dict[str, str]
) -> Cell:
    """The cell with its status: impossible (with why) before indexed before built before todo."""
    reason = impossible(cell, spec, {name: v for name, (v, _) in versions.items()})
    if reason:
        return _replace(cell, IMPOSSIBLE, reason)
    if cell.wheel and cell.wheel in existing:
        return _replace(cell, existing[cell.wheel], "")
    return cell


def impossible(cell: Cell, spec: Spec, versions: dict[str, str | None]) -> str:
    """Why this cell cannot be built, in one line; '' when nothing known stops it."""
    reasons = [build_refusal(cell, spec)]
    reasons += [compat.torch_python(cell.torch.version, cell.python, cell.platform)]
    reasons += [compat.cuda_arch(cell.torch.cuda, arch) for arch in cell.archs]
    if cell.package.name == "causal-conv1d":
        reasons.append(compat.pair(versions.get("mamba-ssm"), cell.version))
    return next((r for r in reasons if r), "")


def cell_request(cell: Cell, spec: Spec, backend: str = NATIVE) -> BuildRequest:
    """The build a cell is: what the runner runs (runner.build_argv writes it as arguments) and
    what the judge validates, one record. One cell is one wheel: `--with none`, or build would
    add causal-conv1d to mamba-ssm's; the label is the one the matrix promised. On the
    cross-windows backend (`ci github --build-on linux`) it is what the cross job builds: the
    platform named, the spec's [options] as they are (refused there when not applied), and the
    label the cross build writes itself."""
    request = BuildRequest(
        package=cell.package.upstream,
        ref=cell.package.ref,
        repo=cell.package.repo,
        archs=cell.archs,
        out=spec.wheelhouse,
        keep_complex=cell.keep_complex,
        skip_patches=cell.skip_patches,
        drop=spec.options.drop,
        keep=spec.options.keep,
        abi=cell.abi,
        source_from=spec.options.source_from,
        arch_groups=spec.options.arch_groups,
    )
    if backend == CROSS_WINDOWS:
        return replace(request, platform=WINDOWS, backend=CROSS_WINDOWS)
    return replace(request, local_version=cell.local_label, with_=NO_COMPANION)


def build_refusal(cell: Cell, spec: Spec) -> str:
    """What `mambawin build` would refuse for this cell, in build's own words ('' if nothing):
    the runner builds each cell's request (runner.build_argv), so judged by the one validator
    on the backend that builds it, a cell build would exit 2 on is impossible, never planned."""
    return dispatch.judge(cell_request(cell, spec))


def _replace(cell: Cell, status: str, reason: str) -> Cell:
    return replace(cell, status=status, reason=reason)


# ---- what already exists -----------------------------------------------------------------------


def _existing(spec: Spec, names: Iterable[str]) -> dict[str, str]:
    """File name → built/indexed for wheels in the wheelhouse and the team's index."""
    found: dict[str, str] = {}
    if spec.index:
        for name in index_files(spec.index, names):
            found[name] = INDEXED
    if spec.wheelhouse.is_dir():
        for path in spec.wheelhouse.glob("*.whl"):
            found.setdefault(path.name, BUILT)
    return found
