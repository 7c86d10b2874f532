"""How `mambawin check --windows` shows its work: a line per unit as it finishes, then a table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table

from mambawin.ui.console import FAIL, OK, SKIP, WARN, console, out

if TYPE_CHECKING:
    from mambawin.check.pipeline import CheckReport
    from mambawin.check.units import UnitResult

MARK = {"ok": OK, "error": FAIL, "skipped": SKIP}


def unit_line(result: UnitResult, done: int, total: int) -> None:
    """One finished unit, with its place in the run (a CI log shows progress without a bar)."""
    detail = str(result.error) if result.error else result.reason
    console.print(
        f"{MARK[result.status]} [{done}/{total}] {result.source} [dim]({result.seconds:.1f}s)[/]"
        + (f" {detail}" if detail else ""),
        soft_wrap=True,
        markup=True,
        highlight=False,
    )


def render(report: CheckReport) -> None:
    """The per-unit table and the link's verdict."""
    table = Table(title=f"{report.package} {report.ref} ({report.mode}, sm {report.archs})")
    for column in ("unit", "result", "seconds", "first error"):
        table.add_column(column, overflow="fold")
    for unit in report.units:
        detail = str(unit.error) if unit.error else unit.reason
        if unit.errors > 1:
            detail += f" (+{unit.errors - 1} more error lines)"
        table.add_row(unit.source, unit.status, f"{unit.seconds:.1f}", detail)
    out.print(table)
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


def to_json(report: CheckReport) -> dict[str, Any]:
    """The report as a JSON document."""
    closure = report.closure
    return {
        "ok": report.ok,
        "status": report.status,
        "not_checked": list(report.not_checked),
        "package": report.package,
        "ref": report.ref,
        "commit": report.commit,
        "version": report.version,
        "mode": report.mode,
        "archs": report.archs,
        "units": [
            {
                "source": u.source,
                "status": u.status,
                "seconds": round(u.seconds, 1),
                "error": str(u.error) if u.error else None,
                "error_file": u.error.file if u.error else None,
                "error_line": u.error.line if u.error else None,
                "error_lines": u.errors,
                "messages": list(u.messages),
                "reason": u.reason or None,
            }
            for u in report.units
        ],
        "closure": None
        if closure is None
        else {
            "holds": closure.holds,
            "fatal": closure.fatal,
            "unresolved": [
                {
                    "symbol": s.symbol,
                    "readable": s.readable,
                    "objects": list(s.objects),
                    "accepted": s.accepted,
                }
                for s in closure.unresolved
            ],
        },
    }
