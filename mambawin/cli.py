"""The typer layer: parse options, call one core function, map errors to exit codes.

Core modules never import typer or print results; this file renders what they return.
"""

from __future__ import annotations

import functools
import logging
from typing import Annotated

import typer

from mambawin import __version__
from mambawin.errors import MambawinError
from mambawin.ui import console

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


def command(name: str | None = None, **kwargs: object):  # type: ignore[no-untyped-def]
    """Register a command whose MambawinError becomes one red line and that error's exit code."""

    def register(fn):  # type: ignore[no-untyped-def]
        @functools.wraps(fn)
        def wrapper(*args, **kw):  # type: ignore[no-untyped-def]
            try:
                return fn(*args, **kw)
            except MambawinError as exc:
                if _state["debug"]:
                    console.print_exception()
                console.print(f"[red]error:[/] {exc}", soft_wrap=True)
                raise typer.Exit(exc.exit_code) from None

        app.command(name, **kwargs)(wrapper)  # type: ignore[arg-type]
        return fn

    return register


# ---- commands are added below, one block per command; keep each one thin -----------------------


def main() -> None:
    """Console-script entry point."""
    app()
