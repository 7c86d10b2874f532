"""`mambawin ci github`: write a GitHub Actions workflow that builds the spec on Windows runners."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from mambawin.cli.app import command, examples, group
from mambawin.cli.options import SourceFromOption
from mambawin.fetch.sdist import OFFLINE_ENV, offline
from mambawin.team.github_cross import BUILD_ON
from mambawin.team.github_publish import PUBLISH
from mambawin.ui.console import console

ci_app = group("ci", "Generate CI workflows that build the spec.")


@command(
    "github",
    group=ci_app,
    epilog=examples(
        "mambawin ci github",
        "mambawin ci github --spec mambawin.toml --publish release",
        "mambawin ci github --build-on linux --out .github/workflows/wheels.yml",
    ),
)
def github_command(
    spec: Annotated[
        Path, typer.Option("--spec", help="The team spec (TOML); `mambawin init` writes one.")
    ] = Path("mambawin.toml"),
    out: Annotated[Path, typer.Option("--out", help="The workflow file to write.")] = Path(
        ".github/workflows/mamba-wheels.yml"
    ),
    publish: Annotated[
        str,
        typer.Option(
            "--publish",
            help="Where the index goes: pages, release or none.",
            metavar="|".join(PUBLISH),
        ),
    ] = "pages",
    runner: Annotated[
        str,
        typer.Option(
            "--runner",
            help="The Windows runner label: the build jobs', or with --build-on linux the check's.",
        ),
    ] = "windows-2022",
    build_on: Annotated[
        str,
        typer.Option(
            "--build-on",
            metavar="|".join(BUILD_ON),
            help="windows, or linux: cross-build the stable-ABI wheels on Linux runners under "
            'wine and check them on a Windows runner (a spec with abi = "stable").',
        ),
    ] = "windows",
    mambawin_req: Annotated[
        str | None,
        typer.Option(
            "--mambawin",
            help="pip requirement the jobs install.",
            show_default="this version's wheel in the spec's index, else the git source "
            "this mambawin came from, else its released version",
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check/--no-check",
            help="Ask pip (a dry run) that the --mambawin requirement resolves.",
        ),
    ] = True,
    force: Annotated[
        bool, typer.Option("--force", help="Replace --out even when mambawin did not write it.")
    ] = False,
    source_from: SourceFromOption = None,
) -> None:
    """Write a workflow: one Windows job per cell, then an index published to Pages or a release."""
    from mambawin.fetch.sdist import source_choice
    from mambawin.team import github, install_source
    from mambawin.team.matrix import expand
    from mambawin.team.spec_reader import load_spec

    asked = install_source.given(mambawin_req) if mambawin_req is not None else None
    loaded = load_spec(spec)
    source = asked or install_source.default_source(index=loaded.index)
    options = github.WorkflowOptions(
        spec_path=_repo_relative(spec),
        publish=publish,
        runner=runner,
        mambawin=source.requirement,
        build_on=build_on,
        source_from=source_choice(source_from),
    )
    cells = expand(loaded)
    text = github.render(loaded, cells, options)
    warning = ""
    if check and offline():
        warning = f"{OFFLINE_ENV} is set: not checked that {source.requirement} resolves"
    elif check:
        warning = install_source.checked(source, install_source.pip_dry_run)
    written = github.write_workflow(text, out, force)
    chosen = github.buildable(cells)
    for note in dict.fromkeys(c.note for c in chosen if "merged" in c.note):
        console.print(f"[dim]note: {escape(note)}[/]")
    for line in github.left_out(cells):  # a package may lose every cell: never without a word
        console.print(f"note: {line}", markup=False)
    if warning:
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    console.print(
        f"wrote {written}: {github.jobs_summary(loaded, options, chosen)}, installing "
        f"{source.requirement}; commit it and run it from the Actions tab",
        markup=False,  # wrapped between words at the width: the path and the requirement whole
    )
    typer.echo(str(written))


def _repo_relative(spec: Path) -> str:
    """The spec's path as a job sees it: relative to the repository root (the working dir)."""
    try:
        return spec.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return spec.as_posix()
