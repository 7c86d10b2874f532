"""What a newcomer sees when a result is piped: whole file names, never split at 80 columns."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.team.matrix import expand
from mambawin.team.spec_reader import load_spec


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
    from mambawin.status import Status
    from mambawin.ui.console import console
    from mambawin.ui.verify import render_step
    from mambawin.verify.report import StepResult

    step = StepResult(
        "upstream-tests",
        Status.FAIL,
        "pytest wrote no report for tests/ops/test_selective_scan.py (exit -11)",
        {"error": "pytest wrote no report (exit -11)", "tail": "Fatal Python error"},
    )
    with console.capture() as captured:
        render_step(step)
    text = captured.get()
    assert "pytest wrote no report" in text and "upstream tests against" not in text
