"""What a benchmark measures and reports: read by the host (`verify`, `bench`, the views) and
filled in by the runner in the install environment (`verify/runners/bench.py`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from mambawin.verify.runners.common import DTYPES

__all__ = [
    "DTYPES",
    "QUICK_SHAPES",
    "REFERENCE",
    "SHAPES",
    "BenchConfig",
    "BenchReport",
    "BenchRow",
]

REFERENCE = "vectorised log-depth (Hillis-Steele) scan in the input dtype, eager torch"
SHAPES = ((1, 768, 1024, 16), (1, 768, 4096, 16), (2, 1536, 2048, 16), (1, 768, 2048, 64))
QUICK_SHAPES = ((1, 256, 512, 16),)


@dataclass(frozen=True)
class BenchConfig:
    """The grid to time: shapes x dtypes x modes, and how many repetitions."""

    shapes: tuple[tuple[int, int, int, int], ...] = SHAPES
    dtypes: tuple[str, ...] = DTYPES
    modes: tuple[str, ...] = ("fwd", "fwd+bwd")
    warmup: int = 3
    reps: int = 10
    device: str = "cuda"


@dataclass
class BenchRow:
    """One (shape, dtype, mode): times, speedup, bandwidth and peak memory of both sides."""

    dtype: str
    batch: int
    dim: int
    seqlen: int
    dstate: int
    mode: str
    kernel_ms: float
    reference_ms: float | None
    speedup: float | None
    bytes: int
    kernel_gbps: float
    bandwidth_fraction: float
    kernel_peak_mb: float
    reference_peak_mb: float | None
    note: str = ""


@dataclass
class BenchReport:
    """Every row plus the device facts the rows are measured against."""

    device: str
    torch: str
    copy_gbps: float
    reference: str = REFERENCE
    rows: list[BenchRow] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A stable JSON object."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchReport:
        """Read back what to_json wrote (the child process's output)."""
        rows = [BenchRow(**row) for row in data.get("rows", [])]
        return cls(
            data["device"], data["torch"], data["copy_gbps"], data.get("reference", REFERENCE), rows
        )

    def headline(self) -> str:
        """One line: the best and worst speedups and bandwidth use."""
        speedups = [r.speedup for r in self.rows if r.speedup]
        if not speedups:
            return f"{len(self.rows)} rows on {self.device}; reference did not run"
        best_bw = max(r.bandwidth_fraction for r in self.rows)
        return (
            f"{len(self.rows)} rows on {self.device}: kernel {min(speedups):.1f}x to "
            f"{max(speedups):.1f}x faster than the eager scan; up to {best_bw:.0%} of copy "
            f"bandwidth ({self.copy_gbps:.0f} GB/s)"
        )
