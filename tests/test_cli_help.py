"""Every option of every command shows its default in --help, and no help text hides one.

rich reads a hand-written `[default: …]` in a help string as markup and drops it (the help then
ended in " ."); a default is shown through typer's show_default instead, a string where the
default is not a value (`this GPU`, `the newest release`).
"""

from __future__ import annotations

import re
import shlex
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


# ---- help a person can use -----------------------------------------------------------------------


def _examples(command: Any) -> list[list[str]]:
    """The command lines of a command's Examples section, as words, up to a shell redirection."""
    lines = (command.epilog or "").split("Examples:", 1)[-1].strip().splitlines()
    words = [shlex.split(line) for line in lines if line.strip()]
    return [w[1 : next((i for i, x in enumerate(w) if x in (">", ">>")), len(w))] for w in words]


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_every_command_has_one_to_three_examples_that_parse(path: tuple[str, ...]) -> None:
    command = COMMANDS[path]
    found = _examples(command)
    assert 1 <= len(found) <= 3, f"{' '.join(path)}: {len(found)} examples"
    for words in found:
        assert tuple(words[: len(path)]) == path, words
        # click parses the example as it would run it: every option exists and takes its value
        with command.make_context(" ".join(path), words[len(path) :], resilient_parsing=False):
            pass
    shown = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"}).stdout
    assert "Examples:" in shown and " ".join(["mambawin", *path]) in shown


def test_flags_show_no_type_and_choices_are_listed() -> None:
    shown = CliRunner().invoke(app, ["build", "--help"], env={"COLUMNS": "200"}).stdout
    assert "<bool>" not in shown
    assert "mamba-ssm|causal-conv1d" in shown and "torch|stable" in shown
    assert "win_amd64" in shown
    ci = CliRunner().invoke(app, ["ci", "github", "--help"], env={"COLUMNS": "200"}).stdout
    assert "pages|release|none" in ci and "windows|linux" in ci


def test_builds_options_are_grouped() -> None:
    shown = CliRunner().invoke(app, ["build", "--help"], env={"COLUMNS": "200"}).stdout
    panels = re.findall(r"─ ([A-Z][^─]+?) ─", shown)
    assert panels[:1] == ["Options"]
    assert set(panels) >= {"What to build", "Where from", "Speed", "Windows wheels on Linux"}
    assert "Team spec" in panels


def test_root_lists_commands_in_workflow_order() -> None:
    shown = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).stdout
    order = [m.group(1) for m in re.finditer(r"^│ (\w+) ", shown, re.M)]
    assert order[:3] == ["doctor", "build", "verify"], order
    assert order.index("init") < order.index("matrix") < order.index("ci")
    assert order.index("fetch") > order.index("index")  # the parts come after the workflow


def test_the_root_listing_and_each_command_share_their_one_line_help() -> None:
    from mambawin.cli.registry import COMMANDS as ENTRIES

    root = typer.main.get_command(app)
    for entry in ENTRIES:
        assert root.commands[entry.name].short_help == entry.summary  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "path",
    [("build",), ("check",), ("verify",), ("doctor",), ("toolchain", "windows")],
    ids=" ".join,
)
def test_the_windows_toolchain_folder_has_one_name(path: tuple[str, ...]) -> None:
    options = [p for p in COMMANDS[path].params if isinstance(p, TyperOption)]
    shown = [p for p in options if not p.hidden]
    assert any("--windows-root" in p.opts for p in shown)
    assert not [p for p in shown if "--root" in p.opts]  # the old name only as a hidden alias


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_no_help_paragraph_breaks_mid_sentence(path: tuple[str, ...]) -> None:
    """typer's rich help keeps a later paragraph's line breaks: each paragraph is one line."""
    for paragraph in (COMMANDS[path].help or "").split("\n\n"):
        assert "\n" not in paragraph.strip(), paragraph
