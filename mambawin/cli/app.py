"""The typer app and its `command` decorator: the one place errors become exit codes."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.markup import escape

from mambawin import __version__
from mambawin.errors import MambawinError
from mambawin.ui.console import console

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Build, check and verify mamba-ssm wheels on Windows (and Linux).",
)

_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mambawin {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and debug logs.")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    _state["debug"] = debug
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


F = TypeVar("F", bound=Callable[..., Any])


def command(name: str | None = None, *, group: typer.Typer | None = None,
            **kwargs: Any) -> Callable[[F], F]:
    """Register a command whose MambawinError becomes one red line and that error's exit code.

    group: a sub-command group (`mambawin ci github`) instead of the top level.
    """

    def register(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kw: Any) -> Any:
            try:
                return fn(*args, **kw)
            except MambawinError as exc:
                if _state["debug"]:
                    console.print_exception()
                # escape: a message may quote `[[torch]]` or `[build]`, which is not Rich markup
                console.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
                raise typer.Exit(exc.exit_code) from None

        (group or app).command(name, **kwargs)(wrapper)
        return fn

    return register


def print_table(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """A rich table on stderr (narration); --json output is the machine-readable result."""
    from rich.table import Table

    table = Table(title=title, show_lines=len(columns) > 3)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    console.print(table)
