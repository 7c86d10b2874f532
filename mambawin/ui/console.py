"""Where output goes: `out` (stdout) for results a user pipes, `console` (stderr) for narration."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

from mambawin.doctor.probes.base import Status

console = Console(stderr=True, highlight=False)
# Results: tables and reports that `mambawin doctor > report.txt` or `| less` should capture.
out = Console(highlight=False)

OK, WARN, FAIL, SKIP = "[green]✓[/]", "[yellow]⚠[/]", "[red]✗[/]", "[dim]-[/]"
MARKS = {Status.OK: OK, Status.WARN: WARN, Status.FAIL: FAIL, Status.SKIP: SKIP}


@contextmanager
def step(name: str) -> Iterator[None]:
    """Show one named pipeline step with ✓/✗ and how long it took."""
    start = time.monotonic()
    try:
        yield
    except BaseException:
        console.print(f"{FAIL} {name} [dim]({time.monotonic() - start:.1f}s)[/]")
        raise
    console.print(f"{OK} {name} [dim]({time.monotonic() - start:.1f}s)[/]")
