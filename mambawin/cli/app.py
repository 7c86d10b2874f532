"""The typer app and its `command` decorator: the one place errors become exit codes."""

from __future__ import annotations

import functools
import importlib
import inspect
import io
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stdout, suppress
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from mambawin import __version__
from mambawin.cli import registry
from mambawin.cli.lazy import FlagsShowNoType, LazyCommands, listed
from mambawin.errors import MambawinError, UsageError, os_error
from mambawin.ui.console import Fitted, console, out, printable

F = TypeVar("F", bound=Callable[..., Any])


def split_values(values: list[str] | None) -> tuple[str, ...]:
    """The names a repeatable, comma-separated option was given (`--skip a,b --skip c`)."""
    return tuple(i.strip() for v in values or () for i in v.split(",") if i.strip())


def print_json(document: Any) -> None:
    """The machine-readable result: one JSON document on stdout."""
    typer.echo(json.dumps(document, indent=2))


def fail_json(message: str, exit_code: int, **extra: Any) -> typer.Exit:
    """Under --json a failure is a JSON document too: {"error": ..., "exit_code": ...}; stderr
    ends with the same `error:` line as without --json."""
    say_error(message)
    return _error_document(message, exit_code, extra)


def _error_document(message: str, exit_code: int, extra: dict[str, Any]) -> typer.Exit:
    """The JSON error document alone (the `error:` line is already on stderr)."""
    print_json({**extra, "error": message, "exit_code": exit_code})
    return typer.Exit(exit_code)


def say_error(message: str) -> None:
    """The one red line on stderr; the message is text, not rich markup (it may hold '[').

    A value the user typed may hold a line break (`--cuda $'13.0\\n'`, a path): it is shown
    as `\\n`, so the error stays one line whatever the message quotes."""
    console.print(f"[red]error:[/] {escape(printable(message))}", soft_wrap=True)


def _wants_json(args: list[str]) -> bool:
    """--json among the options (not after a `--` that ends them)."""
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def _click_module() -> Any:
    """Click itself: typer 0.2x vendors it as typer._click, older typer uses click."""
    try:
        return importlib.import_module("typer._click")
    except ImportError:
        return importlib.import_module("click")


_CLICK = _click_module()
# click 8.2+ raises this for a group given alone (its help); older click exits instead
_NO_ARGS_IS_HELP = getattr(_CLICK.exceptions, "NoArgsIsHelpError", ())
_JSON_META = "mambawin.wants_json"  # in ctx.meta, which every sub-command's context shares


def _usage_line(exc: Any) -> str:
    """Click's message on one line, with where to read the options."""
    message = " ".join(line.strip() for line in exc.format_message().splitlines() if line.strip())
    ctx = getattr(exc, "ctx", None)
    where = f"`{ctx.command_path} --help`" if ctx is not None else "`--help`"
    return f"{message.rstrip('.')}; see {where} for the options"


@contextmanager
def _one_error_shape(ctx: Any) -> Iterator[None]:
    """Click's usage errors (a bad value, an unknown option, a missing argument or command) in the
    shape every MambawinError has: one red line, exit 2, and the JSON error document under --json.

    Left to typer they are a 5-line panel on stderr, and no JSON at all.
    """
    try:
        yield
    except _NO_ARGS_IS_HELP:
        raise  # `mambawin ci` alone: the help is the answer
    except _CLICK.ClickException as exc:
        message = _usage_line(exc)
        say_error(message)
        if ctx.meta.get(_JSON_META):
            raise _error_document(message, UsageError.exit_code, {}) from None
        raise typer.Exit(UsageError.exit_code) from None


class _TrimmedHelp:
    """Help that, piped (a CI log, `| less`, a file), ends each line at its text: typer pads
    every line of its panels to 80 columns with spaces. On a terminal it is typer's, unchanged."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        render = super().format_help  # type: ignore[misc]
        if sys.stdout.isatty():
            render(ctx, formatter)
            return
        captured = io.StringIO()
        with redirect_stdout(captured):  # typer's rich console writes to sys.stdout
            render(ctx, formatter)
        lines = captured.getvalue().splitlines()
        sys.stdout.write("".join(line.rstrip() + "\n" for line in lines))


class Group(FlagsShowNoType, _TrimmedHelp, TyperGroup):
    """A sub-command group (`ci`, `toolchain`): typer.Typer(cls=Group)."""


class _Root(FlagsShowNoType, _TrimmedHelp, TyperGroup):
    """The top-level group: every command's parsing runs inside it, so its usage errors are
    rendered here, once. Its commands load when used (`LazyCommands`); its own help lists them
    from the registry, importing none."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(dict(self.commands))
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        commands = self.commands
        assert isinstance(commands, LazyCommands)
        if self._listing and not commands.loaded(cmd_name):
            return listed(cmd_name)
        return commands.get(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True  # the command list is the registry's: nothing is imported for it
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta[_JSON_META] = _wants_json(args)
        with _one_error_shape(ctx):
            return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        with _one_error_shape(ctx):
            return super().invoke(ctx)


class _Command(FlagsShowNoType, _TrimmedHelp, TyperCommand):
    """A command whose options never take another mambawin option as their value."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        _refuse_an_option_as_a_value(ctx, args)
        _refuse_an_empty_path(ctx, args)
        try:
            return super().parse_args(ctx, args)
        except _CLICK.exceptions.UsageError as exc:
            exc.ctx = exc.ctx or ctx  # the parser's own errors (`--arch` last, no value) lack it
            raise


def _refuse_an_option_as_a_value(ctx: Any, args: list[str]) -> None:
    """Click gives an option that lacks its value the next word, even an option: `init --out
    --json` wrote a spec named `--json` and printed no JSON. A file of that name is `./--json`."""
    valued = {
        name
        for p in ctx.command.params
        if p.param_type_name == "option" and not (p.is_flag or p.count)
        for name in p.opts
    }
    names: set[str] | None = None  # every command's options: loaded only when a value is one
    for token, after in zip(args, [*args[1:], ""], strict=False):
        if token == "--":
            return
        name, equals, value = token.partition("=")
        given = value if equals else after
        if name not in valued or not given.startswith("-"):
            continue
        names = _option_names(ctx.find_root().command) if names is None else names
        if given.partition("=")[0] in names:
            msg = f"{name} needs a value and got the option {given}: give {name} its value"
            raise _CLICK.exceptions.UsageError(msg, ctx)


def _refuse_an_empty_path(ctx: Any, args: list[str]) -> None:
    """A path option given '' is a mistake (an unset shell variable: `--out "$DIR"`), not the
    current folder that Path('') reads as: `--windows-root ''` looked for the toolchain in `.`,
    `--out ''` wrote the wheel there, while `toolchain --root ''` was refused."""
    paths = {
        name
        for p in ctx.command.params
        if p.param_type_name == "option"
        and getattr(getattr(p, "type_descriptor", None), "is_path", False)
        for name in p.opts
    }
    for token, after in zip(args, [*args[1:], None], strict=False):
        if token == "--":
            return
        name, equals, value = token.partition("=")
        given = value if equals else after
        if name in paths and given is not None and not given.strip():
            msg = f"{name} is empty: give it a path (was the shell variable you meant unset?)"
            raise _CLICK.exceptions.UsageError(msg, ctx)
    _refuse_an_empty_path_argument(ctx, args)


def _refuse_an_empty_path_argument(ctx: Any, args: list[str]) -> None:
    """The same for a path argument: `index ""` published the current folder's wheels, `patch
    ""` patched the current folder, `verify ""` verified it."""
    params = ctx.command.params
    arguments = [
        p
        for p in params
        if p.param_type_name == "argument"
        and getattr(getattr(p, "type_descriptor", None), "is_path", False)
    ]
    valued = {
        name
        for p in params
        if p.param_type_name == "option" and not (p.is_flag or p.count)
        for name in p.opts
    }
    skip = False  # the token is the value of the option before it
    for token in args:
        if skip:
            skip = False
            continue
        if token == "--":
            return
        if token.startswith("-") and token != "-":
            skip = "=" not in token and token in valued
            continue
        if arguments and not token.strip():
            name = arguments[0].name.upper()
            msg = f"{name} is empty: give it a path (was the shell variable you meant unset?)"
            raise _CLICK.exceptions.UsageError(msg, ctx)


def _option_names(command: Any) -> set[str]:
    """Every option name of command and of the commands under it (any mambawin option)."""
    names = {
        name
        for p in command.params
        if p.param_type_name == "option"
        for name in (*p.opts, *p.secondary_opts)
    }
    for sub in getattr(command, "commands", {}).values():
        names |= _option_names(sub)
    return names


app = typer.Typer(
    cls=_Root,
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
        from mambawin.origin import describe  # small on purpose: --version stays cheap

        typer.echo(f"mambawin {__version__} {describe()}")
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


def command(
    name: str | None = None,
    *,
    group: typer.Typer | None = None,
    cache: bool = False,
    **kwargs: Any,
) -> Callable[[F], F]:
    """Register a command whose MambawinError becomes one red line and that error's exit code.

    group: a sub-command group (`mambawin ci github`) instead of the top level.
    cache: the command uses mambawin's cache; it is checked (a folder, writable) before any work.

    With --json (the command's `as_json` parameter) the error is also a JSON document on stdout.
    """

    def register(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kw: Any) -> Any:
            try:
                try:
                    if cache:  # imported here: --help and --version never load the cache code
                        from mambawin.store.cache_usage import usable_cache

                        usable_cache()
                    return fn(*args, **kw)
                except OSError as exc:
                    # The backstop: a core module that knows its action raises os_error itself.
                    raise os_error(exc) from exc
            except MambawinError as exc:
                if _state["debug"]:
                    console.print_exception()
                say_error(str(exc))
                if kw.get("as_json"):
                    # stdout itself may be what failed (a full disk): the line above then stands
                    with suppress(OSError):
                        raise _error_document(str(exc), exc.exit_code, {}) from None
                raise typer.Exit(exc.exit_code) from None

        entry = registry.BY_NAME.get(name or "") if group is None else None
        # A root command's line and panel in `mambawin --help` are the registry's; a
        # sub-command's line is its docstring's first paragraph, on one line.
        listed: dict[str, Any] = {
            "short_help": _first_paragraph(fn.__doc__ or ""),
            "help": _paragraphs(fn.__doc__ or ""),
        }
        if entry is not None:
            listed |= {"short_help": entry.summary, "rich_help_panel": entry.panel}
        (group or app).command(name, cls=_Command, **listed, **kwargs)(wrapper)
        return fn

    return register


def _first_paragraph(doc: str) -> str:
    return " ".join(doc.strip().split("\n\n")[0].split())


def _paragraphs(doc: str) -> str:
    """doc with each paragraph on one line: typer's rich help keeps a later paragraph's line
    breaks, so a docstring wrapped at 100 columns broke mid-sentence in the help."""
    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n"))


def examples(*lines: str) -> str:
    """A command's Examples section (its help's epilog): one command line per line."""
    return "Examples:\n\n" + "\n".join(f"  {line}" for line in lines)


def group(name: str, help: str) -> typer.Typer:
    """A root group of sub-commands (`ci`, `toolchain`), listed as the registry says."""
    entry = registry.BY_NAME[name]
    sub = typer.Typer(cls=Group, no_args_is_help=True, help=help)
    app.add_typer(sub, name=name, short_help=entry.summary, rich_help_panel=entry.panel)
    return sub


def print_table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    to: Console | None = None,
) -> None:
    """A result table on stdout (so `mambawin patches | less` pages it), or on `to`; as records
    where it would not fit the width (ui.console.Fitted)."""
    (to or out).print(Fitted(title, columns, rows))
