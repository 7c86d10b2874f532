"""Where output goes: `out` (stdout) for results a user pipes, `console` (stderr) for narration."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console, ConsoleDimensions, ConsoleOptions, RenderableType, RenderResult
from rich.markup import escape
from rich.measure import Measurement
from rich.protocol import is_renderable
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from mambawin.stage import Status

# Piped output (a CI log, `| less`, a file) fits COLUMNS, else this: wide enough for a wheel's
# file name beside its label, narrow enough for a log viewer. Text wraps between words and never
# inside one, so a path or a wheel name longer than the width stays whole on its own line.
PIPED_WIDTH = 100


def piped_width() -> int:
    """The width of output that is not a terminal: $COLUMNS when it is a number, else 100."""
    columns = os.environ.get("COLUMNS", "").strip()
    return int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH


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
        """Console.print; piped, each renderable that is not plain text comes out trimmed, and
        text wraps at the width between words (never inside a path or a file name), unless the
        caller asks for one line (soft_wrap=True)."""
        if self.is_terminal:
            super().print(*objects, **kwargs)
            return
        # soft_wrap=True is the caller's "one line" (an error, a path): it stays whole
        if objects and not kwargs.get("soft_wrap") and not any(_is_block(o) for o in objects):
            super().print(self._wrapped(objects, kwargs), soft_wrap=True, crop=False)
            return
        super().print(*(_Trimmed(o) if _is_block(o) else o for o in objects), **kwargs)

    def _wrapped(self, objects: tuple[Any, ...], kwargs: dict[str, Any]) -> Text:
        """objects as print would join them, wrapped between words at the width."""
        markup, highlight = kwargs.get("markup"), kwargs.get("highlight")
        parts = [
            o
            if isinstance(o, Text)
            else self.render_str(str(o), markup=markup, highlight=highlight)
            for o in objects
        ]
        text = Text(kwargs.get("sep", " ")).join(parts)
        if kwargs.get("style"):
            text.stylize(kwargs["style"])
        text.overflow = (
            "ignore"  # a long word (a path) stays whole; wrap(overflow=...) would not wrap
        )
        lines = text.wrap(self, self.width)
        for line in lines:
            line.rstrip()
        return Text("\n").join(lines)

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        return size if self.is_terminal else ConsoleDimensions(piped_width(), size.height)

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


class Fitted:
    """A table that fits the width: as a table where every cell fits on its line, else as
    records, one per row: its first cell and its short ones on a heading line, each long one on
    a line of its own below (`  why: ...`), wrapped between words. A 5-column table of prose
    was 614 columns wide piped, or a column of 3-letter lines at 100."""

    SHORT = 24  # a column whose cells are all this short stays on the heading line

    def __init__(
        self,
        title: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[str]],
        *,
        box: bool = True,
    ) -> None:
        self.title, self.columns, self.rows = title, tuple(columns), [tuple(r) for r in rows]
        self.box = box  # False: columns only, no lines (a list to read, not a grid)

    def table(self) -> Table:
        table = Table(show_lines=self.wide()) if self.box else Table(box=None, pad_edge=False)
        for column in self.columns:
            table.add_column(column, overflow="fold")
        for row in self.rows:
            table.add_row(*row)
        return table

    def wide(self) -> bool:
        return len(self.columns) > 3

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = self.table()
        if self.title:  # on its own line, never centred over (or wrapped to) the table
            yield Text.from_markup(f"[bold]{self.title}[/]", overflow="ignore")
        unbounded = options.update(width=1_000_000)  # what the table needs, not what fits
        if Measurement.get(console, unbounded, table).maximum <= options.max_width:
            yield table
            return
        # The first column names the row (a patch id, a unit's file): it heads the record always
        short = [
            i
            for i, _ in enumerate(self.columns)
            if i == 0 or self._longest(console, i) <= self.SHORT
        ]
        for row in self.rows:
            yield Text.from_markup("  ".join(row[i] for i in short if row[i]), overflow="ignore")
            for i, column in enumerate(self.columns):
                if i not in short and row[i]:
                    yield from _detail(console, column, row[i], options.max_width)

    def _longest(self, console: Console, column: int) -> int:
        return max((Text.from_markup(row[column]).cell_len for row in self.rows), default=0)


def _detail(console: Console, label: str, value: str, width: int) -> Iterator[Text]:
    """`    label: value` wrapped between words at width, its later lines indented further."""
    text = Text.from_markup(f"[dim]{escape(label)}:[/] {value}" if label else value)
    text.overflow = "ignore"  # a long word (a path) stays whole; wrap(overflow=...) would not wrap
    for n, line in enumerate(text.wrap(console, max(width - 6, 20))):
        yield Text("      " if n else "    ") + line
