"""Views of a team matrix and of a `build --spec` run: the matrix and the plan are results
(stdout), their notes narration (stderr); the table after a run goes to stderr."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

from mambawin.ui.console import FAIL, OK, SKIP, WARN, console, out

if TYPE_CHECKING:
    from mambawin.team.matrix import Cell
    from mambawin.team.runner import CellResult, PlannedCell

STATUS_MARKS = {
    "todo": "[cyan]•[/] todo",
    "built": f"{OK} built",
    "indexed": f"{OK} indexed",
    "impossible": f"{FAIL} impossible",
}
OUTCOME_MARKS = {
    "built": f"{OK} built",
    "skipped": f"{SKIP} skipped",
    "failed": f"{FAIL} failed",
    "impossible": f"{WARN} impossible",
    "elsewhere": f"{SKIP} other platform",
}


def render_matrix(cells: Sequence[Cell]) -> None:
    """One row per cell: what it is, its status (why, if impossible) and the wheel it makes."""
    table = Table(title="matrix", box=None, pad_edge=False)
    for column in ("package", "py", "torch", "platform", "status"):
        table.add_column(column, no_wrap=True)
    table.add_column("wheel (or why not)", overflow="fold", ratio=1)
    for cell in cells:
        why = f"[dim]{cell.reason}[/]" if cell.reason else cell.wheel or "? (version unknown)"
        buildable = cell.stable and cell.status != "impossible"
        table.add_row(
            f"{cell.package.name} {cell.package.ref}",
            "any" if cell.stable else cell.python,
            f">={cell.torch_floor} {cell.torch.variant}"
            if buildable
            else f"{cell.torch.version} {cell.torch.variant}",
            cell.platform,
            STATUS_MARKS.get(cell.status, cell.status),
            why,
        )
    out.print(table)
    for note in dict.fromkeys(cell.note for cell in cells if cell.note):
        console.print(f"[dim]note: {note}[/]", soft_wrap=True)
    counts = {s: sum(c.status == s for c in cells) for s in STATUS_MARKS}
    out.print(", ".join(f"{n} {s}" for s, n in counts.items() if n) + f" of {len(cells)} cells")


def render_results(results: Sequence[CellResult]) -> None:
    """The summary after `build --spec`: one row per cell with its outcome and time."""
    table = Table(title="build --spec", box=None, pad_edge=False)
    for column in ("cell", "outcome", "time", "wheel or why"):
        table.add_column(column, overflow="fold")
    for result in results:
        detail = result.wheel.name if result.wheel else result.detail
        table.add_row(
            result.cell.id,
            OUTCOME_MARKS.get(result.outcome, result.outcome),
            f"{result.seconds:.0f}s" if result.seconds else "",
            detail,
        )
    console.print(table)


def render_plan(planned: Sequence[PlannedCell]) -> None:
    """`build --spec --plan`: per cell, the environment and the command a run would use."""
    for item in planned:
        if item.outcome != "build":
            mark = OUTCOME_MARKS.get(item.outcome, item.outcome)
            out.print(f"{mark} {item.cell.id}: {item.detail}", soft_wrap=True)
            continue
        out.print(f"[cyan]•[/] {item.cell.id}: environment {item.env}", soft_wrap=True)
        out.print("  " + " ".join(item.argv), markup=False, soft_wrap=True)
    count = sum(p.outcome == "build" for p in planned)
    out.print(f"{count} of {len(planned)} cells would be built; nothing was created")
