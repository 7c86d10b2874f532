"""The two wine backends: `build --platform win_amd64` (cross-windows) and `check`
(windows-check), each a `Backend` (builder/backends.py) over its package's entry points."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mambawin import __version__
from mambawin.archs import parse_archs
from mambawin.builder.backends import DOES, Outcome, check_windows_root, cross_doctor_line
from mambawin.builder.options import check_options, resolve_jobs
from mambawin.builder.rebuild import this_python
from mambawin.builder.rebuild_target import MachineFacts
from mambawin.builder.request import CHECK_ARCHS, CROSS_WINDOWS, WINDOWS_CHECK, BuildRequest, Tools
from mambawin.check.pipeline import CheckOptions, build_result, check_windows, plan_check
from mambawin.cross.source import (
    build_windows,
    check_cross,
    check_platform,
    plan_windows,
    windows_compilers,
)
from mambawin.stage import timed
from mambawin.toolchain import wine, wine_server
from mambawin.toolchain.pytorch import package_version

if TYPE_CHECKING:
    from mambawin.stage import Reporter
    from mambawin.toolchain.wine import WindowsToolchain
    from mambawin.toolchain.wine_server import WineTools


@dataclass(frozen=True)
class WineBackendTools(Tools):
    """The wine backends' tools: the unit runner (toolchain.wine_server.WineTools) and the wine
    program (None: found, wine_server.need_wine)."""

    wine: WineTools | None = None
    launcher: str | None = None


def wine_tools(tools: Tools | None) -> WineBackendTools:
    """The wine backends' record of what a caller passed (a plain Tools: the real wine)."""
    if isinstance(tools, WineBackendTools):
        return tools
    return WineBackendTools(doctor=tools.doctor if tools else None)


@dataclass(frozen=True)
class CrossBackend:
    """`build --platform win_amd64` on Linux: cl.exe and nvcc.exe under wine."""

    name: str = CROSS_WINDOWS
    does: str = DOES[CROSS_WINDOWS]

    def check_inputs(self, request: BuildRequest) -> None:

        check_platform(request.platform or "")
        if request.windows_root is not None:  # the cache's own is checked in the doctor step
            check_windows_root(request.windows_root)
        check_cross(request)
        check_options(request)

    def plan(
        self, request: BuildRequest, *, tools: Tools | None = None, reporter: Reporter | None = None
    ) -> Outcome:

        steps, toolchain, _ = _wine_doctor(request, tools, reporter=reporter, needs_wine=False)
        return Outcome((plan_windows(request, toolchain, reporter=steps),))

    def build(
        self, request: BuildRequest, *, tools: Tools | None = None, reporter: Reporter | None = None
    ) -> Outcome:

        steps, toolchain, launcher = _wine_doctor(
            request, tools, reporter=reporter, needs_wine=True
        )
        wine = wine_tools(tools).wine
        return Outcome((build_windows(request, toolchain, launcher, tools=wine, reporter=steps),))


@dataclass(frozen=True)
class CheckBackend:
    """`mambawin check`: every unit compiled under wine, then the symbol closure; no wheel."""

    name: str = WINDOWS_CHECK
    does: str = DOES[WINDOWS_CHECK]

    def check_inputs(self, request: BuildRequest) -> None:
        if request.windows_root is not None:  # the cache's own is checked when it is used
            check_windows_root(request.windows_root)

    def plan(
        self, request: BuildRequest, *, tools: Tools | None = None, reporter: Reporter | None = None
    ) -> Outcome:

        options = _check_options(request, wine_tools(tools).launcher or "")
        return Outcome((plan_check(options, reporter=reporter),))

    def build(
        self, request: BuildRequest, *, tools: Tools | None = None, reporter: Reporter | None = None
    ) -> Outcome:

        given = wine_tools(tools)
        options = _check_options(request, given.launcher or wine_server.need_wine())
        report = check_windows(options, tools=given.wine, reporter=reporter)
        return Outcome((build_result(report),), report=report)


def cross_facts(request: BuildRequest) -> MachineFacts:
    """What a cross build on this machine records (`rebuild` checks it against the wheel's):
    the Windows toolchain's torch headers, nvcc.exe and cl.exe, as windows_tree writes them."""
    toolchain = wine.toolchain_at(check_windows_root(request.windows_root))
    cuda = toolchain.cuda_version() or ""
    return MachineFacts(
        mambawin=__version__,
        torch=package_version(toolchain.torch) if toolchain.torch else "",
        cuda=cuda,
        compiler=windows_compilers(toolchain.msvc_tools.name, cuda),
        python=this_python(),
    )


def _wine_doctor(
    request: BuildRequest,
    tools: Tools | None,
    *,
    reporter: Reporter | None,
    needs_wine: bool,
) -> tuple[Reporter, WindowsToolchain, str]:
    """The cross build's doctor step: the Windows toolchain, and wine unless it is a plan."""
    steps = timed(reporter)
    given = wine_tools(tools)
    with steps("doctor"):  # what the cross build runs: the Windows toolchain, wine
        where = check_windows_root(request.windows_root)
        toolchain = wine.toolchain_at(where)
        launcher = given.launcher or (wine_server.need_wine() if needs_wine else None)
        steps.note(cross_doctor_line(toolchain, where, launcher))
    return steps, toolchain, launcher or ""


def _check_options(request: BuildRequest, launcher: str) -> Any:
    """The check's own record (check/pipeline.py's CheckOptions) of this request."""

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
