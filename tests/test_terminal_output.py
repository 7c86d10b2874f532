"""What a newcomer sees when a result is piped: whole file names, never split at 80 columns."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.team.matrix import expand
from mambawin.team.spec_reader import load_spec
from mambawin.ui.console import out


def test_a_piped_matrix_keeps_every_wheel_name_on_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    spec = tmp_path / "mambawin.toml"
    assert runner.invoke(app, ["init", "--out", str(spec)]).exit_code == 0
    result = runner.invoke(app, ["matrix", "--spec", str(spec)])
    assert result.exit_code == 0, result.output
    names = [cell.wheel for cell in expand(load_spec(spec)) if cell.wheel]
    assert names and any(len(n) > 50 for n in names)
    lines = result.output.splitlines()
    for name in names:
        assert any(name in line for line in lines), f"{name} is split in:\n{result.output}"


def test_an_upstream_test_run_that_wrote_no_report_prints_its_line_not_a_traceback(
    capsys: object,
) -> None:
    """A crashed pytest (a segfault: no report) leaves only its error in the step's details."""
    from mambawin.stage import Status
    from mambawin.ui.console import console
    from mambawin.ui.progress import ConsoleReporter
    from mambawin.ui.verify import step_details
    from mambawin.verify.pipeline import step_finished
    from mambawin.verify.report import StepResult

    step = StepResult(
        "upstream-tests",
        Status.FAIL,
        "pytest wrote no report for tests/ops/test_selective_scan.py (exit -11)",
        {"error": "pytest wrote no report (exit -11)", "tail": "Fatal Python error"},
    )
    with console.capture() as captured:
        ConsoleReporter(details=step_details).finished(step_finished(step))
    text = captured.get()
    assert "pytest wrote no report" in text and "upstream tests against" not in text


# ---- piped tables are as wide as their content ---------------------------------------------------


def _padded(text: str) -> list[str]:
    return [line for line in text.splitlines() if line != line.rstrip()]


def test_piped_tables_have_no_trailing_padding(tmp_path: Path) -> None:
    """A boxed table with a centred title (patches), a borderless one (matrix), one on stderr
    (patch --dry-run's table) and doctor's: no line ends in a space."""
    runner = CliRunner()
    spec = tmp_path / "mambawin.toml"
    assert runner.invoke(app, ["init", "--out", str(spec)]).exit_code == 0
    tree = tmp_path / "tree"
    shutil.copytree(Path(__file__).parent / "fixtures" / "fake_upstream", tree)
    for args in (["patches"], ["matrix", "--spec", str(spec)], ["patch", str(tree), "--dry-run"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert result.output.count("\n") > 3
        assert _padded(result.stdout) == [] and _padded(result.stderr) == [], args


def test_a_borderless_table_with_one_long_row_pads_no_other_row() -> None:
    """doctor's shape: one long fix hint made every row of a CI log 245 columns wide."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in ("", "check", "found"):
        table.add_column(column, overflow="fold")
    table.add_row("✓", "python", "/usr/bin/python3")
    table.add_row("", "", "fix: " + "x" * 200)
    with out.capture() as captured:
        out.print(table)
    lines = captured.get().splitlines()
    assert _padded(captured.get()) == []
    assert lines[1] == "✓  python  /usr/bin/python3"  # as wide as its content
    assert max(len(line) for line in lines) <= 100  # the long cell wraps at the piped width
    assert "".join(line.strip() for line in lines[2:]) == "fix:" + "x" * 200


def test_a_pipe_to_another_program_gets_no_padding() -> None:
    """What a CI log gets: the real process, its stdout a pipe."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("FORCE_COLOR", None)
    env.pop("COLUMNS", None)
    done = subprocess.run(
        [sys.executable, "-m", "mambawin", "patches"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    assert "arch-list" in done.stdout and _padded(done.stdout) == []


def test_a_table_too_wide_becomes_records_headed_by_its_first_cell() -> None:
    """Piped at 100 columns: the row's name, then its short cells, then each long one below."""
    from mambawin.ui.console import Fitted

    unit = "csrc/selective_scan/selective_scan_bwd_bf16_real_part4.cu"
    error = "error: identifier " + " ".join(["M_LOG2E is undefined"] * 8)
    with out.capture() as captured:
        out.print(
            Fitted("mamba-ssm v2.2.6", ("unit", "result", "first error"), [(unit, "error", error)])
        )
    lines = captured.get().splitlines()
    assert lines[0] == "mamba-ssm v2.2.6"
    assert lines[1] == f"{unit}  error"
    assert lines[2].startswith("    first error: error: identifier")
    assert all(len(line) <= 100 for line in lines) and lines[3].startswith("      ")


def test_a_table_that_fits_stays_a_table_with_its_title_above() -> None:
    from mambawin.ui.console import Fitted

    with out.capture() as captured:
        out.print(Fitted("kept builds", ("key", "MB"), [("abc", "12")]))
    lines = captured.get().splitlines()
    assert lines[0] == "kept builds" and "┃ key ┃ MB ┃" in captured.get()
