"""How `mambawin doctor` shows a report to people: a table, then one verdict line, on stdout.

The report is the result (`mambawin doctor > report.txt`), so it goes to stdout.
"""

from __future__ import annotations

from rich.table import Table

from mambawin.doctor.checks import DoctorReport, summary
from mambawin.stage import Status
from mambawin.ui.console import MARKS, out


def render_report(report: DoctorReport) -> None:
    """One row per check (✓ ⚠ ✗ -) with the fix under each line that is not ok, then the verdict."""
    table = Table(show_header=True, box=None, pad_edge=False)
    for column in ("", "check", "version", "found"):
        table.add_column(column, overflow="fold")
    for check in report.checks:
        table.add_row(MARKS[check.status], check.name, check.version, check.found)
        if check.hint and check.status is not Status.OK:
            table.add_row("", "", "", f"[dim]fix:[/] {check.hint}")
    out.print(table)
    colour = "green" if report.ready else "red"
    out.print(f"[{colour}]{summary(report)}[/]", soft_wrap=True)
