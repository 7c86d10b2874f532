"""`mambawin rebuild`: a published wheel rebuilt from its own provenance, and the bytes compared.

A wheel mambawin built records what made it (wheel/provenance.py): the upstream source (a git
commit, or an sdist by file name and sha256), the archs, the ABI, the patches left out, the
toolchain and the build date; its file name adds the Python, the platform and the local label.
`target_of` turns that record into the one `BuildRequest` that made the wheel, with the source
pinned (fetch/pin.py) and SOURCE_DATE_EPOCH from the build date. `machine_differences` says what
this machine would have to change to give the same bytes (the torch, CUDA and compilers the
build records, the Python, mambawin itself), so a rebuild that could only differ is refused
before any fetch or compile. `rebuild` builds each wheel into a folder of mambawin's own and
compares it with the published one member by member (wheel/compare.py).

The build and the machine's facts are passed in (`Build`, `Probe`): the CLI hands in the
dispatcher and the doctor's probes, tests hand in fakes.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from packaging.version import InvalidVersion, Version

from mambawin import __version__
from mambawin.abi import ABIS, Abi
from mambawin.archs import Arch, format_archs, parse_archs
from mambawin.builder.backends import Outcome
from mambawin.builder.faces import to_argv
from mambawin.builder.pipeline import run_doctor
from mambawin.builder.request import CROSS_WINDOWS, NATIVE, BuildRequest, Tools, backend_for
from mambawin.builder.results import BuildResult
from mambawin.builder.workspace import publish
from mambawin.errors import (
    BuildError,
    MachineDiffers,
    MambawinError,
    RebuildDiffers,
    WheelError,
    os_error,
)
from mambawin.fetch.git import check_ref
from mambawin.fetch.pin import SourcePin
from mambawin.packages import MAMBA, Package, get_package
from mambawin.patch.registry import patch_ids
from mambawin.store.atomic import staging_dir
from mambawin.store.owned import cache_dir
from mambawin.wheel.compare import Comparison, compare_wheels
from mambawin.wheel.info import open_wheel
from mambawin.wheel.naming import WINDOWS, WheelFileName, platform_tag
from mambawin.wheel.provenance import NO_LABEL, ZIP_EPOCHS, Provenance, provenance_in

COMPLEX_REMOVAL = "complex-removal"  # the patch --keep-complex leaves out (mamba-ssm only)
DROPPED_ON_REQUEST = "dropped on request (--drop)"  # wheel/requirements.py's reason for --drop
HEX_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a SHA-1 or SHA-256 object name
HEX_SHA256 = re.compile(r"[0-9a-f]{64}")
SDIST_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*\.tar\.gz")  # a plain file name, no path
PATCH_ID = re.compile(r"[a-z0-9][a-z0-9-]*")


@dataclass(frozen=True)
class MachineFacts:
    """What decides a build's bytes besides its request: the tools as the build records them."""

    mambawin: str
    torch: str  # the torch whose headers the build compiles against
    cuda: str
    compiler: str  # as the provenance's `compiler`: each tool with its own version
    python: str  # "3.12"; "" where the wheel names no Python (a stable py3 wheel)


@dataclass(frozen=True)
class Target:
    """One published wheel and the build that made it."""

    wheel: Path
    request: BuildRequest
    epoch: int  # SOURCE_DATE_EPOCH: the provenance's build date
    needs: MachineFacts  # what this machine must have to give the same bytes

    @property
    def pin(self) -> SourcePin:
        """The source the rebuild must fetch (every target has one)."""
        assert self.request.pin is not None  # target_of always pins
        return self.request.pin


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


# ---- the wheel's record → the request that made it ---------------------------------------------


def read_target(wheel: Path, *, host: str | None = None, jobs: int | None = None) -> Target:
    """The build that made wheel, from its provenance and file name (checked as a wheel first);
    WheelError for a wheel mambawin did not build or whose record it would not have written."""
    with open_wheel(wheel) as (archive, info):
        provenance = provenance_in(archive, info)
    if provenance is None:
        msg = (
            f"{wheel.name} carries no mambawin-provenance.json: only a wheel mambawin built can "
            "be rebuilt from its record"
        )
        raise WheelError(msg)
    return target_of(wheel, info.file, provenance, host=host or platform_tag(), jobs=jobs)


def target_of(
    wheel: Path,
    file: WheelFileName,
    provenance: Provenance,
    *,
    host: str,
    jobs: int | None = None,
) -> Target:
    """The request a wheel's record and file name say made it (host: this machine's platform
    tag, which decides native or cross); every value the record gives is checked as mambawin
    writes it, so an odd record (an option as a ref, fullwidth digits as an arch) is refused."""
    name = wheel.name
    package = _package(name, file)
    abi = _abi(name, provenance, file)
    archs = _archs(name, provenance.archs)
    pin, source_from = _pin(name, provenance)
    ref = _field(name, "ref", provenance.ref)
    _checked(name, "ref", lambda: check_ref(ref))
    repo = None
    if source_from == "git":
        repo = _repo(name, provenance.upstream_repo, package)
    left_out = tuple(_patch_id(name, p, package) for p in provenance.left_out)
    in_effect = {p.get("id", "") for p in provenance.patches}
    keep_complex = (
        package == MAMBA
        and abi == "torch"
        and COMPLEX_REMOVAL in patch_ids(package)
        and COMPLEX_REMOVAL not in in_effect | set(left_out)
    )
    platform = _platform(name, file.platform, host)
    backend = backend_for(platform)
    request = BuildRequest(
        ref=ref,
        repo=repo,
        package=package,
        source_from=source_from,
        archs=archs,
        jobs=jobs,
        abi=abi,
        platform=platform,
        keep_complex=keep_complex,
        skip_patches=left_out,
        drop=_dropped(provenance),
        local_version=_local_version(name, file, provenance, backend),
        with_="none" if package == MAMBA and backend == NATIVE else None,
        backend=backend,
        pin=pin,
    )
    needs = MachineFacts(
        mambawin=provenance.mambawin_version,
        torch=provenance.torch_headers or provenance.torch_version,
        cuda=provenance.cuda_version,
        compiler=provenance.compiler,
        python=_python(name, file, abi),
    )
    return Target(wheel, request, _epoch(name, provenance.build_date), needs)


def _refused(name: str, what: str) -> WheelError:
    return WheelError(
        f"{name}: its provenance {what}: not a record mambawin writes, so it cannot be rebuilt "
        "from it; get the wheel from where it was published"
    )


def _checked(name: str, field: str, check: Callable[[], object]) -> None:
    """A check of a record's value, its refusal (written for a flag) named as the record's."""
    try:
        check()
    except MambawinError:
        raise _refused(name, f"has an odd {field}") from None


def _field(name: str, field: str, value: str) -> str:
    if not value:
        raise _refused(name, f"records no {field}")
    if not value.isprintable() or value != value.strip():
        raise _refused(name, f"has {field} {value!r}")
    return value


def _package(name: str, file: WheelFileName) -> Package:
    try:
        return get_package(file.name)
    except MambawinError:
        msg = f"{name} is no mamba-ssm or causal-conv1d wheel: mambawin rebuilds only those"
        raise WheelError(msg) from None


def _abi(name: str, provenance: Provenance, file: WheelFileName) -> Abi:
    abi = provenance.abi
    if abi not in ABIS:
        raise _refused(name, f"has abi {abi!r}")
    stable = abi == "stable"
    if stable != (file.abi == "none"):
        raise _refused(name, f"says abi {abi}, and the file name's tags say {file.abi}")
    return "stable" if stable else "torch"


def _archs(name: str, recorded: Sequence[str]) -> tuple[Arch, ...]:
    """The archs, exactly as format_archs writes them (fullwidth digits or another spelling of
    the same arch would be read as one and written back otherwise)."""
    if not recorded:
        raise _refused(name, "records no archs")
    try:
        archs = parse_archs(";".join(recorded))
    except MambawinError:
        raise _refused(name, f"has archs {list(recorded)!r}") from None
    if format_archs(archs).split(";") != list(recorded):
        raise _refused(name, f"has archs {list(recorded)!r}")
    return archs


def _pin(name: str, provenance: Provenance) -> tuple[SourcePin, str]:
    """The exact source and where to fetch it: the commit from git, or the sdist by name and
    sha256 from the package index."""
    source = provenance.source
    kind = source.get("kind", "")
    if kind == "git":
        commit = source.get("commit", "")
        if not HEX_COMMIT.fullmatch(commit) or commit != provenance.commit:
            raise _refused(name, f"names commit {commit!r}")
        return SourcePin(commit=commit), "git"
    if kind == "sdist":
        file, sha256 = source.get("file", ""), source.get("sha256", "")
        if not SDIST_FILE.fullmatch(file):
            raise _refused(name, f"names sdist {file!r}")
        if not HEX_SHA256.fullmatch(sha256):
            raise _refused(name, f"gives sdist sha256 {sha256!r}, which is no sha256")
        return SourcePin(sdist_file=file, sdist_sha256=sha256), "index"
    if not source:
        msg = (
            f"{name} was built from a local folder (build --source): there is no published "
            "source to rebuild it from"
        )
        raise WheelError(msg)
    raise _refused(name, f"names a source of kind {kind!r}")


def _repo(name: str, recorded: str, package: Package) -> str | None:
    """The git repository, None for the package's own (so the command line stays short)."""
    repo = _field(name, "upstream_repo", recorded)
    if repo.startswith("-") or any(c.isspace() for c in repo):
        raise _refused(name, f"has upstream_repo {repo!r}")
    return None if repo == package.default_repo else repo


def _patch_id(name: str, patch: str, package: Package) -> str:
    if not PATCH_ID.fullmatch(patch) or patch not in patch_ids(package):
        raise _refused(name, f"leaves out patch {patch!r}, which {package.name} has none of")
    return patch


def _dropped(provenance: Provenance) -> tuple[str, ...]:
    """The requirements the build dropped on request (--drop), from the rewrite's record."""
    return tuple(
        str(change.get("from") or "").split(";")[0].strip()
        for change in provenance.requirements
        if change.get("reason") == DROPPED_ON_REQUEST and change.get("from")
    )


def _local_version(name: str, file: WheelFileName, provenance: Provenance, backend: str) -> str:
    """--local-version: auto where the label is the one the build derives, none for no label,
    else the label itself (a cross build derives it always)."""
    try:
        label = Version(file.version).local
    except InvalidVersion:
        raise _refused(name, f"goes with version {file.version!r}") from None
    if label == provenance.label:
        return "auto"
    if backend == CROSS_WINDOWS:
        raise _refused(name, f"goes with label {label!r}, which a cross build never writes")
    return label or NO_LABEL


def _platform(name: str, platform: str, host: str) -> str | None:
    """None: this machine's own (native); win_amd64 on Linux: the cross build."""
    if platform == host:
        return None
    if platform == WINDOWS and host.startswith("linux"):
        return WINDOWS
    msg = (
        f"{name} is a {platform} wheel and this machine builds {host} ones: rebuild it on a "
        f"{platform} machine"
    )
    raise MachineDiffers(msg)


def _python(name: str, file: WheelFileName, abi: Abi) -> str:
    """The Python a torch-ABI wheel was built with (cp312 → 3.12); "" for a stable py3 wheel."""
    if abi == "stable":
        return ""
    found = re.fullmatch(r"cp3(\d+)", file.python)
    if found is None:
        raise _refused(name, f"goes with Python tag {file.python!r}")
    return f"3.{found[1]}"


def _epoch(name: str, build_date: str) -> int:
    """SOURCE_DATE_EPOCH from the build date the record holds."""
    try:
        moment = datetime.fromisoformat(build_date)
    except ValueError:
        raise _refused(name, f"has build_date {build_date!r}") from None
    if moment.tzinfo is None:
        raise _refused(name, f"has build_date {build_date!r} without a time zone")
    epoch = int(moment.timestamp())
    if not ZIP_EPOCHS[0] <= epoch <= ZIP_EPOCHS[1]:
        raise _refused(name, f"has build_date {build_date!r}, which no wheel can carry")
    return epoch


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
