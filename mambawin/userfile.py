"""What a user gives mambawin besides options: files they name and environment variables.

A file a user names (a team spec, a verify record) is read as a regular file, of sane size.

A FIFO would block the read forever, `/dev/zero` would fill memory, and a folder or a device is no
spec at all; a UTF-8 byte-order mark (Notepad's "UTF-8 with BOM") is named instead of reported as
a syntax error at line 1. A file mambawin reads but anyone could have written (a verify record, a
marker, a wheel's provenance) is parsed with parse_json or parse_toml: `[[[[…` nested deeper than
Python recurses is bad input like any other, not a RecursionError traceback.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomllib

from mambawin.errors import UsageError, os_error

SPEC_LIMIT = 1 << 20  # 1 MiB: a spec of thousands of cells is a few dozen kB
_BOM = b"\xef\xbb\xbf"
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode: int) -> str | None:
    """What a path of this (followed) mode is when it is no regular file ("a FIFO (named
    pipe)"), or None for a regular file: the one test before mambawin opens a file a user names."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_text(
    path: Path,
    *,
    what: str,
    limit: int = SPEC_LIMIT,
    missing: str = "check the path",
    error: type[UsageError] = UsageError,
) -> str:
    """The UTF-8 text of a regular file; error (a UsageError) naming the problem and the fix.

    missing: the fix when there is no such file. OS errors stay FileSystemError (exit 10).
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise error(f"{path}: no such {what} file: {missing}") from None
    except OSError as exc:
        raise os_error(exc, f"read the {what}") from None
    kind = kind_of(info.st_mode)
    if kind is not None:
        msg = f"{path} is {kind}, not a {what} file: pass the file itself"
        raise error(msg)
    if info.st_size > limit:
        msg = (
            f"{path} is {info.st_size} bytes, more than a {what} can be ({limit} bytes): "
            "pass the right file"
        )
        raise error(msg)
    data = _read(path, limit, what, error)
    if data.startswith(_BOM):
        msg = (
            f'{path} starts with a UTF-8 byte-order mark (an editor\'s "UTF-8 with BOM"), '
            f"which TOML and JSON readers reject: save the {what} as UTF-8 without BOM"
        )
        raise error(msg)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = (
            f"{path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}): "
            f"save the {what} as UTF-8"
        )
        raise error(msg) from None


def _read(path: Path, limit: int, what: str, error: type[UsageError]) -> bytes:
    # O_NONBLOCK: a regular file reads as usual, and a path swapped for a FIFO after the stat
    # cannot block the open.
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as stream:
            data = stream.read(limit + 1)
    except OSError as exc:
        raise os_error(exc, f"read the {what}") from None
    if len(data) > limit:  # it grew after the stat
        msg = f"{path} is larger than a {what} can be ({limit} bytes): pass the right file"
        raise error(msg)
    return data


_TOO_DEEP = "nested too deeply to read (thousands of levels, not a file mambawin writes)"


def parse_json(text: str | bytes) -> Any:
    """json.loads; nesting too deep for Python is a ValueError, as any other bad JSON is."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(_TOO_DEEP) from None


def parse_toml(text: str) -> dict[str, Any]:
    """tomllib.loads; nesting too deep for Python is a TOMLDecodeError, as any bad TOML is."""
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError(_TOO_DEEP) from None
    return data


# ---- numbers and paths from the environment ---------------------------------------------------
# Numbers and paths from the environment, parsed strictly: one parser for every variable.
#
# A value from the environment is typed by a person or a CI file, so it is checked as closely as an
# option: a number is ASCII digits only (`str.isdigit` also accepts `²` and `٣`, which `int()` then
# refuses or reads as 3), within bounds; a path is absolute after `~` is expanded. An empty or
# unset variable means "not set". Anything else is a UsageError naming the variable, the value
# and an example of a good one.

_DIGITS = re.compile(r"[0-9]+")  # ASCII only: re's \d, like isdigit, accepts other scripts' digits
JOBS_BOUND = 1024  # parallel jobs: beyond any machine, so a bigger MAX_JOBS or --jobs is a typo
_MAX_DIGITS = 18  # beyond any bound below; keeps int() away from 4300-digit strings


def _environ(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def env_int(
    name: str,
    *,
    minimum: int,
    maximum: int,
    unit: str,
    example: int,
    note: str = "",
    env: Mapping[str, str] | None = None,
) -> int | None:
    """name as a whole number in [minimum, maximum]; None when unset or empty.

    note: what the bounds mean, said when a value is outside them."""
    raw = _environ(env).get(name, "")
    text = raw.strip()
    if not text:
        return None
    if _DIGITS.fullmatch(text) and len(text) <= _MAX_DIGITS:
        value = int(text)
        if minimum <= value <= maximum:
            return value
    msg = (
        f"{name}={raw!r} is not a whole number of {unit} (ASCII digits) in "
        f"{minimum}..{maximum}{note}: set e.g. {name}={example}, or unset it"
    )
    raise UsageError(msg)


# The one reading of a yes/no variable (mambawin's own and the guard written into wheels):
# `MAMBAWIN_OFFLINE=0` meant on when any non-empty value did.
FLAG_ON = ("1", "true", "yes", "on")
FLAG_OFF = ("", "0", "false", "no", "off")


def env_flag(name: str, *, env: Mapping[str, str] | None = None) -> bool:
    """name as a yes/no: 1/true/yes/on (any case) on, 0/false/no/off, empty or unset off;
    UsageError naming the variable for anything else (` 1`, `2`, `yes\\n`)."""
    raw = _environ(env).get(name, "")
    word = raw.lower()
    if word in FLAG_ON:
        return True
    if word in FLAG_OFF:
        return False
    msg = (
        f"{name}={raw!r} is not a yes/no value: set {name}=1 (or true, yes, on) to turn it on, "
        f"{name}=0 (or false, no, off) or unset it to turn it off"
    )
    raise UsageError(msg)


def env_path(name: str, *, env: Mapping[str, str] | None = None) -> Path | None:
    """name as an absolute path (`~` expanded); None when unset or empty."""
    raw = _environ(env).get(name, "")
    if not raw.strip():
        return None
    if raw != raw.strip():
        msg = f"{name}={raw!r} has leading or trailing spaces: set it to the folder's exact path"
        raise UsageError(msg)
    try:
        path = Path(raw).expanduser()
    except RuntimeError:  # `~name` of a user this system does not have
        msg = f"{name}={raw!r} names a home folder this system does not have: give an absolute path"
        raise UsageError(msg) from None
    if not path.is_absolute():
        msg = (
            f"{name}={raw!r} is not an absolute path (it would change with the current folder): "
            f"set e.g. {name}={Path.home() / 'mambawin-cache'}"
        )
        raise UsageError(msg)
    return path
