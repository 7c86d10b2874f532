"""`mambawin ci github`: write a GitHub Actions workflow that builds the spec on Windows runners."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mambawin.cli.app import app, command
from mambawin.ui.console import console

ci_app = typer.Typer(no_args_is_help=True, help="Generate CI workflows that build the spec.")
app.add_typer(ci_app, name="ci")


@command("github", group=ci_app)
def github_command(
    spec: Annotated[Path, typer.Option(
        "--spec", help="The team spec (TOML); `mambawin init` writes one.")] = Path(
        "mambawin.toml"),
    out: Annotated[Path, typer.Option("--out", help="The workflow file to write.")] = Path(
        ".github/workflows/mamba-wheels.yml"),
    publish: Annotated[str, typer.Option(
        "--publish", help="Where the index goes: pages, release or none.")] = "pages",
    runner: Annotated[str, typer.Option(
        "--runner", help="The Windows runner label of the build jobs.")] = "windows-2022",
    mambawin_req: Annotated[str | None, typer.Option(
        "--mambawin", help="pip requirement the jobs install [default: this mambawin's version]."
    )] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace --out even when mambawin did not write it.")] = False,
) -> None:
    """Write a workflow: one Windows job per cell, then an index published to Pages or a release."""
    from mambawin.team import github
    from mambawin.team.matrix import expand
    from mambawin.team.spec import load_spec

    loaded = load_spec(spec)
    options = github.WorkflowOptions(spec_path=_repo_relative(spec), publish=publish,
                                     runner=runner,
                                     mambawin=mambawin_req or github.WorkflowOptions.mambawin)
    cells = expand(loaded)
    written = github.write_workflow(github.render(loaded, cells, options), out, force)
    count = len(github.buildable(cells))
    console.print(f"wrote {written}: {count} build jobs; commit it and run it from the Actions tab")
    typer.echo(str(written))


def _repo_relative(spec: Path) -> str:
    """The spec's path as a job sees it: relative to the repository root (the working dir)."""
    try:
        return spec.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return spec.as_posix()
