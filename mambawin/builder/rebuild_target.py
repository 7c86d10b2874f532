"""A published wheel's record as the build that made it: `mambawin rebuild`'s request.

A wheel mambawin built records what made it (wheel/provenance.py): the upstream source (a git
commit, or an sdist by file name and sha256), the archs, the ABI, the patches left out, the
toolchain and the build date; its file name adds the Python, the platform and the local label.
`target_of` turns that record into the one `BuildRequest` that made the wheel, with the source
pinned (fetch/pin.py) and SOURCE_DATE_EPOCH from the build date, and the machine facts the
rebuild needs (builder/rebuild.py checks them). Every value is checked as mambawin writes it: the
record is read from a file someone published, and its values reach git and the command line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from packaging.version import InvalidVersion, Version

from mambawin.abi import ABIS, Abi
from mambawin.archs import Arch, format_archs, parse_archs
from mambawin.builder.request import CROSS_WINDOWS, NATIVE, BuildRequest, backend_for
from mambawin.errors import MachineDiffers, MambawinError, UsageError, WheelError
from mambawin.fetch.git import check_not_option, check_ref
from mambawin.fetch.pin import SourcePin
from mambawin.packages import MAMBA, Package, get_package
from mambawin.patch.arch_groups import OFF, PROVEN
from mambawin.patch.registry import patch_ids
from mambawin.secret_urls import LOCAL_REPOSITORY, public_repo
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


# ---- the wheel's record → the request that made it ---------------------------------------------


def read_target(
    wheel: Path,
    *,
    host: str | None = None,
    jobs: int | None = None,
    windows_root: Path | None = None,
    repo: str | None = None,
) -> Target:
    """The build that made wheel, from its provenance and file name (checked as a wheel first);
    WheelError for a wheel mambawin did not build or whose record it would not have written.
    jobs and windows_root: this machine's own, which cannot change the bytes; repo: a clone to
    fetch the pinned commit from, where the record names the same repository."""
    with open_wheel(wheel) as (archive, info):
        provenance = provenance_in(archive, info)
    if provenance is None:
        msg = (
            f"{wheel.name} carries no mambawin-provenance.json: only a wheel mambawin built can "
            "be rebuilt from its record"
        )
        raise WheelError(msg)
    target = target_of(
        wheel, info.file, provenance, host=host or platform_tag(), jobs=jobs, repo=repo
    )
    if windows_root is None:
        return target
    return replace(target, request=replace(target.request, windows_root=windows_root))


def target_of(
    wheel: Path,
    file: WheelFileName,
    provenance: Provenance,
    *,
    host: str,
    jobs: int | None = None,
    repo: str | None = None,
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
    if source_from == "git":
        repo = _repo(name, provenance.upstream_repo, package, repo)
    elif repo is not None:
        msg = f"--repo: {name} was built from the package index's sdist, not git: drop --repo"
        raise UsageError(msg)
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
        # Passes shared by several archs are in the record; none shared reads as off, which
        # gives the same one-pass-per-arch setup.py whatever the proof table holds.
        arch_groups=PROVEN if provenance.shared_passes else OFF,
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


def _repo(name: str, recorded: str, package: Package, given: str | None) -> str | None:
    """The git repository to fetch the pinned commit from (None: the package's own, so the
    command line stays short): the record's, or a clone given whose recorded form is the
    record's (the provenance names the repository, so another one would give other bytes)."""
    if given is not None:
        check_not_option(given, "--repo")
        if public_repo(given) != recorded:
            msg = (
                f"--repo {given} is recorded as {public_repo(given)!r} and {name} records "
                f"{recorded!r}: the provenance would differ; pass a clone of that repository"
            )
            raise UsageError(msg)
        return given
    repo = _field(name, "upstream_repo", recorded)
    if repo == LOCAL_REPOSITORY:
        msg = f"{name} was built from a local clone: pass --repo with a clone that holds its commit"
        raise UsageError(msg)
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
