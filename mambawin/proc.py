"""The one way mambawin runs an external program.

Resolves the executable with shutil.which, never uses a shell, logs the command line, captures or
streams, times out hung tools, and raises CommandError with the command, exit code and output tail.
"""

from __future__ import annotations

import locale
import logging
import os
import shlex
import shutil
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mambawin.errors import CommandError, CommandTimeout, ToolNotFound

log = logging.getLogger("mambawin")

TAIL_LINES = 40


@dataclass(frozen=True)
class Completed:
    """What a finished program printed and returned."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity where the OS tells it (taskset, a
    container's cpuset), else the machine's count."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


def which(program: str | Path, path: str | None = None) -> str | None:
    """Resolve a program like the OS would; an explicit path must exist and be a file."""
    text = str(program)
    if os.sep in text or (os.altsep and os.altsep in text):
        return text if Path(text).is_file() else shutil.which(text)
    return shutil.which(text, path=path)


def decode(data: bytes, encoding: str | None = None) -> str:
    """Decode tool output without ever raising (cl.exe prints in the OEM code page)."""
    return data.decode(encoding or locale.getpreferredencoding(False), errors="replace")


def run(
    argv: Sequence[str | Path],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    check: bool = True,
    encoding: str | None = None,
    on_line: Callable[[str], None] | None = None,
    capture: bool = True,
) -> Completed:
    """Run argv; capture its output, or stream it line by line to on_line (stderr merged), or
    with capture=False send it to the null device (a program that leaves daemons behind holding
    its output: a captured run would wait for them)."""
    resolved = _resolve(argv, env)
    log.debug("run: %s (cwd=%s)", subprocess.list2cmdline(resolved), cwd or ".")
    if not capture:
        done = _run_discarded(resolved, cwd, env, timeout)
    elif on_line is None:
        done = _run_captured(resolved, cwd, env, timeout, encoding)
    else:
        done = _run_streamed(resolved, cwd, env, timeout, encoding, on_line)
    if check and done.returncode != 0:
        tail = "\n".join((done.stdout + "\n" + done.stderr).strip().splitlines()[-TAIL_LINES:])
        reason = last_line(tail) or "(no output)"
        msg = f"{Path(resolved[0]).name} exited with code {done.returncode}: {reason}"
        raise CommandError(msg, argv=done.argv, returncode=done.returncode, tail=tail)
    return done


def _resolve(argv: Sequence[str | Path], env: Mapping[str, str] | None) -> tuple[str, ...]:
    if not argv:
        raise ValueError("run() needs a program to run")
    search_path = env.get("PATH") if env is not None else None
    exe = which(argv[0], path=search_path)
    if exe is None:
        msg = f"{argv[0]} not found on PATH: install it or add its folder to PATH"
        raise ToolNotFound(msg, argv=tuple(str(a) for a in argv))
    return (exe, *(str(a) for a in argv[1:]))


def _run_captured(
    argv: tuple[str, ...],
    cwd: Path | None,
    env: Mapping[str, str] | None,
    timeout: float | None,
    encoding: str | None,
) -> Completed:
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            capture_output=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise _timeout_error(argv, timeout) from exc
    except OSError as exc:
        msg = f"could not start {argv[0]}: {exc.strerror or exc}"
        raise CommandError(msg, argv=argv) from exc
    return Completed(
        argv, proc.returncode, decode(proc.stdout, encoding), decode(proc.stderr, encoding)
    )


def _run_discarded(
    argv: tuple[str, ...], cwd: Path | None, env: Mapping[str, str] | None, timeout: float | None
) -> Completed:
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise _timeout_error(argv, timeout) from exc
    except OSError as exc:
        msg = f"could not start {argv[0]}: {exc.strerror or exc}"
        raise CommandError(msg, argv=argv) from exc
    return Completed(argv, proc.returncode, "", "")


def _run_streamed(
    argv: tuple[str, ...],
    cwd: Path | None,
    env: Mapping[str, str] | None,
    timeout: float | None,
    encoding: str | None,
    on_line: Callable[[str], None],
) -> Completed:
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    except OSError as exc:
        msg = f"could not start {argv[0]}: {exc.strerror or exc}"
        raise CommandError(msg, argv=argv) from exc
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    # A watchdog thread, because a blocking readline cannot notice a deadline by itself.
    fired = threading.Event()

    def _kill() -> None:
        fired.set()
        proc.kill()

    timer = threading.Timer(timeout, _kill) if timeout else None
    if timer:
        timer.start()
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = decode(raw, encoding).rstrip("\r\n")
            tail.append(line)
            on_line(line)
        returncode = proc.wait()
    finally:
        if timer:
            timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if fired.is_set():
        raise _timeout_error(argv, timeout)
    return Completed(argv, returncode, "\n".join(tail), "")


def _timeout_error(argv: tuple[str, ...], timeout: float | None) -> CommandTimeout:
    msg = f"{Path(argv[0]).name} did not finish within {timeout:g} s and was stopped"
    return CommandTimeout(msg, argv=argv)


def command_line(argv: Sequence[str], *, windows: bool) -> str:
    """argv as one command string, quoted for the shell that will read it.

    ninja runs commands through /bin/sh on POSIX and CreateProcess on Windows, whose quoting
    rules differ ("C:\\Program Files\\NVIDIA GPU Computing Toolkit\\...").
    """
    return subprocess.list2cmdline(argv) if windows else shlex.join(argv)


def last_line(text: str) -> str:
    """The last non-blank line of a program's output, stripped; '' when there is none."""
    return reason(text)


def reason(
    output: str,
    *,
    markers: tuple[str, ...] = (),
    pick: str = "last",
    none: str = "",
    strip_marker: bool = True,
) -> str:
    """The line of a tool's output that says why it failed, for a one-line message.

    The first or last (pick) line starting with one of markers (case-insensitive; the marker
    removed unless strip_marker is False: git's `fatal:`, pip's `ERROR:`), else the last
    non-blank line, else none.
    """
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    lowered = tuple(m.lower() for m in markers)
    marked = [line for line in lines if line.lower().startswith(lowered)] if markers else []
    if marked:
        line = marked[0] if pick == "first" else marked[-1]
        if not strip_marker:
            return line
        prefix = next(m for m in markers if line.lower().startswith(m.lower()))
        return line[len(prefix) :].strip() or line
    return lines[-1] if lines else none
