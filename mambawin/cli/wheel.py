"""`mambawin metadata`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mambawin.cli.app import command, examples, print_json
from mambawin.ui.console import console


@command(
    "metadata",
    epilog=examples(
        "mambawin metadata dist/mamba_ssm-2.2.6-cp312-cp312-linux_x86_64.whl",
        "mambawin metadata WHEEL --local-version cu129torch2.8 --drop triton --out wheelhouse",
    ),
)
def metadata_command(
    wheel: Annotated[Path, typer.Argument(help="The wheel to rewrite; it is never modified.")],
    drop: Annotated[
        list[str] | None, typer.Option("--drop", help="Also drop this requirement (repeatable).")
    ] = None,
    keep: Annotated[
        list[str] | None,
        typer.Option("--keep", help="Keep this requirement as upstream has it (repeatable)."),
    ] = None,
    local_version: Annotated[
        str | None,
        typer.Option(
            "--local-version",
            help="Local version label, e.g. cu129torch2.8; none drops the label.",
            show_default="the wheel's own",
        ),
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Folder for the new wheel.")] = Path(
        "wheelhouse"
    ),
    no_guard: Annotated[
        bool, typer.Option("--no-guard", help="Leave out (or remove) the torch/CUDA import guard.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Copy WHEEL with requirements for its platform, a local version, provenance, a torch guard."""
    from mambawin.wheel.metadata import requirement_plan
    from mambawin.wheel.provenance import read_provenance
    from mambawin.wheel.repack import rewrite_wheel

    plan = requirement_plan(wheel, drop=drop or (), keep=keep or ())
    written = rewrite_wheel(
        wheel,
        out,
        drop=drop or (),
        keep=keep or (),
        local_version=local_version,
        guard=not no_guard,
    )
    if as_json:
        provenance = read_provenance(written)  # shown as the wheel stores it
        print_json(
            {
                "wheel": str(written),
                "changes": [c.to_json() for c in plan.every],
                "dropped": [c.before for c in plan.changes if c.after is None],
                "provenance": dict(provenance.stored) if provenance else None,
            }
        )
        return
    for change in plan.every:
        before, after = change.before or "(none)", change.after or "(dropped)"
        console.print(f"Requires-Dist: {before} -> {after}: {change.reason}", markup=False)
    typer.echo(str(written))
