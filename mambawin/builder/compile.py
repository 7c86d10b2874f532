"""Run upstream's own setup.py to build the wheel, streaming its output into a log and progress.

Why `python setup.py bdist_wheel --dist-dir D` and not `pip wheel`: the objects must land in a
folder we keep between runs, so torch's ninja build resumes an interrupted build and skips
up-to-date objects. pip wheel builds from a copy in a temporary folder
(pip < 21.3 always; PEP 517 builds still put build/ where pip likes) whose absolute paths end up
in build.ninja, so every run recompiles everything - about 6 minutes per arch on 2 cores here,
and much longer for stock upstream. A direct call also streams ninja's `[N/M]` lines as they come
(pip hides them without -v), and keeps object paths short (MAX_PATH, C1081). Build isolation is
off by construction: the running Python, with its CUDA torch, builds the wheel.

The build folder is set through DIST_EXTRA_CONFIG (`[build] build_base = ...`), not with
`setup.py build -b B bdist_wheel`: that form makes setuptools run build_ext twice (a second
ninja run and a second link). A setuptools too old to read DIST_EXTRA_CONFIG builds in
`src/build` instead, which lives in the same workspace and is just as persistent.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from mambawin import proc
from mambawin.builder.ninja import parse_status
from mambawin.builder.triage import Diagnostic, first_error
from mambawin.builder.workspace import Workspace
from mambawin.errors import BuildError
from mambawin.packages import PACKAGES
from mambawin.stage import NinjaStatus
from mambawin.store.owned import remove_tree

_NO_WORK = "ninja: no work to do."
_MESSAGE_LIMIT = 300


@dataclass(frozen=True)
class CompileResult:
    """A built (not yet rewritten) wheel and what the compile did."""

    wheel: Path
    log: Path
    units: int  # compile units ninja built in this run
    reused: bool  # ninja found every object up to date
    seconds: float


class CompileFailed(BuildError):
    """The compile failed; carries the first compiler error and the log file."""

    def __init__(self, msg: str, *, diagnostic: Diagnostic | None, log: Path) -> None:
        super().__init__(msg)
        self.diagnostic = diagnostic
        self.log = log


def setup_command(workspace: Workspace) -> list[str]:
    """The setup.py invocation; the wheel goes to workspace.dist."""
    return [sys.executable, "setup.py", "bdist_wheel", "--dist-dir", str(workspace.dist)]


def build_config(workspace: Workspace) -> Path:
    """Write the distutils config that puts setuptools' build folder in the workspace and has
    bdist_wheel store its members: the metadata step deflates them on every CPU (wheel/writer.py)
    where bdist_wheel would deflate the extension on one, at the end of the build."""
    config = workspace.root / "build.cfg"
    # Forward slashes: distutils reads this with configparser, where backslashes are literal.
    config.write_text(
        f"[build]\nbuild_base = {workspace.build_base.as_posix()}\n"
        "[bdist_wheel]\ncompression = stored\n",
        encoding="utf-8",
    )
    return config


def compile_wheel(
    workspace: Workspace, env: Mapping[str, str], on_status: Callable[[NinjaStatus], None]
) -> CompileResult:
    """Build the wheel in workspace.src; CompileFailed with the first compiler error on failure."""
    remove_tree(workspace.dist)  # a wheel left by an earlier run must not pass for this one
    argv = setup_command(workspace)
    env = {**env, "DIST_EXTRA_CONFIG": str(build_config(workspace))}
    log = workspace.new_log()
    start = time.monotonic()
    with log.open("w", encoding="utf-8", errors="replace") as handle:
        _write_header(handle, argv, workspace.src, env)
        watcher = _Watcher(handle, on_status)
        done = proc.run(argv, cwd=workspace.src, env=env, check=False, on_line=watcher)
    if done.returncode != 0:
        raise _failure(log, done.returncode)
    wheel = _the_wheel(workspace.dist, log)
    return CompileResult(
        wheel, log, watcher.units, watcher.reused, round(time.monotonic() - start, 1)
    )


class _Watcher:
    """on_line callback: every line to the log, ninja status lines to the progress display."""

    def __init__(self, handle: TextIO, on_status: Callable[[NinjaStatus], None]) -> None:
        self.handle = handle
        self.on_status = on_status
        self.units = 0
        self.no_work = False

    def __call__(self, line: str) -> None:
        self.handle.write(line + "\n")
        self.handle.flush()  # `tail -f` works, and a killed build leaves a complete log
        status = parse_status(line)
        if status is not None:
            self.units += 1
            self.on_status(status)
        elif line.strip() == _NO_WORK:
            self.no_work = True

    @property
    def reused(self) -> bool:
        """Every object was up to date: ninja said so and compiled nothing."""
        return self.no_work and self.units == 0


def _write_header(handle: TextIO, argv: list[str], cwd: Path, env: Mapping[str, str]) -> None:
    shown = (
        *(name for package in PACKAGES for name in package.force_vars),
        "MAX_JOBS",
        "MAMBAWIN_JOB_POOL",  # a pooled pair's job pool (builder/job_pool.py)
        "MAMBAWIN_JOB_PACKAGE",
        "NVCC_THREADS",
        "TORCH_CUDA_ARCH_LIST",
        "CUDA_HOME",
        "DISTUTILS_USE_SDK",
        "DIST_EXTRA_CONFIG",
        "PYTORCH_NVCC",
        "TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES",
        "TORCH_NO_COMPILER_WRAPPER",
        "PYTHONPATH",
    )
    handle.write(f"# mambawin build: {' '.join(argv)}\n# cwd: {cwd}\n")
    for name in shown:
        if name in env:
            handle.write(f"# {name}={env[name]}\n")
    handle.flush()


def _failure(log: Path, returncode: int) -> CompileFailed:
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    diagnostic = first_error(lines)
    if diagnostic is None:
        msg = (
            f"setup.py exited with code {returncode} without a recognisable compiler error; "
            f"read the full log {log}"
        )
    else:
        text = diagnostic.one_line()
        if len(text) > _MESSAGE_LIMIT:
            text = text[:_MESSAGE_LIMIT] + "..."
        msg = (
            f"build failed: {text} (line {diagnostic.log_line} of {log}); fix that, or run "
            "`mambawin doctor`, and build again: compiled objects are kept"
        )
    return CompileFailed(msg, diagnostic=diagnostic, log=log)


def _the_wheel(dist: Path, log: Path) -> Path:
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        msg = (
            f"setup.py succeeded but left {len(wheels)} wheels in {dist}, expected 1; "
            f"read the log {log}"
        )
        raise BuildError(msg)
    return wheels[0]
