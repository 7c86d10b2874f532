"""The pip-fetched Windows toolchain as environment variables for later steps of a CI job.

`mambawin toolchain windows --env github` prints them as `KEY=VALUE` lines, the format GitHub
Actions reads from `$GITHUB_ENV`, so the steps after it compile with the toolchain's cl.exe and
nvcc.exe natively on Windows, with no Visual Studio or CUDA installer: what vcvars64 would set
(INCLUDE, LIB, PATH), CUDA's variables as NVIDIA's installer sets them (CUDA_HOME, CUDA_PATH,
CUDA_PATH_V13_0), and the two switches that make setuptools and torch use that environment as it
is instead of looking for a Visual Studio of their own. Without MSVC (`--no-msvc`) only CUDA's
variables are printed: the Visual Studio of the runner's image compiles, as a fallback.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from mambawin.errors import ToolchainError, UsageError
from mambawin.toolchain.wine import WindowsToolchain

FORMATS = ("github",)


# setuptools' _get_vc_env returns the process environment as it is when DISTUTILS_USE_SDK is set
# (instead of running the vcvarsall.bat of an installed Visual Studio); torch's cpp_extension
# runs its own vcvars lookup unless VSCMD_ARG_TGT_ARCH is set, and refuses that variable without
# DISTUTILS_USE_SDK ("the VC environment is activated but DISTUTILS_USE_SDK is not set").
MSVC_SWITCHES = {"DISTUTILS_USE_SDK": "1", "VSCMD_ARG_TGT_ARCH": "x64"}


def native_environ(
    toolchain: WindowsToolchain, path: str, *, msvc: bool = True, sep: str = os.pathsep
) -> dict[str, str]:
    """The variables a native Windows build takes from the toolchain folder; path is the PATH
    they are put in front of."""
    cuda = toolchain.cuda_version()
    if cuda is None:
        msg = (
            f"{toolchain.cuda / 'include' / 'cuda.h'} names no CUDA_VERSION: set the Windows "
            "toolchain up again (`mambawin toolchain windows --setup`)"
        )
        raise ToolchainError(msg)
    home = str(toolchain.cuda)
    env = {"CUDA_HOME": home, "CUDA_PATH": home, f"CUDA_PATH_V{cuda.replace('.', '_')}": home}
    dirs = (
        toolchain.exe_dirs() if msvc else [toolchain.cuda / "bin", toolchain.cuda / "nvvm" / "bin"]
    )
    if msvc:
        env["INCLUDE"] = _joined(toolchain.include_dirs())
        env["LIB"] = _joined(toolchain.lib_dirs())
        env |= MSVC_SWITCHES
    env["PATH"] = sep.join([*(str(d) for d in dirs), *([path] if path else [])])
    return env


def _joined(folders: list[Path]) -> str:
    return ";".join(str(f) for f in folders)  # INCLUDE and LIB are `;`-separated on Windows


def env_lines(env: Mapping[str, str], form: str) -> str:
    """env as the lines `form` reads: `KEY=VALUE` each (GitHub's $GITHUB_ENV)."""
    if form not in FORMATS:
        msg = f"--env {form!r}: the only format is {', '.join(FORMATS)} (lines for $GITHUB_ENV)"
        raise UsageError(msg)
    for key, value in env.items():
        # A line break would end the value and start a variable of the text's choosing.
        if "\n" in value or "\r" in value:
            msg = (
                f"{key} holds a line break, which $GITHUB_ENV would read as another variable: "
                f"rename the folder ({value.splitlines()[0]!r}…) or the entry of PATH that has one"
            )
            raise UsageError(msg)
    return "".join(f"{key}={value}\n" for key, value in env.items())
