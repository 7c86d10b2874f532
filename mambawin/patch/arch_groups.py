"""One nvcc front-end pass for the archs that share it, where the SASS is proven the same.

nvcc runs cicc, its expensive front end, once per virtual arch: `-gencode
arch=compute_86,code=sm_86` for each of four archs parses and optimises every kernel four times.
`-gencode arch=compute_80,code=[sm_80,sm_86,sm_89]` runs cicc once for compute_80 and ptxas once
per real arch. Whether sm_86's SASS from compute_80's PTX is the SASS sm_86's own pass gives
depends on the kernels (a `__CUDA_ARCH__` test, an intrinsic only the newer PTX has), the
upstream release, the ABI's sources and the nvcc, so nothing is grouped on reasoning alone: in
one compile unit, an arch shares a lower arch's pass only where a proof says that, for this
package, release, ABI, CUDA and platform, every kernel of that unit was compared and its SASS is
identical (data/sass_groups.json, one entry per comparison naming the units that passed;
`proof_entry` writes one). Proofs are per unit because real ones are: in causal-conv1d
1.5.0.post8 every kernel is the same from compute_80 for sm_86 and sm_89 except those of
causal_conv1d_update.cu. Anything unproven keeps its own pass, as before.

setup.py always gets one pass per arch (so a patched tree built without mambawin is the usual
build); the proven units' passes go into the tree's .mambawin/front_end.json, which the build's
nvcc wrapper (builder/nvcc_front.py) applies to each unit it compiles.

Rules: only plain archs group (sm_90a/sm_100f code is tied to its own arch); a pass may serve an
arch of a higher major, but only where proven like any other (compute_80's PTX leaves out what
sm_90 adds, yet in mamba-ssm's fp16 and fp32 units sm_90's SASS from it is its own pass's, kernel
for kernel, while every bf16 unit differs); a pass's PTX arch is its lowest member; an arch whose
+PTX was asked keeps its own pass (its compute_XY pass runs anyway, so joining would save no
front-end work), and a pass emits its PTX arch's PTX when that arch asked for it. With one pass
per arch the gencode values are the ones a build without grouping gives, byte for byte.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mambawin.archs import Arch
from mambawin.patch.sass_proofs import DATA as DATA
from mambawin.patch.sass_proofs import PROOF_PLATFORM as PROOF_PLATFORM
from mambawin.patch.sass_proofs import GroupKey as GroupKey
from mambawin.patch.sass_proofs import Proof as Proof
from mambawin.patch.sass_proofs import ProofTable as ProofTable
from mambawin.patch.sass_proofs import cuda_release as cuda_release
from mambawin.patch.sass_proofs import group_key as group_key
from mambawin.patch.sass_proofs import parse_proofs as parse_proofs
from mambawin.patch.sass_proofs import proof_entry as proof_entry
from mambawin.patch.sass_proofs import shipped_proofs as shipped_proofs
from mambawin.patch.sass_proofs import unit_stem as unit_stem
from mambawin.patch.sass_proofs import with_proof as with_proof

PROVEN, OFF = "proven", "off"
ARCH_GROUPS = (PROVEN, OFF)
_CU_SOURCE = re.compile(r"""["']([^"'\n]+)\.cu["']""")  # a .cu path in setup.py
FRONT_TABLE = ".mambawin/front_end.json"  # in the patched tree: the proven units' passes


@dataclass(frozen=True)
class GroupFacts:
    """What grouping needs besides the archs, the package, its release and the ABI: the nvcc,
    the platform built for, and the proofs."""

    cuda: str  # the nvcc's version (any PEP 440 spelling; major.minor is used)
    platform: str
    proofs: ProofTable


@dataclass(frozen=True)
class FrontPass:
    """One front-end pass: cicc for compute_<ptx>, ptxas for each real arch it serves."""

    ptx: Arch  # the lowest member: its compute_XY is the pass's virtual arch
    archs: tuple[Arch, ...]  # the real archs served, ptx first
    emits_ptx: bool  # compute_XY's PTX goes into the binary too (ptx asked for +PTX)
    proof: Proof | None = None  # what lets more than one arch share it

    def gencode(self) -> tuple[str, ...]:
        """The -gencode values: `arch=compute_80,code=[sm_80,sm_86]` for a shared pass; an arch
        alone gets Arch.gencode's, as a build without grouping does (its PTX a value of its own)."""
        if len(self.archs) == 1:
            return tuple(self.ptx.gencode())
        codes = [a.sm for a in self.archs] + ([self.ptx.compute] if self.emits_ptx else [])
        return (f"arch={self.ptx.compute},code=[{','.join(codes)}]",)

    @property
    def targets(self) -> int:
        """What nvcc's --threads can run at once for it: ptxas per real arch, and the PTX."""
        return len(self.archs) + self.emits_ptx

    def describe(self) -> str:
        served = ", ".join(a.sm for a in self.archs) + (" +PTX" if self.emits_ptx else "")
        return f"{self.ptx.compute} for {served}"

    def to_json(self) -> dict[str, Any]:
        return {
            "ptx_arch": self.ptx.number,
            "archs": [a.number for a in self.archs],
            "ptx": self.emits_ptx,
            "gencode": list(self.gencode()),
            "evidence": self.proof.evidence if self.proof else None,
        }


Passes = tuple[FrontPass, ...]


@dataclass(frozen=True)
class FrontEnd:
    """The passes nvcc runs: one per arch for every unit (what setup.py bakes), and fewer for
    each unit whose SASS is proven the same from a shared pass; and why the rest do not share.
    """

    passes: Passes  # the default: one pass per arch, today's build
    units: tuple[tuple[str, Passes], ...] = ()  # (unit stem, its passes), proven units only
    unshared: tuple[str, ...] = ()  # one line per reason
    key: GroupKey | None = None  # what the proofs were sought for (None: grouping off)

    def gencode(self) -> tuple[str, ...]:
        """The -gencode values setup.py bakes: one pass per arch, for every unit."""
        return _gencode(self.passes)

    def table(self) -> dict[str, list[str]]:
        """{unit stem: its -gencode values} for each proven unit: .mambawin/front_end.json."""
        return {unit: list(_gencode(passes)) for unit, passes in self.units}

    @property
    def split_passes(self) -> int:
        """The passes split-units counts: the fewest a proven unit gets where a unit is proven
        (those units do the less work a finer split serves), else one per arch."""
        return min((len(p) for _, p in self.units), default=len(self.passes))

    @property
    def targets(self) -> int:
        return sum(p.targets for p in self.passes)

    def lines(self) -> tuple[str, ...]:
        """What the build and its plan say: the passes, then each reason."""
        if not self.passes:
            return ()
        if not self.units:
            return ("front end: " + "; ".join(p.describe() for p in self.passes), *self.unshared)
        layouts: dict[Passes, list[str]] = {}
        for unit, passes in self.units:
            layouts.setdefault(passes, []).append(unit)
        said = [_layout_text(passes, units) for passes, units in layouts.items()]
        proven = f" (SASS proven identical: {self.key.proven_text()})" if self.key else ""
        return (
            f"front end{proven}: " + "; ".join(said) + "; every other unit one pass per arch",
            *self.unshared,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "passes": [p.to_json() for p in self.passes],
            "units": {unit: [p.to_json() for p in passes] for unit, passes in self.units},
            "unshared": list(self.unshared),
        }


def _gencode(passes: Passes) -> tuple[str, ...]:
    return tuple(g for p in passes for g in p.gencode())


def _layout_text(passes: Passes, units: list[str]) -> str:
    """'compute_80 for sm_80, sm_86 in 2 units (a, b)'."""
    shared = "; ".join(p.describe() for p in passes if len(p.archs) > 1)
    count = f"{len(units)} unit{'s' if len(units) > 1 else ''}"
    return f"{shared} in {count} ({', '.join(units)})"


def setup_units(setup_text: str) -> tuple[str, ...]:
    """The unit stems a setup.py's text lists (every quoted `.cu` path), parts mapped to their
    unit, sorted."""
    return tuple(sorted({unit_stem(m) for m in _CU_SOURCE.findall(setup_text)}))


def table_text(front: FrontEnd) -> str | None:
    """FRONT_TABLE's text for front: {unit stem: [-gencode values]} of the proven units, sorted;
    None when no unit is proven (the tree holds no table)."""
    table = front.table()
    return json.dumps(table, indent=2, sort_keys=True) + "\n" if table else None


def plan_front_end(
    archs: tuple[Arch, ...],
    key: GroupKey,
    proofs: ProofTable | None,
    units: Iterable[str] | None = None,
) -> FrontEnd:
    """The front-end passes for archs (proofs None: one pass per arch, grouping off): one per
    arch for every unit, and per unit the passes its proofs allow. units: the tree's unit stems
    (parts map to theirs), so the unproven ones are named; None: the rest are spoken of as
    'every other unit'. Which units are proven, and their passes, never depend on units."""
    default = tuple(FrontPass(a, (a,), a.ptx) for a in sorted(archs))
    if proofs is None:
        return FrontEnd(default)
    listed = None if units is None else sorted({unit_stem(u) for u in units})
    # The proven units never depend on the list (the table is a function of the options).
    candidates = sorted({*proofs.units_of(key), *(listed or ())})
    planned = {unit: _unit_passes(archs, key, proofs, unit) for unit in candidates}
    proven = tuple((u, p) for u, (p, _) in planned.items() if len(p) < len(default))
    lines = _ptx_lines(archs) + _unproven_lines(
        archs, key, planned, listed is not None, {u for u, _ in proven}
    )
    return FrontEnd(default, proven, lines, key)


def _unit_passes(
    archs: tuple[Arch, ...], key: GroupKey, proofs: ProofTable, unit: str
) -> tuple[Passes, tuple[Arch, ...]]:
    """unit's passes, and the archs that could have shared a lower pass but have no proof."""
    passes: list[FrontPass] = []
    unproven: list[Arch] = []
    for arch in sorted(archs):
        hosts = _lower_passes(passes, arch)
        proven = [
            (h, p) for h in hosts if (p := proofs.proof_for(key, h.ptx.number, arch.number, unit))
        ]
        if arch.ptx or not proven:
            if hosts and not arch.ptx:
                unproven.append(arch)
            passes.append(FrontPass(arch, (arch,), arch.ptx))
            continue
        host, proof = proven[0]
        joined = FrontPass(host.ptx, (*host.archs, arch), host.emits_ptx, host.proof or proof)
        passes[passes.index(host)] = joined
    return tuple(passes), tuple(unproven)


def _groupable(archs: tuple[Arch, ...]) -> list[Arch]:
    """The archs that have a lower plain arch to share a pass with."""
    singles: list[FrontPass] = []
    out: list[Arch] = []
    for arch in sorted(archs):
        if _lower_passes(singles, arch):
            out.append(arch)
        singles.append(FrontPass(arch, (arch,), arch.ptx))
    return out


def _ptx_lines(archs: tuple[Arch, ...]) -> tuple[str, ...]:
    """Why an arch built with +PTX keeps its own pass in every unit."""
    asked = [a for a in _groupable(archs) if a.ptx]
    if not asked:
        return ()
    return tuple(_unshared_line([a], f"its PTX needs a {a.compute} pass anyway") for a in asked)


def _unproven_lines(
    archs: tuple[Arch, ...],
    key: GroupKey,
    planned: Mapping[str, tuple[Passes, tuple[Arch, ...]]],
    listed: bool,
    proven: set[str],
) -> tuple[str, ...]:
    """Why each unit (or, without the tree's list, each arch) keeps passes it could share."""
    groupable = [a for a in _groupable(archs) if not a.ptx]
    if not groupable:
        return ()
    why = f"no SASS proof for it ({key.text()})"
    lines: list[str] = []
    whole = [u for u in planned if u not in proven]
    if whole:
        verb, it = ("keeps", "it") if len(whole) == 1 else ("keep", "them")
        lines.append(
            f"{', '.join(whole)} {verb} a pass per arch: no SASS proof for {it} ({key.text()})"
        )
    by_missing: dict[tuple[Arch, ...], list[str]] = {}
    for unit in sorted(proven):
        if missing := planned[unit][1]:
            by_missing.setdefault(missing, []).append(unit)
    for missing, units in by_missing.items():
        lines.append(f"{', '.join(units)}: " + _unshared_line(list(missing), why))
    if not listed and not proven:  # no unit named anywhere: say it of the archs, as before
        lines = [_unshared_line(groupable, f"no SASS proof for {key.unproven_text()}")]
    return tuple(lines)


def _lower_passes(passes: list[FrontPass], arch: Arch) -> list[FrontPass]:
    """The passes of lower plain archs, lowest first: those it could share. Another major is no
    bar by itself (compute_80's PTX is valid input for sm_90's ptxas); only a proof decides."""
    if arch.suffix:
        return []
    return [p for p in passes if not p.ptx.suffix and p.ptx.capability < arch.capability]


def _unshared_line(archs: list[Arch], why: str) -> str:
    names = ", ".join(str(a) for a in archs)
    verb = "keeps its" if len(archs) == 1 else "keep their"
    return f"{names} {verb} own pass: {why}"
