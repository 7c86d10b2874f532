"""What every command promises a script: JSON on failure, results on stdout, defaults in --help."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.errors import UpstreamError, UsageError, WheelError

FAKE = Path(__file__).parent / "fixtures" / "fake_upstream"
WHEEL = "mamba_ssm-2.2.6-cp311-cp311-linux_x86_64.whl"

runner = CliRunner()

# (command line, exit code, words of the one-line error). None of these reaches the network,
# a compiler or pip: each fails on its input first.
BAD_INPUTS = [
    (["doctor", "--arch", "86a"], UsageError.exit_code, "no sm_86a exists"),
    (["doctor", "--arch", ""], UsageError.exit_code, "empty --arch"),
    (["fetch", "--repo", "{tmp}/no-such-repo"], UpstreamError.exit_code, "neither a URL"),
    (["patch", "{tmp}/no-such-tree"], UpstreamError.exit_code, "not a mamba-ssm source tree"),
    (["patch", "{fake}", "--arch", ""], UsageError.exit_code, "empty --arch"),
    (["patches", "--bogus"], 2, "No such option: --bogus"),
    (["build", "--arch", ""], UsageError.exit_code, "empty --arch"),
    (["build", "--arch", "89f"], UsageError.exit_code, "no sm_89f exists"),
    (["build", "--jobs", "0"], 2, "Invalid value for '--jobs'"),
    (["build", "--local-version", "cu 13"], UsageError.exit_code, "--local-version: invalid"),
    (["metadata", "{tmp}/" + WHEEL], WheelError.exit_code, WHEEL),
    (["metadata"], 2, "Missing argument"),
    (["verify", "{tmp}/" + WHEEL], UsageError.exit_code, "does not exist"),
    (["verify"], UsageError.exit_code, "nothing to verify"),
    (["bench", "{tmp}/" + WHEEL], UsageError.exit_code, "does not exist"),
    (["matrix", "--spec", "{tmp}/nope.toml"], UsageError.exit_code, "no such spec file"),
    (["index", "{tmp}/empty", "--out", "{tmp}/site"], UsageError.exit_code, "holds no .whl"),
]


def _args(args: list[str], tmp_path: Path) -> list[str]:
    fake = tmp_path / "fake"
    if not fake.exists():
        shutil.copytree(FAKE, fake)
    (tmp_path / "empty").mkdir(exist_ok=True)
    return [a.format(tmp=tmp_path, fake=fake) for a in args]


@pytest.mark.parametrize(
    ("args", "code", "words"),
    BAD_INPUTS,
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_every_command_fails_as_json_under_json(
    tmp_path: Path, args: list[str], code: int, words: str
) -> None:
    result = runner.invoke(app, [*_args(args, tmp_path), "--json"])
    assert result.exit_code == code, result.output
    data = json.loads(result.stdout)  # stdout is one JSON document, nothing else
    assert set(data) == {"error", "exit_code"} and data["exit_code"] == code
    assert words in data["error"] and "\n" not in data["error"]
    assert words in result.stderr  # the human line is still there


@pytest.mark.parametrize(("args", "code", "words"), BAD_INPUTS[:4])
def test_without_json_a_failure_is_one_line_on_stderr(
    tmp_path: Path, args: list[str], code: int, words: str
) -> None:
    result = runner.invoke(app, _args(args, tmp_path))
    assert result.exit_code == code and result.stdout == ""
    assert result.stderr.startswith("error: ") and words in result.stderr
    assert "Traceback" not in result.output


def test_json_after_a_double_dash_is_an_argument_not_the_flag(tmp_path: Path) -> None:
    result = runner.invoke(app, ["metadata", "--out", str(tmp_path), "--", "--json"])
    assert result.exit_code == WheelError.exit_code and result.stdout == ""


# ---- results on stdout, narration on stderr -----------------------------------------------------


def test_patches_table_goes_to_stdout_for_a_pager() -> None:
    result = runner.invoke(app, ["patches"])
    assert result.exit_code == 0
    assert "arch-list" in result.stdout and "nvcc-threads" in result.stdout
    assert result.stderr == ""


def test_patch_table_goes_to_stdout_and_the_dry_run_diff_owns_it(tmp_path: Path) -> None:
    tree = Path(_args(["{fake}"], tmp_path)[0])
    dry = runner.invoke(app, ["patch", str(tree), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "arch-list" not in dry.stdout and "arch-list" in dry.stderr  # `> windows.patch`
    applied = runner.invoke(app, ["patch", str(tree)])
    assert applied.exit_code == 0, applied.output
    assert "arch-list" in applied.stdout and applied.stderr == ""


# ---- --help -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "defaults"),
    [
        (
            "build",
            [
                "the newest release tag",
                "the package's GitHub repo",
                "this GPU",
                "$MAX_JOBS, else doctor's",
                "one per gencode target, max 4",
                "wheelhouse",
                "auto",
            ],
        ),
        (
            "fetch",
            [
                "the newest release tag",
                "the package's GitHub repo",
                "a short path in the mambawin cache",
            ],
        ),
        ("metadata", ["wheelhouse", "the wheel's own"]),
    ],
)
def test_help_shows_every_default(command: str, defaults: list[str]) -> None:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = re.sub(r"[\s│]+", " ", result.stdout)  # rich wraps long help inside its box
    for default in defaults:
        assert re.search(rf"\[default: \(?{re.escape(default)}\)?\]", text), default
