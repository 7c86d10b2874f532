"""One error shape in every command: click's own usage errors (a bad value, an unknown option, a
missing argument) are one `error:` line and exit 2, and under --json the JSON error document, like
every error mambawin raises itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.errors import UsageError

runner = CliRunner()


def _command_paths(group: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every runnable command of the app, as the words that name it (`ci github`)."""
    paths = []
    for name, sub in sorted(getattr(group, "commands", {}).items()):
        children = _command_paths(sub, (*prefix, name))
        paths += children or [(*prefix, name)]
    return paths


COMMANDS = _command_paths(typer.main.get_command(app))


def _assert_one_line(result: object, *words: str) -> str:
    stderr = result.stderr  # type: ignore[attr-defined]
    assert result.exit_code == UsageError.exit_code, result.output  # type: ignore[attr-defined]
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    assert "╭" not in stderr and "Usage:" not in stderr  # not typer's panel
    for word in words:
        assert word in stderr
    return str(stderr)


def test_the_walk_finds_every_command_group_included() -> None:
    assert ("ci", "github") in COMMANDS and ("toolchain", "windows") in COMMANDS
    assert ("build",) in COMMANDS and ("verify",) in COMMANDS and len(COMMANDS) >= 15


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_an_unknown_option_is_one_line_in_every_command(path: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*path, "--no-such-option"])
    _assert_one_line(result, "No such option: --no-such-option", f"{path[-1]} --help")
    assert result.stdout == ""


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_an_unknown_option_is_the_json_error_document_in_every_command(
    path: tuple[str, ...],
) -> None:
    result = runner.invoke(app, [*path, "--no-such-option", "--json"])
    line = _assert_one_line(result, "No such option")
    document = json.loads(result.stdout)
    assert document == {"error": line.removeprefix("error: ").strip(), "exit_code": 2}


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["build", "--jobs", "-1"], "Invalid value for '--jobs'"),
        (["check", "--jobs", "٣"], "Invalid value for '--jobs'"),  # a unicode digit
        (["build", "--jobs", "9" * 23], "less than or equal to 1024"),  # no machine has that
        (["check", "--windows", "--jobs", "1025"], "less than or equal to 1024"),
        (["cache", "--keep-mb", "²"], "Invalid value for '--keep-mb'"),
        (["metadata"], "Missing argument"),
        (
            ["doctor", "--arch"],
            "requires an argument; see `root doctor --help`",
        ),  # (--json first: it would be the value)
        (["no-such-command"], "No such command 'no-such-command'"),
        (["ci", "no-such-command"], "No such command 'no-such-command'"),
        (["--no-such-option", "doctor"], "No such option"),
    ],
)
def test_a_usage_error_is_one_line_and_under_json_a_document(args: list[str], words: str) -> None:
    _assert_one_line(runner.invoke(app, args), words)
    json_args = [args[0], "--json", *args[1:]] if args[-1] == "--arch" else [*args, "--json"]
    as_json = runner.invoke(app, json_args)
    _assert_one_line(as_json, words)
    assert json.loads(as_json.stdout)["exit_code"] == UsageError.exit_code


def test_a_group_without_its_command_still_shows_its_help() -> None:
    result = runner.invoke(app, ["ci"])
    assert "github" in result.output and "error:" not in result.output


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["init", "--out", "--json"], "--out needs a value and got the option --json"),
        (["init", "--out=--force"], "--out needs a value and got the option --force"),
        (["build", "--ref", "--plan"], "--ref needs a value and got the option --plan"),
        (["verify", "-k", "--json"], "-k needs a value and got the option --json"),
        (["ci", "github", "--out", "--no-check"], "--out needs a value and got the option"),
    ],
)
def test_an_option_given_as_another_options_value_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], words: str
) -> None:
    """Click would take `--json` as --out's value: `init --out --json` wrote a file named
    `--json` and printed no JSON."""
    monkeypatch.chdir(tmp_path)
    _assert_one_line(runner.invoke(app, args), words)
    assert list(tmp_path.iterdir()) == []


def test_a_file_named_like_an_option_is_written_through_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["init", "--out", "./--json"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "--json").is_file()


def test_an_error_quoting_a_line_break_stays_one_line(tmp_path: Path) -> None:
    root = tmp_path / "tc"
    result = runner.invoke(
        app, ["toolchain", "windows", "--setup", "--cuda", "13.0\n", "--root", str(root)]
    )
    line = _assert_one_line(result, "--cuda '13.0\\n' is not a CUDA major.minor version")
    assert line.endswith("give one such as 13.0\n") and not root.exists()
