"""`mambawin patch` and `mambawin patches`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mambawin.abi import ABIS
from mambawin.cli.app import command, examples, print_json, print_table, split_values
from mambawin.packages import PACKAGE_NAMES
from mambawin.ui.console import console

if TYPE_CHECKING:
    from mambawin.packages import Package
    from mambawin.patch.record import PatchReport


PACKAGE_HELP = "mamba-ssm or causal-conv1d."
PACKAGE_CHOICES = "|".join(PACKAGE_NAMES)


@command(
    "patch",
    epilog=examples(
        "mambawin patch src/mamba --dry-run > windows.patch",
        "mambawin patch src/mamba --arch 86 --export patches/",
    ),
)
def patch_command(
    source: Annotated[
        Path,
        typer.Argument(help="Root of a mamba-ssm or causal-conv1d checkout (`mambawin fetch`)."),
    ],
    arch: Annotated[
        str | None,
        typer.Option("--arch", help="CUDA archs to bake into setup.py, e.g. '86;89' or '8.9+PTX'."),
    ] = None,
    nvcc_threads: Annotated[
        int | None,
        typer.Option(
            "--nvcc-threads", min=1, help="Default of NVCC_THREADS in the patched setup.py."
        ),
    ] = None,
    keep_complex: Annotated[
        bool, typer.Option("--keep-complex", help="Keep the complex-weight kernels.")
    ] = False,
    abi: Annotated[
        str,
        typer.Option(
            "--abi", help="torch, or stable: port to torch's stable ABI.", metavar="|".join(ABIS)
        ),
    ] = "torch",
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Apply only this patch id (repeatable).")
    ] = None,
    skip: Annotated[
        list[str] | None, typer.Option("--skip", help="Do not apply this patch id (repeatable).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the unified diff and write nothing.")
    ] = False,
    export: Annotated[
        Path | None,
        typer.Option("--export", help="Also write NNNN-<id>.patch files for `git apply` here."),
    ] = None,
    package: Annotated[
        str | None,
        typer.Option(
            "--package", help=PACKAGE_HELP, metavar=PACKAGE_CHOICES, show_default="what SOURCE is"
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Apply the versioned Windows patch set to SOURCE: all patches or none."""
    from mambawin.abi import parse_abi
    from mambawin.archs import parse_archs
    from mambawin.packages import get_package
    from mambawin.patch.base import PatchOptions
    from mambawin.patch.engine import apply_patches
    from mambawin.patch.export import check_export_dest, export_patches

    archs = parse_archs(arch) if arch is not None else ()
    options = PatchOptions(archs, nvcc_threads, keep_complex, parse_abi(abi))
    if export is not None:
        check_export_dest(export)  # before anything is patched
    report = apply_patches(
        source,
        options,
        only=split_values(only),
        skip=split_values(skip),
        dry_run=dry_run,
        package=get_package(package) if package else None,
    )
    exported = export_patches(report, export) if export is not None else []
    for path in exported:
        console.print(f"exported {path}", markup=False)
    if as_json:
        print_json(report.to_json())
        return
    if dry_run:  # the diff is the result: `mambawin patch --dry-run SRC > windows.patch`
        typer.echo(report.diff, nl=False)
    # Under --dry-run the diff owns stdout, so the table is narration there.
    print_table(
        _title(report, dry_run),
        ("patch", "status", "files / reason"),
        _rows(report),
        to=console if dry_run else None,
    )


def _title(report: PatchReport, dry_run: bool) -> str:
    return f"{report.package} {report.version} {(report.commit or 'not a git checkout')[:10]}" + (
        " (dry run: nothing written)" if dry_run else ""
    )


def _rows(report: PatchReport) -> list[tuple[str, ...]]:
    return [
        (r.id, _STATUS_STYLE[r.status].format(r.status), ", ".join(r.files) or r.reason)
        for r in report.results
    ]


_STATUS_STYLE = {
    "applied": "[green]{}[/]",
    "already-applied": "[cyan]{}[/]",
    "skipped": "[yellow]{}[/]",
    "not-applicable": "[dim]{}[/]",
}


@command(
    "patches",
    epilog=examples("mambawin patches", "mambawin patches --package causal-conv1d --json"),
)
def patches_command(
    package: Annotated[
        str | None,
        typer.Option(
            "--package",
            help=PACKAGE_HELP,
            metavar=PACKAGE_CHOICES,
            show_default="mamba-ssm; both with --check-new",
        ),
    ] = None,
    check_new: Annotated[
        bool,
        typer.Option(
            "--check-new",
            help="List the releases on the package index and in the cached git mirror that the "
            "patch set is not proven on (exit code 12 when there are any).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the catalogue as JSON.")] = False,
) -> None:
    """List the patch catalogue: what each patch fixes, for which upstream versions, and why."""
    from mambawin.packages import MAMBA, PACKAGES, get_package
    from mambawin.patch.registry import patches_for

    if check_new:
        _check_new(PACKAGES if package is None else (get_package(package),), as_json=as_json)
        return
    chosen = get_package(package) if package is not None else MAMBA
    rows = [
        {
            "id": p.id,
            "summary": p.summary,
            "prevents": p.prevents,
            "versions": str(p.versions),
            "why": p.why,
            "files": list(p.files),
        }
        for p in patches_for(chosen)
    ]
    if as_json:
        print_json(rows)
        return
    columns = ("id", "summary", "prevents", "versions", "why")
    print_table(
        f"mambawin patch catalogue for {chosen.name} (apply order)",
        columns,
        [tuple(str(row[c]) for c in columns) for row in rows],
    )


def _check_new(packages: tuple[Package, ...], *, as_json: bool) -> None:
    """`patches --check-new`: one line per unproven release on stdout, notes on stderr, exit
    code 12 (UnprovenReleases) when there is one."""
    from mambawin.errors import UnprovenReleases
    from mambawin.patch.proven import check_new

    found = check_new(packages)
    for note in found.notes:
        console.print(f"note: {note}", markup=False)  # wrapped between words at the width
    failed = UnprovenReleases.exit_code if found.releases else 0
    if as_json:
        data = found.to_json()
        if failed:  # the keys every error document has, beside the result
            count = len(found.releases)
            data |= {"error": f"{count} release(s) not proven", "exit_code": failed}
        print_json(data)
    else:
        for release in found.releases:
            typer.echo(release.line())
        if not found.releases:
            proven = ", ".join(f"{k} {v}" for k, v in found.proven.items())
            console.print(f"every release seen is proven (through {proven})", markup=False)
    if failed:
        raise typer.Exit(failed)
