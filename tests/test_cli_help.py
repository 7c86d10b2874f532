"""Every option of every command shows its default in --help, and no help text hides one.

rich reads a hand-written `[default: …]` in a help string as markup and drops it (the help then
ended in " ."); a default is shown through typer's show_default instead, a string where the
default is not a value (`this GPU`, `the newest release`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.core import TyperOption
from typer.testing import CliRunner

from mambawin.cli import app


def commands(
    command: Any = None, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    command = command or typer.main.get_command(app)
    subcommands = getattr(command, "commands", None)
    if subcommands:
        for name, sub in sorted(subcommands.items()):
            yield from commands(sub, (*path, name))
    else:
        yield path, command


COMMANDS = dict(commands())


def shown_default(option: TyperOption) -> str | None:
    """What --help must show as the option's default; None when there is nothing to show."""
    if isinstance(option.show_default, str):
        return option.show_default
    if option.is_flag or option.show_default is False or option.name == "help":
        return None
    default = option.default
    if default is None or default == () or default == []:
        return None
    return str(default)


def test_every_command_is_covered() -> None:
    assert {" ".join(path) for path in COMMANDS} >= {
        "build",
        "verify",
        "ci github",
        "index",
        "doctor",
        "patch",
        "matrix",
    }


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_every_option_shows_its_default_and_no_help_hides_one(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    text = re.sub(r"\s+", " ", result.output)
    for option in COMMANDS[path].params:
        if not isinstance(option, TyperOption):
            continue
        assert "[default:" not in (option.help or ""), f"{option.opts}: hand-written default"
        expected = shown_default(option)
        if expected is not None:
            shown = (
                f"[default: ({expected})]"
                if isinstance(option.show_default, str)
                else (f"[default: {expected}]")
            )
            assert shown in text, f"{' '.join(path)} {option.opts[0]}: {shown} not in --help"
    assert not re.search(r"\s\.\s", text), "a help line ends in ' .' (markup swallowed)"


def _every_path(command: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The root, every group and every command, as the words that name them."""
    command = command or typer.main.get_command(app)
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _every_path(sub, (*path, name))


@pytest.mark.parametrize("path", list(_every_path()), ids=lambda p: " ".join(p) or "mambawin")
def test_piped_help_has_no_trailing_spaces(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"])  # not a terminal, as in a CI log
    assert result.exit_code == 0, result.output
    padded = [line for line in result.stdout.splitlines() if line != line.rstrip()]
    assert not padded, padded[:3]  # typer padded every panel line to 80 columns
    assert "Usage:" in result.stdout
