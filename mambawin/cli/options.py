"""The options several commands share, each declared once: which upstream, at which ref, for
which package, how many jobs, and the Windows toolchain's folder; and build --help's panels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from mambawin.builder.backends import help_of
from mambawin.errors import UsageError
from mambawin.packages import PACKAGE_NAMES
from mambawin.userfile import JOBS_BOUND

# build --help's panels: what to build, where from, how fast, for Windows, for a team.
WHAT, FROM, SPEED = "What to build", "Where from", "Speed"
WINDOWS, TEAM = "Windows wheels on Linux", "Team spec"
PACKAGE_CHOICES = "|".join(PACKAGE_NAMES)


# The Windows toolchain folder, one name in every command that takes it (build, check, verify,
# doctor, toolchain windows); check and toolchain windows still take their old --root, hidden.
WINDOWS_ROOT_HELP = "The Windows toolchain folder (`mambawin toolchain windows --setup` makes it)."
WINDOWS_ROOT_DEFAULT = "mambawin's cache"
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


# The options build and fetch share: which upstream, at which ref, for which package.
RefOption = Annotated[
    str | None,
    typer.Option(
        "--ref", rich_help_panel=WHAT, help=help_of("--ref"), show_default="the newest release tag"
    ),
]
RepoOption = Annotated[
    str | None,
    typer.Option(
        "--repo",
        rich_help_panel=FROM,
        help=help_of("--repo"),
        show_default="the package's GitHub repo",
    ),
]
PackageOption = Annotated[
    str,
    typer.Option(
        "--package", rich_help_panel=WHAT, metavar=PACKAGE_CHOICES, help=help_of("--package")
    ),
]

SourceFromOption = Annotated[
    str | None,
    typer.Option(
        "--source-from",
        rich_help_panel=FROM,
        metavar="git|index|auto",
        help=help_of("--source-from"),
        show_default="$MAMBAWIN_SOURCE, else auto",
    ),
]


def jobs_option(default: str) -> Any:  # typer.Option is typed Any
    """--jobs for build and check alike; only what it defaults to differs."""
    return typer.Option(
        "--jobs",
        rich_help_panel=SPEED,
        min=1,
        max=JOBS_BOUND,
        help=help_of("--jobs"),
        show_default=default,
    )
