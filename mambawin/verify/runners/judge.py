"""Comparing a kernel with its float64 reference, shared by the runners: the error of each tensor
against tolerance, the per-dtype summary and the device's name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# Lengths around the kernel's 2048-step chunk: 1, odd, just under a power of two, 2 chunks + 1,
# and a multiple of the chunk (the state is carried between chunks through x).


@dataclass
class CaseResult:
    """Errors of every output and gradient of one case against the float64 reference."""

    name: str
    dtype: str
    seqlen: int
    passed: bool = True
    errors: dict[str, dict[str, float]] = field(default_factory=dict)
    error: str | None = None
    note: str | None = None  # what a failure is known to be (e.g. a known upstream bug)


def compare(got: Any, ref: Any, rtol: float, atol: float) -> dict[str, float]:
    """max abs and rel error, and the worst error/tolerance ratio (<= 1 passes).

    The absolute floor grows with the tensor's RMS: a gradient summed over thousands of steps
    carries rounding in proportion to its summands, not to an entry that happens to cancel.
    """
    import torch

    got, ref = got.detach().to(torch.float64), ref.detach().to(torch.float64)
    if got.shape != ref.shape:
        return {"max_abs": float("inf"), "max_rel": float("inf"), "ratio": float("inf")}
    diff = (got - ref).abs()
    floor = atol * max(1.0, ref.pow(2).mean().sqrt().item()) if ref.numel() else atol
    ratio = (diff / (floor + rtol * ref.abs())).max().item() if diff.numel() else 0.0
    if not torch.isfinite(got).all():
        ratio = float("inf")
    rel = (diff / ref.abs().clamp_min(atol)).max().item() if diff.numel() else 0.0
    return {"max_abs": diff.max().item() if diff.numel() else 0.0, "max_rel": rel, "ratio": ratio}


def summarize(results: Sequence[CaseResult]) -> dict[str, dict[str, float]]:
    """Per dtype: cases, failures, and the largest abs/rel error over every tensor compared."""
    table: dict[str, dict[str, float]] = {}
    for r in results:
        row = table.setdefault(
            r.dtype, {"cases": 0, "failed": 0, "max_abs": 0.0, "max_rel": 0.0, "worst_ratio": 0.0}
        )
        row["cases"] += 1
        row["failed"] += 0 if r.passed else 1
        for e in r.errors.values():
            row["max_abs"] = max(row["max_abs"], e["max_abs"])
            row["max_rel"] = max(row["max_rel"], e["max_rel"])
            row["worst_ratio"] = max(row["worst_ratio"], e["ratio"])
        if r.error:
            row["worst_ratio"] = float("inf")
    return table


def device_name(device: str) -> str:
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(device)
        return f"{torch.cuda.get_device_name(device)} (sm_{major}{minor})"
    return device
