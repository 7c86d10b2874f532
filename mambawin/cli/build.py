"""`mambawin build` and `mambawin fetch`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from mambawin.abi import ABIS
from mambawin.builder import backends
from mambawin.builder.backends import help_of
from mambawin.builder.options import DEFAULT_OUT
from mambawin.cli.app import command, examples, print_json, split_values
from mambawin.cli.options import (
    FROM,
    SPEED,
    TEAM,
    WHAT,
    WINDOWS,
    WINDOWS_ROOT_DEFAULT,
    PackageOption,
    RefOption,
    RepoOption,
    SourceFromOption,
    jobs_option,
)
from mambawin.cross.source import WINDOWS as WINDOWS_PLATFORM  # the one --platform
from mambawin.errors import UsageError
from mambawin.ui.console import console

if TYPE_CHECKING:
    from mambawin.builder.options import BuildOptions
    from mambawin.builder.reporter import Reporter
    from mambawin.toolchain.wine import WindowsToolchain


@command(
    "build",
    epilog=examples(
        "mambawin build --with causal-conv1d",
        "mambawin build --ref v2.2.6 --with causal-conv1d==v1.5.2 --arch 86 --out wheelhouse",
        "mambawin build --abi stable --platform win_amd64 --plan",
    ),
)
def build_command(
    ctx: typer.Context,
    ref: RefOption = None,
    repo: RepoOption = None,
    package: PackageOption = "mamba-ssm",
    source_from: SourceFromOption = None,
    with_: Annotated[
        str | None,
        typer.Option(
            "--with",
            rich_help_panel=WHAT,
            help=help_of("--with"),
            show_default="causal-conv1d (the newest release that fits) with mamba-ssm",
        ),
    ] = None,
    with_repo: Annotated[
        str | None,
        typer.Option("--with-repo", rich_help_panel=FROM, help=help_of("--with-repo")),
    ] = None,
    source: Annotated[
        Path | None,
        typer.Option("--source", rich_help_panel=FROM, help=help_of("--source")),
    ] = None,
    arch: Annotated[
        str | None,
        typer.Option(
            "--arch", rich_help_panel=WHAT, help=help_of("--arch"), show_default="this GPU"
        ),
    ] = None,
    out: Annotated[Path, typer.Option("--out", help=help_of("--out"))] = DEFAULT_OUT,
    jobs: Annotated[int | None, jobs_option("$MAX_JOBS, else doctor's")] = None,
    nvcc_threads: Annotated[
        int | None,
        typer.Option(
            "--nvcc-threads",
            rich_help_panel=SPEED,
            min=1,
            help=help_of("--nvcc-threads"),
            show_default="one per gencode target, max 4",
        ),
    ] = None,
    keep_complex: Annotated[
        bool, typer.Option("--keep-complex", rich_help_panel=WHAT, help=help_of("--keep-complex"))
    ] = False,
    skip_patch: Annotated[
        list[str] | None,
        typer.Option(
            "--skip-patch",
            rich_help_panel=WHAT,
            help=help_of("--skip-patch"),
        ),
    ] = None,
    local_version: Annotated[
        str, typer.Option("--local-version", rich_help_panel=WHAT, help=help_of("--local-version"))
    ] = "auto",
    abi: Annotated[
        str,
        typer.Option(
            "--abi",
            rich_help_panel=WHAT,
            metavar="|".join(ABIS),
            help=help_of("--abi"),
        ),
    ] = "torch",
    platform: Annotated[
        str | None,
        typer.Option(
            "--platform",
            rich_help_panel=WINDOWS,
            metavar=WINDOWS_PLATFORM,
            help=help_of("--platform"),
            show_default="this machine's",
        ),
    ] = None,
    windows_root: Annotated[
        Path | None,
        typer.Option(
            "--windows-root",
            help=help_of("--windows-root"),
            show_default=WINDOWS_ROOT_DEFAULT,
            rich_help_panel=WINDOWS,
        ),
    ] = None,
    plan_only: Annotated[bool, typer.Option("--plan", help=help_of("--plan"))] = False,
    force: Annotated[bool, typer.Option("--force", help=help_of("--force"))] = False,
    drop: Annotated[
        list[str] | None,
        typer.Option(
            "--drop",
            rich_help_panel=WHAT,
            help=help_of("--drop"),
        ),
    ] = None,
    keep: Annotated[
        list[str] | None,
        typer.Option(
            "--keep",
            rich_help_panel=WHAT,
            help=help_of("--keep"),
        ),
    ] = None,
    cache: Annotated[
        bool | None,
        typer.Option(
            "--cache/--no-cache",
            rich_help_panel=SPEED,
            help=help_of("--cache"),
            show_default="on when doctor finds one",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help=help_of("--json"))] = False,
    spec: Annotated[
        Path | None,
        typer.Option(
            "--spec",
            rich_help_panel=TEAM,
            help="Build every cell of a team spec this machine can (see `matrix`).",
        ),
    ] = None,
) -> None:
    """Build a mamba-ssm (or causal-conv1d) wheel: doctor, fetch, patch, build, metadata, record.

    --plan says what a build would do and compiles nothing."""
    from mambawin.abi import parse_abi
    from mambawin.archs import parse_archs
    from mambawin.builder import pair, pooled
    from mambawin.builder import pipeline as core
    from mambawin.builder.options import BuildOptions
    from mambawin.builder.results import BuildPlan, BuildResult
    from mambawin.fetch.sdist import source_choice
    from mambawin.packages import get_package
    from mambawin.ui.progress import ConsoleReporter

    given = given_options(ctx)
    if spec is not None:
        from mambawin.cli.team import build_spec

        refuse_for_spec(given)
        build_spec(spec, jobs=jobs, force=force, as_json=as_json, plan_only=plan_only)
        return

    backend = backends.CROSS_WINDOWS if platform is not None else backends.NATIVE
    if platform is not None:
        from mambawin.cross.source import check_platform

        check_platform(platform)
    backends.validate(backend, given)  # before any work: --windows-root, then every option
    options = BuildOptions(
        repo=repo,
        ref=ref,
        source=source,
        archs=parse_archs(arch) if arch is not None else (),
        out=out,
        jobs=jobs,
        nvcc_threads=nvcc_threads,
        keep_complex=keep_complex,
        local_version=local_version,
        force=force,
        drop=split_values(drop),
        keep=split_values(keep),
        package=get_package(package),
        cache=cache,
        skip_patches=split_values(skip_patch),
        abi=parse_abi(abi),
        source_from=source_choice(source_from),
    )
    if backend == backends.CROSS_WINDOWS:
        _cross_build(options, windows_root, plan_only=plan_only, as_json=as_json)
        return
    reporter = ConsoleReporter()
    # The doctor a caller passes in (`invoke(app, args, obj={"doctor": ...})`), else the probes.
    doctor = (ctx.obj or {}).get("doctor") if isinstance(ctx.obj, dict) else None
    stage = core.plan if plan_only else core.build

    def run(options: BuildOptions, reporter: Reporter) -> BuildPlan | BuildResult:
        return stage(options, reporter=reporter, doctor=doctor)

    companion = pair.companion_of(options.package, with_, with_repo)
    results: list[BuildPlan | BuildResult]
    if companion is None:
        results = [run(options, reporter)]
    elif plan_only:  # --plan compiles nothing: each package planned in turn
        results = pair.run_pair(options, companion, reporter, run)
    else:  # both packages compile at once, in one job pool
        both = pair.pair_options(options, companion, reporter)
        results = list(pooled.build_together(both, reporter, doctor=doctor))
    if as_json:
        print_json(results[0].to_json() if companion is None else pair.pair_json(results))
        return
    for result in results:
        reporter.summary(result)
    if companion is not None and plan_only:
        reporter.note(pair.pair_time(results))


@command(
    "fetch",
    cache=True,
    epilog=examples(
        "mambawin fetch",
        "mambawin fetch --package causal-conv1d --ref v1.5.2 --dest src/causal-conv1d",
    ),
)
def fetch_command(
    ref: RefOption = None,
    repo: RepoOption = None,
    dest: Annotated[
        Path | None,
        typer.Option(
            "--dest", help="Checkout folder.", show_default="a short path in the mambawin cache"
        ),
    ] = None,
    package: PackageOption = "mamba-ssm",
    source_from: SourceFromOption = None,
    as_json: Annotated[bool, typer.Option("--json", help=help_of("--json"))] = False,
) -> None:
    """Check out upstream mamba-ssm or causal-conv1d from a cached mirror, or extract its
    release's sdist from the package index (offline if cached)."""
    from mambawin.fetch import origin
    from mambawin.fetch.sdist import source_choice
    from mambawin.packages import get_package

    chosen = get_package(package)
    result = origin.fetch_release(
        repo, ref, dest, package=chosen, source_from=source_choice(source_from)
    )
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    if as_json:
        print_json(result.to_json())
        return
    made_from = result.sdist.filename if result.sdist else result.commit
    console.print(
        f"{chosen.name} {result.version} ({result.tag or result.ref}, {made_from})", markup=False
    )
    typer.echo(str(result.path))


def given_options(ctx: typer.Context) -> dict[str, object]:
    """Each build option the user set on the command line, by its flag, with its value."""
    given: dict[str, object] = {}
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name) if param.name else None
        typed = source is not None and source.name == "COMMANDLINE"  # not a default
        if param.name and typed and param.opts[0] in backends.OPTIONS:
            given[param.opts[0]] = ctx.params[param.name]
    return given


def refuse_for_spec(given: dict[str, object]) -> None:
    """--spec sets what each cell builds: refuse every build option it does not apply, named."""
    not_applied = [flag for flag in given if not backends.OPTIONS[flag].with_spec]
    if not_applied:
        msg = (
            f"--spec builds each cell as the spec says: drop {', '.join(not_applied)} (the "
            "spec's [options] set what a cell builds), or build one wheel without --spec"
        )
        raise UsageError(msg)


def _cross_build(
    options: BuildOptions, root: Path | None, *, plan_only: bool, as_json: bool
) -> None:
    """`build --abi stable --platform win_amd64` on Linux: the Windows wheel under wine."""
    from mambawin.builder.options import check_options
    from mambawin.cross.source import build_windows, check_cross, plan_windows
    from mambawin.toolchain import wine, wine_server
    from mambawin.ui.progress import ConsoleReporter

    check_cross(options)
    check_options(options)
    reporter = ConsoleReporter()  # narration on stderr, as every backend's; results on stdout
    with reporter.step("doctor"):  # what the cross build runs: the Windows toolchain, wine
        where = backends.check_windows_root(root)
        toolchain = wine.toolchain_at(where)
        launcher = None if plan_only else wine_server.need_wine()  # a plan never runs wine
        reporter.note(cross_doctor_line(toolchain, where, launcher))
    if plan_only:  # nothing compiles
        plan = plan_windows(options, toolchain, reporter=reporter)
        if as_json:
            print_json(plan.to_json())
            return
        reporter.summary(plan)
        return
    assert launcher is not None
    result = build_windows(options, toolchain, launcher, reporter=reporter)
    if as_json:
        print_json(result.to_json())
        return
    reporter.summary(result)


def cross_doctor_line(toolchain: WindowsToolchain, where: Path, launcher: str | None) -> str:
    """The doctor step's line of a cross build: which compilers, from where, run by what."""
    cuda = toolchain.cuda_version() or "?"
    runs = f"under {launcher}" if launcher else "wine not needed for a plan"
    return (
        f"Windows toolchain in {where}: MSVC {toolchain.msvc_tools.name}, Windows Kits "
        f"{toolchain.kits_version}, nvcc.exe {cuda} ({runs})"
    )
