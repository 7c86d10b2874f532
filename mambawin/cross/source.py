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
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from packaging.utils import parse_wheel_filename

from mambawin.archs import format_archs
from mambawin.builder.front import (
    CROSS_PATCHES,
    WINDOWS_PLATFORM,
    Configure,
    Front,
    FrontEndChoice,
    backend_request,
    wheel_version,
    windows_front,
)
from mambawin.builder.metadata import provenance
from mambawin.builder.options import BuildOptions, nvcc_threads, resolve_jobs
from mambawin.builder.results import (
    CROSS_WINDOWS,
    BuildPlan,
    BuildResult,
    patch_json,
    upstream_json,
)
from mambawin.builder.setup_scan import (
    front_end_json,
    front_end_lines,
    planned_front_end,
    planned_gencode,
    scan_setup,
)
from mambawin.cross.pipeline import CrossOptions, CrossResult, cross_build
from mambawin.errors import UsageError
from mambawin.stage import Reporter, timed
from mambawin.toolchain.msvc import cl_version
from mambawin.toolchain.pytorch import package_version
from mambawin.toolchain.wine import WindowsToolchain
from mambawin.toolchain.wine_server import WineTools
from mambawin.wheel.naming import WINDOWS as WINDOWS  # the one --platform it builds
from mambawin.wheel.naming import wheel_name
from mambawin.wheel.provenance import Provenance, read_provenance


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
    """The front half's tree (builder.front) and the provenance the cross build records."""

    front: Front
    provenance: Provenance


@contextmanager
def windows_tree(
    options: BuildOptions,
    toolchain: WindowsToolchain,
    *,
    reporter: Reporter | None = None,
    configure: bool = True,
) -> Iterator[WindowsTree]:
    """The shared front half for the stable ABI, with the .dist-info for the wheel, under the
    work folder's lock (held while the caller compiles or plans). configure=False (the plan)
    never runs setup.py: it needs a torch of its own."""
    request = backend_request(
        options.package,
        options.upstream_repo,
        options.ref,
        archs=options.archs,
        patches=CROSS_PATCHES,
        source_from=options.source_from,
        # No SASS is proven for Windows builds yet: under proven every arch keeps its own pass
        # and the plan says why.
        groups=FrontEndChoice(options.arch_groups, toolchain.cuda_version() or "", WINDOWS),
        pin=options.pin,
        configure=Configure(
            env=configure_env_of(options),
            platform=WINDOWS_PLATFORM,
            wheel_tag=f"py3-none-{WINDOWS}",
        )
        if configure
        else None,
    )
    with windows_front(request, "cross", ("objs",), reporter=reporter) as front:
        for line in front_end_lines(planned_front_end(front.patches, front.tree)):
            timed(reporter).note(line)
        cuda = toolchain.cuda_version() or ""
        written = provenance(
            front.checkout,
            front.patches,
            front.epoch,
            archs=options.archs,
            abi="stable",
            cuda_version=cuda,
            compiler=windows_compilers(toolchain.msvc_tools.name, cuda),
            torch_headers=package_version(toolchain.torch) if toolchain.torch else "",
        )
        yield WindowsTree(front, written)


def windows_compilers(toolset: str, cuda: str) -> str:
    """The compilers of a cross build, each with its own version: cl.exe's is not its toolset
    folder's (toolset 14.44 ships cl.exe 19.44)."""
    return f"cl.exe {cl_version(toolset)} (MSVC toolset {toolset}), nvcc.exe {cuda}, under wine"


def build_windows(
    options: BuildOptions,
    toolchain: WindowsToolchain,
    wine: str,
    *,
    tools: WineTools | None = None,
    reporter: Reporter | None = None,
) -> BuildResult:
    """Fetch, patch for the stable ABI, configure as win32 and cross-build the wheel; the
    result as every backend reports it (`build --json`'s one shape)."""
    steps = timed(reporter)
    with windows_tree(options, toolchain, reporter=steps) as prepared:
        cross = CrossOptions(
            tree=prepared.front.tree,
            config=prepared.front.setup,
            toolchain=toolchain,
            wine=wine,
            archs=options.archs,
            work=prepared.front.work / "objs",
            out=options.out,
            jobs=resolve_jobs(options.jobs, None),
            provenance=prepared.provenance,
            date_epoch=prepared.front.epoch,
            local_version=prepared.provenance.label,
        )
        built = cross_build(cross, tools=tools, reporter=steps)
        front_end = front_end_json(planned_front_end(prepared.front.patches, prepared.front.tree))
    return build_result(options, built, steps.durations, front_end=front_end)


def plan_windows(
    options: BuildOptions, toolchain: WindowsToolchain, *, reporter: Reporter | None = None
) -> BuildPlan:
    """What the cross build would compile, read from its patched tree's setup.py text (as the
    native plan: builder/setup_scan.py): nothing is compiled or run, wine is never started, and
    no torch is needed."""
    with windows_tree(options, toolchain, reporter=reporter, configure=False) as prepared:
        front = prepared.front
        scan = scan_setup(front.tree)
        label = prepared.provenance.label
        version = wheel_version(front, options.package)
        wheel = wheel_name(options.package, version, label, "", "stable", WINDOWS)
        gencode = planned_gencode(front.patches, scan)
        threads = nvcc_threads(options, options.archs)
        jobs = resolve_jobs(options.jobs, None)
        return BuildPlan(
            upstream=upstream_json(front.checkout),
            patches=[patch_json(r) for r in front.patches.results],
            archs=format_archs(options.archs),
            ext_name=scan.ext_name,
            units=list(scan.sources),
            gencode=list(gencode),
            nvcc_flags=[f for g in gencode for f in ("-gencode", g)] + ["--threads", str(threads)],
            jobs=jobs,
            nvcc_threads=threads,
            key="",  # the cross build keeps no object cache keyed by its inputs
            build_dir=front.work / "objs",
            reuses_objects=False,
            local_version=label,
            package=options.package.name,
            wheel=wheel,
            front_end=front_end_json(planned_front_end(front.patches, front.tree)),
        )


def build_result(
    options: BuildOptions,
    cross: CrossResult,
    steps: Mapping[str, float],
    *,
    front_end: dict[str, Any] | None = None,
) -> BuildResult:
    """The cross build as every backend reports it (`build --json`'s one shape); steps: every
    step's seconds, the front half's and the backend's; front_end: nvcc's front-end passes."""
    wheel = cross.wheel
    provenance = read_provenance(wheel) or Provenance()
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
        steps=dict(steps),
        package=options.package.name,
        backend=CROSS_WINDOWS,
        units=tuple(u.report() for u in cross.units),
        source=dict(provenance.source),
        front_end=front_end,
    )


def configure_env_of(options: BuildOptions) -> dict[str, str]:
    """The environment setup.py is configured in: nvcc's --threads as a native build gets it
    (--nvcc-threads, else one per gencode target up to 4), read by the nvcc-threads patch."""
    return {**os.environ, "NVCC_THREADS": str(nvcc_threads(options, options.archs))}
