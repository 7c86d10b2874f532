"""Which wheels of an index a torch user is served: per CUDA variant, and per torch minor.

A wheel built against torch's C++ ABI serves one torch minor of one CUDA variant. A stable wheel
(provenance abi "stable", tagged py3-none) serves every torch at or above its floor, and every
CUDA variant of its CUDA major, so it is listed in each of those folders.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from mambawin.abi import STABLE_FLOOR
from mambawin.index.model import IndexedWheel
from mambawin.verify.abi_audit import is_stable
from mambawin.versions import release


def serves_variant(wheel: IndexedWheel, variant: str) -> bool:
    """A wheel of one torch serves its own CUDA variant; a stable wheel every variant of its CUDA
    major (cu126 and cu128 users both load a wheel built for CUDA 12)."""
    if wheel.variant == variant:
        return True
    return _stable_floor(wheel) is not None and _cuda_major(wheel.variant) == _cuda_major(variant)


def serves_torch(wheel: IndexedWheel, torch: str) -> bool:
    """Whether a user of torch `major.minor` can load the wheel: its own torch, or a stable
    wheel's floor at or below it."""
    floor = _stable_floor(wheel)
    if floor is not None:
        return release(torch, 2) >= release(floor, 2)
    return _torch_minor(wheel) == torch


def torches(wheels: Iterable[IndexedWheel]) -> list[str]:
    """The torch minors the wheels name (one-torch wheels' torch, stable wheels' floor)."""
    found = {_torch_minor(w) if _stable_floor(w) is None else _stable_floor(w) for w in wheels}
    return sorted((t for t in found if t), key=lambda t: release(t, 2))


def _stable_floor(wheel: IndexedWheel) -> str | None:
    """The floor `2.10` of a stable wheel (provenance abi "stable"); None for one torch's wheel."""
    if not is_stable(wheel.provenance):
        return None
    floor = str((wheel.provenance or {}).get("torch_floor") or STABLE_FLOOR)
    return ".".join(map(str, release(floor, 2))) or None


def _torch_minor(wheel: IndexedWheel) -> str | None:
    """`2.11` from the provenance's torch_version, else from the local label's `torch2.11`."""
    recorded = str((wheel.provenance or {}).get("torch_version") or "")
    if not recorded:
        label = re.search(r"\+[^-]*torch(\d+\.\d+)", wheel.file)
        recorded = label[1] if label else ""
    return ".".join(map(str, release(recorded, 2))) or None


def _cuda_major(variant: str | None) -> str | None:
    """`12` of cu128 (the last digit is the minor: cu92 is CUDA 9.2)."""
    match = re.fullmatch(r"cu(\d+)\d", variant or "")
    return match[1] if match else None
