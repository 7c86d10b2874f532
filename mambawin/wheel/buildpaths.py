"""Paths of the machine that built a wheel, found in its extensions' bytes.

Why: `__FILE__` (every TORCH_CHECK message) and nvcc's -lineinfo line tables put the absolute
path of each source file into the binary, so a wheel would tell its users the build machine's
user name and folders, and two builds in two folders would differ. The compiler-flags patch maps
or trims those paths; this finds a wheel where that did not happen (built before the patch, or
with it left out).

The rule is narrow on purpose (a binary is full of strings): an absolute path that starts a
string (after a NUL, a quote, a space or the start of the file) and lies under a folder where
builds run: a home (/home/, /root/, /Users/, C:\\Users\\), a temporary folder (/tmp/,
/var/folders/, a drive's Temp), a CI workspace (/__w/, /github/workspace/, D:\\a\\), or wine's
drive Z:, which is the Linux root of a cross build. System folders (/usr/, /proc/, C:\\Windows\\)
are never flagged: runtime code names them on purpose.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass

from mambawin.wheel.info import WheelInfo, read_member

_PATH_CHAR = rb"[A-Za-z0-9._+~@=,\-/\\]"
_POSIX = rb"/(?:home|root|tmp|Users|var/folders|__w|github/workspace)/"
_WINDOWS = rb"[A-Za-z]:[\\/](?:Users|a|Temp|tmp|actions-runner|Windows[\\/]Temp)[\\/]|[Zz]:\\"
BUILD_PATH = re.compile(
    rb"(?<![A-Za-z0-9._+~@=,\-/\\:])(?:" + _POSIX + rb"|" + _WINDOWS + rb")" + _PATH_CHAR + rb"+"
)
SHOWN = 3  # paths named per member in the message


@dataclass(frozen=True)
class BuildPaths:
    """The build-machine paths found in each extension member, in wheel order."""

    found: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def ok(self) -> bool:
        return not self.found

    def message(self, checked: int) -> str:
        if self.ok:
            return f"{checked} extension(s) hold no path of the build machine"
        named = "; ".join(
            f"{member}: {', '.join(paths[:SHOWN])}" + (" …" if len(paths) > SHOWN else "")
            for member, paths in self.found
        )
        return (
            f"build-machine paths in the binary ({named}): rebuild with this mambawin "
            "(its compiler-flags patch maps source paths) to ship a wheel that names none"
        )

    def to_json(self) -> dict[str, object]:
        return {"paths": {member: list(paths) for member, paths in self.found}}


def paths_in(data: bytes) -> tuple[str, ...]:
    """The distinct build-machine paths in data, in order of first appearance."""
    seen = dict.fromkeys(m.group().decode("ascii") for m in BUILD_PATH.finditer(data))
    return tuple(seen)


def scan(members: Iterable[tuple[str, bytes]]) -> BuildPaths:
    """The build paths in each (name, bytes) member that holds any."""
    return BuildPaths(tuple((name, found) for name, data in members if (found := paths_in(data))))


def wheel_build_paths(archive: zipfile.ZipFile, info: WheelInfo) -> BuildPaths:
    """The build paths in a wheel's extensions (opened and checked once by the caller)."""
    return scan((m, read_member(info.path, archive, m)) for m in info.extensions)
