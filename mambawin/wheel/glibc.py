"""The oldest Linux a compiled binary loads on: the newest glibc (and libstdc++) symbol version it
needs, read from the versions its undefined symbols carry (`wheel.imports`).

A `linux_x86_64` tag promises nothing about glibc, so pip installs a wheel built on a newer
system on an older one, and the import fails with "version `GLIBC_2.38' not found" (the H100
image's g++ linked a static libstdc++ built against glibc >= 2.38 headers, whose strtoul is
`__isoc23_strtoul@GLIBC_2.38`; benchmarks.md §15). The binary says so before anything loads it.
Nothing here judges: verify's fit step compares the floor with the machine's glibc, and build
states it.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from packaging.version import Version

from mambawin.errors import WheelError
from mambawin.wheel.imports import BinaryImports, read_imports
from mambawin.wheel.info import WheelInfo, open_wheel, read_member

# glibc's own versions, libstdc++'s library and C++ ABI versions (GLIBCXX_3.4.32, CXXABI_1.3.15).
_VERSION = re.compile(r"^(GLIBC|GLIBCXX|CXXABI)_(\d+(?:\.\d+)*)$")
_RUNTIMES = ("GLIBC", "GLIBCXX", "CXXABI")
_ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True)
class VersionNeed:
    """The newest version of one runtime (GLIBC, GLIBCXX, CXXABI) a binary needs, and a symbol
    that needs it (the name a user can look up)."""

    runtime: str
    version: Version
    symbol: str
    binary: str

    @property
    def line(self) -> str:
        """`x.so needs glibc 2.38 (__isoc23_strtoul)`."""
        return f"{self.binary} needs {self.label} ({self.symbol})"

    def to_json(self) -> dict[str, str]:
        return {
            "runtime": self.runtime,
            "version": str(self.version),
            "symbol": self.symbol,
            "binary": self.binary,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, str]) -> VersionNeed:
        return cls(data["runtime"], Version(data["version"]), data["symbol"], data["binary"])

    @property
    def label(self) -> str:
        """`glibc 2.38`, or libstdc++'s own spelling: `GLIBCXX_3.4.32`."""
        if self.runtime == "GLIBC":
            return f"glibc {self.version}"
        return f"{self.runtime}_{self.version}"


def needs_of(imports: BinaryImports, binary: str) -> tuple[VersionNeed, ...]:
    """Per runtime, the newest version the binary's imports need; none for PE or unversioned."""
    versioned = ((s, _VERSION.match(s.version or "")) for s in imports.symbols)
    return newest(
        VersionNeed(found[1], Version(found[2]), symbol.name, binary)
        for symbol, found in versioned
        if found is not None
    )


def newest(needs: Iterable[VersionNeed]) -> tuple[VersionNeed, ...]:
    """Per runtime, the newest need (of one binary's symbols, or of a wheel's binaries: a wheel
    loads where all of them do); glibc first."""
    kept: dict[str, VersionNeed] = {}
    for need in needs:
        held = kept.get(need.runtime)
        if held is None or need.version > held.version:
            kept[need.runtime] = need
    return tuple(kept[r] for r in _RUNTIMES if r in kept)


def wheel_needs(archive: zipfile.ZipFile, info: WheelInfo) -> tuple[VersionNeed, ...]:
    """The runtime versions a wheel's ELF extensions need, opened once (as gpucode reads them);
    PE members and non-ELF bytes need none. WheelError when an ELF's headers are unreadable."""
    return newest(
        need
        for member in info.extensions
        for need in _elf_needs(read_member(info.path, archive, member), member)
    )


def file_needs(paths: Iterable[Path]) -> tuple[VersionNeed, ...]:
    """The same for installed libraries (verify --installed); unreadable files need nothing."""
    found: list[VersionNeed] = []
    for path in paths:
        try:
            found += _elf_needs(path.read_bytes(), path.name)
        except (OSError, WheelError):
            continue  # the static step's other checks say what is wrong with the file
    return newest(found)


def _elf_needs(data: bytes, name: str) -> tuple[VersionNeed, ...]:
    """needs_of an ELF binary's bytes; a PE or any other file needs none."""
    if data[:4] != _ELF_MAGIC:
        return ()
    return needs_of(read_imports(data, name), PurePosixPath(name).name)


def glibc_of(needs: Iterable[VersionNeed]) -> VersionNeed | None:
    """The glibc need among `needs`, if any."""
    return next((n for n in needs if n.runtime == "GLIBC"), None)


def wheel_glibc(path: Path) -> str | None:
    """The glibc a finished wheel's extensions need, as build states it ("2.32
    (__libc_single_threaded)"): the oldest Linux it loads on, which its linux_x86_64 tag does not
    say. None when nothing in it is versioned against glibc (a PE wheel)."""
    with open_wheel(path) as (archive, info):
        need = glibc_of(wheel_needs(archive, info))
    return f"{need.version} ({need.symbol})" if need else None
