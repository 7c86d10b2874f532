"""The CUDA toolkit, found the way torch's _find_cuda_home finds it, and what its nvcc compiles."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from mambawin import proc
from mambawin.archs import Arch
from mambawin.errors import MambawinError
from mambawin.stage import Status
from mambawin.toolchain.probe import Check, ProbeContext, output_of

_RELEASE = re.compile(r"release (\d+)\.(\d+)(?:, V(\d+\.\d+\.\d+))?")
_GPU_CODE = re.compile(r"^sm_(\d+)([af]?)$", re.MULTILINE)
_VERSIONED_PATH = re.compile(r"^CUDA_PATH_V(\d+)_(\d+)$", re.IGNORECASE)
CUDA_DOWNLOAD = "https://developer.nvidia.com/cuda-toolkit-archive"
# Where CUDA came from when no toolkit is installed: doctor says so in the nvcc line.
PIP_TOOLCHAIN_SOURCE = "mambawin's toolchain (pip wheels; no CUDA toolkit installed)"
NO_INSTALLER = ", or fetch CUDA 13 with pip: `mambawin toolchain {} --setup`"


@dataclass(frozen=True)
class CudaFacts:
    """The toolkit torch would use, the one mambawin will build with, and what nvcc can target."""

    torch_home: str | None = None
    home: str | None = None
    source: str = ""
    nvcc: str | None = None
    version: Version | None = None
    gpu_codes: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    error: str = ""


def nvcc_name(platform: str) -> str:
    return "nvcc.exe" if platform == "win32" else "nvcc"


def parse_nvcc_version(text: str) -> Version | None:
    """'release 12.6, V12.6.85' -> 12.6.85 (11.x builds without the V part -> 11.1)."""
    match = _RELEASE.search(text or "")
    if match is None:
        return None
    return Version(match[3] or f"{match[1]}.{match[2]}")


def parse_gpu_codes(text: str) -> tuple[str, ...]:
    """The sm_XX lines of `nvcc --list-gpu-code`, in nvcc's order."""
    return tuple(f"sm_{m[0]}{m[1]}" for m in _GPU_CODE.findall((text or "").replace("\r", "")))


def nvcc_version(
    cuda_home: str | Path, env: Mapping[str, str] | None = None, timeout: float = 20.0
) -> Version | None:
    """The version of <cuda_home>/bin/nvcc, or None when it does not run."""
    nvcc = Path(cuda_home, "bin", "nvcc.exe" if os.name == "nt" else "nvcc")
    try:
        done = proc.run([str(nvcc), "--version"], env=env, timeout=timeout)
    except MambawinError:
        return None
    return parse_nvcc_version(done.stdout)


def torch_cuda_home(ctx: ProbeContext) -> tuple[str | None, str]:
    """(CUDA_HOME, where it came from) exactly as torch.utils.cpp_extension._find_cuda_home."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if ctx.env.get(var):
            return ctx.env[var], var
    nvcc = ctx.which("nvcc")
    if nvcc:
        return str(Path(nvcc).parent.parent), f"nvcc on PATH ({nvcc})"
    defaults = default_toolkits(ctx)
    # torch takes glob(...)[0]; NTFS lists names in order, so that is the alphabetically first
    # (v11.8 before v12.6), not the newest.
    return (str(defaults[0]), "default install folder") if defaults else (None, "")


def default_toolkits(ctx: ProbeContext) -> list[Path]:
    """Toolkits in the installer's default places."""
    if ctx.windows:
        base = Path(
            ctx.env.get("ProgramFiles", "C:/Program Files"), "NVIDIA GPU Computing Toolkit", "CUDA"
        )
        return sorted(base.glob("v*.*")) if base.is_dir() else []
    found = [Path("/usr/local/cuda"), *sorted(Path("/usr/local").glob("cuda-*"))]
    return [p for p in found if p.is_dir()]


def candidate_toolkits(ctx: ProbeContext) -> list[Path]:
    """Every toolkit named by CUDA_PATH_Vx_y or found in a default folder."""
    named = [Path(v) for k, v in sorted(ctx.env.items()) if _VERSIONED_PATH.match(k) and v]
    return _unique([*named, *default_toolkits(ctx)])


def is_toolkit(home: str | Path | None, platform: str) -> bool:
    """A folder with bin/nvcc and include/cuda_runtime.h, which torch's build needs both of."""
    if not home:
        return False
    return (
        Path(home, "bin", nvcc_name(platform)).is_file()
        and Path(home, "include", "cuda_runtime.h").is_file()
    )


def gather_cuda(ctx: ProbeContext) -> CudaFacts:
    """Find the toolkit, run its nvcc, list its targets."""
    torch_home, source = torch_cuda_home(ctx)
    home, notes = _usable_home(ctx, torch_home)
    own = ctx.pip_cuda
    if home is None and own is not None and is_toolkit(own, ctx.platform):  # none installed
        home, source = str(own), PIP_TOOLCHAIN_SOURCE
    if home is None:
        return CudaFacts(torch_home=torch_home, source=source, notes=notes)
    nvcc = str(Path(home, "bin", nvcc_name(ctx.platform)))
    version = parse_nvcc_version(output_of(ctx, [nvcc, "--version"]) or "")
    codes = parse_gpu_codes(output_of(ctx, [nvcc, "--list-gpu-code"]) or "")
    return CudaFacts(
        torch_home, home, source, nvcc, version, codes, notes + _disagreements(ctx, home)
    )


def _usable_home(ctx: ProbeContext, torch_home: str | None) -> tuple[str | None, tuple[str, ...]]:
    """torch's pick when it is a real toolkit; else the first real one (the build exports it)."""
    if is_toolkit(torch_home, ctx.platform):
        return torch_home, ()
    others = [p for p in candidate_toolkits(ctx) if is_toolkit(p, ctx.platform)]
    if not others:
        return None, ()
    note = (
        (
            f"torch would use CUDA_HOME={torch_home} (no bin/nvcc + include/cuda_runtime.h there); "
            f"mambawin builds with CUDA_HOME={others[0]}"
        )
        if torch_home
        else ""
    )
    return str(others[0]), (note,) if note else ()


def _disagreements(ctx: ProbeContext, home: str) -> tuple[str, ...]:
    """CUDA_HOME vs CUDA_PATH vs nvcc on PATH: torch takes the first, nvcc users the last."""
    notes = []
    env_home, env_path = ctx.env.get("CUDA_HOME"), ctx.env.get("CUDA_PATH")
    if env_home and env_path and not _same(env_home, env_path):
        notes.append(f"CUDA_HOME={env_home} but CUDA_PATH={env_path} (torch uses CUDA_HOME)")
    on_path = ctx.which("nvcc")
    if on_path and not _same(Path(on_path).parent.parent, home) and not _wrapper_of(on_path, home):
        notes.append(f"nvcc on PATH ({on_path}) is not {home}'s")
    versioned = [k for k in ctx.env if _VERSIONED_PATH.match(k)]
    if len(versioned) > 1 and not (env_home or env_path):
        notes.append(f"{len(versioned)} CUDA_PATH_V* toolkits, no CUDA_HOME/CUDA_PATH to pick one")
    return tuple(notes)


def _wrapper_of(nvcc: str, home: str) -> bool:
    """A launcher script such as /usr/local/bin/nvcc that execs the toolkit's nvcc."""
    try:
        head = Path(nvcc).read_bytes()[:400]
    except OSError:
        return False
    bins = {str(Path(home, "bin")), str(Path(os.path.realpath(home), "bin"))}
    return head.startswith(b"#!") and any(b.encode() in head for b in bins)


def _same(a: str | Path, b: str | Path) -> bool:
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def _unique(paths: list[Path]) -> list[Path]:
    seen: set[str] = set()
    kept = []
    for path in paths:
        key = os.path.normcase(os.path.realpath(path))
        if key not in seen:
            seen.add(key)
            kept.append(path)
    return kept


# ---- checks ------------------------------------------------------------------------------------


def cuda_checks(cuda: CudaFacts, torch_cuda: str | None, *, windows: bool = False) -> list[Check]:
    """nvcc found and runs; the toolkit torch will use is coherent."""
    want = f"CUDA {torch_cuda}" if torch_cuda else "CUDA 12.4+"
    if cuda.error:
        return [Check("nvcc", Status.FAIL, hint=cuda.error, blocking=True)]
    if cuda.home is None:
        where = (
            f"CUDA_HOME resolves to {cuda.torch_home}, which is not a toolkit; "
            if cuda.torch_home
            else ""
        )
        hint = (
            f"{where}install the CUDA toolkit ({want}, {CUDA_DOWNLOAD}) "
            "or set CUDA_HOME to its folder"
            + NO_INSTALLER.format("windows" if windows else "linux")
        )
        return [
            Check("nvcc", Status.FAIL, found="not found", required=want, hint=hint, blocking=True)
        ]
    if cuda.version is None:
        hint = f"{cuda.nvcc} --version did not run or printed no release: reinstall the toolkit"
        return [
            Check(
                "nvcc", Status.FAIL, found=cuda.nvcc or "", required=want, hint=hint, blocking=True
            )
        ]
    found = f"{cuda.nvcc} (CUDA_HOME={cuda.home}, from {cuda.source or 'a default folder'})"
    checks = [Check("nvcc", Status.OK, found=found, version=cuda.version.public, required=want)]
    if cuda.notes:
        hint = "; ".join(cuda.notes) + ": set CUDA_HOME and CUDA_PATH to the same toolkit"
        checks.append(Check("CUDA_HOME", Status.WARN, found=cuda.home, hint=hint))
    return checks


def arch_check(cuda: CudaFacts, archs: tuple[Arch, ...]) -> Check:
    """Whether nvcc can compile each --arch (CUDA 13 dropped sm_50-72; sm_100/120 need 12.8)."""
    if cuda.version is None:
        return Check("nvcc archs", Status.SKIP, hint="nvcc not found")
    if not cuda.gpu_codes:
        return Check(
            "nvcc archs",
            Status.WARN,
            version=cuda.version.public,
            hint=f"{cuda.nvcc} --list-gpu-code printed nothing; arch support unchecked",
        )
    numbers = sorted(_number(code) for code in cuda.gpu_codes)
    listed = f"sm_{numbers[0]} .. sm_{numbers[-1]}"
    missing = [a for a in archs if not _compiles(cuda, a)]
    if not missing:
        found = ", ".join(str(a) for a in archs) if archs else f"can compile {listed}"
        return Check(
            "nvcc archs", Status.OK, found=found, version=cuda.version.public, required=listed
        )
    return Check(
        "nvcc archs",
        Status.FAIL,
        found=", ".join(a.sm for a in missing),
        version=cuda.version.public,
        required=listed,
        hint=_arch_hint(cuda, missing),
        blocking=True,
    )


# `--list-gpu-code` names base targets only (sm_90, not sm_90a): the suffixed ones came later.
_SUFFIX_SINCE = {"a": Version("12.0"), "f": Version("12.9")}


def _compiles(cuda: CudaFacts, arch: Arch) -> bool:
    """nvcc lists the arch's base target, and is new enough for its a/f suffix."""
    if f"sm_{arch.major}{arch.minor}" not in cuda.gpu_codes:
        return False
    since = _SUFFIX_SINCE.get(arch.suffix)
    return since is None or cuda.version is None or cuda.version >= since


def _arch_hint(cuda: CudaFacts, missing: list[Arch]) -> str:
    lowest = min(_number(code) for code in cuda.gpu_codes)
    names = ", ".join(a.sm for a in missing)
    listed = [a for a in missing if f"sm_{a.major}{a.minor}" in cuda.gpu_codes]
    if listed:
        since = ", ".join(f"'{a.suffix}' needs CUDA {_SUFFIX_SINCE[a.suffix]}+" for a in listed)
        return (
            f"nvcc {cuda.version} cannot compile {names} ({since}): use a newer toolkit, "
            f"or drop the suffix (--arch {listed[0].major}{listed[0].minor})"
        )
    if all(a.major * 10 + a.minor < lowest for a in missing):
        why = f"CUDA {cuda.version} dropped targets below sm_{lowest}: use CUDA 12.x"
    else:
        why = "use a newer CUDA toolkit (sm_100/sm_120 need 12.8+, sm_103/sm_110 need 13.0+)"
    return f"nvcc {cuda.version} cannot compile {names}: {why}, or drop them from --arch"


def _number(code: str) -> int:
    return int(code.removeprefix("sm_").rstrip("af"))
