"""doctor's line for the Windows compilers on Linux (`toolchain windows --setup`'s toolchain)."""

from __future__ import annotations

from pathlib import Path

from mambawin.stage import Status
from mambawin.toolchain.probe import Check
from mambawin.toolchain.wine import WindowsToolchain, separator_problem, toolchain_at
from mambawin.toolchain.wine_server import not_ready

# Every command that runs Microsoft's and NVIDIA's Windows compilers from this toolchain.
NEEDED_BY = (
    "needed by `mambawin check`, the cross build `mambawin build --platform win_amd64` and "
    "verify's load step for a win_amd64 wheel"
)
NAME = "windows compilers (wine)"


def root_check(root: Path, launcher: str | None) -> Check:
    """doctor's line for the toolchain in root; a root no Windows path list can hold is said, as
    a skipped line, not raised (the line is optional)."""
    why = separator_problem(root)
    if why is not None:
        return Check(NAME, Status.SKIP, found="not usable", hint=why)
    return doctor_check(toolchain_at(root), launcher)


def doctor_check(toolchain: WindowsToolchain, launcher: str | None) -> Check:
    """doctor's line for the Windows compilers on Linux: optional, so never blocking."""
    name = NAME
    problems = not_ready(toolchain, launcher)
    if problems:
        hint = f"{problems[0]} ({NEEDED_BY})"
        return Check(name, Status.SKIP, found="not set up", hint=hint)
    cuda = toolchain.cuda_version() or "?"
    what = (
        f"MSVC {toolchain.msvc_tools.name}, Windows Kits {toolchain.kits_version}, nvcc.exe {cuda}"
    )
    return Check(name, Status.OK, found=f"{what}, under {launcher}", version=cuda)
