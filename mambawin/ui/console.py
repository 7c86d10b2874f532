"""Where output goes: `out` (stdout) for results a user pipes, `console` (stderr) for narration."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console, ConsoleDimensions

from mambawin.status import Status

# Piped output is read by programs and people with wide pagers: no fixed 80-column wrap that would
# split a wheel's file name over two lines (tables do not expand, so they stay as wide as their
# content).
PIPED_WIDTH = 1000


class _PipeFriendlyConsole(Console):
    """A console that wraps at the terminal's width, and not at all when it is not a terminal."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        return size if self.is_terminal else ConsoleDimensions(PIPED_WIDTH, size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


console = _PipeFriendlyConsole(stderr=True, highlight=False)
# Results: tables and reports that `mambawin doctor > report.txt` or `| less` should capture.
out = _PipeFriendlyConsole(highlight=False)

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
