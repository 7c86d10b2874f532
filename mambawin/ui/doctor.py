"""How `mambawin doctor` shows a report to people: a table, then one verdict line, on stdout.

The report is the result (`mambawin doctor > report.txt`), so it goes to stdout.
"""

from __future__ import annotations

from rich.markup import escape
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
        # cells are rich markup: a path holding `[red]` (a --windows-root) is escaped to show
        found, version = escape(check.found), escape(check.version)
        table.add_row(MARKS[check.status], escape(check.name), version, found)
        if check.hint and check.status is not Status.OK:
            table.add_row("", "", "", f"[dim]fix:[/] {escape(check.hint)}")
    out.print(table)
    colour = "green" if report.ready else "red"
    out.print(f"[{colour}]{summary(report)}[/]", soft_wrap=True)
