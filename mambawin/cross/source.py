"""`mambawin build --abi stable --platform win_amd64` on Linux: what the cross build starts from.

The same steps as a Linux build's first half and as `check --windows`: upstream's tree at a ref,
a copy patched for the stable ABI, its setup.py configured as win32 (torch's and setuptools'
Windows branches); then pipeline.cross_build compiles, links and packs it with the Windows
compilers under wine. Only the stable ABI can be cross-built: a torch-ABI extension links
against python3XX.lib and torch's C++ import libraries, which no registry serves.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import parse_wheel_filename

from mambawin.archs import format_archs
from mambawin.builder.configure import DistInfo, SetupConfig, configure
from mambawin.builder.options import BuildOptions, nvcc_threads, resolve_jobs
from mambawin.builder.results import BuildPlan, BuildResult, patch_json, upstream_json
from mambawin.builder.workspace import copy_source
from mambawin.cache import cache_dir
from mambawin.cross.pipeline import CrossOptions, CrossResult, CrossTools, cross_build
from mambawin.errors import UsageError
from mambawin.fetch import upstream
from mambawin.fetch.upstream import Checkout
from mambawin.lock import hold
from mambawin.owned import claim, remove_tree
from mambawin.patch.base import PatchOptions
from mambawin.patch.engine import apply_patches
from mambawin.patch.record import IN_EFFECT, PatchReport
from mambawin.toolchain.wine import WindowsToolchain
from mambawin.wheel.provenance import Provenance, read_provenance, record, source_date_epoch

WINDOWS = "win_amd64"


def check_platform(platform: str) -> None:
    """UsageError for a --platform this machine cannot build for, before any work."""
    if platform != WINDOWS:
        msg = f"--platform {platform!r}: mambawin cross-builds {WINDOWS} only; drop --platform"
        raise UsageError(msg)


def check_cross(options: BuildOptions) -> None:
    """UsageError for what the cross build cannot take, before any work."""
    if options.abi != "stable":
        msg = (
            f"--platform {WINDOWS} on Linux needs --abi stable: a torch-ABI extension links "
            "against python3XX.lib and torch's C++ import libraries, which no registry serves; "
            "add --abi stable, or build on Windows"
        )
        raise UsageError(msg)
    if options.source is not None or not options.archs:
        msg = f"--platform {WINDOWS}: pass --ref (not --source) and --arch (no GPU to ask)"
        raise UsageError(msg)


@dataclass(frozen=True)
class WindowsTree:
    """Upstream's tree patched for the stable ABI and configured as win32: what both the cross
    build and its plan start from."""

    checkout: Checkout
    patches: PatchReport
    config: SetupConfig
    tree: Path
    work: Path
    epoch: int | None
    provenance: Provenance


@contextmanager
def windows_tree(options: BuildOptions, toolchain: WindowsToolchain) -> Iterator[WindowsTree]:
    """Fetch, copy, patch for the stable ABI and configure as win32, under the work folder's
    lock (held while the caller compiles or plans)."""
    package = options.package
    work = cache_dir() / "cross" / f"{package.name}-{_slug(options.ref)}"
    owned = ("src", "patched", "objs", "dist-info", "cross.lock")
    claim(work, "cross-work", owned)  # refused if not ours
    with hold(work / "cross.lock", f"the cross-build folder {work}", UsageError):
        for old in ("src", "patched", "dist-info"):  # ours: a moving ref must not keep an old tree
            remove_tree(work / old)
        checkout = upstream.checkout(
            options.upstream_repo, options.ref, work / "src", package=package
        )
        tree = work / "patched"
        copy_source(checkout.path, tree)
        report = apply_patches(
            tree, PatchOptions(archs=options.archs, abi="stable"), package=package
        )
        (work / "dist-info").mkdir()
        config = configure(
            tree,
            configure_env_of(options),
            package,
            platform="win32",
            dist_info=DistInfo(work / "dist-info", f"py3-none-{WINDOWS}", checkout.version),
        )
        cuda = toolchain.cuda_version() or ""
        epoch = source_date_epoch()
        epoch = epoch if epoch is not None else upstream.commit_time(checkout.path)
        provenance = record(
            checkout,
            patches=tuple(
                {"id": r.id, "status": r.status} for r in report.results if r.status in IN_EFFECT
            ),
            archs=tuple(format_archs(options.archs).split(";")),
            cuda_version=cuda,
            compiler=f"cl.exe {toolchain.msvc_tools.name} and nvcc.exe {cuda} under wine",
            abi="stable",
            epoch=epoch,
        )
        yield WindowsTree(checkout, report, config, tree, work, epoch, provenance)


def build_windows(
    options: BuildOptions,
    toolchain: WindowsToolchain,
    wine: str,
    tools: CrossTools | None = None,
) -> CrossResult:
    """Fetch, patch for the stable ABI, configure as win32 and cross-build the wheel."""
    with windows_tree(options, toolchain) as prepared:
        cross = CrossOptions(
            tree=prepared.tree,
            config=prepared.config,
            toolchain=toolchain,
            wine=wine,
            archs=options.archs,
            work=prepared.work / "objs",
            out=options.out,
            jobs=resolve_jobs(options.jobs, None),
            provenance=prepared.provenance,
            date_epoch=prepared.epoch,
            local_version=prepared.provenance.label,
        )
        return cross_build(cross, tools)


def plan_windows(options: BuildOptions, toolchain: WindowsToolchain) -> BuildPlan:
    """What the cross build would compile, from its patched and configured tree: nothing is
    compiled, and wine is never started."""
    with windows_tree(options, toolchain) as prepared:
        config = prepared.config
        return BuildPlan(
            upstream=upstream_json(prepared.checkout),
            patches=[patch_json(r) for r in prepared.patches.results],
            archs=format_archs(options.archs),
            ext_name=config.ext_name,
            units=list(config.sources),
            gencode=list(config.gencode),
            nvcc_flags=list(config.nvcc_flags),
            jobs=resolve_jobs(options.jobs, None),
            nvcc_threads=nvcc_threads(options, options.archs),
            key="",  # the cross build keeps no object cache keyed by its inputs
            build_dir=prepared.work / "objs",
            reuses_objects=False,
            local_version=prepared.provenance.label,
            package=options.package.name,
        )


def build_result(options: BuildOptions, cross: CrossResult) -> BuildResult:
    """The cross build as every backend reports it (`build --json`'s one shape)."""
    wheel = cross.wheel
    provenance = Provenance.from_dict(read_provenance(wheel))
    return BuildResult(
        wheel=wheel,
        size=wheel.stat().st_size,
        sha256=hashlib.sha256(wheel.read_bytes()).hexdigest(),
        archs=format_archs(options.archs),
        log=None,  # each unit's compiler output is printed as it finishes
        version=str(parse_wheel_filename(wheel.name)[1]),
        commit=provenance.commit or None,
        key="",
        build_dir=cross.library.parent,
        units_compiled=sum(1 for u in cross.units if u.status == "ok"),
        reused_objects=False,
        steps=dict(cross.seconds),
        package=options.package.name,
    )


def configure_env_of(options: BuildOptions) -> dict[str, str]:
    """The environment setup.py is configured in: nvcc's --threads as a native build gets it
    (--nvcc-threads, else one per gencode target up to 4), read by the nvcc-threads patch."""
    return {**os.environ, "NVCC_THREADS": str(nvcc_threads(options, options.archs))}


def _slug(ref: str | None) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in ref or "newest")
