"""`mambawin build` and `mambawin fetch`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from mambawin.builder.backends import help_of
from mambawin.builder.request import set_fields
from mambawin.cli.app import command, examples, print_json
from mambawin.cli.options import (
    TEAM,
    PackageOption,
    RefOption,
    RepoOption,
    SourceFromOption,
    request_parameters,
    split_params,
)
from mambawin.errors import UsageError
from mambawin.ui.console import console

if TYPE_CHECKING:
    from mambawin.builder.backends import Outcome
    from mambawin.builder.request import BuildRequest
    from mambawin.ui.progress import ConsoleReporter


@command(
    "build",
    epilog=examples(
        "mambawin build --with causal-conv1d",
        "mambawin build --ref v2.2.6 --with causal-conv1d==v1.5.2 --arch 86 --out wheelhouse",
        "mambawin build --abi stable --platform win_amd64 --plan",
    ),
)
@request_parameters("build")
def build_command(
    ctx: typer.Context,
    spec: Annotated[
        Path | None,
        typer.Option(
            "--spec",
            rich_help_panel=TEAM,
            help="Build every cell of a team spec this machine can (see `matrix`).",
        ),
    ] = None,
    **options: Any,
) -> None:
    """Build a mamba-ssm (or causal-conv1d) wheel: doctor, fetch, patch, build, metadata, record.

    --plan says what a build would do and compiles nothing."""
    from mambawin.builder.faces import from_params
    from mambawin.builder.request import Tools
    from mambawin.dispatch import run

    params, plan_only, as_json = split_params(options)
    request = from_params("build", params)
    if spec is not None:
        from mambawin.cli.team import build_spec

        refuse_for_spec(request)
        build_spec(
            spec, jobs=request.jobs, force=request.force, as_json=as_json, plan_only=plan_only
        )
        return
    from mambawin.ui.progress import ConsoleReporter

    reporter = ConsoleReporter()  # narration on stderr, as every backend's; results on stdout
    # The doctor a caller passes in (`invoke(app, args, obj={"doctor": ...})`), else the probes.
    doctor = (ctx.obj or {}).get("doctor") if isinstance(ctx.obj, dict) else None
    outcome = run(request, plan_only=plan_only, tools=Tools(doctor=doctor), reporter=reporter)
    show(outcome, reporter=reporter, as_json=as_json)


def show(outcome: Outcome, *, reporter: ConsoleReporter, as_json: bool) -> None:
    """A backend's outcome on stdout: its JSON document, or each result's summary."""
    if as_json:
        print_json(outcome.to_json())
        return
    for result in outcome.results:
        reporter.summary(result)
    for note in outcome.notes:
        reporter.note(note)


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


def refuse_for_spec(request: BuildRequest) -> None:
    """--spec sets what each cell builds: refuse every build option it does not apply, named."""
    not_applied = [o.flag for o in set_fields(request) if not o.with_spec]
    if not_applied:
        msg = (
            f"--spec builds each cell as the spec says: drop {', '.join(not_applied)} (the "
            "spec's [options] set what a cell builds), or build one wheel without --spec"
        )
        raise UsageError(msg)
