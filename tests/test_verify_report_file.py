"""`verify --report FILE`: the Markdown and JSON a Windows user sends back, written whatever the
verdict, refused before any work when the path cannot take them, all or nothing."""

from __future__ import annotations

import errno
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.store import atomic
from mambawin.verify import pipeline, seal, send
from mambawin.verify.report import StepResult, Target, VerifyReport
from mambawin.verify.target import probe_driver
from tests.test_verify import INSTALLED, STANDIN, code, make_wheel

DRIVER = "572.16"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """cwd and HOME inside tmp_path; the wheels in a folder of their own; an nvidia-smi on PATH
    that answers as a driver does."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "wheels").mkdir()
    bin_dir = tmp_path.parent / f"{tmp_path.name}-bin"
    _fake_smi(bin_dir)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def _fake_verify(monkeypatch: pytest.MonkeyPatch, **tools: object) -> None:
    """The CLI builds its options with the real tools; its core gets fakes of the sandbox."""
    fakes = replace(
        INSTALLED,
        probe_target=lambda python: Target("2.8.0", "12.8", "NVIDIA H100", (9, 0)),
        **tools,
    )
    real = pipeline.verify
    monkeypatch.setattr(
        pipeline,
        "verify",
        lambda options, reporter=None: real(replace(options, tools=fakes), reporter=reporter),
    )


def _fake_smi(folder: Path) -> None:
    folder.mkdir(exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho '{DRIVER}'\n")
    smi.chmod(0o755)


def _failing_wheel(home: Path) -> Path:
    return make_wheel(home / "wheels", provenance=None)  # static fails: no provenance record


def test_a_failing_verify_still_writes_both_reports_then_exits_8(home, monkeypatch):
    wheel = _failing_wheel(home)
    _fake_verify(monkeypatch)
    (home / "out").mkdir()
    argv = ["verify", str(wheel), "--skip", "smoke", "--report", "out/report.md"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 8, result.output
    text = (home / "out" / "report.md").read_text(encoding="utf-8")
    doc = json.loads((home / "out" / "report.json").read_text(encoding="utf-8"))
    # What ran: the wheel by its file name, never its folder.
    assert doc["ran"] == f"mambawin verify {wheel.name} --skip smoke --report report.md"
    assert str(wheel.parent) not in json.dumps(doc["ran"]) and str(wheel.parent) not in text
    # Where: this machine, the probe's torch and GPU, and the driver.
    assert doc["where"]["torch"] == "2.8.0" and doc["where"]["gpu"] == "NVIDIA H100"
    assert doc["where"]["capability"] == "sm_90" and doc["where"]["driver"] == DRIVER
    assert doc["where"]["os"] and doc["where"]["python"]
    assert "| NVIDIA driver | 572.16 |" in text and "| GPU | NVIDIA H100 (sm_90) |" in text
    # Each step in the table, the first failure's error in full.
    assert [s["name"] for s in doc["steps"]][:2] == ["static", "fit"]
    for step in doc["steps"]:
        assert f"| {step['name']} | {step['status']} |" in text
    static = doc["steps"][0]
    assert static["status"] == "fail"
    assert doc["first_error"]["step"] == "static"
    assert doc["first_error"]["summary"] == static["summary"]
    assert "First error, at `static`:" in text and doc["first_error"]["text"] in text
    assert doc["passed"] is False and text.startswith(f"<!-- {send.KIND}")
    assert doc["wheels"] == {wheel.name: doc["wheels"][wheel.name]}


def test_the_json_report_round_trips_and_names_the_other_file(home, monkeypatch):
    wheel = make_wheel(home / "wheels", files={"selective_scan_cuda.py": STANDIN})
    _fake_verify(monkeypatch, wheel_gpu_code=lambda archive, info: (code("sm_90"), "sm_90"))
    runner, skip = CliRunner(), "smoke,calls,blocks,compile"
    result = runner.invoke(app, ["verify", str(wheel), "--skip", skip, "--report", "r.json"])
    assert result.exit_code == 0, result.output
    raw = (home / "r.json").read_text(encoding="utf-8")
    doc = json.loads(raw)
    assert json.loads(json.dumps(doc)) == doc and doc["kind"] == send.KIND
    assert doc["passed"] is True and doc["first_error"] is None
    # The Markdown beside it renders the same document (each file sealed with its sha256).
    assert doc.pop(seal.HASH_KEY)
    assert (home / "r.md").read_bytes() == seal.sealed_markdown(send.markdown(doc))
    assert "First error" not in send.markdown(doc)
    # A second run overwrites the reports it wrote (a user re-running after a fix).
    again = runner.invoke(app, ["verify", str(wheel), "--skip", skip, "--report", "r.md"])
    assert again.exit_code == 0, again.output
    assert json.loads((home / "r.json").read_text(encoding="utf-8"))["ran"].endswith("r.md")


def test_json_keeps_its_shape_with_a_report(home, monkeypatch):
    wheel = _failing_wheel(home)
    _fake_verify(monkeypatch)
    plain = json.loads(CliRunner().invoke(app, ["verify", str(wheel), "--json"]).stdout)
    result = CliRunner().invoke(app, ["verify", str(wheel), "--json", "--report", "a.md"])
    assert result.exit_code == 8
    data = json.loads(result.stdout)
    assert sorted(data) == sorted(plain) and data["exit_code"] == 8
    assert (home / "a.md").is_file() and (home / "a.json").is_file()


def _bad(home: Path, how: str) -> str:
    if how == "folder":
        (home / "r.md").mkdir()
    elif how == "fifo":
        os.mkfifo(home / "r.md")
    elif how == "symlink":
        (home / "elsewhere.md").write_text("x")
        (home / "r.md").symlink_to(home / "elsewhere.md")
    elif how == "dangling symlink":
        (home / "r.md").symlink_to(home / "nowhere.md")
    elif how == "foreign file":
        (home / "r.md").write_text("my notes\n")
    elif how == "foreign sibling":
        (home / "r.json").write_text('{"mine": true}\n')
    elif how == "missing folder":
        return "no/such/r.md"
    elif how == "folder is a file":
        (home / "f").write_text("")
        return "f/r.md"
    elif how == "suffix":
        return "report.txt"
    return "r.md"


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("folder", "r.md is a folder: pass a file path"),
        ("fifo", "r.md is a FIFO (named pipe): pass a file path"),
        ("symlink", "r.md is a symlink: pass a plain file path"),
        ("dangling symlink", "r.md is a symlink: pass a plain file path"),
        ("foreign file", "r.md already exists and is not a report mambawin wrote"),
        ("foreign sibling", "r.json already exists and is not a report mambawin wrote (--report"),
        ("missing folder", "the folder no/such does not exist"),
        ("folder is a file", "f is not a folder"),
        ("suffix", "the name must end in .md or .json"),
    ],
)
def test_a_bad_report_path_is_refused_before_any_work(home, monkeypatch, how, says):
    wheel = _failing_wheel(home)
    named = _bad(home, how)
    before = sorted(p.name for p in home.rglob("*"))
    monkeypatch.setattr(pipeline, "verify", lambda *a, **k: pytest.fail("verify ran"))
    result = CliRunner().invoke(app, ["verify", str(wheel), "--report", named])
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and len(result.output.strip().splitlines()) == 1
    assert says in " ".join(result.output.split()), result.output
    assert sorted(p.name for p in home.rglob("*")) == before
    as_json = CliRunner().invoke(app, ["verify", str(wheel), "--json", "--report", named])
    assert as_json.exit_code == 2 and json.loads(as_json.stdout)["exit_code"] == 2


def test_an_os_error_writing_is_exit_10_and_leaves_the_earlier_report(home, monkeypatch):
    wheel = _failing_wheel(home)
    _fake_verify(monkeypatch)
    assert CliRunner().invoke(app, ["verify", str(wheel), "--report", "r.md"]).exit_code == 8
    earlier = {name: (home / name).read_bytes() for name in ("r.md", "r.json")}
    moves = []

    def full_disk(src: Path, dst: Path) -> None:
        moves.append(dst)
        if len(moves) == 3:  # the second report, after the first was moved in
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        os.replace(src, dst)

    monkeypatch.setattr(atomic, "replace_file", full_disk)
    result = CliRunner().invoke(app, ["verify", str(wheel), "--seed", "3", "--report", "r.md"])
    assert result.exit_code == 10, result.output
    assert "neither file was written" in result.output
    assert {name: (home / name).read_bytes() for name in ("r.md", "r.json")} == earlier
    assert sorted(p.name for p in home.iterdir()) == ["r.json", "r.md", "wheels"]


def test_markdown_keeps_a_table_and_a_fence_whole():
    failing = StepResult(
        "install", "fail", "pip said | no\nreally", {"error": "boom", "tail": "```\nTraceback"}
    )
    report = VerifyReport("w.whl", Target(), (StepResult("static", "ok", "fine"), failing))
    doc = send.document(report, "mambawin verify w.whl --report r.md", send.where(report, None))
    text = send.markdown(doc)
    assert "| install | fail |  | pip said \\| no really |" in text
    assert "````text\nboom\n```\nTraceback\n````" in text
    assert "| NVIDIA driver | unknown |" in text and "| GPU | unknown |" in text


def test_a_long_error_is_cut_in_the_markdown_and_whole_in_the_json():
    # The conv step's details made a 70 KB report on the H100; GitHub takes 65,536 characters.
    details = {f"case {n}": {"max_abs": n, "reason": "x" * 80} for n in range(2000)}
    failing = StepResult("conv", "fail", "63 of 63 cases failed", details)
    report = VerifyReport("w.whl", Target(), (failing,))
    doc = send.document(report, "mambawin verify w.whl --report r.md", send.where(report, None))
    text = send.markdown(doc)
    assert len(text) < 10_000 and len(doc["first_error"]["text"]) > 100_000
    assert "more lines: the whole text is in the JSON report)" in text
    assert doc["first_error"]["text"].splitlines()[1] in text


def test_the_driver_comes_from_nvidia_smi_or_is_unknown(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert probe_driver() is None
    _fake_smi(tmp_path)
    assert probe_driver() == DRIVER


def test_the_home_folder_is_shortened_to_a_tilde(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "jane"))
    venv = tmp_path / "jane" / "AppData" / "venv"
    failing = StepResult("install", "fail", f"cannot import from {venv}", {"error": f"{venv}: no"})
    report = VerifyReport("w.whl", Target(), (failing,))
    doc = send.document(report, "mambawin verify w.whl --report r.md", send.where(report, None))
    assert "jane" not in json.dumps(doc) and "jane" not in send.markdown(doc)
    assert doc["first_error"]["text"] == f"~{os.sep}AppData{os.sep}venv: no"
