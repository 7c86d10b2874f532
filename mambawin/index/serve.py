"""Which wheels of an index a torch user is served: per CUDA variant, and per torch minor.

A wheel built against torch's C++ ABI serves one torch minor of one CUDA variant. A stable wheel
(provenance abi "stable", tagged py3-none) serves every torch at or above its floor, and every
CUDA variant of its CUDA major, so it is listed in each of those folders.

pip cannot see which torch is installed: among the wheels of one folder it takes the highest
version, and `+cu130torch2.11` sorts above `+cu130.stable.torch2.10`. So a torch-ABI wheel is
listed only where every user fits it: its own `<variant>/torch<X.Y>/simple`, and the variant's
`<variant>/simple` only while the variant holds wheels of that one torch and no stable wheel.
Once it holds more (a mixed variant), `<variant>/simple` lists only the wheels that fit every
torch (stable wheels, which also require `torch>=floor`), and each torch user takes their own
per-torch folder, which exists for every torch minor from the oldest a wheel of the variant
names up to the newest the index names or was asked for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from mambawin.index.model import IndexedWheel
from mambawin.versions import release
from mambawin.wheel.provenance import Provenance, major_minor


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


def plain_wheels(wheels: Sequence[IndexedWheel]) -> list[IndexedWheel]:
    """What `<variant>/simple` lists of the variant's wheels: all of them when they fit one torch
    only, else only those that fit every torch (never a torch-ABI wheel: pip would hand the
    newest torch's to every user)."""
    pinned = {_torch_minor(w) for w in wheels if _stable_floor(w) is None} - {None}
    if len(pinned) <= 1 and all(_stable_floor(w) is None for w in wheels):
        return list(wheels)
    return [w for w in wheels if _stable_floor(w) is not None or _torch_minor(w) is None]


_SPAN = 64


def torch_folders(wheels: Sequence[IndexedWheel], newest: Iterable[str]) -> tuple[str, ...]:
    """The per-torch folders of a variant: every torch minor from the oldest its wheels name to
    the newest they or `newest` name (within each major: 2.10, 2.11, 2.12; then 3.0, ...) that
    some wheel serves."""
    own = [_pair(t) for t in torches(wheels)]
    if not own:
        return ()
    top: dict[int, int] = {}
    for major, minor in [*own, *map(_pair, newest)]:
        top[major] = max(top.get(major, minor), minor)
    low = own[0]
    span = {
        (major, minor)
        for major, last in top.items()
        if major >= low[0]
        # at most _SPAN minors a major: a provenance claiming torch 2.99999 names no folder range
        for minor in range(low[1] if major == low[0] else 0, last + 1)[:_SPAN]
    }
    span |= {pair for pair in [*own, *map(_pair, newest)] if pair >= low}
    return tuple(
        torch
        for torch in (f"{major}.{minor}" for major, minor in sorted(span))
        if any(serves_torch(w, torch) for w in wheels)
    )


def torch_minors(values: Iterable[str]) -> tuple[str, ...]:
    """`2.13` for each torch version given (2.13, 2.13.0, 2.13.0+cu130); UsageError otherwise."""
    return tuple(sorted({"{}.{}".format(*major_minor(v, "torch")) for v in values}, key=_pair))


def _pair(torch: str) -> tuple[int, int]:
    numbers = release(torch, 2)
    return numbers[0], numbers[1] if len(numbers) > 1 else 0


def torches(wheels: Iterable[IndexedWheel]) -> list[str]:
    """The torch minors the wheels name (one-torch wheels' torch, stable wheels' floor)."""
    found = {_torch_minor(w) if _stable_floor(w) is None else _stable_floor(w) for w in wheels}
    return sorted((t for t in found if t), key=lambda t: release(t, 2))


def is_stable_wheel(wheel: IndexedWheel) -> bool:
    """A stable-ABI wheel (it loads in every torch at or above its floor)."""
    return _stable_floor(wheel) is not None


def _stable_floor(wheel: IndexedWheel) -> str | None:
    """The floor `2.10` of a stable wheel (provenance abi "stable"); None for one torch's wheel."""
    provenance = wheel.provenance or Provenance()
    if not provenance.is_stable:
        return None
    return ".".join(map(str, release(provenance.floor, 2))) or None


def _torch_minor(wheel: IndexedWheel) -> str | None:
    """`2.11` from the provenance's torch_version, else from the local label's `torch2.11`."""
    recorded = (wheel.provenance or Provenance()).torch_version
    if not recorded:
        label = re.search(r"\+[^-]*torch(\d+\.\d+)", wheel.file)
        recorded = label[1] if label else ""
    return ".".join(map(str, release(recorded, 2))) or None


def _cuda_major(variant: str | None) -> str | None:
    """`12` of cu128 (the last digit is the minor: cu92 is CUDA 9.2)."""
    match = re.fullmatch(r"cu(\d+)\d", variant or "")
    return match[1] if match else None
