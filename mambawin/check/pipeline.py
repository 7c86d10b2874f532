"""`mambawin check --windows`: fetch → patch → configure as Windows → compile every unit → link.

Fetch, patch and configure are the wine backends' shared front half (builder/front.py): the
trees live in mambawin's cache under `check/<package>-<ref>/`: `src/` (upstream's checkout,
never edited), `patched/` (a fresh copy with the check's patch set applied) and one objects
folder per mode. With stock the patch set is empty: the copy is upstream's tree as it is, and
its own setup.py, configured as win32, gives the units and their flags (upstream's file list,
not the patched tree's split units; upstream's archs and standard). So what it shows is what a
Windows build of upstream meets, the setup.py problems (archs CUDA 13 rejects, -std=c++17 under
torch 2.10+) included; `mambawin patches` lists what each patch changes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from mambawin.archs import Arch, format_archs
from mambawin.builder.configure import SetupConfig
from mambawin.builder.front import (
    CHECK_PATCHES,
    DEFAULT_SOURCE,
    STOCK,
    WINDOWS_PLATFORM,
    Configure,
    Front,
    backend_request,
    windows_front,
)
from mambawin.builder.results import (
    WINDOWS_CHECK,
    BuildPlan,
    BuildResult,
    patch_json,
    upstream_json,
)
from mambawin.builder.setup_scan import (
    front_end_json,
    planned_front_end,
    planned_gencode,
    scan_setup,
)
from mambawin.errors import ToolchainError, UsageError
from mambawin.packages import Package
from mambawin.stage import QuietReporter, Reporter, TimedSteps
from mambawin.store.owned import remove_tree
from mambawin.toolchain.wine import WindowsToolchain, missing_parts, wine_environ
from mambawin.toolchain.wine_server import WineTools
from mambawin.winbuild.closure import Closure, check_closure
from mambawin.winbuild.units import (
    UnitResult,
    compile_all,
    unit_finished,
    windows_commands,
)


@dataclass(frozen=True)
class CheckOptions:
    """What to check, and with what."""

    package: Package
    ref: str | None
    repo: str
    archs: tuple[Arch, ...]
    toolchain: WindowsToolchain
    wine: str
    stock: bool = False
    jobs: int = 2
    cpython: Path | None = None  # a CPython source tree: Include/ and PC/pyconfig.h
    link: bool = True
    units: tuple[str, ...] = ()  # only the sources whose file name is one of these
    source_from: str = DEFAULT_SOURCE  # git, index (the release's sdist) or auto


@dataclass(frozen=True)
class CheckReport:
    """Per unit ok/error/skipped, and the link's verdict when it ran."""

    package: str
    ref: str
    commit: str
    version: str
    mode: str  # "patched" or "stock"
    archs: str
    units: tuple[UnitResult, ...]
    closure: Closure | None
    # What this run did not check, one line each (a unit without --cpython, the link): a run
    # that passed with parts left out is "partial", never a plain ok.
    not_checked: tuple[str, ...]
    objects: Path  # the folder of the objects it compiled
    steps: Mapping[str, float]  # seconds per named step, the front half's too
    # What the tree was made from (Checkout.source_record): the sdist's file and sha256, or the
    # git commit; an sdist has no commit, so this is what names it.
    source: Mapping[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Nothing that was checked failed."""
        compiled = all(u.status != "error" for u in self.units)
        return compiled and (self.closure is None or self.closure.holds)

    @property
    def status(self) -> str:
        """ok (everything checked, and it holds), partial (what ran holds; not_checked says
        what did not run) or fail."""
        if not self.ok:
            return "fail"
        return "partial" if self.not_checked else "ok"


def build_result(report: CheckReport) -> BuildResult:
    """The check as every backend reports it (`--json`'s one shape): no wheel; its status,
    what it did not check, each unit and the link's verdict."""
    return BuildResult(
        wheel=None,
        size=0,
        sha256="",
        archs=report.archs,
        log=None,  # each unit's compiler output is printed as it finishes
        version=report.version,
        commit=report.commit,
        key="",  # the check keeps no objects keyed by its inputs
        build_dir=report.objects,
        units_compiled=sum(1 for u in report.units if u.status == "ok"),
        reused_objects=False,
        steps=dict(report.steps),
        package=report.package,
        backend=WINDOWS_CHECK,
        status=report.status,
        not_checked=report.not_checked,
        units=tuple(u.report() for u in report.units),
        closure=None if report.closure is None else report.closure.report(),
        source=dict(report.source),
    )


def not_checked(options: CheckOptions, units: list[UnitResult], linked: bool) -> tuple[str, ...]:
    """What a run left out and how to include it; empty when it checked everything."""
    gaps = [
        f"{len(skipped)} unit(s) not compiled ({', '.join(skipped)}): {reason}"
        for reason in sorted({u.reason for u in units if u.status == "skipped"})
        for skipped in [[u.source for u in units if u.reason == reason]]
    ]
    if linked or not all(u.status != "error" for u in units):
        return tuple(gaps)  # a failed unit is the finding; the link could not run anyway
    if options.stock:
        why = "--stock compiles upstream's tree as it is and never links it"
    elif options.units:
        why = "--unit checks some units only: drop it to check the link"
    elif not options.link:
        why = "the link check is off"
    else:
        why = "the binding needs --cpython (Python.h, pyconfig.h): pass a CPython source tree"
    return (*gaps, f"the link (the symbol closure) was not checked: {why}")


def cpython_dirs(cpython: Path | None) -> list[Path]:
    """The include folders a CPython source tree gives the binding file (Include, then PC)."""
    if cpython is None:
        return []
    dirs = [cpython / "Include", cpython / "PC"]
    if not (dirs[0] / "Python.h").is_file() or not (dirs[1] / "pyconfig.h").is_file():
        msg = (
            f"--cpython {cpython} is not a CPython source tree (Include/Python.h and "
            "PC/pyconfig.h): check out python/cpython at the tag of the Python you target"
        )
        raise UsageError(msg)
    return dirs


def check_windows(
    options: CheckOptions, *, tools: WineTools | None = None, reporter: Reporter | None = None
) -> CheckReport:
    """Compile every unit of the (patched or stock) tree with cl.exe and nvcc.exe under wine."""
    tools = tools or WineTools()
    steps = TimedSteps(reporter or QuietReporter())
    problems = missing_parts(options.toolchain)
    if problems:
        raise ToolchainError(f"the Windows toolchain is not ready: {problems[0]}")
    python_dirs = cpython_dirs(options.cpython)
    with _front(options, steps) as front:
        checkout = front.checkout
        config = front.setup
        mode = "stock" if options.stock else "patched"
        tree = front.tree  # with stock, the copy no patch touched, configured as upstream's
        objects = front.work / f"objs-{mode}"
        units = compile_step(
            steps, lambda: _compile(options, tools, steps, config, tree, objects, python_dirs)
        )
        closure = None
        whole = not options.units
        if options.link and whole and not options.stock and python_dirs and _all_ok(units):
            with steps("link"):
                closure = _link(options, tools, config, objects, units)
    commit = checkout.commit or "unknown"  # a git checkout always has one
    return CheckReport(
        options.package.name,
        options.ref or checkout.tag or commit,
        commit,
        checkout.version,
        mode,
        format_archs(options.archs),
        tuple(units),
        closure,
        not_checked(options, units, closure is not None),
        objects,
        steps.durations,
        checkout.source_record,
    )


def plan_check(options: CheckOptions, *, reporter: Reporter | None = None) -> BuildPlan:
    """What `check --windows` would compile, read from the patched setup.py's text as every plan
    is (builder/setup_scan.py): nothing is compiled or run, wine is never started, no torch is
    needed (`check --windows --plan`, the plan every backend prints)."""
    problems = missing_parts(options.toolchain)
    if problems:
        raise ToolchainError(f"the Windows toolchain is not ready: {problems[0]}")
    with _front(options, reporter, configure=False) as front:
        scan = scan_setup(front.tree)
        gencode = planned_gencode(front.patches, scan)
        # The check's compile gets setup.py's own flags: NVCC_THREADS from the environment (the
        # nvcc-threads patch reads it), else setup.py's default.
        threads = int(os.environ.get("NVCC_THREADS") or scan.threads or 1)
        units = select_units(scan.sources, options.units)
        mode = "stock" if options.stock else "patched"
        return BuildPlan(
            upstream=upstream_json(front.checkout),
            patches=[patch_json(r) for r in front.patches.results],
            archs=format_archs(options.archs),
            ext_name=scan.ext_name,
            units=units,
            gencode=list(gencode),
            nvcc_flags=[f for g in gencode for f in ("-gencode", g)] + ["--threads", str(threads)],
            jobs=options.jobs,
            nvcc_threads=threads,
            key="",  # the check keeps no objects keyed by its inputs
            build_dir=front.work / f"objs-{mode}",
            reuses_objects=False,
            local_version=None,
            package=options.package.name,
            front_end=front_end_json(planned_front_end(front.patches, front.tree)),
        )


def _front(
    options: CheckOptions, reporter: Reporter | None, *, configure: bool = True
) -> AbstractContextManager[Front]:
    """The shared front half in the check's cache folder, configured as win32 (not for the
    plan); its objects folders (objs-patched, objs-stock) are the check's own entries there."""
    request = backend_request(
        options.package,
        options.repo,
        options.ref,
        archs=options.archs,
        patches=STOCK if options.stock else CHECK_PATCHES,
        source_from=options.source_from,
        configure=Configure(platform=WINDOWS_PLATFORM) if configure else None,
    )
    return windows_front(request, "check", ("objs-*",), reporter=reporter)


def compile_step(
    steps: Reporter, compile_units: Callable[[], list[UnitResult]]
) -> list[UnitResult]:
    """The compile step's units; the step shows ✓ only when every unit compiled (a unit that
    failed marks it ✗, and the check goes on to report every unit)."""
    try:
        with steps.step("compile"):
            units = compile_units()
            if any(u.status == "error" for u in units):
                raise _UnitsFailed(units)
    except _UnitsFailed as failed:
        return failed.units
    return units


class _UnitsFailed(Exception):
    """Ends the compile step as failed (its ✗) while the check goes on to report every unit."""

    def __init__(self, units: list[UnitResult]) -> None:
        super().__init__("units failed")
        self.units = units


def select_units(sources: Sequence[str], wanted: Sequence[str]) -> list[str]:
    """The sources --unit names, each by the path the table prints (`csrc/x/y.cu`) or its file
    name (`y.cu`); all of them when none is named. UsageError naming each name that matches
    no unit: one left out must not pass silently."""
    if not wanted:
        return list(sources)
    given = {w: w.strip().replace("\\", "/").removeprefix("./") for w in wanted}
    unknown = [w for w, n in given.items() if not any(n in (s, Path(s).name) for s in sources)]
    if unknown:
        listed = ", ".join(sources)
        msg = f"--unit {', '.join(unknown)}: no such unit (there are {listed}); give one as listed"
        raise UsageError(msg)
    names = set(given.values())
    return [s for s in sources if s in names or Path(s).name in names]


def _all_ok(units: list[UnitResult]) -> bool:
    return all(u.status == "ok" for u in units)


def _compile(
    options: CheckOptions,
    tools: WineTools,
    reporter: Reporter,
    config: SetupConfig,
    tree: Path,
    objects: Path,
    python_dirs: list[Path],
) -> list[UnitResult]:
    remove_tree(objects)  # ours; an old object must never pass for a new one
    commands = windows_commands(config, tree, options.toolchain, objects, python_dirs)
    chosen = set(select_units(config.sources, options.units))
    commands = [c for c in commands if c.source in chosen]
    skipped = [
        UnitResult(c.source, "skipped", 0.0, reason="needs --cpython (Python.h, pyconfig.h)")
        for c in commands
        if c.compiler == "cl" and not python_dirs
    ]
    runnable = [c for c in commands if not (c.compiler == "cl" and not python_dirs)]
    done = compile_all(
        runnable,
        options.toolchain,
        tree,
        options.wine,
        jobs=options.jobs,
        runner=tools.runner,
        on_done=lambda unit, done, total: reporter.finished(unit_finished(unit, done, total)),
    )
    by_source = {u.source: u for u in [*done, *skipped]}
    return [by_source[c.source] for c in commands]


def _link(
    options: CheckOptions,
    tools: WineTools,
    config: SetupConfig,
    objects: Path,
    units: list[UnitResult],
) -> Closure:
    env = wine_environ(options.toolchain, dict(os.environ))
    assert options.cpython is not None
    return check_closure(
        options.toolchain,
        [u.obj for u in units if u.obj is not None],
        config.ext_name,
        objects,
        wine=options.wine,
        env=env,
        runner=tools.runner,
        pyconfig=options.cpython / "PC" / "pyconfig.h",
    )
