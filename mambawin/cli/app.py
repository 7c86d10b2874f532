"""The typer app and its `command` decorator: the one place errors become exit codes."""

from __future__ import annotations

import functools
import importlib
import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperCommand

from mambawin import __version__
from mambawin.errors import MambawinError, os_error
from mambawin.ui.console import console, out

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Build, check and verify mamba-ssm wheels on Windows (and Linux).",
    # "rich" escapes what typer adds, so `[default: ...]` shows; None would drop rich help.
    rich_markup_mode="rich",
)

_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mambawin {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and debug logs.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    _state["debug"] = debug
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


F = TypeVar("F", bound=Callable[..., Any])


def split_values(values: list[str] | None) -> tuple[str, ...]:
    """The names a repeatable, comma-separated option was given (`--skip a,b --skip c`)."""
    return tuple(i.strip() for v in values or () for i in v.split(",") if i.strip())


def print_json(document: Any) -> None:
    """The machine-readable result: one JSON document on stdout."""
    typer.echo(json.dumps(document, indent=2))


def fail_json(message: str, exit_code: int, **extra: Any) -> typer.Exit:
    """Under --json a failure is a JSON document too: {"error": ..., "exit_code": ...}."""
    print_json({**extra, "error": message, "exit_code": exit_code})
    return typer.Exit(exit_code)


def _say_error(message: str) -> None:
    """The one red line on stderr; the message is text, not rich markup (it may hold '[')."""
    console.print(f"[red]error:[/] {escape(message)}", soft_wrap=True)


def _wants_json(args: list[str]) -> bool:
    """--json among the options (not after a `--` that ends them)."""
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def _click_exception() -> type[Exception]:
    """Click's error base: typer 0.2x vendors click as typer._click, older typer uses click."""
    try:
        module = importlib.import_module("typer._click")
    except ImportError:
        module = importlib.import_module("click")
    base: type[Exception] = module.ClickException
    return base


_CLICK_ERROR = _click_exception()


class _JsonCommand(TyperCommand):
    """Click's own usage errors (missing argument, bad int, unknown option) honour --json too."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        wants_json = _wants_json(args)
        try:
            return super().parse_args(ctx, args)
        except _CLICK_ERROR as exc:
            if not wants_json:
                raise
            message, code = exc.format_message(), exc.exit_code  # type: ignore[attr-defined]
            _say_error(message)
            raise fail_json(message, code) from None


def command(
    name: str | None = None, *, group: typer.Typer | None = None, **kwargs: Any
) -> Callable[[F], F]:
    """Register a command whose MambawinError becomes one red line and that error's exit code.

    group: a sub-command group (`mambawin ci github`) instead of the top level.

    With --json (the command's `as_json` parameter) the error is also a JSON document on stdout.
    """

    def register(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kw: Any) -> Any:
            try:
                try:
                    return fn(*args, **kw)
                except OSError as exc:
                    # The backstop: a core module that knows its action raises os_error itself.
                    raise os_error(exc) from exc
            except MambawinError as exc:
                if _state["debug"]:
                    console.print_exception()
                _say_error(str(exc))
                if kw.get("as_json"):
                    raise fail_json(str(exc), exc.exit_code) from None
                raise typer.Exit(exc.exit_code) from None

        (group or app).command(name, cls=_JsonCommand, **kwargs)(wrapper)
        return fn

    return register


def print_table(
    title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]], *, to: Console | None = None
) -> None:
    """A result table on stdout (so `mambawin patches | less` pages it), or on `to`."""
    table = Table(title=title, show_lines=len(columns) > 3)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    (to or out).print(table)
