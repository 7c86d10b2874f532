"""Every command's output, piped, fits the width: no line wider than 120 columns, except where one
word that cannot wrap (a path, a URL, a wheel's file name) makes it so.

Run as a user runs them: a real process whose stdout and stderr are pipes, COLUMNS unset (a CI
log). Before, `patches` was 614 columns wide and titles were indented by hundreds of spaces.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 120
FIXTURES = Path(__file__).parent / "fixtures"


def _run(args: list[str], cwd: Path, **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MAMBAWIN_CACHE_DIR": str(cwd / "cache")}
    for name in ("COLUMNS", "FORCE_COLOR", "LINES"):
        env.pop(name, None)
    env.update(extra_env)
    return subprocess.run(
        [sys.executable, "-m", "mambawin", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
        timeout=120,
    )


def too_wide(text: str, limit: int = LIMIT) -> list[str]:
    """The lines wider than limit once each word that cannot wrap (a path, a URL: it holds a
    slash) counts as one short word. An `error:` line is one line by contract (every error is
    one line a script can grep), so it is not judged here."""
    wide = []
    for line in text.splitlines():
        if line.startswith("error: "):
            continue
        if len(re.sub(r"\S+[/\\]\S*|[/\\]\S+", "PATH", line)) > limit:
            wide.append(line)
    return wide


def test_too_wide_lets_a_long_path_stand_and_catches_padding() -> None:
    path = "/home/someone/" + "x" * 150 + ".whl"
    assert too_wide(f"wheel   {path}") == []
    assert too_wide("word " * 40) != []
    assert too_wide(" " * 300 + "title") != []  # a centred title


def _commands(tmp: Path) -> list[list[str]]:
    spec = tmp / "mambawin.toml"
    tree = tmp / "tree"
    shutil.copytree(FIXTURES / "fake_upstream", tree)
    return [
        ["--help"],
        ["--version"],
        ["patches"],
        ["patches", "--package", "causal-conv1d"],
        ["init", "--out", str(spec)],
        ["matrix", "--spec", str(spec)],
        ["build", "--spec", str(spec), "--plan"],
        ["patch", str(tree), "--dry-run"],
        ["patch", str(tree)],
        ["cache"],
        ["doctor"],
        ["toolchain", "windows", "--windows-root", str(tmp / "empty-toolchain")],
        ["toolchain", "linux", "--root", str(tmp / "empty-cuda")],
        ["ci", "github", "--spec", str(spec), "--out", str(tmp / "wf.yml"), "--no-check"],
    ]


def _help_paths() -> list[list[str]]:
    from mambawin.cli.registry import COMMANDS

    paths = [[e.name] for e in COMMANDS]
    return [*paths, ["ci", "github"], ["toolchain", "windows"], ["toolchain", "linux"]]


@pytest.mark.parametrize("path", _help_paths(), ids=" ".join)
def test_every_help_fits_the_width_piped(path: list[str], tmp_path: Path) -> None:
    done = _run([*path, "--help"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert too_wide(done.stdout) == [] and too_wide(done.stderr) == []


def test_every_command_fits_the_width_piped(tmp_path: Path) -> None:
    """Each command in turn (init before matrix), its stdout and its stderr."""
    for args in _commands(tmp_path):
        done = _run(args, tmp_path)
        assert done.stdout or done.stderr, args
        for stream in (done.stdout, done.stderr):
            assert too_wide(stream) == [], (args, too_wide(stream)[:3])
            # a title centred over a table: far indented, first or after a blank line
            assert not re.search(r"(?:\A|\n\n) {20,}\S", stream), (args, "an indented title")


def test_columns_sets_the_piped_width(tmp_path: Path) -> None:
    """COLUMNS=60: the catalogue fits 60 columns (except unbreakable words)."""
    done = _run(["patches"], tmp_path, COLUMNS="60")
    assert done.returncode == 0, done.stderr
    assert "arch-list" in done.stdout
    assert too_wide(done.stdout, 60) == []


def test_a_columns_that_is_no_width_reads_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    from mambawin.ui.console import PIPED_WIDTH, piped_width

    for value in ("abc", "0", "", "-5"):
        monkeypatch.setenv("COLUMNS", value)
        assert piped_width() == PIPED_WIDTH
    monkeypatch.setenv("COLUMNS", "72")
    assert piped_width() == 72


def test_a_build_plan_fits_the_width_piped(tmp_path: Path) -> None:
    """`build --plan`'s summary (about 1000 columns piped before): its patch table, gencode flags
    and unit list wrap at the width; each flag stays whole."""
    from mambawin.builder.results import BuildPlan
    from mambawin.ui.console import out
    from mambawin.ui.progress import ConsoleReporter

    units = [f"csrc/selective_scan/selective_scan_bwd_fp16_real_part{i}.cu" for i in range(40)]
    plan = BuildPlan(
        upstream={
            "version": "2.2.6",
            "repo": "https://github.com/state-spaces/mamba",
            "ref": "v2.2.6",
            "commit": "a" * 40,
        },
        patches=[
            {"id": f"patch-{i}", "status": "applied", "files": [u for u in units[:6]]}
            for i in range(12)
        ],
        archs="75;80;86;89;90;100;120",
        ext_name="selective_scan_cuda",
        units=units,
        gencode=[f"arch=compute_{a},code=sm_{a}" for a in (75, 80, 86, 89, 90, 100, 120)],
        nvcc_flags=[],
        jobs=8,
        nvcc_threads=4,
        key="k" * 64,
        build_dir=tmp_path / "builds" / "mamba-x",
        reuses_objects=False,
        local_version="cu130torch2.10",
    )
    with out.capture() as captured:
        ConsoleReporter().summary(plan)
    text = captured.get()
    assert too_wide(text) == [], too_wide(text)[:3]
    assert "arch=compute_120,code=sm_120" in text  # a flag is never split
    assert not re.search(r"(?:\A|\n) {20,}\S", text)  # no centred title
