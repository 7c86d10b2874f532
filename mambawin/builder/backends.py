"""The backends a build runs on, and the one path every request takes: validate, then run.

Every build starts the same way: fetch → copy → patch → configure. What comes after is a backend's:

- `native`: this machine's compilers (nvcc, gcc or cl.exe), then the wheel is packed;
- `cross-windows`: cl.exe and nvcc.exe under wine on Linux, link, then the wheel is packed;
- `windows-check`: every unit compiled under wine and the symbol closure checked; nothing packed.

The model is cibuildwheel's `PlatformModule` protocol and `ALL_PLATFORM_MODULES` registry: one
`run(request)` checks the request (every field set away from its default that the backend does not
apply is refused by its flag, then the backend's own `check_inputs`), then calls the backend's
`plan` or `build`. `build`, `build --platform` and `check` are requests with their backend named;
the spec's cells are judged by the same `validate` (team/matrix.py), so a cell build would refuse
is impossible, with build's own reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mambawin.builder.request import (
    ALL,
    BACKEND_NAMES,
    BUILD_OPTIONS,
    BUILDS,
    CROSS_WINDOWS,
    NATIVE,
    OPTIONS,
    SPEC_OPTION_KEYS,
    SPEC_OPTIONS,
    WINDOWS_CHECK,
    BuildOption,
    BuildRequest,
    Tools,
    set_fields,
)
from mambawin.errors import UsageError

if TYPE_CHECKING:
    from mambawin.builder.reporter import Reporter
    from mambawin.builder.results import BuildPlan, BuildResult
    from mambawin.toolchain.wine import WindowsToolchain

__all__ = [
    "ALL",
    "BACKEND_NAMES",
    "BUILDS",
    "BUILD_OPTIONS",
    "CROSS_WINDOWS",
    "NATIVE",
    "OPTIONS",
    "SPEC_OPTIONS",
    "SPEC_OPTION_KEYS",
    "WINDOWS_CHECK",
    "BuildOption",
]


def spec_args(values: Mapping[str, object]) -> list[str]:
    """A spec's [options] values (by key) as `mambawin build` arguments, each option's argv."""
    return [arg for o in SPEC_OPTIONS for arg in o.argv(values[str(o.spec_key)])]


def help_of(flag: str) -> str:
    """The CLI help of a build option, as declared once here."""
    return OPTIONS[flag].help


@dataclass(frozen=True)
class Outcome:
    """What a backend's plan or build gives: one plan or result per package (two for the native
    build's mamba-ssm + causal-conv1d pair, mamba-ssm first), the notes that close its summary,
    and the check's own report for its table."""

    results: tuple[BuildPlan | BuildResult, ...]
    paired: bool = False
    notes: tuple[str, ...] = ()
    report: Any = None  # the check's CheckReport (ui/check.py renders it)

    def to_json(self) -> dict[str, Any]:
        """`--json`'s document: the one result, or the pair's (builder/pair.py)."""
        if not self.paired:
            return self.results[0].to_json()
        from mambawin.builder.pair import pair_json

        return pair_json(list(self.results))


class Backend(Protocol):
    """What runs after fetch → copy → patch → configure: the request checked, planned, built."""

    @property
    def name(self) -> str: ...

    @property
    def does(self) -> str: ...  # one line for docs and refusals

    def check_inputs(self, request: BuildRequest) -> None:
        """UsageError (or ToolchainError) for what the backend cannot take, before any work."""

    def plan(
        self, request: BuildRequest, *, tools: Tools | None = None, reporter: Reporter | None = None
    ) -> Outcome:
        """What the build would do; nothing compiled."""

    def build(
        self, request: BuildRequest, *, tools: Tools | None = None, reporter: Reporter | None = None
    ) -> Outcome:
        """The build itself: its result (a wheel, or the check's verdict)."""


@dataclass(frozen=True)
class NativeBackend:
    """This machine's compilers; with a companion (--with), both packages in one job pool."""

    name: str = NATIVE
    does: str = "this machine's compilers, then pack"

    def check_inputs(self, request: BuildRequest) -> None:
        """The request itself (pure: a spec's cells are judged by it); the environment and
        --out are the pipeline's first step (pipeline.check_inputs)."""
        from mambawin.builder import pair
        from mambawin.builder.options import check_options

        companion = pair.companion_of(request.package, request.with_, request.with_repo)
        # A pair's --skip-patch ids may be either package's: split before the one check.
        check_options(request if companion is None else pair.split_skips(request))

    def plan(
        self, request: BuildRequest, *, tools: Tools | None = None, reporter: Reporter | None = None
    ) -> Outcome:
        from mambawin.builder import pair, pipeline
        from mambawin.builder.reporter import QuietReporter

        shown = reporter or QuietReporter()
        companion = pair.companion_of(request.package, request.with_, request.with_repo)
        if companion is None:
            return Outcome((pipeline.plan(request, tools=tools, reporter=shown),))
        plans = pair.run_pair(  # --plan compiles nothing: each package planned in turn
            request,
            companion,
            shown,
            lambda one, to: pipeline.plan(one, tools=tools, reporter=to),
        )
        return Outcome(tuple(plans), paired=True, notes=(pair.pair_time(plans),))

    def build(
        self, request: BuildRequest, *, tools: Tools | None = None, reporter: Reporter | None = None
    ) -> Outcome:
        from mambawin.builder import pair, pipeline, pooled
        from mambawin.builder.reporter import QuietReporter

        companion = pair.companion_of(request.package, request.with_, request.with_repo)
        if companion is None:
            return Outcome((pipeline.build(request, tools=tools, reporter=reporter),))
        shown = reporter or QuietReporter()
        both = pair.pair_options(request, companion, shown)  # both compile at once, one pool
        return Outcome(tuple(pooled.build_together(both, shown, tools=tools)), paired=True)


@dataclass(frozen=True)
class CrossBackend:
    """`build --platform win_amd64` on Linux: cl.exe and nvcc.exe under wine."""

    name: str = CROSS_WINDOWS
    does: str = "cl.exe and nvcc.exe under wine, link, pack"

    def check_inputs(self, request: BuildRequest) -> None:
        from mambawin.builder.options import check_options
        from mambawin.cross.source import check_cross, check_platform

        check_platform(request.platform or "")
        if request.windows_root is not None:  # the cache's own is checked in the doctor step
            check_windows_root(request.windows_root)
        check_cross(request)
        check_options(request)

    def plan(
        self, request: BuildRequest, *, tools: Tools | None = None, reporter: Reporter | None = None
    ) -> Outcome:
        from mambawin.cross.source import plan_windows

        steps, toolchain, _ = _wine_doctor(request, tools, reporter, needs_wine=False)
        return Outcome((plan_windows(request, toolchain, reporter=steps),))

    def build(
        self, request: BuildRequest, *, tools: Tools | None = None, reporter: Reporter | None = None
    ) -> Outcome:
        from mambawin.cross.source import build_windows

        steps, toolchain, launcher = _wine_doctor(request, tools, reporter, needs_wine=True)
        wine = (tools or Tools()).wine
        return Outcome((build_windows(request, toolchain, launcher, tools=wine, reporter=steps),))


@dataclass(frozen=True)
class CheckBackend:
    """`mambawin check`: every unit compiled under wine, then the symbol closure; no wheel."""

    name: str = WINDOWS_CHECK
    does: str = "every unit under wine, the symbol closure; no pack"

    def check_inputs(self, request: BuildRequest) -> None:
        if request.windows_root is not None:  # the cache's own is checked when it is used
            check_windows_root(request.windows_root)

    def plan(
        self, request: BuildRequest, *, tools: Tools | None = None, reporter: Reporter | None = None
    ) -> Outcome:
        from mambawin.check.pipeline import plan_check

        options = _check_options(request, (tools or Tools()).launcher or "")
        return Outcome((plan_check(options, reporter=reporter),))

    def build(
        self, request: BuildRequest, *, tools: Tools | None = None, reporter: Reporter | None = None
    ) -> Outcome:
        from mambawin.check.pipeline import build_result, check_windows
        from mambawin.toolchain import wine_server

        given = tools or Tools()
        options = _check_options(request, given.launcher or wine_server.need_wine())
        report = check_windows(options, tools=given.wine, reporter=reporter)
        return Outcome((build_result(report),), report=report)


ALL_BACKENDS: Mapping[str, Backend] = {
    NATIVE: NativeBackend(),
    CROSS_WINDOWS: CrossBackend(),
    WINDOWS_CHECK: CheckBackend(),
}


def run(
    request: BuildRequest,
    *,
    plan_only: bool = False,
    tools: Tools | None = None,
    reporter: Reporter | None = None,
) -> Outcome:
    """The one entry of every build: validate the request, then its backend's plan or build."""
    backend = validate(request)
    stage = backend.plan if plan_only else backend.build
    return stage(request, tools=tools, reporter=reporter)


def validate(request: BuildRequest) -> Backend:
    """The one check before any work: every field set away from its default that the backend
    does not apply, refused by its flag; then the backend's own inputs."""
    chosen = ALL_BACKENDS.get(request.backend)
    if chosen is None:  # a caller's bug: the request names no backend there is
        raise ValueError(f"unknown backend {request.backend!r}")
    not_applied = [o.flag for o in set_fields(request) if request.backend not in o.backends]
    if not_applied:
        raise UsageError(refusal(request.backend, not_applied))
    chosen.check_inputs(request)
    return chosen


def judge(request: BuildRequest) -> str:
    """'' when its backend would take this request, else its own one-line refusal: what a spec
    cell build would refuse is impossible, for the reason build gives."""
    try:
        validate(request)
    except UsageError as exc:
        return str(exc)
    return ""


def applies(backend: str) -> tuple[str, ...]:
    """The flags a backend applies, in declaration order."""
    return tuple(o.flag for o in BUILD_OPTIONS if backend in o.backends)


def refused(backend: str) -> tuple[str, ...]:
    """The flags a backend does not apply, in declaration order."""
    return tuple(o.flag for o in BUILD_OPTIONS if backend not in o.backends)


def spec_keys_not_applied(backend: str) -> tuple[str, ...]:
    """The spec's [options] keys a backend does not apply (the cross workflow refuses them)."""
    return tuple(o.spec_key for o in BUILD_OPTIONS if o.spec_key and backend not in o.backends)


def refusal(backend: str, flags: Iterable[str]) -> str:
    """One line: which options the backend does not apply, and how to go on."""
    names = list(flags)
    one = len(names) == 1
    them, verb = ("it", "does") if one else ("them", "do")
    hint = {
        NATIVE: f"{'it chooses' if one else 'they choose'} the cross build: add --platform "
        f"win_amd64, or drop {them}",
        CROSS_WINDOWS: f"drop {them}, or build natively (without --platform) where "
        f"{'it applies' if one else 'they apply'}",
        WINDOWS_CHECK: f"drop {them}; `mambawin build` applies {them}",
    }[backend]
    if backend == NATIVE and any(OPTIONS[n].backends == {WINDOWS_CHECK} for n in names):
        hint = f"`mambawin check` applies {them}: drop {them}"
    does = ALL_BACKENDS[backend].does
    return f"{', '.join(names)} {verb} not apply to the {backend} backend ({does}): {hint}"


def check_windows_root(root: Path | None) -> Path:
    """The toolchain folder (--windows-root, else the cache's), checked before any work."""
    from mambawin.toolchain import wine

    return wine.whole_root(root, "leave --windows-root out for the cache's")


def _wine_doctor(
    request: BuildRequest, tools: Tools | None, reporter: Reporter | None, *, needs_wine: bool
) -> tuple[Reporter, WindowsToolchain, str]:
    """The cross build's doctor step: the Windows toolchain, and wine unless it is a plan."""
    from mambawin.builder.reporter import timed
    from mambawin.toolchain import wine, wine_server

    steps = timed(reporter)
    given = tools or Tools()
    with steps("doctor"):  # what the cross build runs: the Windows toolchain, wine
        where = check_windows_root(request.windows_root)
        toolchain = wine.toolchain_at(where)
        launcher = given.launcher or (wine_server.need_wine() if needs_wine else None)
        steps.note(cross_doctor_line(toolchain, where, launcher))
    return steps, toolchain, launcher or ""


def cross_doctor_line(toolchain: WindowsToolchain, where: Path, launcher: str | None) -> str:
    """The doctor step's line of a cross build: which compilers, from where, run by what."""
    cuda = toolchain.cuda_version() or "?"
    runs = f"under {launcher}" if launcher else "wine not needed for a plan"
    return (
        f"Windows toolchain in {where}: MSVC {toolchain.msvc_tools.name}, Windows Kits "
        f"{toolchain.kits_version}, nvcc.exe {cuda} ({runs})"
    )


def _check_options(request: BuildRequest, launcher: str) -> Any:
    """The check's own record (check/pipeline.py's CheckOptions) of this request."""
    from mambawin.archs import parse_archs
    from mambawin.builder.options import resolve_jobs
    from mambawin.builder.request import CHECK_ARCHS
    from mambawin.check.pipeline import CheckOptions
    from mambawin.toolchain import wine

    return CheckOptions(
        package=request.package,
        ref=request.ref,
        repo=request.upstream_repo,
        archs=request.archs or parse_archs(CHECK_ARCHS),
        toolchain=wine.toolchain_at(request.windows_root or wine.default_root()),
        wine=launcher,
        stock=request.stock,
        jobs=resolve_jobs(request.jobs, None),
        cpython=request.cpython,
        units=request.units,
        source_from=request.source_from,
    )
