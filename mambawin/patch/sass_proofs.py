"""The SASS proofs arch groups rest on, as data: data/sass_groups.json's entries, their key and
their checks (patch/arch_groups.py plans the passes from them).

Each entry says that, for one package release, ABI, CUDA (the nvcc's major.minor) and platform,
every kernel of each named compile unit compiled from compute_<ptx_arch> for each of archs has
the SASS of that arch's own pass (benchmarks/sass_groups.py compares them and writes the entry
through `proof_entry`). A unit is named by its upstream file stem; a split part is its unit's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from packaging.version import InvalidVersion, Version

DATA = "sass_groups.json"  # in mambawin/patch/data/
SCHEMA = 1
PROOF_PLATFORM = "linux_x86_64"  # the one platform proofs are made on so far
_ARCH = re.compile(r"^\d{2,3}$", re.ASCII)  # a plain arch, as nvcc packs it: 80, 86, 100
_CUDA = re.compile(r"^\d+\.\d+$", re.ASCII)
_FIELDS = ("package", "version", "abi", "cuda", "platform", "ptx_arch", "archs", "units", "kernels")
_PART = re.compile(r"_part\d+$", re.ASCII)  # split-units' part of a unit: <stem>_partK
_UNIT = re.compile(r"^[A-Za-z0-9_]+$", re.ASCII)  # a unit's file stem, as upstream names them
# What makes two entries the same comparison (with_proof replaces one with the other).
_SAME = ("package", "version", "abi", "cuda", "platform", "ptx_arch", "archs")


@dataclass(frozen=True)
class GroupKey:
    """What a proof holds for: the SASS of one package release, ABI, CUDA and platform."""

    package: str
    version: str  # upstream's version, exact (normalised by PEP 440)
    abi: str  # torch | stable
    cuda: str  # major.minor of the nvcc; "" when unknown (nothing is proven for it)
    platform: str  # the wheel's platform tag, e.g. linux_x86_64

    def proven_text(self) -> str:
        """e.g. 'mamba-ssm 2.2.4, CUDA 13.0, torch ABI'."""
        return f"{self.package} {self.version}, CUDA {self.cuda}, {self.abi} ABI{self._where()}"

    def unproven_text(self) -> str:
        """e.g. 'causal-conv1d 1.6.2 (torch ABI, CUDA 13.0)'."""
        cuda = f"CUDA {self.cuda}" if self.cuda else "CUDA unknown"
        return f"{self.package} {self.version} ({self.abi} ABI, {cuda}{self._where()})"

    def text(self) -> str:
        """e.g. 'causal-conv1d 1.5.0.post8, torch ABI, CUDA 13.0'."""
        cuda = f"CUDA {self.cuda}" if self.cuda else "CUDA unknown"
        return f"{self.package} {self.version}, {self.abi} ABI, {cuda}{self._where()}"

    def _where(self) -> str:
        return "" if self.platform == PROOF_PLATFORM else f", {self.platform}"


@dataclass(frozen=True)
class Proof:
    """One comparison: in each of units, every kernel's SASS of archs from ptx_arch's pass
    equals its own pass's."""

    key: GroupKey
    ptx_arch: str  # e.g. "80"
    archs: tuple[str, ...]  # the real archs the pass serves, ptx_arch included
    kernels: int  # kernels compared
    evidence: str  # the docs/benchmarks.md section that shows it
    units: tuple[str, ...] = ()  # the upstream unit stems whose every kernel was identical

    def covers(self, key: GroupKey, ptx_arch: str, arch: str, unit: str) -> bool:
        return (
            self.key == key and self.ptx_arch == ptx_arch and arch in self.archs
        ) and unit in self.units


@dataclass(frozen=True)
class ProofTable:
    """Every SASS proof mambawin knows."""

    proofs: tuple[Proof, ...] = ()

    def proof_for(self, key: GroupKey, ptx_arch: str, arch: str, unit: str) -> Proof | None:
        return next((p for p in self.proofs if p.covers(key, ptx_arch, arch, unit)), None)

    def units_of(self, key: GroupKey) -> tuple[str, ...]:
        """Every unit stem some proof for key names, sorted."""
        return tuple(sorted({u for p in self.proofs if p.key == key for u in p.units}))


def group_key(package: str, version: str, abi: str, cuda: str, platform: str) -> GroupKey:
    """The key of a build: its release normalised by PEP 440, its CUDA as major.minor."""
    return GroupKey(package, _version(version), abi, cuda_release(cuda), platform)


def cuda_release(text: str) -> str:
    """'13.0' of '13.0', '13.0.88' or 'V13.0.88'; '' when it is no version."""
    try:
        release = Version(text.strip().lstrip("vV")).release
    except InvalidVersion:
        return ""
    return f"{release[0]}.{release[1] if len(release) > 1 else 0}"


def unit_stem(name: str) -> str:
    """The upstream unit a source belongs to: 'causal_conv1d_bwd' of 'csrc/causal_conv1d_bwd.cu'
    and of its split part 'causal_conv1d_bwd_part3.cu' (split-units moves kernels between
    objects without changing their SASS, so a part is proven with its unit)."""
    stem = name.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".cu")
    return _PART.sub("", stem)


# ---- the proofs, as data -----------------------------------------------------------------------


def proof_entry(
    package: str,
    version: str,
    abi: str,
    cuda: str,
    platform: str,
    ptx_arch: str,
    archs: Iterable[str],
    kernels: int,
    evidence: str,
    units: Iterable[str],
) -> dict[str, Any]:
    """One entry of data/sass_groups.json's "proofs", checked as the loader checks it: what a
    SASS comparison of ptx_arch's pass against each arch's own pass proved. units: the upstream
    unit stems (e.g. "causal_conv1d_fwd"; a split part names its unit) in which every kernel of
    every arch was identical; a unit with any differing kernel is left out."""
    archs = list(archs)
    entry = {
        "package": package,
        "version": _version(version),
        "abi": abi,
        "cuda": cuda_release(cuda) or cuda,
        "platform": platform,
        "ptx_arch": ptx_arch,
        "archs": sorted(set(archs), key=int) if all(_ARCH.match(a) for a in archs) else list(archs),
        "units": sorted({unit_stem(u) for u in units}),
        "kernels": kernels,
        "evidence": evidence,
    }
    _proof(entry, 0)  # refuses what the loader would
    return entry


def with_proof(text: str, entry: Mapping[str, Any]) -> str:
    """sass_groups.json's text with entry added, replacing an entry for the same key, PTX arch
    and archs (a newer comparison of the same thing); the entries sorted, so the file diffs
    well."""
    data = json.loads(text)
    parse_proofs(text)  # the table as it stands must be valid
    _proof(entry, len(data["proofs"]))
    kept = [e for e in data["proofs"] if any(e[f] != entry[f] for f in _SAME)]
    data["proofs"] = sorted([*kept, dict(entry)], key=lambda e: [str(e[f]) for f in _SAME])
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def parse_proofs(text: str) -> ProofTable:
    """The table a sass_groups.json text holds; ValueError naming the first bad entry."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"{DATA}: not a schema {SCHEMA} proof table")
    entries = data.get("proofs")
    if not isinstance(entries, list):
        raise ValueError(f'{DATA}: "proofs" is no list')
    return ProofTable(tuple(_proof(e, i) for i, e in enumerate(entries)))


@lru_cache(maxsize=1)
def shipped_proofs() -> ProofTable:
    """The proofs this mambawin ships (mambawin/patch/data/sass_groups.json)."""
    text = resources.files("mambawin.patch").joinpath(f"data/{DATA}").read_text(encoding="utf-8")
    return parse_proofs(text)


def _proof(entry: object, index: int) -> Proof:
    where = f"{DATA}: proof {index}"
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where} is no object")
    missing = [f for f in (*_FIELDS, "evidence") if f not in entry]
    if missing:
        raise ValueError(f"{where} lacks {', '.join(missing)}")
    strings = ("package", "version", "abi", "cuda", "platform", "ptx_arch", "evidence")
    if not all(isinstance(entry[f], str) and entry[f] for f in strings):
        raise ValueError(f"{where}: {', '.join(strings)} must be non-empty strings")
    archs, ptx = entry["archs"], entry["ptx_arch"]
    if not isinstance(archs, list) or not all(isinstance(a, str) and _ARCH.match(a) for a in archs):
        raise ValueError(f'{where}: archs must be plain archs like "86"')
    if not _ARCH.match(ptx) or ptx not in archs or len(archs) < 2:
        raise ValueError(f"{where}: ptx_arch must be one of two or more archs")
    if any(int(a) < int(ptx) for a in archs):
        raise ValueError(f"{where}: archs must not be below ptx_arch")
    if not _CUDA.match(entry["cuda"]):
        raise ValueError(f"{where}: cuda must be major.minor, e.g. 13.0")
    units = entry["units"]
    if (
        not isinstance(units, list)
        or not units
        or not all(isinstance(u, str) and _UNIT.match(u) and not _PART.search(u) for u in units)
    ):
        raise ValueError(
            f'{where}: units must name one or more unit stems like "causal_conv1d_fwd"'
        )
    if units != sorted(set(units)):
        raise ValueError(f"{where}: units must be sorted, each once")
    kernels = entry["kernels"]
    if not isinstance(kernels, int) or isinstance(kernels, bool) or kernels < 1:
        raise ValueError(f"{where}: kernels must be the number of kernels compared (>= 1)")
    key = GroupKey(
        entry["package"], _version(entry["version"]), entry["abi"], entry["cuda"], entry["platform"]
    )
    return Proof(key, ptx, tuple(archs), kernels, entry["evidence"], tuple(units))


def _version(text: str) -> str:
    try:
        return str(Version(text))
    except InvalidVersion:
        return text
