"""Numbers and paths from the environment, parsed strictly: one parser for every variable.

A value from the environment is typed by a person or a CI file, so it is checked as closely as an
option: a number is ASCII digits only (`str.isdigit` also accepts `²` and `٣`, which `int()` then
refuses or reads as 3), within bounds; a path is absolute after `~` is expanded. An empty or
unset variable means "not set". Anything else is a UsageError naming the variable, the value
and an example of a good one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from mambawin.errors import UsageError

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
