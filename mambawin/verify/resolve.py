"""Ask pip whether a wheel's requirements install on the wheel's own platform.

`pip install --dry-run --report - --ignore-installed --only-binary=:all:` with `--platform`,
`--python-version`, `--implementation` and `--abi` from the wheel's tags runs pip's real resolver
against the user's own index configuration. torch is never resolved: it is the user's (a CUDA
build from the PyTorch index), so a tiny stand-in wheel at the torch version the wheel was built for
answers every `torch` requirement, direct or transitive. Nothing is installed (`--dry-run` into a
scratch `--target`, which pip wants beside `--platform`). Offline, the step says so and is skipped.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mambawin import proc
from mambawin.errors import CommandError, MambawinError, UsageError
from mambawin.fetch.sdist import OFFLINE_ENV as OFFLINE_ENV  # one switch for every index look-up
from mambawin.fetch.sdist import offline as offline
from mambawin.userfile import parse_json

Status = Literal["ok", "fail", "skip"]
# What pip prints when the index cannot be reached at all (DNS, no route, proxy, TLS to nowhere).
_OFFLINE = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution"
    r"|Name or service not known|Network is unreachable|No route to host|getaddrinfo failed"
    r"|ProxyError|ConnectTimeoutError|Max retries exceeded",
    re.IGNORECASE,
)
_NO_MATCH = re.compile(r"No matching distribution found for (\S+)")
_FROM_VERSIONS = re.compile(
    r"Could not find a version that satisfies the requirement (\S+) "
    r"\(from versions: ([^)]*)\)"
)
# pip reached a verdict about the requirements (rather than failing to run at all).
_RESOLVER_VERDICT = re.compile(
    r"No matching distribution|ResolutionImpossible|conflicting "
    r"dependencies|Could not find a version"
)
_TORCH = "torch"
_STANDIN_LOCAL = "mambawin.standin"


@dataclass(frozen=True)
class PipTarget:
    """The interpreter and platform pip resolves for, read from one wheel tag."""

    platforms: tuple[str, ...]
    python_version: str  # "3.11"
    implementation: str  # "cp"
    abi: str  # "cp311", "abi3", "none"

    @property
    def platform(self) -> str:
        """The wheel's own platform tag (the first one pip is given)."""
        return self.platforms[0]

    def pip_args(self) -> list[str]:
        args = [arg for platform in self.platforms for arg in ("--platform", platform)]
        return [
            *args,
            "--python-version",
            self.python_version,
            "--implementation",
            self.implementation,
            "--abi",
            self.abi,
        ]


@dataclass(frozen=True)
class Missing:
    """A top-level requirement pip cannot install on the target, with pip's own reason."""

    requirement: str
    reason: str


@dataclass(frozen=True)
class Resolution:
    """pip's verdict: ok (what it would install), fail (what has no wheel), or skip (why)."""

    status: Status
    summary: str
    target: str = ""
    installs: tuple[str, ...] = ()  # "name==version" pip picked, torch stand-in excluded
    missing: tuple[Missing, ...] = ()
    details: dict[str, object] = field(default_factory=dict)


def target_from_tag(tag: str) -> PipTarget:
    """PipTarget for 'cp311-cp311-win_amd64'; UsageError for a tag pip cannot target."""
    python, _, rest = tag.partition("-")
    abi, _, platform = rest.partition("-")
    if python == "py3" and abi == "none" and platform not in ("", "any"):
        # A stable-ABI wheel (abi.py) runs on every CPython 3: resolve its requirements for this
        # interpreter's, whose dependencies come as cpXY wheels (pip's --abi takes one value).
        here = f"{sys.version_info[0]}{sys.version_info[1]}"
        version = f"{sys.version_info[0]}.{sys.version_info[1]}"
        return PipTarget(platform_tags(platform), version, "cp", f"cp{here}")
    match = re.fullmatch(r"(cp|pp|py)(\d)(\d+)", python)
    if not match or not platform:
        msg = f"wheel tag {tag!r} names no CPython version and platform: rebuild the wheel"
        raise UsageError(msg)
    impl, major, minor = match.groups()
    return PipTarget(platform_tags(platform), f"{major}.{minor}", impl, abi)


def platform_tags(platform: str) -> tuple[str, ...]:
    """The tags pip may accept for a wheel built on `platform`.

    A locally built Linux wheel says linux_x86_64, but its requirements come as manylinux wheels:
    on this machine's own arch take this machine's tags, else assume glibc 2.28 (torch's baseline).
    """
    if not platform.startswith("linux_"):
        return (platform,)
    arch = platform.removeprefix("linux_")
    from packaging.tags import platform_tags as here

    mine = [tag for tag in here() if tag.endswith(f"_{arch}")]
    if platform in mine:
        return (platform, *[tag for tag in mine if tag != platform])
    many = [f"manylinux_2_{minor}_{arch}" for minor in range(28, 16, -1)]
    return (platform, *many, f"manylinux2014_{arch}")


def resolve_wheel(wheel: Path, *, python: str = sys.executable) -> Resolution:
    """Resolve a wheel's default requirements for its own tag, torch at the version it was for."""
    from mambawin.wheel.info import open_wheel, read_member
    from mambawin.wheel.provenance import Provenance, provenance_in

    if offline():
        return _skipped("")
    with open_wheel(Path(wheel)) as (archive, info):
        raw = read_member(info.path, archive, info.metadata_path)
        tag, version = sorted(info.file.tags)[0], info.version
        provenance = provenance_in(archive, info)  # read in the same open
    recorded = (provenance or Provenance()).torch_version
    return resolve_metadata(raw, tag, torch_version=recorded or _torch_of(version), python=python)


def resolve_metadata(
    raw: bytes, tag: str, *, torch_version: str | None = None, python: str = sys.executable
) -> Resolution:
    """Resolve the requirements pip installs by default from METADATA bytes, for `tag`."""
    from mambawin.wheel.metadata import requires_dist

    target = target_from_tag(tag)
    return resolve(
        for_target(requires_dist(raw), target), target, torch_version=torch_version, python=python
    )


def for_target(requires: Sequence[str], target: PipTarget) -> list[str]:
    """The requirements that apply on `target`, markers evaluated there and removed.

    pip evaluates markers against the machine it runs on, even with --platform, so a
    `; sys_platform == "linux"` requirement must be decided here for a Windows target.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    env = _marker_env(target)
    out = []
    for text in requires:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            out.append(text)  # pip names what is wrong with it
            continue
        if requirement.marker is None or requirement.marker.evaluate(env):
            requirement.marker = None
            out.append(str(requirement))
    return out


def _marker_env(target: PipTarget) -> dict[str, str]:
    windows = target.platform.startswith("win")
    machine = target.platform.split("_", 1)[-1]
    return {
        "sys_platform": "win32" if windows else "linux",
        "os_name": "nt" if windows else "posix",
        "platform_system": "Windows" if windows else "Linux",
        "platform_machine": {"amd64": "AMD64"}.get(machine, machine),
        "python_version": target.python_version,
        "python_full_version": f"{target.python_version}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }


def _torch_of(version: str) -> str | None:
    """'2.8' from a mambawin local version like 2.2.6+cu129torch2.8, else None."""
    found = re.search(r"torch(\d+)\.(\d+)", version.partition("+")[2])
    return f"{found.group(1)}.{found.group(2)}" if found else None


def resolve(
    requires: Sequence[str],
    target: PipTarget,
    *,
    torch_version: str | None = None,
    python: str = sys.executable,
    timeout: float = 600.0,
) -> Resolution:
    """Resolve `requires` (torch excluded) for `target` with pip; never installs anything."""
    if offline():
        return _skipped(target.platform)
    wanted = [text for text in requires if _name(text) != _TORCH]
    if not wanted:
        return Resolution("ok", "no requirements besides torch", target.platform)
    with tempfile.TemporaryDirectory(prefix="mambawin-resolve-") as scratch:
        pip = _Pip(python, target, Path(scratch), torch_version, timeout)
        return pip.verdict(wanted)


def _skipped(where: str) -> Resolution:
    return Resolution("skip", f"{OFFLINE_ENV} is set: requirements not checked with pip", where)


class _Pip:
    """pip runs that share one scratch folder, target and torch stand-in."""

    def __init__(
        self,
        python: str,
        target: PipTarget,
        scratch: Path,
        torch_version: str | None,
        timeout: float,
    ) -> None:
        self.python, self.target, self.scratch, self.timeout = python, target, scratch, timeout
        self.extra = _standin_args(scratch, torch_version) if torch_version else []

    def verdict(self, wanted: list[str]) -> Resolution:
        ok, output = self.run(wanted)
        where = self.target.platform
        if ok:
            installs = _installs(output)
            return Resolution(
                "ok",
                f"pip resolves {len(wanted)} requirements for {where} "
                f"({len(installs)} wheels, torch excluded)",
                where,
                installs,
            )
        offline = _OFFLINE.search(output)
        if offline:
            return Resolution(
                "skip",
                f"offline: pip could not reach the package index "
                f"({offline.group(0)}): requirements not checked",
                where,
            )
        details: dict[str, object] = {"pip": output[-4000:]}
        if not _RESOLVER_VERDICT.search(output):
            return Resolution(
                "fail",
                f"pip could not run the check with {self.python}: "
                f"{_errors(output)} (it needs pip >= 22.2)",
                where,
                details=details,
            )
        missing = self.missing(wanted)
        if not missing:
            return Resolution(
                "fail",
                f"pip finds no set of versions for {where} that fits together: {_errors(output)}",
                where,
                details=details,
            )
        names = "; ".join(f"{m.requirement} ({m.reason})" for m in missing)
        return Resolution(
            "fail",
            f"no {where} wheel (pip --only-binary=:all:) for: {names}",
            where,
            missing=missing,
            details=details,
        )

    def missing(self, wanted: list[str]) -> tuple[Missing, ...]:
        """Each requirement that fails alone (pip stops at the first one it cannot find)."""
        from concurrent.futures import ThreadPoolExecutor

        # Separate pip processes, each mostly waiting on the index: run a few at once.
        with ThreadPoolExecutor(max_workers=4) as pool:
            verdicts = list(pool.map(lambda text: self.run([text]), wanted))
        return tuple(
            Missing(text, _errors(output))
            for text, (ok, output) in zip(wanted, verdicts, strict=True)
            if not ok
        )

    def run(self, requires: Iterable[str]) -> tuple[bool, str]:
        argv = [
            self.python,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--only-binary=:all:",
            "--report",
            "-",
            "--quiet",
            "--retries",
            "1",
            "--no-input",
            "--target",
            str(self.scratch / "target"),
            *self.target.pip_args(),
            *self.extra,
            *requires,
        ]
        try:
            done = proc.run(argv, timeout=self.timeout, check=False)
        except CommandError as exc:
            raise MambawinError(f"could not run pip with {self.python}: {exc}") from exc
        return done.returncode == 0, done.stdout + "\n" + done.stderr


def _standin_args(scratch: Path, torch_version: str) -> list[str]:
    """A find-links folder holding an empty `torch` wheel, pinned by a constraint."""
    from packaging.version import Version

    version = f"{Version(torch_version).public}+{_STANDIN_LOCAL}"
    links = scratch / "standin"
    _write_standin(links, version)
    constraints = scratch / "constraints.txt"
    constraints.write_text(f"torch=={version}\n", encoding="utf-8")
    return ["--find-links", str(links), "--constraint", str(constraints)]


def _write_standin(folder: Path, version: str) -> None:
    from wheel.wheelfile import WheelFile

    src = folder / "src"
    dist = src / f"torch-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n", encoding="utf-8"
    )
    (dist / "WHEEL").write_text(
        "Wheel-Version: 1.0\nGenerator: mambawin\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        encoding="utf-8",
    )
    with WheelFile(folder / f"torch-{version}-py3-none-any.whl", "w") as out:
        out.write_files(str(src))


def _installs(output: str) -> tuple[str, ...]:
    try:
        found = report_installs(output)
    except ValueError:
        return ()
    return tuple(sorted(f"{name}=={version}" for name, version in found if _name(name) != _TORCH))


def report_installs(output: str) -> tuple[tuple[str, str], ...]:
    """(name, version) of each distribution a `pip install --report -` JSON says it would
    install; ValueError naming what is wrong for anything else (no report, another JSON shape,
    a name or version of another type): pip's output is read, never trusted."""
    start = output.find("{")
    if start < 0:
        raise ValueError("pip printed no report")
    report = parse_json(output[start : output.rfind("}") + 1])
    items = report.get("install") if isinstance(report, dict) else None
    if not isinstance(items, list):
        raise ValueError("pip's report has no list of what it would install")
    found = []
    for item in items:
        meta = item.get("metadata") if isinstance(item, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        version = meta.get("version") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not isinstance(version, str):
            shown = repr(item)[:80]
            raise ValueError(f"pip's report lists an install without a name and version: {shown}")
        found.append((name, version))
    return tuple(found)


def _errors(output: str) -> str:
    """pip's reason in one line: the versions it saw, or its last ERROR line."""
    found = _FROM_VERSIONS.search(output)
    if found:
        versions = found.group(2).strip() or "none"
        return f"pip found no usable wheel of {found.group(1)}; versions with one: {versions}"
    missing = _NO_MATCH.search(output)
    if missing:
        return f"no matching distribution for {missing.group(1)}"
    return proc.reason(output, markers=("ERROR:",), none="pip printed nothing")


def _name(text: str) -> str:
    from mambawin.wheel.metadata import requirement_name

    return requirement_name(text)
