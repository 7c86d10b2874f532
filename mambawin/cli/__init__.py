"""The typer layer: parse options, call one core function, map errors to exit codes.

Core modules never import typer or print results; the modules here render what they return.
Each command module registers itself on `app` when imported, and `app` imports it only when its
command is used (cli/registry.py lists them), so `mambawin --help` stays quick.
"""

from __future__ import annotations

import os
import sys
from contextlib import suppress

from mambawin.cli.app import app, say_error
from mambawin.errors import os_error

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    code: int | str | None = 0
    try:
        app()
    except SystemExit as exc:
        code = exc.code
    except OSError as exc:  # outside any command: stdout refused --version's or --help's text
        code = _say_os_error(exc)
    sys.exit(_with_stdout_written(code))


def _with_stdout_written(code: int | str | None) -> int | str | None:
    """code, once what stdout still buffers is written. When it cannot be (a full disk, a pipe
    closed early), stdout goes to the null device: Python's own flush at exit would fail again
    with exit 120 and an "Exception ignored" traceback. A command that had succeeded then says
    so in one line and exits with the OS error's code; one that failed has said why already."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        if code in (0, None):
            return _say_os_error(exc)
        _drop_stdout()
    return code


def _say_os_error(exc: OSError) -> int:
    """The one line for an OSError outside any command, and its exit code. One that names no
    file is stdout's (nothing else here writes without a name): stdout then goes nowhere."""
    action = "use"
    if exc.filename is None:
        _drop_stdout()
        exc, action = OSError(exc.errno, exc.strerror, "stdout"), "write the result to"
    error = os_error(exc, action)
    say_error(str(error))
    return error.exit_code


def _drop_stdout() -> None:
    with suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
