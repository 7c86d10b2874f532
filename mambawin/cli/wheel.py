"""`mambawin metadata`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mambawin.cli.app import command, print_json
from mambawin.ui.console import console


@command("metadata")
def metadata_command(
    wheel: Annotated[Path, typer.Argument(help="The wheel to rewrite; it is never modified.")],
    drop: Annotated[list[str] | None, typer.Option(
        "--drop", help="Also drop this requirement (repeatable); triton always goes.")] = None,
    local_version: Annotated[str | None, typer.Option(
        "--local-version", help="Local version label, e.g. cu129torch2.8; none drops the label.",
        show_default="the wheel's own")] = None,
    out: Annotated[Path, typer.Option("--out", help="Folder for the new wheel.")] = Path(
        "wheelhouse"),
    no_guard: Annotated[bool, typer.Option(
        "--no-guard", help="Leave out (or remove) the torch/CUDA import guard.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Write a copy of WHEEL without triton, with a local version, provenance and a torch guard."""
    from mambawin.wheel import metadata
    names = (*metadata.DEFAULT_DROP, *(drop or ()))
    canonical = {metadata.requirement_name(name) for name in names}
    dropped = [r for r in metadata.requirements(wheel) if metadata.requirement_name(r) in canonical]
    written = metadata.rewrite_wheel(wheel, out, drop=names, local_version=local_version,
                                     guard=not no_guard)
    if as_json:
        print_json({"wheel": str(written), "dropped": dropped,
                    "provenance": metadata.read_provenance(written)})
        return
    for requirement in dropped:
        console.print(f"dropped Requires-Dist: {requirement}")
    typer.echo(str(written))
