"""The backends a build runs on, and the one path every request takes: validate, then run.

Every build starts the same way: fetch → copy → patch → configure. What comes after is a backend's:

- `native`: this machine's compilers (nvcc, gcc or cl.exe), then the wheel is packed;
- `cross-windows`: cl.exe and nvcc.exe under wine on Linux, link, then the wheel is packed;
- `windows-check`: every unit compiled under wine and the symbol closure checked; nothing packed.

The model is cibuildwheel's `PlatformModule` protocol and `ALL_PLATFORM_MODULES` registry: here
the `Backend` protocol, the native backend, the field check every backend shares (every field set
away from its default that the backend does not apply is refused by its flag) and the refusal's
words; the registry and the one `run(request)` sit above the backends (mambawin/dispatch/), so
the builder never imports the wine backends it sits below. `build`, `build --platform` and
`check` are requests with their backend named; the spec's cells are judged by the same
`dispatch.validate` (team/matrix.py), so a cell build would refuse is impossible, with build's
own reason.
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
from mambawin.stage import QuietReporter

if TYPE_CHECKING:
    from mambawin.builder.results import BuildPlan, BuildResult
    from mambawin.stage import Reporter
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


# What each backend does, in one line for docs and refusals.
DOES: Mapping[str, str] = {
    NATIVE: "this machine's compilers, then pack",
    CROSS_WINDOWS: "cl.exe and nvcc.exe under wine, link, pack",
    WINDOWS_CHECK: "every unit under wine, the symbol closure; no pack",
}


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
    does: str = DOES[NATIVE]

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

        shown = reporter or QuietReporter()
        companion = pair.companion_of(request.package, request.with_, request.with_repo)
        if companion is None:
            return Outcome((pipeline.plan(request, tools=tools, reporter=shown),))
        plans = pair.run_pair(  # --plan compiles nothing: each package planned in turn
            request,
            companion,
            lambda one, to: pipeline.plan(one, tools=tools, reporter=to),
            reporter=shown,
        )
        return Outcome(tuple(plans), paired=True, notes=(pair.pair_time(plans),))

    def build(
        self, request: BuildRequest, *, tools: Tools | None = None, reporter: Reporter | None = None
    ) -> Outcome:
        from mambawin.builder import pair, pipeline, pooled

        companion = pair.companion_of(request.package, request.with_, request.with_repo)
        if companion is None:
            return Outcome((pipeline.build(request, tools=tools, reporter=reporter),))
        shown = reporter or QuietReporter()
        both = pair.pair_options(request, companion, reporter=shown)  # at once, in one pool
        return Outcome(tuple(pooled.build_together(both, tools=tools, reporter=shown)), paired=True)


def refuse_fields(request: BuildRequest) -> None:
    """UsageError naming every field the request sets away from its default that its backend
    does not apply: the check every backend shares, before its own (dispatch.validate)."""
    not_applied = [o.flag for o in set_fields(request) if request.backend not in o.backends]
    if not_applied:
        raise UsageError(refusal(request.backend, not_applied))


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
    return f"{', '.join(names)} {verb} not apply to the {backend} backend ({DOES[backend]}): {hint}"


def check_windows_root(root: Path | None) -> Path:
    """The toolchain folder (--windows-root, else the cache's), checked before any work."""
    from mambawin.toolchain import wine

    return wine.whole_root(root, "leave --windows-root out for the cache's")


def cross_doctor_line(toolchain: WindowsToolchain, where: Path, launcher: str | None) -> str:
    """The doctor step's line of a cross build: which compilers, from where, run by what."""
    cuda = toolchain.cuda_version() or "?"
    runs = f"under {launcher}" if launcher else "wine not needed for a plan"
    return (
        f"Windows toolchain in {where}: MSVC {toolchain.msvc_tools.name}, Windows Kits "
        f"{toolchain.kits_version}, nvcc.exe {cuda} ({runs})"
    )
