"""`mambawin build` and `mambawin fetch`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mambawin.cli.app import command, print_json
from mambawin.ui.console import console


@command("build")
def build_command(
    ref: Annotated[str | None, typer.Option(
        "--ref", help="Upstream tag, branch or commit.", show_default="the newest release")] = None,
    repo: Annotated[str | None, typer.Option(
        "--repo", help="Upstream URL or local path.", show_default="state-spaces/mamba")] = None,
    source: Annotated[Path | None, typer.Option(
        "--source", help="Build this existing source folder (copied, never edited).")] = None,
    arch: Annotated[str | None, typer.Option(
        "--arch", help="CUDA archs, e.g. '86', '86;89' or '8.9+PTX'.",
        show_default="this GPU")] = None,
    out: Annotated[Path, typer.Option("--out", help="Folder for the finished wheel.")] = Path(
        "dist"),
    jobs: Annotated[int | None, typer.Option(
        "--jobs", min=1, help="Parallel compile jobs (MAX_JOBS).",
        show_default="$MAX_JOBS, else doctor's")] = None,
    nvcc_threads: Annotated[int | None, typer.Option(
        "--nvcc-threads", min=1, help="nvcc --threads per job.",
        show_default="#archs, max 4")] = None,
    keep_complex: Annotated[bool, typer.Option(
        "--keep-complex", help="Keep the complex-weight kernels (slower build).")] = False,
    local_version: Annotated[str, typer.Option(
        "--local-version", help="auto (e.g. +cu130torch2.10), none, or a label.")] = "auto",
    plan_only: Annotated[bool, typer.Option(
        "--plan", help="Show what would be built; compile nothing.")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Build even when a blocking doctor check fails.")] = False,
    cache: Annotated[bool | None, typer.Option(
        "--cache/--no-cache", help="sccache/ccache in front of nvcc [default: on when found].",
        show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    spec: Annotated[Path | None, typer.Option(
        "--spec", help="Build every cell of a team spec this machine can (see `matrix`).")] = None,
) -> None:
    """Build a mamba-ssm wheel: doctor, fetch, patch, build, metadata, record."""
    from mambawin.archs import parse_archs
    from mambawin.build import pipeline as core
    from mambawin.ui.progress import ConsoleReporter

    if spec is not None:
        from mambawin.cli.team import build_spec

        given = {"--ref": ref, "--repo": repo, "--source": source, "--arch": arch}
        build_spec(spec, jobs=jobs, force=force, as_json=as_json,
                   conflicts=[name for name, value in given.items() if value])
        return

    options = core.BuildOptions(
        repo=repo or core.DEFAULT_REPO, ref=ref, source=source,
        archs=parse_archs(arch) if arch is not None else (), out=out, jobs=jobs,
        nvcc_threads=nvcc_threads, keep_complex=keep_complex, local_version=local_version,
        force=force, cache=cache)
    reporter = ConsoleReporter()
    result = core.plan(options, reporter) if plan_only else core.build(options, reporter)
    if as_json:
        print_json(result.to_json())
    else:
        reporter.summary(result)


@command("fetch")
def fetch_command(
    ref: Annotated[str | None, typer.Option(
        "--ref", help="Tag, branch or commit.",
        show_default="the newest vX.Y.Z[.postN] tag")] = None,
    repo: Annotated[str | None, typer.Option(
        "--repo", help="Upstream URL, file:// URL or local path.", show_default="GitHub's")] = None,
    dest: Annotated[Path | None, typer.Option(
        "--dest", help="Checkout folder.",
        show_default="a short path in the mambawin cache")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Check out upstream mamba from a cached mirror (offline when the ref is cached)."""
    from mambawin.fetch import upstream
    result = upstream.checkout(repo or upstream.DEFAULT_REPO, ref, dest)
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True)
    if as_json:
        print_json(result.to_json())
        return
    console.print(f"mamba {result.version} ({result.tag or result.ref}, {result.commit})")
    typer.echo(str(result.path))
