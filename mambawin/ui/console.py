"""Where output goes: `out` (stdout) for results a user pipes, `console` (stderr) for narration."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console, ConsoleDimensions, ConsoleOptions, RenderableType, RenderResult
from rich.protocol import is_renderable
from rich.segment import Segment
from rich.text import Text

from mambawin.status import Status

# Piped output is read by programs and people with wide pagers: no fixed 80-column wrap that would
# split a wheel's file name over two lines (tables do not expand, so they stay as wide as their
# content).
PIPED_WIDTH = 1000


class _Trimmed:
    """A renderable's lines without the spaces that fill each to the width of the widest.

    Rich pads every line of a table (and a centred title) to the table's width: in a CI log, a
    table with one long hint was 245 columns of trailing spaces on every row.
    """

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in console.render_lines(self.renderable, options, pad=False):
            yield from _without_trailing_spaces(line)
            yield Segment.line()


def _without_trailing_spaces(line: Iterable[Segment]) -> list[Segment]:
    segments = list(line)
    while segments and not segments[-1].control and not segments[-1].text.rstrip(" "):
        segments.pop()
    if segments and not segments[-1].control:
        text, style, _ = segments[-1]
        segments[-1] = Segment(text.rstrip(" "), style)
    return segments


def printable(text: str) -> str:
    """text with each character a terminal would act on (a line break, ESC of a colour or
    cursor sequence) written as its escape (`\\n`, `\\x1b`): a name or value read from a file or
    typed by a user is shown on its one line, never run by the terminal."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )


def _is_block(obj: object) -> bool:
    """A table, panel or other rich renderable (not text, which rich never pads)."""
    return is_renderable(obj) and not isinstance(obj, (str, Text))


class _PipeFriendlyConsole(Console):
    """A console that wraps at the terminal's width, and not at all when it is not a terminal;
    there, tables are as wide as their content, with no trailing padding."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """Console.print; piped, each renderable that is not plain text comes out trimmed."""
        if not self.is_terminal:
            objects = tuple(_Trimmed(o) if _is_block(o) else o for o in objects)
        super().print(*objects, **kwargs)

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
