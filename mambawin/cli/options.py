"""The options several commands share, each declared once: which upstream, at which ref, for
which package, how many jobs, and the Windows toolchain's folder; and build --help's panels."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_type_hints

import typer

from mambawin.builder.backends import help_of
from mambawin.builder.request import (
    FROM,
    OPTIONS,
    SPEED,
    TEAM,
    WHAT,
    BuildOption,
    command_options,
)
from mambawin.builder.request import WINDOWS_PANEL as WINDOWS
from mambawin.errors import UsageError
from mambawin.packages import PACKAGE_NAMES
from mambawin.userfile import JOBS_BOUND

__all__ = ["FROM", "SPEED", "TEAM", "WHAT", "WINDOWS"]
PACKAGE_CHOICES = "|".join(PACKAGE_NAMES)
F = TypeVar("F", bound=Callable[..., Any])


# The Windows toolchain folder, one name in every command that takes it (build, check, verify,
# doctor, toolchain windows); check and toolchain windows still take their old --root, hidden.
WINDOWS_ROOT_HELP = help_of("--windows-root")
WINDOWS_ROOT_DEFAULT = OPTIONS["--windows-root"].show_default
WindowsRootOption = Annotated[
    Path | None,
    typer.Option(
        "--windows-root",
        help=WINDOWS_ROOT_HELP,
        show_default=WINDOWS_ROOT_DEFAULT,
    ),
]
OldRootOption = Annotated[
    Path | None, typer.Option("--root", hidden=True, help="Old name of --windows-root.")
]


def windows_root_of(new: Path | None, old: Path | None) -> Path | None:
    """--windows-root, or the --root an older command line gave; UsageError for both."""
    if new is not None and old is not None:
        raise UsageError("--root is the old name of --windows-root: give the folder once")
    return new if new is not None else old


# ---- a command's parameters, derived from the request's fields (builder/request.py) ----------

# The run's own flags keep the names the command functions (and app.command's --json) read.
RUN_PARAMS = {"--json": "as_json", "--plan": "plan_only"}
_TYPES: dict[str, Any] = {
    "int": int | None,
    "path": Path | None,
    "flag": bool,
    "switch": bool | None,
    "list": list[str] | None,
}


def param_name(declared: BuildOption) -> str:
    """The command function's parameter for an option: the request's field name."""
    return RUN_PARAMS.get(declared.flag, declared.param)


def option_parameter(declared: BuildOption, command: str) -> inspect.Parameter:
    """One typer parameter from the option's one declaration: flag, help, panel, default."""
    extra: dict[str, Any] = {}
    if declared.cli == "int":
        extra = {"min": 1, "max": JOBS_BOUND if declared.flag == "--jobs" else None}
    shown = declared.show_default
    if command == "check" and declared.check_shows is not None:
        shown = declared.check_shows
    if shown is None and declared.default not in (None, (), False):
        default = declared.default
        shown = getattr(default, "name", None) or str(default)
    decls = [declared.flag]
    if declared.cli == "switch":  # an optional bool: --cache, --no-cache, or neither
        decls = [f"{declared.flag}/--no-{declared.flag.removeprefix('--')}"]
    info = typer.Option(
        *decls,
        help=declared.help,
        rich_help_panel=declared.panel,
        metavar=declared.metavar,
        show_default=shown if shown is not None else False,
        **extra,
    )
    kind = _TYPES.get(declared.cli, str | None)
    default = False if declared.cli == "flag" else None
    return inspect.Parameter(
        param_name(declared),
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[kind, info],
    )


def request_parameters(command: str) -> Callable[[F], F]:
    """Give a command function (ctx, *, <its own>, **options) one parameter per option its
    backends apply, in declaration order: the typer signature derived from the request."""

    def derive(fn: F) -> F:
        hints = get_type_hints(fn, include_extras=True)  # the function's own, evaluated
        own = inspect.signature(fn).parameters.values()
        kept = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in own
            if p.kind is not inspect.Parameter.VAR_KEYWORD
        ]
        derived = [option_parameter(o, command) for o in command_options(command)]
        fn.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [*kept[:1], *derived, *(p.replace(kind=p.KEYWORD_ONLY) for p in kept[1:])]
        )
        fn.__annotations__ = {p.name: p.annotation for p in [*kept, *derived]}
        return fn

    return derive


def split_params(params: dict[str, Any]) -> tuple[dict[str, Any], bool, bool]:
    """The request's fields, --plan and --json out of a command's keyword arguments."""
    fields = dict(params)
    return fields, bool(fields.pop("plan_only", False)), bool(fields.pop("as_json", False))


# The options fetch and ci share with build: which upstream, at which ref, for which package,
# from where; each as build declares it.
RefOption = option_parameter(OPTIONS["--ref"], "build").annotation
RepoOption = option_parameter(OPTIONS["--repo"], "build").annotation
PackageOption = option_parameter(OPTIONS["--package"], "build").annotation
SourceFromOption = option_parameter(OPTIONS["--source-from"], "build").annotation
