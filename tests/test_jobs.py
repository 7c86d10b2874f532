"""How many compile jobs a build runs: --jobs, else MAX_JOBS from the environment, else doctor's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_build import (  # noqa: F401  (fixtures)
    RecordedDoctor,
    Recorder,
    _options,
    doctor,
    fake_repo,
)
from typer.testing import CliRunner

from mambawin.builder import pipeline as core
from mambawin.builder.options import resolve_jobs
from mambawin.builder.request import Tools
from mambawin.cli import app
from mambawin.errors import UsageError


def _built_with(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    repo: Path,
    doctor: RecordedDoctor,
    **changes: object,
) -> str:
    dump = tmp_path / "env.json"
    monkeypatch.setenv("FAKE_ENV_DUMP", str(dump))
    core.build(
        _options(repo, tmp_path / "out", **changes), reporter=Recorder(), tools=Tools(doctor=doctor)
    )
    return str(json.loads(dump.read_text())["MAX_JOBS"])


def test_max_jobs_from_the_environment_is_honoured(
    fake_repo: Path,
    tmp_path: Path,
    doctor: RecordedDoctor,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MAX_JOBS", "2")
    assert _built_with(tmp_path, monkeypatch, fake_repo, doctor) == "2"


def test_jobs_option_wins_over_max_jobs(
    fake_repo: Path,
    tmp_path: Path,
    doctor: RecordedDoctor,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MAX_JOBS", "2")
    assert _built_with(tmp_path, monkeypatch, fake_repo, doctor, jobs=6) == "6"


@pytest.mark.parametrize("value", ["0", "four", "-1", "2.5"])
def test_bad_max_jobs_is_one_line_naming_it(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_JOBS", value)
    with pytest.raises(UsageError, match=r"MAX_JOBS=.* whole number"):
        resolve_jobs(None, 3)


def test_empty_max_jobs_falls_back_to_the_doctor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_JOBS", " ")
    assert resolve_jobs(None, 3) == 3


def test_cli_exit_code_for_bad_max_jobs(
    fake_repo: Path,
    tmp_path: Path,
    doctor: RecordedDoctor,
) -> None:
    result = CliRunner().invoke(
        app,
        ["build", "--repo", str(fake_repo), "--ref", "v0.1.0", "--out", str(tmp_path)],
        env={"MAX_JOBS": "lots"},
        obj={"doctor": doctor},
    )
    assert result.exit_code == UsageError.exit_code
    assert "MAX_JOBS='lots'" in result.output
