"""`mambawin toolchain windows`: the Windows compilers on Linux, set up into mambawin's cache."""

from __future__ import annotations

from typing import Annotated

import typer

from mambawin.cli.app import app, command, print_json
from mambawin.ui.console import console

toolchain_app = typer.Typer(no_args_is_help=True, help="Toolchains mambawin sets up itself.")
app.add_typer(toolchain_app, name="toolchain")


@command("windows", group=toolchain_app)
def windows_command(
    setup: Annotated[
        bool, typer.Option("--setup", help="Fetch MSVC, CUDA and torch headers with pip.")
    ] = False,
    root: Annotated[
        str | None,
        typer.Option(
            "--root",
            help="Where it lives: a new or empty folder, or one --setup made.",
            show_default="mambawin's cache",
        ),
    ] = None,
    cuda: Annotated[str, typer.Option("--cuda", help="CUDA version of nvcc.exe.")] = "13.0",
    torch: Annotated[str, typer.Option("--torch", help="torch whose headers to use.")] = "2.11.0",
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Say whether cl.exe and the Windows nvcc can run here under wine; --setup fetches them."""
    from mambawin.errors import ToolchainError
    from mambawin.toolchain import wine

    where = wine.root_option(root)
    if setup:
        result = wine.setup(where, cuda=cuda, torch=torch)
        missing, launcher = list(result.missing), result.wine
    else:
        launcher = None
        missing = wine.missing_parts(wine.toolchain_at(where))
    for line in missing[1:]:
        console.print(f"✗ {line}", soft_wrap=True, markup=False)
    if missing:  # one line (and under --json one document) from the command decorator
        raise ToolchainError(f"the Windows toolchain in {where} is not ready: {missing[0]}")
    if as_json:
        print_json({"root": str(where), "ready": True, "wine": launcher})
        return
    console.print(f"✓ the Windows toolchain is ready in {where} ({launcher or 'wine'})")
