"""The index page says, per wheel, which checks ran and where (from the verify record beside it,
`verify --json` or `verify --report`), and links the wheel's build provenance attestation."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from test_index import HERE, PY, fake_wheel
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.errors import UsageError
from mambawin.index.simple import build_index
from mambawin.verify import send
from mambawin.verify.options import VerifyOptions
from mambawin.verify.report import StepResult, Target, VerifyReport

ATTESTATION = "https://github.com/team/wheels/attestations/42"


def _report(wheel: Path, target: Target) -> VerifyReport:
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    steps = (
        StepResult("static", "ok", "tags, METADATA"),
        StepResult("smoke", "ok", "42 cases"),
        StepResult("upstream-tests", "skip", "not asked for"),
    )
    return VerifyReport(str(wheel), target, steps, {wheel.name: digest})


T4 = Target("2.10.0+cu130", "13.0", "Tesla T4", (7, 5))
WHERE = {"os": "Windows-2022Server-10.0.20348-SP0", "gpu": "Tesla T4", "capability": "sm_75"}


def test_the_report_of_the_check_job_shows_its_checks_and_machine(tmp_path: Path) -> None:
    wheel = fake_wheel(tmp_path / "wh", "1.0+cu130torch2.10", PY, HERE)
    report = _report(wheel, T4)
    machine = {**send.where(report, "581.42"), **WHERE}
    document = send.document(report, send.command(VerifyOptions(wheel=wheel), "r.md"), machine)
    (wheel.parent / (wheel.name + ".verify.json")).write_text(json.dumps(document))
    result = build_index(wheel.parent, tmp_path / "site", attestation=ATTESTATION)
    (shown,) = result.wheels
    assert shown.verify is not None and shown.verify["where"] == (
        "Windows-2022Server-10.0.20348-SP0, Tesla T4 (sm_75), torch 2.10.0+cu130"
    )
    page = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "checks: static ✓, smoke ✓, upstream-tests –" in page
    assert "where: Windows-2022Server-10.0.20348-SP0, Tesla T4 (sm_75)" in page
    assert f'<a href="{ATTESTATION}">attestation</a>' in page


def test_the_json_record_says_where_from_its_target(tmp_path: Path) -> None:
    wheel = fake_wheel(tmp_path / "wh", "1.0+cu130torch2.10", PY, HERE)
    record = _report(wheel, T4).to_json()
    (wheel.parent / (wheel.name + ".verify.json")).write_text(json.dumps(record))
    (shown,) = build_index(wheel.parent, tmp_path / "site").wheels
    assert shown.verify == {
        "passed": True,
        "summary": "verified on Tesla T4 (sm_75)",
        "checks": [["static", "ok"], ["smoke", "ok"], ["upstream-tests", "skip"]],
        "where": "Tesla T4 (sm_75), torch 2.10.0+cu130",
    }
    assert shown.attestation is None
    assert "attestation</a>" not in (tmp_path / "site" / "index.html").read_text("utf-8")


def test_a_report_of_other_bytes_is_not_shown(tmp_path: Path) -> None:
    wheel = fake_wheel(tmp_path / "wh", "1.0+cu130torch2.10", PY, HERE)
    report = _report(wheel, T4)
    document = send.document(report, "mambawin verify", WHERE)
    document["wheels"] = {wheel.name: "0" * 64}
    (wheel.parent / (wheel.name + ".verify.json")).write_text(json.dumps(document))
    (shown,) = build_index(wheel.parent, tmp_path / "site").wheels
    assert shown.verify is None and "other bytes" in (shown.verify_ignored or "")


def test_a_published_wheel_keeps_its_attestation_in_later_runs(tmp_path: Path) -> None:
    first = fake_wheel(tmp_path / "wh", "1.0+cu130torch2.10", PY, HERE)
    build_index(first.parent, tmp_path / "site", attestation=ATTESTATION)
    later = fake_wheel(tmp_path / "wh2", "1.1+cu130torch2.10", PY, HERE)
    other = "https://github.com/team/wheels/attestations/43"
    result = build_index(later.parent, tmp_path / "site", attestation=other)
    assert {w.file: w.attestation for w in result.wheels} == {
        first.name: ATTESTATION,
        later.name: other,
    }
    page = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert ATTESTATION in page and other in page


@pytest.mark.parametrize(
    "bad",
    ["", "http://github.com/a/b/attestations/1", "https://x/a b", "https://x/\n<script>", "-x"],
)
def test_an_attestation_that_is_no_https_address_is_refused_before_any_work(
    bad: str, tmp_path: Path
) -> None:
    wheel = fake_wheel(tmp_path / "wh", "1.0+cu130torch2.10", PY, HERE)
    result = CliRunner().invoke(
        app, ["index", str(wheel.parent), "--out", str(tmp_path / "site"), "--attestation", bad]
    )
    assert result.exit_code == UsageError.exit_code, result.output
    assert result.stderr.count("\n") == 1 and "--attestation" in result.stderr
    assert not (tmp_path / "site").exists()
