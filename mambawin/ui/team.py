"""Views of a team matrix and of a `build --spec` run: the matrix and the plan are results (on
stdout); a run's summary is narration after its progress (on stderr)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.markup import escape

from mambawin.ui.console import FAIL, OK, SKIP, WARN, Fitted, console, out

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
    """One row per cell: what it is, its status (why, if impossible) and the wheel it makes; on
    stdout, as the result it is (notes and counts too)."""
    rows = []
    for cell in cells:
        # Fitted's cells are rich markup: what the spec says (a ref, a reason quoting it) is
        # escaped, or `ref = "v2.2.6[red]x"` showed as `v2.2.6x`
        why = (
            f"[dim]{escape(cell.reason)}[/]" if cell.reason else cell.wheel or "? (version unknown)"
        )
        buildable = cell.stable and cell.status != "impossible"
        rows.append(
            (
                escape(f"{cell.package.name} {cell.package.ref}"),
                "any" if cell.stable else cell.python,
                f">={cell.torch_floor} {cell.torch.variant}"
                if buildable
                else f"{cell.torch.version} {cell.torch.variant}",
                cell.platform,
                STATUS_MARKS.get(cell.status, cell.status),
                why,
            )
        )
    columns = ("package", "py", "torch", "platform", "status", "wheel (or why not)")
    out.print(Fitted("matrix", columns, rows, box=False))
    for note in dict.fromkeys(cell.note for cell in cells if cell.note):
        out.print(f"[dim]note: {escape(note)}[/]")
    counts = {s: sum(c.status == s for c in cells) for s in STATUS_MARKS}
    out.print(", ".join(f"{n} {s}" for s, n in counts.items() if n) + f" of {len(cells)} cells")


def render_results(results: Sequence[CellResult]) -> None:
    """The summary after `build --spec`: one row per cell with its outcome and time (on stderr:
    under --json the cells' JSON is the result)."""
    rows = [
        (
            escape(result.cell.id),
            OUTCOME_MARKS.get(result.outcome, result.outcome),
            f"{result.seconds:.0f}s" if result.seconds else "",
            escape(result.wheel.name if result.wheel else result.detail),
        )
        for result in results
    ]
    console.print(
        Fitted("build --spec", ("cell", "outcome", "time", "wheel or why"), rows, box=False)
    )


def render_plan(planned: Sequence[PlannedCell]) -> None:
    """`build --spec --plan`: per cell, the environment and the command a run would use."""
    for item in planned:
        if item.outcome != "build":
            mark = OUTCOME_MARKS.get(item.outcome, item.outcome)
            out.print(f"{mark} {escape(item.cell.id)}: {escape(item.detail)}")
            continue
        out.print(f"[cyan]•[/] {escape(item.cell.id)}: environment {escape(str(item.env))}")
        out.print("  " + " ".join(item.argv), markup=False, soft_wrap=True)
    count = sum(p.outcome == "build" for p in planned)
    out.print(f"{count} of {len(planned)} cells would be built; nothing was created")
