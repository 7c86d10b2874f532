"""The metadata step of a build: the wheel setup.py built, rewritten for its platform with the
local label and the provenance, or the rewrite an identical earlier build kept (finals.py)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from mambawin.abi import STABLE_FLOOR, Abi
from mambawin.archs import Arch, format_archs
from mambawin.builder import finals
from mambawin.builder.compiler_cache import CacheStats
from mambawin.builder.options import BuildOptions
from mambawin.builder.results import Prepared
from mambawin.builder.setup_scan import planned_front_end
from mambawin.builder.workspace import sha256_of
from mambawin.errors import BuildError
from mambawin.fetch.upstream import Checkout
from mambawin.patch.record import IN_EFFECT, SKIPPED_BY_USER, PatchReport
from mambawin.wheel.info import open_wheel
from mambawin.wheel.provenance import Provenance, record
from mambawin.wheel.repack import rewrite_wheel
from mambawin.wheel.stable_wheel import audit_libraries


def rewrite(
    wheel: Path,
    out_dir: Path,
    prepared: Prepared,
    label_choice: str | None,
    options: BuildOptions,
    stats: CacheStats | None,
) -> Path:
    """Requirements for the wheel's platform, local version, provenance: a new wheel."""
    provenance = provenance_of(prepared, options)
    label = local_label(label_choice, provenance)
    digest = finals.rewrite_digest(
        {
            "wheel": sha256_of(wheel),
            "provenance": provenance.to_dict(),
            "options": [sorted(options.drop), sorted(options.keep), label, prepared.epoch],
            "source_date_epoch": os.environ.get("SOURCE_DATE_EPOCH"),
        }
    )
    reused = finals.reuse(prepared.workspace.dist, digest, out_dir)
    if reused is not None:
        return reused
    if options.abi == "stable":
        refuse_unstable(wheel)
    fixed = pack(
        wheel,
        out_dir,
        provenance,
        label=label,
        epoch=prepared.epoch,
        abi=options.abi,
        drop=options.drop,
        keep=options.keep,
    )
    finals.remember(prepared.workspace.dist, digest, fixed)
    return fixed


def pack(
    raw: Path,
    out_dir: Path,
    provenance: Provenance | None,
    *,
    label: str | None,
    epoch: int | None,
    abi: Abi,
    drop: Iterable[str] = (),
    keep: Iterable[str] = (),
) -> Path:
    """The packing step every backend ends with, so a native and a cross-built wheel of one tag
    differ only in their binary and platform tag: the raw wheel (setup.py's bdist_wheel, or the
    cross build's files with setuptools' .dist-info) gets its platform's requirements (torch >=
    the floor for a stable build), the torch/CUDA import guard, the local label, the provenance
    and a fresh RECORD, every member dated epoch (SOURCE_DATE_EPOCH wins)."""
    return rewrite_wheel(
        raw,
        out_dir,
        drop=drop,
        keep=keep,
        local_version=label,
        provenance=provenance,
        guard=True,
        date_epoch=epoch,
        abi=abi,
    )


def provenance_of(prepared: Prepared, options: BuildOptions) -> Provenance:
    """A native build's provenance, through the one writer every packing backend uses."""
    tools = prepared.toolchain
    return provenance(
        prepared.checkout,
        prepared.patches,
        prepared.epoch,
        archs=prepared.archs,
        abi=options.abi,
        torch_version=tools.torch,
        cuda_version=tools.cuda,
        compiler=tools.compiler,
    )


def provenance(
    checkout: Checkout,
    patches: PatchReport,
    epoch: int | None,
    *,
    archs: tuple[Arch, ...],
    abi: Abi,
    cuda_version: str,
    compiler: str,
    torch_version: str = "",
    torch_headers: str = "",
) -> Provenance:
    """The provenance of a wheel built from a patched tree, for every packing backend (native,
    cross): the patches in effect and those left out with --skip-patch, read from the patch
    report here and nowhere else."""
    return record(
        checkout,
        patches=tuple(
            {"id": r.id, "status": r.status} for r in patches.results if r.status in IN_EFFECT
        ),
        left_out=tuple(r.id for r in patches.results if r.reason == SKIPPED_BY_USER),
        archs=tuple(format_archs(archs).split(";")),
        torch_version=torch_version,
        cuda_version=cuda_version,
        compiler=compiler,
        torch_headers=torch_headers,
        abi=abi,
        epoch=epoch,
        source=checkout.source_record,
        shared_passes=shared_passes(patches),
    )


def shared_passes(patches: PatchReport) -> tuple[str, ...]:
    """Each proven unit's front-end passes, `"<unit>: <gencode>[, <gencode>]"`, sorted, as the
    record keeps them (a rebuild reads a non-empty list back as --arch-groups proven). A pure
    function of the patch options, as the tree's .mambawin/front_end.json is."""
    front = planned_front_end(patches)
    if front is None:
        return ()
    return tuple(sorted(f"{unit}: {', '.join(g)}" for unit, g in front.table().items()))


def refuse_unstable(wheel: Path) -> None:
    """BuildError, before any wheel is written, when setup.py's library breaks the stable form
    verify would refuse (a torch C++ symbol, Python, a static libstdc++ from the compiler)."""
    with open_wheel(wheel) as (archive, info):
        check = audit_libraries(archive, info, STABLE_FLOOR)
    if not check.ok:
        msg = (
            f"the built library is no stable-ABI library, so no wheel was written: {check.message}"
        )
        raise BuildError(msg)


def local_label(choice: str | None, provenance: Provenance) -> str | None:
    """The wheel's local label: the user's, else what it was built for (auto)."""
    return provenance.label if choice == "auto" else choice
