"""How `mambawin doctor` shows a report to people: a table on stderr, then one verdict line."""

from __future__ import annotations

from rich.table import Table

from mambawin.doctor.checks import DoctorReport, Status, summary
from mambawin.ui.console import MARKS, console


def render_report(report: DoctorReport) -> None:
    """One row per check (✓ ⚠ ✗ -) with the fix under each line that is not ok, then the verdict."""
    table = Table(show_header=True, box=None, pad_edge=False)
    for column in ("", "check", "version", "found"):
        table.add_column(column, overflow="fold")
    for check in report.checks:
        table.add_row(MARKS[check.status], check.name, check.version, check.found)
        if check.hint and check.status is not Status.OK:
            table.add_row("", "", "", f"[dim]fix:[/] {check.hint}")
    console.print(table)
    colour = "green" if report.ready else "red"
    console.print(f"[{colour}]{summary(report)}[/]", soft_wrap=True)
