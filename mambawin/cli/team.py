"""`mambawin init`, `mambawin matrix`, `mambawin index` and the `build --spec` entry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from mambawin.cli.app import command, examples
from mambawin.ui.console import console

SpecOption = Annotated[
    Path, typer.Option("--spec", help="The team spec (TOML); `mambawin init` writes one.")
]


@command("init", epilog=examples("mambawin init", "mambawin init --out team/mambawin.toml"))
def init_command(
    out: Annotated[Path, typer.Option("--out", help="Where to write the example spec.")] = Path(
        "mambawin.toml"
    ),
) -> None:
    """Write a commented example team spec (never replaces an existing file)."""
    from mambawin.team.example import write_example

    written = write_example(out)
    console.print(
        f"wrote {written}: edit it, then `mambawin matrix --spec {written}`", markup=False
    )
    typer.echo(str(written))


@command(
    "matrix",
    cache=True,
    epilog=examples("mambawin matrix", "mambawin matrix --spec team/mambawin.toml --json"),
)
def matrix_command(
    spec: SpecOption = Path("mambawin.toml"),
    wheelhouse: Annotated[
        Path | None,
        typer.Option(
            "--wheelhouse", help="Look for wheels here.", show_default="the spec's wheelhouse"
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the cells as JSON.")] = False,
) -> None:
    """Expand the spec into cells: the exact wheel each makes, what exists, what cannot be built."""
    from dataclasses import replace

    from mambawin.team.matrix import expand
    from mambawin.team.spec_reader import load_spec
    from mambawin.ui.team import render_matrix

    loaded = load_spec(spec)
    if wheelhouse is not None:
        loaded = replace(loaded, wheelhouse=wheelhouse)
    cells = expand(loaded)
    if as_json:
        typer.echo(json.dumps([cell.to_json() for cell in cells], indent=2))
        return
    render_matrix(cells)


@command(
    "index",
    epilog=examples(
        "mambawin index wheelhouse --out site",
        "mambawin index wheelhouse --out site --spec mambawin.toml --title 'Our wheels'",
    ),
)
def index_command(
    # readable=False: click's own check would call an unreadable folder bad usage (exit 2); the
    # index names it as the OS refusing (exit 10).
    wheelhouse: Annotated[
        Path, typer.Argument(help="Folder of wheels to add to the index.", readable=False)
    ],
    out: Annotated[
        Path, typer.Option("--out", help="The index folder (created or updated).", readable=False)
    ],
    title: Annotated[
        str | None,
        typer.Option(
            "--title",
            help="Title of the index page (kept for later runs).",
            show_default="the index's own, else 'mambawin wheels'",
        ),
    ] = None,
    torch: Annotated[
        list[str] | None,
        typer.Option(
            "--torch",
            help="Also make the per-torch folder of this torch (X.Y, repeatable), e.g. a torch "
            "newer than the wheels name, for its users of the stable wheels.",
        ),
    ] = None,
    spec: Annotated[
        Path | None,
        typer.Option(
            "--spec", help="Also make per-torch folders for the spec's torches.", readable=False
        ),
    ] = None,
    attestation: Annotated[
        str | None,
        typer.Option(
            "--attestation",
            help="The https address of the wheels' build provenance attestation: the page links "
            "it beside each wheel this run adds.",
        ),
    ] = None,
    with_mambawin: Annotated[
        Path | None,
        typer.Option(
            "--with-mambawin",
            help="Also publish this mambawin wheel (`python -m pip wheel --no-deps -w dist "
            "<mambawin source>` writes one) in simple/mambawin/: `ci github` then installs "
            "mambawin from this index. The wheelhouse may be empty.",
            readable=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Write (or update) a static PEP 503 index of WHEELHOUSE in OUT, per CUDA variant and torch."""
    from rich.markup import escape

    from mambawin.index.serve import torch_minors
    from mambawin.index.simple import build_index
    from mambawin.team.spec_reader import load_spec

    named = [*(torch or ()), *(t.version for t in (load_spec(spec).torches if spec else ()))]
    result = build_index(
        wheelhouse,
        out,
        title=title,
        torches=torch_minors(named),
        attestation=attestation,
        own_wheel=with_mambawin,
    )
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
        return
    console.print(
        f"{len(result.added)} wheel(s) added, {len(result.wheels)} in the index; "
        f"variants: {', '.join(result.variants) or 'none'}"
    )
    for wheel in result.wheels:
        if wheel.verify_ignored:
            note = escape(f"{wheel.file}: {wheel.verify_ignored}")
            console.print(f"[yellow]not verified[/]: {note}")
    for root in [*result.to_json()["simple"], *result.to_json()["per_torch"]]:
        typer.echo(root)


def build_spec(
    spec: Path,
    *,
    jobs: int | None,
    force: bool,
    as_json: bool,
    plan_only: bool = False,
) -> None:
    """`mambawin build --spec F`: every cell this machine can build; exit 6 if any failed."""
    from mambawin.errors import BuildError
    from mambawin.team.runner import FAILED, RunOptions, plan_spec, run_spec
    from mambawin.team.spec_reader import load_spec
    from mambawin.ui.progress import ConsoleReporter
    from mambawin.ui.team import render_plan, render_results

    if plan_only:  # nothing is created, installed or compiled
        planned = plan_spec(load_spec(spec), RunOptions(jobs=jobs, force=force))
        if as_json:
            typer.echo(json.dumps([p.to_json() for p in planned], indent=2))
        else:
            render_plan(planned)
        return
    results = run_spec(
        load_spec(spec), RunOptions(jobs=jobs, force=force), reporter=ConsoleReporter()
    )
    render_results(results)
    if as_json:
        typer.echo(json.dumps([r.to_json() for r in results], indent=2))
    failed = [r for r in results if r.outcome == FAILED]
    if failed:
        msg = (
            f"{len(failed)} of {len(results)} cells failed (first: {failed[0].cell.id}: "
            f"{failed[0].detail}); logs: {failed[0].log or 'none'}"
        )
        raise BuildError(msg)
