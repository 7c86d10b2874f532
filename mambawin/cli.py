"""The typer layer: parse options, call one core function, map errors to exit codes.

Core modules never import typer or print results; this file renders what they return.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from mambawin import __version__
from mambawin.errors import MambawinError
from mambawin.ui import console

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Build, check and verify mamba-ssm wheels on Windows (and Linux).",
)

_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mambawin {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and debug logs.")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    _state["debug"] = debug
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


F = TypeVar("F", bound=Callable[..., Any])


def command(name: str | None = None, **kwargs: Any) -> Callable[[F], F]:
    """Register a command whose MambawinError becomes one red line and that error's exit code."""

    def register(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kw: Any) -> Any:
            try:
                return fn(*args, **kw)
            except MambawinError as exc:
                if _state["debug"]:
                    console.print_exception()
                console.print(f"[red]error:[/] {exc}", soft_wrap=True)
                raise typer.Exit(exc.exit_code) from None

        app.command(name, **kwargs)(wrapper)
        return fn

    return register


# ---- commands are added below, one block per command; keep each one thin -----------------------


@command("doctor")
def doctor_command(
    arch: Annotated[str | None, typer.Option(
        "--arch", help="CUDA archs you will build for, e.g. '86;89' (checked by nvcc).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check torch, CUDA, the host compiler, build tools, GPU and disk; say how to fix each."""
    from mambawin.archs import parse_archs
    from mambawin.doctor_view import render_report
    from mambawin.env import DoctorOptions, run_checks

    options = DoctorOptions(archs=parse_archs(arch) if arch else ())
    report = run_checks(options.archs, options.build_dir)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    else:
        render_report(report)
    if not report.ready:
        raise typer.Exit(1)


@command("build")
def build_command(
    ref: Annotated[str | None, typer.Option(
        "--ref", help="Upstream tag, branch or commit [default: the newest release].")] = None,
    repo: Annotated[str | None, typer.Option(
        "--repo", help="Upstream URL or local path [default: state-spaces/mamba].")] = None,
    source: Annotated[Path | None, typer.Option(
        "--source", help="Build this existing source folder (copied, never edited).")] = None,
    arch: Annotated[str | None, typer.Option(
        "--arch", help="CUDA archs, e.g. '86', '86;89' or '8.9+PTX' [default: this GPU].")] = None,
    out: Annotated[Path, typer.Option("--out", help="Folder for the finished wheel.")] = Path(
        "dist"),
    jobs: Annotated[int | None, typer.Option(
        "--jobs", min=1, help="Parallel compile jobs, MAX_JOBS [default: doctor's].")] = None,
    nvcc_threads: Annotated[int | None, typer.Option(
        "--nvcc-threads", min=1, help="nvcc --threads per job [default: #archs, max 4].")] = None,
    keep_complex: Annotated[bool, typer.Option(
        "--keep-complex", help="Keep the complex-weight kernels (slower build).")] = False,
    local_version: Annotated[str, typer.Option(
        "--local-version", help="auto (e.g. +cu130torch2.10), none, or a label.")] = "auto",
    plan_only: Annotated[bool, typer.Option(
        "--plan", help="Show what would be built; compile nothing.")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Build even when a blocking doctor check fails.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Build a mamba-ssm wheel: doctor, fetch, patch, build, metadata, record."""
    from mambawin import build as core
    from mambawin.archs import parse_archs
    from mambawin.progress import ConsoleReporter

    options = core.BuildOptions(
        repo=repo or core.DEFAULT_REPO, ref=ref, source=source,
        archs=parse_archs(arch) if arch else (), out=out, jobs=jobs, nvcc_threads=nvcc_threads,
        keep_complex=keep_complex, local_version=local_version, force=force)
    reporter = ConsoleReporter()
    result = core.plan(options, reporter) if plan_only else core.build(options, reporter)
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        reporter.summary(result)


@command("fetch")
def fetch_command(
    ref: Annotated[str | None, typer.Option(
        "--ref", help="Tag, branch or commit [default: the newest vX.Y.Z[.postN] tag]")] = None,
    repo: Annotated[str | None, typer.Option(
        "--repo", help="Upstream URL, file:// URL or local path [default: GitHub's]")] = None,
    dest: Annotated[Path | None, typer.Option(
        "--dest", help="Checkout folder (default: a short path in the mambawin cache).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Check out upstream mamba from a cached mirror (offline when the ref is cached)."""
    from mambawin import upstream

    result = upstream.checkout(repo or upstream.DEFAULT_REPO, ref, dest)
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True)
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
        return
    console.print(f"mamba {result.version} ({result.tag or result.ref}, {result.commit})")
    typer.echo(str(result.path))


def _ids(values: list[str] | None) -> tuple[str, ...]:
    """Patch ids from repeatable and comma-separated --only/--skip values."""
    return tuple(i.strip() for v in values or () for i in v.split(",") if i.strip())


@command("patch")
def patch_command(
    source: Annotated[Path, typer.Argument(help="Root of a mamba checkout (`mambawin fetch`).")],
    arch: Annotated[str | None, typer.Option(
        "--arch", help="CUDA archs to bake into setup.py, e.g. '86;89' or '8.9+PTX'.")] = None,
    nvcc_threads: Annotated[int | None, typer.Option(
        "--nvcc-threads", min=1, help="Default of NVCC_THREADS in the patched setup.py.")] = None,
    keep_complex: Annotated[bool, typer.Option(
        "--keep-complex", help="Keep the complex-weight kernels.")] = False,
    only: Annotated[list[str] | None, typer.Option(
        "--only", help="Apply only this patch id (repeatable).")] = None,
    skip: Annotated[list[str] | None, typer.Option(
        "--skip", help="Do not apply this patch id (repeatable).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the unified diff and write nothing.")] = False,
    export: Annotated[Path | None, typer.Option(
        "--export", help="Also write NNNN-<id>.patch files for `git apply` here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Apply the versioned Windows patch set to SOURCE: all patches or none."""
    from mambawin.archs import parse_archs
    from mambawin.patches.base import PatchOptions
    from mambawin.patches.engine import apply_patches, export_patches

    options = PatchOptions(parse_archs(arch) if arch else (), nvcc_threads, keep_complex)
    report = apply_patches(source, options, only=_ids(only), skip=_ids(skip), dry_run=dry_run)
    exported = export_patches(report, export) if export is not None else []
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    elif dry_run:
        typer.echo(report.diff, nl=False)
    title = (f"mamba {report.version} {(report.commit or 'not a git checkout')[:10]}"
             + (" (dry run: nothing written)" if dry_run else ""))
    _print_table(title, ("patch", "status", "files / reason"),
                 [(r.id, _STATUS_STYLE[r.status].format(r.status), ", ".join(r.files) or r.reason)
                  for r in report.results])
    for path in exported:
        console.print(f"exported {path}")


_STATUS_STYLE = {"applied": "[green]{}[/]", "already-applied": "[cyan]{}[/]",
                 "skipped": "[yellow]{}[/]", "not-applicable": "[dim]{}[/]"}


def _print_table(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """A rich table on stderr (narration); --json output is the machine-readable result."""
    from rich.table import Table

    table = Table(title=title, show_lines=len(columns) > 3)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    console.print(table)


@command("patches")
def patches_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the catalogue as JSON.")] = False,
) -> None:
    """List the patch catalogue: what each patch fixes, for which upstream versions, and why."""
    from mambawin.patches.registry import PATCHES

    rows = [{"id": p.id, "summary": p.summary, "prevents": p.prevents,
             "versions": str(p.versions), "why": p.why, "files": list(p.files)} for p in PATCHES]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    columns = ("id", "summary", "prevents", "versions", "why")
    _print_table("mambawin patch catalogue (apply order)", columns,
                 [tuple(str(row[c]) for c in columns) for row in rows])


@command("metadata")
def metadata_command(
    wheel: Annotated[Path, typer.Argument(help="The wheel to rewrite; it is never modified.")],
    drop: Annotated[list[str] | None, typer.Option(
        "--drop", help="Also drop this requirement (repeatable); triton always goes.")] = None,
    local_version: Annotated[str | None, typer.Option(
        "--local-version", help="Local version label, e.g. cu129torch2.8.")] = None,
    out: Annotated[Path, typer.Option("--out", help="Folder for the new wheel.")] = Path(
        "wheelhouse"),
    no_guard: Annotated[bool, typer.Option(
        "--no-guard", help="Leave out (or remove) the torch/CUDA import guard.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Write a copy of WHEEL without triton, with a local version, provenance and a torch guard."""
    from mambawin import metadata

    names = (*metadata.DEFAULT_DROP, *(drop or ()))
    canonical = {metadata.requirement_name(name) for name in names}
    dropped = [r for r in metadata.requirements(wheel) if metadata.requirement_name(r) in canonical]
    written = metadata.rewrite_wheel(wheel, out, drop=names, local_version=local_version,
                                     guard=not no_guard)
    if as_json:
        typer.echo(json.dumps({"wheel": str(written), "dropped": dropped,
                               "provenance": metadata.read_provenance(written)}, indent=2))
        return
    for requirement in dropped:
        console.print(f"dropped Requires-Dist: {requirement}")
    typer.echo(str(written))


@command("verify")
def verify_command(
    wheel: Annotated[Path | None, typer.Argument(
        help="The wheel to verify (installed into a throwaway venv).")] = None,
    installed: Annotated[bool, typer.Option(
        "--installed", help="Verify the mamba-ssm installed in this environment.")] = False,
    bench: Annotated[bool, typer.Option("--bench", help="Also benchmark the kernel.")] = False,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed for the smoke inputs.")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Fewer smoke cases.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Check a wheel: tags/METADATA/GPU code, fit to this GPU and torch, install, GPU smoke."""
    from mambawin import verify as core
    from mambawin.errors import VerifyError
    from mambawin.verifyui import render_step, render_verify

    options = core.VerifyOptions(
        wheel=wheel, installed=installed, bench=bench, seed=seed,
        smoke_args=("--seqlens", "1,127,2049", "--per-length", "1") if quick else (),
        bench_args=("--quick",) if quick else ())
    report = core.verify(options, on_step=render_step)
    render_verify(report)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    if not report.passed:
        raise VerifyError(report.summary())


@command("bench")
def bench_command(
    wheel: Annotated[Path | None, typer.Argument(help="The wheel to benchmark.")] = None,
    installed: Annotated[bool, typer.Option(
        "--installed", help="Benchmark the mamba-ssm installed here.")] = False,
    plot: Annotated[Path | None, typer.Option("--plot", help="Write a PNG plot here.")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="One small shape only.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Time the compiled selective scan against an eager torch scan on this GPU."""
    from mambawin import bench as core
    from mambawin.verifyui import bench_table

    report = core.bench(core.BenchOptions(wheel=wheel, installed=installed, quick=quick))
    console.print(bench_table(report))
    if plot is not None and core.plot(report, plot) is None:
        console.print("[yellow]matplotlib is not installed: no plot written[/]")
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":  # `python -m mambawin.cli ...`
    main()
