"""`mambawin build` and `mambawin fetch`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mambawin.abi import STABLE_FLOOR
from mambawin.cli.app import command, print_json, split_values
from mambawin.envvars import JOBS_BOUND
from mambawin.errors import UsageError
from mambawin.packages import CAUSAL_CONV1D, MAMBA
from mambawin.ui.console import console

if TYPE_CHECKING:
    from mambawin.builder.options import BuildOptions
    from mambawin.builder.reporter import Reporter


# The options build and fetch share: which upstream, at which ref, for which package.
RefOption = Annotated[
    str | None,
    typer.Option(
        "--ref", help="Upstream tag, branch or commit.", show_default="the newest release tag"
    ),
]
RepoOption = Annotated[
    str | None,
    typer.Option(
        "--repo",
        help="Upstream URL, file:// URL or local clone.",
        show_default="the package's GitHub repo",
    ),
]
PackageOption = Annotated[str, typer.Option("--package", help="mamba-ssm or causal-conv1d.")]


@command("build")
def build_command(
    ctx: typer.Context,
    ref: RefOption = None,
    repo: RepoOption = None,
    package: PackageOption = "mamba-ssm",
    with_: Annotated[
        str | None,
        typer.Option(
            "--with",
            help="Also build causal-conv1d[==REF] into --out.",
            show_default="REF: the newest release that fits the mamba-ssm version",
        ),
    ] = None,
    with_repo: Annotated[
        str | None,
        typer.Option("--with-repo", help="URL or local path of causal-conv1d for --with."),
    ] = None,
    source: Annotated[
        Path | None,
        typer.Option("--source", help="Build this existing source folder (copied, never edited)."),
    ] = None,
    arch: Annotated[
        str | None,
        typer.Option(
            "--arch", help="CUDA archs, e.g. '86', '86;89' or '8.9+PTX'.", show_default="this GPU"
        ),
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Folder for the finished wheel.")] = Path(
        "dist"
    ),
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            min=1,
            max=JOBS_BOUND,
            help="Parallel compile jobs (MAX_JOBS).",
            show_default="$MAX_JOBS, else doctor's",
        ),
    ] = None,
    nvcc_threads: Annotated[
        int | None,
        typer.Option(
            "--nvcc-threads",
            min=1,
            help="nvcc --threads per job.",
            show_default="one per gencode target, max 4",
        ),
    ] = None,
    keep_complex: Annotated[
        bool, typer.Option("--keep-complex", help="Keep the complex-weight kernels (slower build).")
    ] = False,
    skip_patch: Annotated[
        list[str] | None,
        typer.Option(
            "--skip-patch",
            help="Leave this patch id out (repeatable or comma-separated; "
            "recorded in the provenance).",
        ),
    ] = None,
    local_version: Annotated[
        str, typer.Option("--local-version", help="auto (e.g. +cu130torch2.10), none, or a label.")
    ] = "auto",
    abi: Annotated[
        str,
        typer.Option(
            "--abi",
            help="torch (one torch minor and CPython), or stable: torch's stable ABI, one "
            f"py3-none wheel for every torch >= {STABLE_FLOOR} (mamba-ssm "
            f"{MAMBA.stable_versions}, causal-conv1d {CAUSAL_CONV1D.stable_versions}).",
        ),
    ] = "torch",
    platform: Annotated[
        str | None,
        typer.Option(
            "--platform",
            help="win_amd64 on Linux: cross-build with cl.exe and nvcc.exe under wine "
            "(--abi stable only; `mambawin toolchain windows --setup` first).",
            show_default="this machine's",
        ),
    ] = None,
    windows_root: Annotated[
        Path | None,
        typer.Option(
            "--windows-root",
            help="The Windows toolchain folder for --platform win_amd64.",
            show_default="mambawin's cache (`mambawin toolchain windows --setup`)",
        ),
    ] = None,
    plan_only: Annotated[
        bool, typer.Option("--plan", help="Show what would be built; compile nothing.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Build even when a blocking doctor check fails.")
    ] = False,
    drop: Annotated[
        list[str] | None,
        typer.Option(
            "--drop",
            help="Also drop this requirement from METADATA (repeatable or comma-separated).",
        ),
    ] = None,
    keep: Annotated[
        list[str] | None,
        typer.Option(
            "--keep",
            help="Keep this requirement as upstream has it (repeatable or comma-separated).",
        ),
    ] = None,
    cache: Annotated[
        bool | None,
        typer.Option(
            "--cache/--no-cache",
            help="sccache/ccache in front of nvcc.",
            show_default="on when doctor finds one",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    spec: Annotated[
        Path | None,
        typer.Option(
            "--spec", help="Build every cell of a team spec this machine can (see `matrix`)."
        ),
    ] = None,
) -> None:
    """Build a mamba-ssm (or causal-conv1d) wheel: doctor, fetch, patch, build, metadata, record."""
    from mambawin.abi import parse_abi
    from mambawin.archs import parse_archs
    from mambawin.builder import pair
    from mambawin.builder import pipeline as core
    from mambawin.builder.options import BuildOptions
    from mambawin.builder.results import BuildPlan, BuildResult
    from mambawin.packages import get_package
    from mambawin.ui.progress import ConsoleReporter

    if spec is not None:
        from mambawin.cli.team import build_spec

        given = {"--ref": ref, "--repo": repo, "--source": source, "--arch": arch}
        build_spec(
            spec,
            jobs=jobs,
            force=force,
            as_json=as_json,
            plan_only=plan_only,
            conflicts=[name for name, value in given.items() if value],
        )
        return

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
    )
    if platform is not None:
        _cross_build(options, platform, windows_root, with_=with_, as_json=as_json)
        return
    reporter = ConsoleReporter()
    # The doctor a caller passes in (`invoke(app, args, obj={"doctor": ...})`), else the probes.
    doctor = (ctx.obj or {}).get("doctor") if isinstance(ctx.obj, dict) else None
    run: Callable[[BuildOptions, Reporter], BuildPlan | BuildResult] = functools.partial(
        core.plan if plan_only else core.build, doctor=doctor
    )
    if with_ is None and with_repo is not None:
        raise UsageError("--with-repo names where --with's causal-conv1d comes from: add --with")
    results = (
        [run(options, reporter)]
        if with_ is None
        else pair.run_pair(options, pair.parse_with(with_, with_repo), reporter, run)
    )
    if as_json:
        data = results[0].to_json() if with_ is None else pair.pair_json(results)
        print_json(data)
        return
    for result in results:
        reporter.summary(result)


@command("fetch")
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
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Check out upstream mamba-ssm or causal-conv1d from a cached mirror (offline if cached)."""
    from mambawin.fetch import upstream
    from mambawin.packages import get_package

    chosen = get_package(package)
    result = upstream.checkout(repo or chosen.default_repo, ref, dest, package=chosen)
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True)
    if as_json:
        print_json(result.to_json())
        return
    console.print(f"{chosen.name} {result.version} ({result.tag or result.ref}, {result.commit})")
    typer.echo(str(result.path))


def _cross_build(
    options: BuildOptions, platform: str, root: Path | None, *, with_: str | None, as_json: bool
) -> None:
    """`build --abi stable --platform win_amd64` on Linux: the Windows wheel under wine."""
    from mambawin.cross.pipeline import CrossTools
    from mambawin.cross.source import build_windows, check_cross
    from mambawin.toolchain import wine
    from mambawin.ui import check as check_view

    check_cross(options, platform)
    if with_ is not None:
        raise UsageError("--platform win_amd64 builds one package: drop --with, run it per package")
    launcher = wine.need_wine()
    tools = CrossTools(
        on_unit=(lambda *_: None) if as_json else check_view.unit_line,
        on_stage=(lambda _: None) if as_json else (lambda stage: console.print(f"· {stage}")),
    )
    toolchain = wine.toolchain_at(root or wine.default_root())
    result = build_windows(options, toolchain, launcher, tools)
    if as_json:
        print_json({"wheel": str(result.wheel), "library": str(result.library)})
        return
    console.print(f"✓ {result.wheel} (cross-built under wine; not run on Windows)")
