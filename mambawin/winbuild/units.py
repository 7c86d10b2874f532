"""Compile each translation unit with the real Windows compilers under wine, in parallel.

Per unit the outcome is ok (with the object), or the first compiler error with file:line (and how
many error lines the compiler printed), or skipped with the reason (the binding file without a
CPython include folder). Paths in compiler messages come back as the tree's own relative paths.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from mambawin import proc
from mambawin.builder.configure import SetupConfig
from mambawin.builder.results import UnitReport
from mambawin.stage import Finished, Status
from mambawin.store.owned import cache_dir
from mambawin.toolchain.wine import (
    WindowsToolchain,
    msvc_tool,
    torch_overlay,
    windows_path,
    wine_environ,
)
from mambawin.toolchain.wine_server import Runner
from mambawin.winbuild.flags import (
    UnitCommand,
    WindowsFlags,
    cl_args,
    nvcc_args,
    preprocessor_options,
    read_flags,
    setuptools_msvc_source,
)

# `FILE(LINE): error: text` (nvcc's front end), `FILE(LINE): error C2975: text` and
# `FILE(LINE): fatal error C1083: text` (cl), `nvcc fatal   : text` (the driver).
_ERROR = re.compile(
    r"^(?P<file>[^\s(][^(]*?)\((?P<line>[0-9]{1,9})\)(?:\s*\(\d+\))?\s*:\s*(?:fatal\s+)?"
    r"error(?:\s+(?P<code>[A-Z]+\d+))?\s*:\s*(?P<text>.*)$"
)
_DRIVER_FATAL = re.compile(
    r"^(?P<tool>nvcc|cl|link)\s*(?:fatal|:\s*fatal error)\s*:\s*(?P<text>.*)$"
)


@dataclass(frozen=True)
class CompileError:
    """The first error a compiler printed for a unit."""

    file: str  # relative to the tree when inside it
    line: int | None
    code: str | None  # cl's C2975, None for nvcc's front end
    text: str

    def __str__(self) -> str:
        where = f"{self.file}({self.line})" if self.line is not None else self.file
        return f"{where}: error{' ' + self.code if self.code else ''}: {self.text}"


@dataclass(frozen=True)
class UnitResult:
    """What happened to one unit."""

    source: str
    status: str  # "ok", "error" or "skipped"
    seconds: float
    error: CompileError | None = None
    errors: int = 0  # error lines the compiler printed
    messages: tuple[str, ...] = ()  # the distinct error texts, in order (without file:line)
    reason: str = ""  # why skipped
    obj: Path | None = None

    def report(self) -> UnitReport:
        """The unit as every backend's result carries it (BuildResult.units)."""
        error = self.error
        return UnitReport(
            self.source,
            self.status,
            self.seconds,
            error=str(error) if error else None,
            error_file=error.file if error else None,
            error_line=error.line if error else None,
            error_lines=self.errors,
            messages=self.messages,
            reason=self.reason or None,
        )


Progress = Callable[["UnitResult", int, int], None]


UNIT_STATUS = {"ok": Status.OK, "error": Status.FAIL, "skipped": Status.SKIP}


def unit_finished(result: UnitResult, done: int, total: int) -> Finished:
    """A finished unit as the Reporter sees it: its verdict, time, first error or why skipped,
    and its place in the run (a CI log shows progress without a bar)."""
    return Finished(
        result.source,
        UNIT_STATUS[result.status],
        str(result.error) if result.error else result.reason,
        seconds=result.seconds,
        count=(done, total),
        subject=result,
    )


def include_dirs(
    config: SetupConfig, tree: Path, toolchain: WindowsToolchain, extra: Sequence[Path]
) -> list[Path]:
    """Upstream's own include folders, then CUDAExtension's (torch, torch's API, CUDA), then
    extra (the overlay for the CPU torch wheel's missing header, CPython's folders)."""
    own = [Path(d) for d in config.include_dirs if Path(d).resolve().is_relative_to(tree.resolve())]
    torch_include = toolchain.torch / "include" if toolchain.torch else None
    torch_dirs = [torch_include, torch_include / "torch/csrc/api/include"] if torch_include else []
    return [*own, *torch_dirs, toolchain.cuda / "include", *extra]


def trim_roots(tree: Path, dirs: Sequence[Path]) -> list[Path]:
    """The folders __FILE__ must not name, as the commands spell them: the tree, then each
    include folder outside it that no other one holds (torch's include folder, not also its
    csrc/api/include). Compared resolved, so a linked cache folder is seen for what it is."""
    roots: list[tuple[Path, Path]] = [(tree, tree.resolve())]
    for folder in map(Path, dirs):
        real = folder.resolve()
        if not any(real.is_relative_to(r) for _, r in roots):
            roots = [(f, r) for f, r in roots if not r.is_relative_to(real)] + [(folder, real)]
    return [folder for folder, _ in roots]


def unit_commands(
    config: SetupConfig,
    tree: Path,
    toolchain: WindowsToolchain,
    flags: WindowsFlags,
    objects: Path,
    extra_includes: Sequence[Path] = (),
    spell: Callable[[Path], str] = windows_path,
) -> list[UnitCommand]:
    """One command per source setup.py declares, in its order, paths written by spell (wine's
    Z: form; a native Windows host's own with `Host("windows").spell`)."""
    dirs = include_dirs(config, tree, toolchain, extra_includes)
    pp_opts = preprocessor_options([spell(d) for d in dirs], config.define_macros)
    roots = [spell(d) for d in trim_roots(tree, dirs)]
    commands = []
    for source in config.sources:
        obj = objects / (Path(source).with_suffix("").as_posix().replace("/", "__") + ".obj")
        src, out = spell(tree / source), spell(obj)
        if source.endswith(".cu"):
            args = nvcc_args(flags, config, pp_opts, src, out, roots)
            commands.append(UnitCommand(source, "nvcc", args, obj))
        else:
            args = cl_args(flags, config, pp_opts, src, out, roots)
            commands.append(UnitCommand(source, "cl", args, obj))
    return commands


def windows_commands(
    config: SetupConfig,
    tree: Path,
    toolchain: WindowsToolchain,
    objects: Path,
    extra_includes: Sequence[Path] = (),
) -> list[UnitCommand]:
    """Every unit's command as a Windows build of tree runs it: torch's and setuptools' flag
    tables, the overlay for the header torch's CPU wheel lacks, then extra_includes (CPython's).

    config's include folders may be relative to tree or absolute; only those inside it are
    upstream's own (include_dirs)."""
    flags = read_flags(toolchain.cpp_extension, setuptools_msvc_source())
    overlay = torch_overlay(toolchain, cache_dir() / "windows-toolchain-overlay")
    rooted = replace(config, include_dirs=tuple(str(tree / d) for d in config.include_dirs))
    return unit_commands(rooted, tree, toolchain, flags, objects, [overlay, *extra_includes])


def program(toolchain: WindowsToolchain, compiler: str) -> Path:
    """The .exe behind "cl" or "nvcc"."""
    if compiler == "cl":
        return msvc_tool(toolchain, "cl")
    return toolchain.cuda / "bin" / "nvcc.exe"


def first_error(output: str, tree: Path) -> tuple[CompileError | None, int]:
    """The first error line of a compiler's output (paths made relative to tree) and the count."""
    errors = all_errors(output, tree)
    return (errors[0] if errors else None), len(errors)


def all_errors(output: str, tree: Path) -> list[CompileError]:
    """Every error line of a compiler's output, in order, paths made relative to tree."""
    found: list[CompileError] = []
    root = windows_path(tree).rstrip("\\") + "\\"
    for raw in output.splitlines():
        line = raw.strip()
        match = _ERROR.match(line)
        if match:
            file = match["file"].strip()
            if file.lower().startswith(root.lower()):
                file = file[len(root) :].replace("\\", "/")
            found.append(
                CompileError(file, int(match["line"]), match["code"], match["text"].strip())
            )
            continue
        fatal = _DRIVER_FATAL.match(line)
        if fatal:
            found.append(CompileError(fatal["tool"], None, None, fatal["text"].strip()))
    return found


def compile_unit(
    command: UnitCommand,
    toolchain: WindowsToolchain,
    tree: Path,
    wine: str,
    env: Mapping[str, str],
    runner: Runner,
) -> UnitResult:
    """Run one unit's compiler; ok only with exit code 0 and the object written."""
    command.obj.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    done = runner([wine, str(program(toolchain, command.compiler)), *command.args], env, tree)
    seconds = time.monotonic() - started
    if done.returncode == 0 and command.obj.is_file():
        return UnitResult(command.source, "ok", seconds, obj=command.obj)
    errors = all_errors(done.stdout + "\n" + done.stderr, tree)
    if not errors:
        tail = proc.last_line(done.stdout + "\n" + done.stderr) or f"exit code {done.returncode}"
        errors = [CompileError(command.compiler, None, None, tail)]
    messages = tuple(dict.fromkeys(e.text for e in errors))
    return UnitResult(command.source, "error", seconds, errors[0], len(errors), messages=messages)


def compile_all(
    commands: Sequence[UnitCommand],
    toolchain: WindowsToolchain,
    tree: Path,
    wine: str,
    *,
    jobs: int,
    runner: Runner,
    on_done: Progress = lambda *_: None,
    base_env: Mapping[str, str] | None = None,
) -> list[UnitResult]:
    """Every unit, jobs at a time; results in the commands' order, on_done(result, finished,
    total) as each finishes."""
    env = wine_environ(toolchain, dict(os.environ if base_env is None else base_env))
    lock = threading.Lock()
    finished: list[UnitResult] = []

    def one(command: UnitCommand) -> UnitResult:
        result = compile_unit(command, toolchain, tree, wine, env, runner)
        with lock:
            finished.append(result)
            on_done(result, len(finished), len(commands))
        return result

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, commands))
