"""The machine: disk, memory and parallel jobs, and the Windows path and code-page traps."""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mambawin import proc
from mambawin.stage import Status
from mambawin.store.owned import cache_dir
from mambawin.toolchain.probe import Check, ProbeContext, output_of
from mambawin.toolchain.winreg import HKLM, MappingRegistry

GIB = 1024**3
# Peak RSS of one nvcc job per arch it compiles: 672-774 MiB measured for the selective_scan
# backward files on Linux (docs/doctor.md), rounded up to the 1 GiB. Upstream passes
# --threads 4, so one job compiles up to 4 archs at once.
JOB_GIB_PER_ARCH = 1.0
NVCC_THREADS = 4
DISK_FAIL_GIB, DISK_WARN_GIB = 2, 10
# The deepest file of a build below the build folder, e.g. \mamba\build\temp.win-amd64-cpython-311
# \Release\csrc\selective_scan\selective_scan_bwd_bf16_complex.obj.d
DEEPEST_SUFFIX = 110
MAX_PATH = 260
FILESYSTEM_KEY = r"SYSTEM\CurrentControlSet\Control\FileSystem"
UTF8_CODEPAGES = (65001, 437)


class SystemInfo(Protocol):
    """Machine facts that need OS calls; tests pass a fake."""

    def memory(self) -> tuple[int, int] | None: ...

    def cpu_count(self) -> int: ...

    def oem_codepage(self) -> int | None: ...


class LocalSystem:
    """This machine, through /proc or Win32."""

    def memory(self) -> tuple[int, int] | None:
        """(total, available) bytes of RAM."""
        return _memory_windows() if sys.platform == "win32" else _memory_posix()

    def cpu_count(self) -> int:
        """CPUs this process may use."""
        return proc.usable_cpus()

    def oem_codepage(self) -> int | None:
        """The OEM code page torch decodes cl's output with (Windows only)."""
        if sys.platform != "win32":
            return None
        return int(ctypes.windll.kernel32.GetOEMCP())  # type: ignore[attr-defined,unused-ignore]


def _memory_posix() -> tuple[int, int] | None:
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        return None
    info = {
        k: int(v.split()[0]) * 1024
        for k, _, v in (line.partition(":") for line in lines)
        if v.strip()
    }
    if "MemTotal" not in info:
        return None
    return info["MemTotal"], info.get("MemAvailable", info.get("MemFree", 0))


class _MemoryStatus(ctypes.Structure):
    _fields_ = [
        ("dwLength", ctypes.c_ulong),
        ("dwMemoryLoad", ctypes.c_ulong),
        ("ullTotalPhys", ctypes.c_ulonglong),
        ("ullAvailPhys", ctypes.c_ulonglong),
        ("ullTotalPageFile", ctypes.c_ulonglong),
        ("ullAvailPageFile", ctypes.c_ulonglong),
        ("ullTotalVirtual", ctypes.c_ulonglong),
        ("ullAvailVirtual", ctypes.c_ulonglong),
        ("ullAvailExtendedVirtual", ctypes.c_ulonglong),
    ]


def _memory_windows() -> tuple[int, int] | None:
    status = _MemoryStatus()
    status.dwLength = ctypes.sizeof(_MemoryStatus)
    kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined,unused-ignore]
    if not kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):
        return None
    return status.ullTotalPhys, status.ullAvailPhys


@dataclass(frozen=True)
class SystemFacts:
    """Machine facts the checks need."""

    build_dir: Path
    free_bytes: int | None = None
    memory: tuple[int, int] | None = None
    cpus: int = 1
    long_paths: object | None = None
    git_longpaths: str | None = None
    links: tuple[str, ...] = ()
    codepage: int | None = None
    error: str = ""


def gather_system(ctx: ProbeContext, system: SystemInfo) -> SystemFacts:
    """Disk, memory, CPUs; on Windows also the registry, git and PATH facts."""
    build_dir = ctx.build_dir or cache_dir()
    facts = SystemFacts(build_dir, _free_bytes(build_dir), system.memory(), system.cpu_count())
    if not ctx.windows:
        return facts
    registry = ctx.registry or MappingRegistry()
    git = ctx.which("git")
    longpaths = output_of(ctx, [git, "config", "--get", "core.longpaths"]) if git else None
    return SystemFacts(
        build_dir,
        facts.free_bytes,
        facts.memory,
        facts.cpus,
        registry.read_value(HKLM, FILESYSTEM_KEY, "LongPathsEnabled"),
        (longpaths or "").strip() or None,
        tuple(_all_on_path(ctx, "link")),
        system.oem_codepage(),
    )


def _free_bytes(folder: Path) -> int | None:
    """Free space where the build will run (its nearest existing parent if not made yet)."""
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return shutil.disk_usage(candidate).free
    return None


def _all_on_path(ctx: ProbeContext, name: str) -> list[str]:
    exts = [".exe", ".bat", ".cmd", ""] if ctx.windows else [""]
    found = []
    for folder in ctx.path.split(os.pathsep):
        for ext in exts:
            candidate = Path(folder, name + ext)
            if folder and candidate.is_file():
                found.append(str(candidate))
                break
    return found


def recommended_jobs(memory: tuple[int, int] | None, cpus: int, archs: int) -> int:
    """MAX_JOBS: as many nvcc jobs as fit in available RAM, at most one per CPU, at least one."""
    if memory is None:
        return max(1, min(cpus, 2))
    per_job = JOB_GIB_PER_ARCH * GIB * max(1, min(NVCC_THREADS, archs))
    return max(1, min(cpus, int(memory[1] * 0.8 // per_job)))


# ---- checks ------------------------------------------------------------------------------------


def system_checks(facts: SystemFacts, jobs: int, archs: int, windows: bool) -> list[Check]:
    """Disk and memory everywhere; long paths, link.exe and the code page on Windows."""
    checks = [_disk(facts), _memory(facts, jobs, archs)]
    if windows:
        checks += [_path_length(facts), _git_longpaths(facts), _link(facts), _codepage(facts)]
    return checks


def _disk(facts: SystemFacts) -> Check:
    required = f">= {DISK_WARN_GIB} GiB free"
    if facts.free_bytes is None:
        return Check(
            "disk", Status.SKIP, found=str(facts.build_dir), hint="could not read free space"
        )
    free = facts.free_bytes / GIB
    found = f"{free:.1f} GiB free at {facts.build_dir}"
    if free < DISK_FAIL_GIB:
        hint = f"free disk space or pass a --build-dir on a drive with {DISK_WARN_GIB} GiB free"
        return Check("disk", Status.FAIL, found=found, required=required, hint=hint, blocking=True)
    if free < DISK_WARN_GIB:
        return Check(
            "disk",
            Status.WARN,
            found=found,
            required=required,
            hint="a build with several archs may run out of space",
        )
    return Check("disk", Status.OK, found=found, required=required)


def _memory(facts: SystemFacts, jobs: int, archs: int) -> Check:
    per_job = JOB_GIB_PER_ARCH * max(1, min(NVCC_THREADS, archs))
    required = f"~{per_job:g} GiB per nvcc job"
    if facts.memory is None:
        return Check(
            "memory",
            Status.SKIP,
            found=f"{facts.cpus} CPUs",
            required=required,
            hint=f"could not read RAM; using MAX_JOBS={jobs}",
        )
    total, avail = (b / GIB for b in facts.memory)
    found = f"{avail:.1f} of {total:.1f} GiB free, {facts.cpus} CPUs -> MAX_JOBS={jobs}"
    if avail < per_job:
        hint = "close other programs: even one nvcc job may swap (or set MAX_JOBS=1 and wait)"
        return Check("memory", Status.WARN, found=found, required=required, hint=hint)
    return Check("memory", Status.OK, found=found, required=required)


def _path_length(facts: SystemFacts) -> Check:
    deepest = len(str(facts.build_dir)) + DEEPEST_SUFFIX
    enabled = facts.long_paths == 1
    found = f"LongPathsEnabled={facts.long_paths}, deepest build path ~{deepest} chars"
    if deepest >= MAX_PATH:
        # cl.exe is not long-path aware even with the registry value set (C1081 file name too long).
        hint = f"{facts.build_dir} is too deep for cl.exe (C1081): use a short one like C:\\mw"
        return Check(
            "path length",
            Status.FAIL,
            found=found,
            required=f"< {MAX_PATH}",
            hint=hint,
            blocking=True,
        )
    if not enabled:
        hint = (
            r"enable long paths: reg add HKLM\SYSTEM\CurrentControlSet\Control\FileSystem "
            "/v LongPathsEnabled /t REG_DWORD /d 1 /f (as administrator)"
        )
        return Check(
            "path length", Status.WARN, found=found, required="LongPathsEnabled=1", hint=hint
        )
    return Check("path length", Status.OK, found=found, required=f"< {MAX_PATH}")


def _git_longpaths(facts: SystemFacts) -> Check:
    if (facts.git_longpaths or "").lower() == "true":
        return Check("git core.longpaths", Status.OK, found="true")
    return Check(
        "git core.longpaths",
        Status.WARN,
        found=facts.git_longpaths or "unset",
        required="true",
        hint="git config --global core.longpaths true",
    )


def _link(facts: SystemFacts) -> Check:
    first = facts.links[0] if facts.links else None
    if first is None or "\\vc\\tools\\msvc\\" in first.lower().replace("/", "\\"):
        return Check("link.exe", Status.OK, found=first or "not on PATH (mambawin activates MSVC)")
    # Git Bash / MSYS put coreutils' link ahead of MSVC's linker (ilammy/msvc-dev-cmd caveat).
    hint = "a non-MSVC link.exe comes first on PATH: build from cmd or PowerShell, not Git Bash"
    return Check("link.exe", Status.WARN, found=first, hint=hint)


def _codepage(facts: SystemFacts) -> Check:
    if facts.codepage is None:
        return Check("code page", Status.SKIP, hint="could not read the OEM code page")
    found = f"OEM code page {facts.codepage}"
    if facts.codepage in UTF8_CODEPAGES:
        return Check("code page", Status.OK, found=found)
    # torch decodes cl's localized messages with this code page; ninja's /showIncludes parsing
    # also expects the English "Note: including file:" prefix.
    hint = (
        "non-English cl messages can break the build: install Visual Studio's English "
        "language pack, or enable 'Beta: Use Unicode UTF-8' in intl.cpl"
    )
    return Check(
        "code page", Status.WARN, found=found, required="65001 or an English cl", hint=hint
    )
