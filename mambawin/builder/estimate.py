"""How long a build will take, from measured builds: `build --plan`'s expected time.

The table is docs/benchmarks.md §22 ("The pair at the machine's limit", the row "E's code" and
"E's code, 4 archs": H100 machine, 16 cores, --jobs 16, --no-cache, split units, torch 2.11 +
CUDA 13.0): per package, the compile seconds summed over its units (Σ) and its longest unit, at
one arch and at four, every unit one front-end pass per arch. Between and beyond them each grows
linearly with the arch passes (every pass compiles every kernel once more). A unit whose archs
share one front-end pass (patch/arch_groups.py) costs one pass per pass it runs and, per arch a
pass serves beyond its own, only that arch's ptxas (`arch_passes`).

The model: the compile step takes the longer of its longest unit and Σ spread over the jobs at
the pool's measured efficiency; the steps around it (doctor, fetch, patch, metadata, record) add
a few seconds. It gives 65 s and 155 s for the pair's measured 62.6 s and 161.7 s.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mambawin.packages import CAUSAL_CONV1D, MAMBA, Package
from mambawin.patch.arch_groups import FrontEnd
from mambawin.patch.sass_proofs import unit_stem

# package → {archs: (Σ unit seconds, longest unit seconds)}; docs/benchmarks.md §22.
MEASURED: dict[str, dict[int, tuple[float, float]]] = {
    MAMBA.name: {1: (455.0, 34.9), 4: (1073.0, 132.6)},
    CAUSAL_CONV1D.name: {1: (279.0, 33.5), 4: (593.0, 146.7)},
}
MEASURED_CORES = 16
# Σ over the wall of the 1-arch pair's compile step (734 unit-s in 57 s on 16 jobs): the share
# of each job slot the pool keeps busy.
EFFICIENCY = 0.8
AROUND_S = 8.0  # doctor, fetch, patch, metadata and record together (§14, §22: 3-8 s)
# The complex kernels roughly double mamba-ssm's work (not re-measured with split units; the
# generated workflow's timeout assumes the same factor).
COMPLEX_FACTOR = 2.0
# ptxas's share of one arch's device work (cicc + ptxas): 2.5 of 13.4 s in a bwd unit
# (`nvcc --time`, §22). An arch served by a shared front-end pass costs its ptxas only.
PTXAS_SHARE = 0.19
BASIS = (
    "docs/benchmarks.md §22: H100 machine, 16 cores, split units, no compiler cache; "
    "scaled to the jobs and front-end passes of this build"
)


@dataclass(frozen=True)
class Estimate:
    """The expected wall time of a build and what it rests on."""

    seconds: float
    jobs: int
    archs: int
    cores: int  # this machine's: more jobs than cores run no faster
    arch_passes: float  # the device work in one-arch passes (arch_passes), the most of any package
    basis: str = BASIS

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds),
            "jobs": self.jobs,
            "archs": self.archs,
            "arch_passes": round(self.arch_passes, 2),
            "cores": self.cores,
            "basis": self.basis,
        }


def arch_passes(front: FrontEnd | None, sources: Sequence[str], archs: int) -> float:
    """A package's device work in one-arch passes, averaged over its .cu units: a unit whose
    SASS is proven from shared passes costs one per pass plus PTXAS_SHARE per arch a pass
    serves beyond its own; every other unit one per arch (so `archs` with no proven unit)."""
    units = [s for s in sources if s.endswith(".cu")]
    proven = dict(front.units) if front is not None else {}
    if not units or not proven:
        return float(archs)

    def cost(source: str) -> float:
        passes = proven.get(unit_stem(source))
        if passes is None:
            return float(archs)
        return sum(1 + (len(p.archs) - 1) * PTXAS_SHARE for p in passes)

    return sum(cost(s) for s in units) / len(units)


def unit_seconds(package: Package, archs: float, keep_complex: bool = False) -> tuple[float, float]:
    """(Σ unit seconds, longest unit seconds) of one package at this many one-arch passes."""
    table = MEASURED[package.name]
    (low, (sum_low, long_low)), (high, (sum_high, long_high)) = sorted(table.items())
    n = max(archs, 1.0)

    def line(at_low: float, at_high: float) -> float:
        return at_low + (at_high - at_low) * (n - low) / (high - low)

    factor = COMPLEX_FACTOR if keep_complex and package == MAMBA else 1.0
    return line(sum_low, sum_high) * factor, line(long_low, long_high) * factor


def expected(
    packages: list[tuple[Package, bool]],
    archs: int,
    jobs: int,
    cores: int | None = None,
    passes: Sequence[float] | None = None,
) -> Estimate:
    """The wall time of building these packages ((package, keep_complex) each) at once in one
    pool of jobs compile slots on cores CPUs (this machine's by default), for this many archs;
    passes: each package's arch_passes (default: one pass per arch)."""
    cores = cores or os.cpu_count() or 1
    work = list(passes) if passes is not None else [float(archs)] * len(packages)
    sums, longest = 0.0, 0.0
    for (package, keep_complex), n in zip(packages, work, strict=True):
        total, long = unit_seconds(package, n, keep_complex)
        sums, longest = sums + total, max(longest, long)
    slots = max(min(jobs, cores), 1)
    compile_s = max(longest, sums / (slots * EFFICIENCY))
    return Estimate(AROUND_S + compile_s, jobs, archs, cores, max(work, default=float(archs)))
