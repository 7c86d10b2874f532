"""The metadata step of a build: the wheel setup.py built, rewritten for its platform with the
local label and the provenance, or the rewrite an identical earlier build kept (finals.py)."""

from __future__ import annotations

import os
from pathlib import Path

from mambawin import __version__
from mambawin.abi import STABLE_FLOOR
from mambawin.archs import format_archs
from mambawin.builder import finals
from mambawin.builder.compiler_cache import CacheStats
from mambawin.builder.options import BuildOptions
from mambawin.builder.results import Prepared
from mambawin.builder.workspace import sha256_of
from mambawin.errors import BuildError
from mambawin.verify.abi_audit import audit_libraries
from mambawin.wheel.info import open_wheel
from mambawin.wheel.provenance import (
    Provenance,
    iso_date,
    local_version_label,
    stable_label,
)
from mambawin.wheel.repack import rewrite_wheel


def rewrite(
    wheel: Path,
    out_dir: Path,
    prepared: Prepared,
    label_choice: str | None,
    options: BuildOptions,
    stats: CacheStats | None,
) -> Path:
    """Requirements for the wheel's platform, local version, provenance: a new wheel."""
    checkout, tools = prepared.checkout, prepared.toolchain
    provenance = Provenance(
        upstream_repo=checkout.repo,
        ref=checkout.ref or "",
        commit=checkout.commit or "",
        version=checkout.version,
        patches=tuple(prepared.applied()),
        left_out=tuple(prepared.left_out()),
        archs=tuple(format_archs(prepared.archs).split(";")),
        torch_version=tools.torch,
        cuda_version=tools.cuda,
        compiler=tools.compiler,
        abi=options.abi,
        torch_floor=str(STABLE_FLOOR) if options.abi == "stable" else "",
        mambawin_version=__version__,
        build_date=iso_date(prepared.epoch) if prepared.epoch is not None else "",
    )
    label = local_label(label_choice, prepared, options)
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
    fixed = rewrite_wheel(
        wheel,
        out_dir,
        drop=options.drop,
        keep=options.keep,
        local_version=label,
        provenance=provenance,
        date_epoch=prepared.epoch,
        abi=options.abi,
    )
    finals.remember(prepared.workspace.dist, digest, fixed)
    return fixed


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


def local_label(choice: str | None, prepared: Prepared, options: BuildOptions) -> str | None:
    """The wheel's local label: the user's, else what it was built for (auto)."""
    if choice != "auto":
        return choice
    tools = prepared.toolchain
    if not (tools.cuda and tools.torch):
        return None
    if options.abi == "stable":
        return stable_label(tools.cuda, str(STABLE_FLOOR))
    return local_version_label(tools.cuda, tools.torch)
