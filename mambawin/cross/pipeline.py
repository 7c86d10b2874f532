"""A Windows wheel of a stable-ABI tree, built on Linux: compile → symbols → import libraries →
link → audit → pack.

The tree is already patched for the stable ABI and configured as win32 (`builder.configure` with
platform="win32"); the compilers are Microsoft's and NVIDIA's Windows programs under wine
(toolchain/wine.py). Every unit is compiled with the commands `check --windows` derives
(winbuild.units.windows_commands), without CPython's headers: a stable binary holds no Python C API,
so a unit that includes Python.h fails here, as it should. The work folder keeps the objects,
the .def files, the import libraries and the library; the wheel is written whole into `out`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mambawin.archs import Arch
from mambawin.builder.configure import SetupConfig
from mambawin.builder.environment import reproducible_nvcc
from mambawin.cross.audit import Audit, audit_library
from mambawin.cross.link import link_library, make_import_libraries, unresolved_symbols
from mambawin.cross.pack import LIBRARY_SUFFIX, library_name, pack_wheel
from mambawin.errors import BuildError, ToolchainError
from mambawin.stage import QuietReporter, Reporter, TimedSteps
from mambawin.store.owned import claim, remove_tree
from mambawin.toolchain.wine import WindowsToolchain, missing_parts, wine_environ
from mambawin.toolchain.wine_server import WineTools
from mambawin.wheel.naming import WINDOWS
from mambawin.wheel.provenance import Provenance
from mambawin.winbuild.torch_exports import ExportTable, Selection, read_export_table, select
from mambawin.winbuild.units import (
    UnitResult,
    compile_all,
    unit_finished,
    windows_commands,
)

STAGES = ("compile", "symbols", "import-libs", "link", "audit", "pack")


@dataclass(frozen=True)
class CrossOptions:
    """What to cross-build, with what, and where."""

    tree: Path  # patched for the stable ABI
    config: SetupConfig  # its setup.py configured as win32
    toolchain: WindowsToolchain
    wine: str
    archs: tuple[Arch, ...]  # what the fatbin must hold (setup.py's -gencode flags compile it)
    work: Path  # objects, .def files, import libraries, the library
    out: Path  # the wheel's folder
    jobs: int = 2
    platform: str = WINDOWS
    provenance: Provenance | None = None
    date_epoch: int | None = None  # the upstream commit's time, when SOURCE_DATE_EPOCH is unset
    local_version: str | None = None  # the wheel's label (None: setup.py's version as it is)


@dataclass(frozen=True)
class CrossResult:
    """The wheel and what went into it."""

    wheel: Path
    library: Path
    units: tuple[UnitResult, ...]
    imports: Mapping[str, tuple[str, ...]]  # torch DLL -> the names its import library names
    cuda_exports_from: str  # where torch_cuda.dll's names came from
    audit: Audit
    seconds: Mapping[str, float]  # per stage


def cross_build(
    options: CrossOptions, *, tools: WineTools | None = None, reporter: Reporter | None = None
) -> CrossResult:
    """Build the wheel; BuildError naming the first unit, symbol or import that breaks it."""
    tools = tools or WineTools()
    timed = TimedSteps(reporter or QuietReporter())  # this backend's stages, each a named step
    problems = missing_parts(options.toolchain)
    if problems or options.toolchain.torch is None:
        first = problems[0] if problems else "torch's Windows wheel is not set up (--torch)"
        raise ToolchainError(f"the Windows toolchain is not ready: {first}")
    name = library_name(options.config)  # a tree not patched for the stable ABI stops here
    env = wine_environ(options.toolchain, dict(os.environ))
    with timed("compile"):
        units = _compile(options, tools, timed)
    objects = [u.obj for u in units if u.obj is not None]
    with timed("symbols"):
        table = read_export_table(
            options.toolchain, wine=options.wine, env=env, runner=tools.runner
        )
        needed = unresolved_symbols(
            options.toolchain,
            objects,
            options.work,
            wine=options.wine,
            env=env,
            runner=tools.runner,
        )
        selection = _selected(needed, table)
    with timed("import-libs"):
        libs = make_import_libraries(
            options.toolchain,
            selection,
            options.work / "import-libs",
            wine=options.wine,
            env=env,
            runner=tools.runner,
        )
    with timed("link"):
        library = link_library(
            options.toolchain,
            objects,
            libs,
            options.work / f"{name}{LIBRARY_SUFFIX}",
            wine=options.wine,
            env=env,
            runner=tools.runner,
        )
    with timed("audit"):
        audit = audit_library(library, options.archs)
    if not audit.ok:
        raise BuildError(f"{library.name} breaks the stable contract: {audit.problems[0]}")
    with timed("pack"):
        wheel = pack_wheel(
            options.tree,
            options.config,
            library,
            options.out,
            platform=options.platform,
            provenance=options.provenance,
            date_epoch=options.date_epoch,
            local_version=options.local_version,
        )
    return CrossResult(
        wheel,
        library,
        tuple(units),
        selection.imports,
        table.cuda_from,
        audit,
        timed.durations,
    )


def _compile(options: CrossOptions, tools: WineTools, reporter: Reporter) -> list[UnitResult]:
    objects = claim(options.work, "cross-objects") / "objs"
    remove_tree(objects)  # ours; an old object must never pass for a new one
    commands = windows_commands(options.config, options.tree, options.toolchain, objects)
    env = dict(os.environ)
    # nvcc.exe's temporary names and internal symbol names: the same object from any folder
    env.update(reproducible_nvcc(options.toolchain.cuda_version(), env))
    units = compile_all(
        commands,
        options.toolchain,
        options.tree,
        options.wine,
        jobs=options.jobs,
        runner=tools.runner,
        on_done=lambda unit, done, total: reporter.finished(unit_finished(unit, done, total)),
        base_env=env,
    )
    failed = next((u for u in units if u.status != "ok"), None)
    if failed is not None:
        total = sum(1 for u in units if u.status != "ok")
        msg = (
            f"{failed.source} does not compile for Windows ({total} of {len(units)} units "
            f"failed): {failed.error}"
        )
        raise BuildError(msg)
    return units


def _selected(needed: tuple[str, ...], table: ExportTable) -> Selection:
    """The selection, or BuildError when the objects need anything outside the stable C ABI."""
    selection = select(needed, table)
    if selection.foreign:
        shown = ", ".join(selection.foreign[:3])
        msg = (
            f"the objects need {len(selection.foreign)} symbol(s) outside torch's stable C ABI "
            f"({shown}): a stable build uses only aoti_torch_*/torch_* C functions"
        )
        raise BuildError(msg)
    if selection.missing:
        msg = (
            f"torch's Windows libraries export no {', '.join(selection.missing[:3])}: "
            "a torch newer than the toolchain's headers, or a TORCH_TARGET_VERSION above the floor"
        )
        raise BuildError(msg)
    return selection
