"""CUDA architecture lists: one parser for every command that takes --arch."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from mambawin.errors import UsageError

# 86, 8.6, sm_86, compute_86, 90a, 9.0a, each optionally +PTX.
_TOKEN = re.compile(
    r"^(?:(?P<prefix>sm_|compute_))?"
    r"(?:(?P<major>\d{1,2})\.(?P<minor>\d)|(?P<packed>\d{2,3}))"
    r"(?P<suffix>[af]?)(?P<ptx>\+ptx)?$",
    re.IGNORECASE | re.ASCII,  # \d alone takes ٩٠ and ９０ as 90
)
_SEPARATORS = re.compile(r"[;,\s]+")


@dataclass(frozen=True, order=True)
class Arch:
    """One GPU target: SASS for sm_<major><minor><suffix>, plus PTX when ptx is set."""

    major: int
    minor: int
    suffix: str = ""
    ptx: bool = False

    @property
    def number(self) -> str:
        """The packed form nvcc uses, e.g. '86' or '90a'."""
        return f"{self.major}{self.minor}{self.suffix}"

    @property
    def sm(self) -> str:
        return f"sm_{self.number}"

    @property
    def compute(self) -> str:
        return f"compute_{self.number}"

    @property
    def capability(self) -> tuple[int, int]:
        return (self.major, self.minor)

    def gencode(self) -> list[str]:
        """nvcc -gencode values: SASS always, PTX of the same arch when asked for."""
        flags = [f"arch={self.compute},code={self.sm}"]
        if self.ptx:
            flags.append(f"arch={self.compute},code={self.compute}")
        return flags

    def runs_on(self, capability: tuple[int, int]) -> bool:
        """Whether this code runs on a GPU of compute capability (major, minor).

        SASS sm_XY runs on X.Z for Z >= Y (same major); sm_XYa only on X.Y exactly; family code
        sm_XYf on the same major from X.Y up. PTX compute_XY is JIT-compiled by the driver for
        any GPU >= X.Y; arch-specific PTX (a/f) never leaves its family.
        """
        if self.suffix == "a":
            return self.capability == capability
        if not self.ptx or self.suffix == "f":
            return self.major == capability[0] and self.minor <= capability[1]
        return self.capability <= capability

    def torch_spec(self) -> str:
        """The TORCH_CUDA_ARCH_LIST spelling, e.g. '8.6' or '9.0a+PTX'."""
        return f"{self.major}.{self.minor}{self.suffix}{'+PTX' if self.ptx else ''}"

    def __str__(self) -> str:
        return self.sm + ("+PTX" if self.ptx else "")


def parse_arch(token: str) -> Arch:
    """Parse one arch token; raise UsageError naming it when it is not one."""
    match = _TOKEN.match(token.strip())
    if match is None:
        msg = (
            f"invalid CUDA arch {token!r} in --arch: use forms like 86, 8.6, sm_86 or 8.6+PTX "
            "(see `nvcc --list-gpu-code`)"
        )
        raise UsageError(msg)
    if match["packed"]:
        major, minor = int(match["packed"][:-1]), int(match["packed"][-1])
    else:
        major, minor = int(match["major"]), int(match["minor"])
    ptx = bool(match["ptx"]) or (match["prefix"] or "").lower() == "compute_"
    if not 3 <= major <= 20:
        msg = (
            f"invalid CUDA arch {token!r} in --arch: compute capability {major}.{minor} "
            "does not exist"
        )
        raise UsageError(msg)
    suffix = match["suffix"].lower()
    _check_suffix(token, major, minor, suffix)
    return Arch(major, minor, suffix, ptx)


def _check_suffix(token: str, major: int, minor: int, suffix: str) -> None:
    """'a' (arch-specific) targets start at sm_90a, 'f' (family) ones at sm_100f (CUDA 12.9).

    No nvcc knows sm_86a, which nvcc would only reject after doctor and --plan had passed it.
    `nvcc --list-gpu-code` lists base targets only, so doctor checks the base and this the suffix.
    """
    first = {"a": (9, 0), "f": (10, 0)}.get(suffix)
    if first is not None and (major, minor) < first:
        msg = (
            f"invalid CUDA arch {token!r} in --arch: no sm_{major}{minor}{suffix} exists "
            f"('{suffix}' targets start at sm_{first[0]}{first[1]}{suffix}); "
            f"use {major}{minor} (see `nvcc --list-gpu-code`)"
        )
        raise UsageError(msg)


def parse_archs(values: str | Iterable[str]) -> tuple[Arch, ...]:
    """Parse '86;89', '86,89', '8.6 8.9', 'sm_86', '8.6+PTX' and repeats into a sorted list.

    The same arch given twice is kept once; if any spelling asked for PTX, the result has PTX.
    """
    if isinstance(values, str):
        values = [values]
    merged: dict[tuple[int, int, str], Arch] = {}
    for value in values:
        for token in _SEPARATORS.split(value.strip()):
            if not token:
                continue
            arch = parse_arch(token)
            key = (arch.major, arch.minor, arch.suffix)
            seen = merged.get(key)
            merged[key] = Arch(*key, ptx=arch.ptx or (seen.ptx if seen else False))
    if not merged:
        raise UsageError("empty --arch: name at least one CUDA arch, e.g. --arch 86")
    return tuple(sorted(merged.values()))


def format_archs(archs: Iterable[Arch]) -> str:
    """The canonical ';'-joined spelling used in records and wheel names, e.g. '86;89+PTX'."""
    return ";".join(a.number + ("+PTX" if a.ptx else "") for a in archs)
