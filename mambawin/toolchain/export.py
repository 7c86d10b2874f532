"""The pip-fetched Windows toolchain as environment variables for later steps of a CI job.

`mambawin toolchain windows --env github` prints them as `KEY=VALUE` lines, the format GitHub
Actions reads from `$GITHUB_ENV`, so the steps after it compile with the toolchain's cl.exe and
nvcc.exe natively on Windows, with no Visual Studio or CUDA installer. The variables are not
defined here: they are what `windows_env.native_environ` sets for a Windows host (the environment
doctor and build use there), less what the job already has as it is.
"""

from __future__ import annotations

from collections.abc import Mapping

from mambawin.errors import ToolchainError, UsageError
from mambawin.toolchain.host import Host
from mambawin.toolchain.windows_env import native_environ
from mambawin.toolchain.wine import WindowsToolchain

FORMATS = ("github",)


def job_environ(
    toolchain: WindowsToolchain, base: Mapping[str, str], *, msvc: bool = True
) -> dict[str, str]:
    """What a native Windows build sets on top of base (the job's environment), and only that:
    a variable base already holds with the same value stays out (the job has it)."""
    if toolchain.cuda_version() is None:  # a job picks its CUDA by CUDA_PATH_VX_Y
        msg = (
            f"{toolchain.cuda / 'include' / 'cuda.h'} names no CUDA_VERSION: set the Windows "
            "toolchain up again (`mambawin toolchain windows --setup`)"
        )
        raise ToolchainError(msg)
    env = native_environ(toolchain, base, Host("windows"), msvc=msvc)
    return {key: value for key, value in env.items() if base.get(key) != value}


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
