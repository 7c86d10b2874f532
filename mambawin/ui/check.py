"""How `mambawin check --windows` shows its result: a table per unit, what was not checked, and
the link's verdict (each unit's line as it finishes is ui.progress.ConsoleReporter's)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

from mambawin.ui.console import FAIL, OK, WARN, Fitted, out

if TYPE_CHECKING:
    from mambawin.check.pipeline import CheckReport


def render(report: CheckReport) -> None:
    """The per-unit table and the link's verdict."""
    rows = []
    for unit in report.units:
        detail = str(unit.error) if unit.error else unit.reason
        if unit.errors > 1:
            detail += f" (+{unit.errors - 1} more error lines)"
        rows.append((escape(unit.source), unit.status, f"{unit.seconds:.1f}", escape(detail)))
    title = f"{report.package} {report.ref} ({report.mode}, sm {report.archs})"
    out.print(Fitted(title, ("unit", "result", "seconds", "first error"), rows))
    for gap in report.not_checked:
        out.print(f"{WARN} not checked: {gap}", markup=True, highlight=False)
    closure = report.closure
    if closure is None:
        return
    if closure.fatal:
        out.print(f"{FAIL} link: {closure.fatal}", markup=True)
    for symbol in closure.broken:
        out.print(f"{FAIL} unresolved: {symbol.readable} (needed by {', '.join(symbol.objects)})")
    accepted = len(closure.unresolved) - len(closure.broken)
    if closure.holds:
        out.print(
            f"{OK} symbol closure holds ({accepted} symbols left to libraries not available here: "
            "python3XX.lib, c10_cuda.lib, torch_cuda.lib)"
        )
