"""`mambawin ci github` with a Windows GPU runner in the spec ([ci] windows_gpu_runner): the check
job runs the full `mambawin verify` there, for both --build-on modes; a runner whose GPU the
spec's archs lack is refused before any YAML is written; the workflow lints clean, its scripts
run against fakes, and each wheel's verify record reaches the index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_ci_cross import STABLE
from test_ci_github import _generate, actionlint_output, ci_github, zizmor_severities
from test_ci_scripts import SOURCE, parses_as_mambawin, run_job

from mambawin.errors import UsageError

yaml = pytest.importorskip("yaml")

TORCH_ABI = """\
python = ["3.11", "3.12"]
archs = ["75", "86"]
[[package]]
name = "mamba-ssm"
ref = "v2.2.6"
[[package]]
name = "causal-conv1d"
ref = "v1.5.2"
[[torch]]
version = "2.10.0"
cuda = "13.0"
[[torch]]
version = "2.11.0"
cuda = "13.0"
"""

GPU = '[ci]\nwindows_gpu_runner = "gpu-windows"\nwindows_gpu_arch = "7.5"\n'


def generate(
    tmp_path: Path, spec: str, *extra: str, publish: str = "pages"
) -> tuple[Path, dict[str, Any]]:
    return _generate(tmp_path, spec, publish, "--mambawin", SOURCE, *extra)


def test_a_gpu_runner_adds_a_check_of_every_wheel_with_its_own_python_and_torch(
    tmp_path: Path,
) -> None:
    _, workflow = generate(tmp_path, TORCH_ABI + GPU)
    jobs = workflow["jobs"]
    assert list(jobs) == ["build", "check", "publish"]
    check = jobs["check"]
    assert check["runs-on"] == "gpu-windows" and check["needs"] == "build"
    assert check["permissions"] == {"contents": "read"}
    assert jobs["publish"]["needs"] == ["build", "check"]
    built = {e["wheel"] for e in jobs["build"]["strategy"]["matrix"]["include"]}
    include = check["strategy"]["matrix"]["include"]
    # 2 Pythons x 2 torches: each check installs the torch its wheels were built against.
    assert sorted((e["python"], e["torch"]) for e in include) == [
        ("3.11", "2.10.0"),
        ("3.11", "2.11.0"),
        ("3.12", "2.10.0"),
        ("3.12", "2.11.0"),
    ]
    for entry in include:
        wheels = entry["wheels"].split()
        assert len(wheels) == 2 and entry["records"] == entry["wheels"]
        for wheel in wheels:
            assert f"torch{entry['torch'][:4]}" in wheel
            assert f"cp{entry['python'].replace('.', '')}" in wheel
    assert {w for e in include for w in e["wheels"].split()} == built


def test_without_a_gpu_runner_the_windows_build_has_no_check(tmp_path: Path) -> None:
    _, workflow = generate(tmp_path, TORCH_ABI)
    assert list(workflow["jobs"]) == ["build", "publish"]
    steps = workflow["jobs"]["publish"]["steps"]
    assert not any(s.get("name") == "the verify records" for s in steps)


def test_the_gpu_check_scripts_run_the_full_verify_and_hand_on_the_records(
    tmp_path: Path,
) -> None:
    _, workflow = generate(tmp_path, TORCH_ABI + GPU)
    for entry in workflow["jobs"]["check"]["strategy"]["matrix"]["include"]:
        wheels = entry["wheels"].split()
        downloaded = (*(f"wheelhouse/{w}" for w in wheels), "report.json")
        # A self-hosted runner keeps its workspace: an earlier run's wheel must not be verified.
        stale = ("check/mamba_ssm-2.2.5-cp312-cp312-win_amd64.whl", "records/old.verify.json")
        calls = run_job(workflow, "check", entry, tmp_path, files=(*downloaded, *stale))
        (gather,) = calls["the wheels and their requirements"]
        # pytest for upstream's tests, beside the wheels' own requirements.
        assert gather[:5] == ["python", "-m", "pip", "install", "pytest"]
        assert sorted(gather[5:]) == sorted(f"check/{w}" for w in wheels)
        (verify,) = calls["mambawin verify"]
        parses_as_mambawin(verify[1:])
        assert verify[1:] == [
            "verify",
            "check",
            "--upstream-tests",
            "--json",
            "--report",
            "report.json",
        ]
        assert calls["the index's verify records"] == []  # cp is no fake: it really copied


def test_the_records_step_puts_the_report_beside_each_wheel_it_names(tmp_path: Path) -> None:
    _, workflow = generate(tmp_path, TORCH_ABI + GPU)
    job = workflow["jobs"]["check"]
    (entry, *_) = job["strategy"]["matrix"]["include"]
    step = next(s for s in job["steps"] if s.get("name") == "the index's verify records")
    from test_ci_scripts import run_step

    run_step(step, {}, entry, tmp_path, files=("report.json",))
    records = sorted(p.name for p in (tmp_path / "run" / "records").iterdir())
    assert records == sorted(f"{w}.verify.json" for w in entry["records"].split())
    upload = next(s for s in job["steps"] if s.get("name") == "the verify records for the index")
    assert upload["with"] == {"name": "${{ matrix.record }}", "path": "records/*.verify.json"}
    assert upload["if"] == step["if"] == "${{ matrix.records != '' }}"


def test_a_stable_cross_build_is_checked_on_the_gpu_runner_for_every_torch_it_serves(
    tmp_path: Path,
) -> None:
    spec = STABLE.replace('archs = ["90", "8.6"]', 'archs = ["90", "8.6", "75"]') + GPU
    _, workflow = generate(tmp_path, spec, "--build-on", "linux")
    check = workflow["jobs"]["check"]
    assert check["runs-on"] == "gpu-windows" and check["needs"] == "cross"
    assert "GPU" in check["name"] and "no GPU" not in check["name"]
    include = check["strategy"]["matrix"]["include"]
    assert sorted(e["torch"] for e in include) == ["2.10.0", "2.11.0"]
    # Each stable wheel is checked in both torches; its record comes from its own (the floor).
    (floor,) = [e for e in include if e["torch"] == "2.10.0"]
    (newer,) = [e for e in include if e["torch"] == "2.11.0"]
    assert floor["wheels"] == newer["wheels"] == floor["records"] and newer["records"] == ""
    verify = next(s for s in check["steps"] if s.get("name") == "mambawin verify")
    assert "--upstream-tests" in verify["run"]


@pytest.mark.parametrize("build_on", ["windows", "linux"])
def test_the_gpu_workflow_lints_clean(build_on: str, tmp_path: Path) -> None:
    base = STABLE if build_on == "linux" else TORCH_ABI
    spec = base.replace('archs = ["90", "8.6"]', 'archs = ["90", "8.6", "75"]') + GPU
    out, _ = generate(tmp_path, spec, "--build-on", build_on)
    # A self-hosted runner's label is the repository's own: actionlint is told it, as a team
    # tells it in .github/actionlint.yaml (docs/team.md).
    config = tmp_path / "actionlint.yaml"
    config.write_text("self-hosted-runner:\n  labels:\n    - gpu-windows\n", encoding="utf-8")
    assert actionlint_output(out, config) == (0, "")
    severities, report = zizmor_severities(out)
    assert "High" not in severities and "Medium" not in severities, report


@pytest.mark.parametrize(
    ("gpu", "archs", "refused"),
    [
        ("7.5", '["86", "90"]', True),  # a T4 runs neither sm_86 nor sm_90
        ("8.9", '["75", "90"]', True),  # an L4: not another major's code
        ("8.9", '["90"]', True),
        ("8.9", '["86", "90"]', False),  # sm_86 SASS runs on 8.9 (same major, older minor)
        ("8.9", '["90", "8.0+PTX"]', False),  # compute_80 PTX is JIT-compiled for it
        ("7.5", '["75"]', False),
    ],
)
def test_a_runner_whose_gpu_the_archs_lack_is_refused(
    gpu: str, archs: str, refused: bool, tmp_path: Path
) -> None:
    spec = TORCH_ABI.replace('archs = ["75", "86"]', f"archs = {archs}")
    spec += GPU.replace('"7.5"', f'"{gpu}"')
    out = tmp_path / "w.yml"
    result = ci_github(tmp_path, spec, "--out", str(out))
    if not refused:
        assert result.exit_code == 0, result.output
        return
    assert result.exit_code == UsageError.exit_code, result.output
    assert result.stderr.count("\n") == 1
    message = " ".join(result.stderr.split())
    line = 1 + spec.splitlines().index(f'windows_gpu_arch = "{gpu}"')  # file:line: key
    assert f"mambawin.toml:{line}: ci.windows_gpu_arch: {gpu}" in message, message
    assert "gpu-windows" in message
    assert f'add "{gpu.replace(".", "")}" to archs' in message
    assert not out.exists()


def test_without_the_arch_the_runner_is_taken_and_verify_names_a_missing_arch(
    tmp_path: Path,
) -> None:
    # The spec does not say which GPU the runner has: nothing to refuse here; verify's fit step
    # names the arch the wheel lacks on that GPU (tests/test_verify.py holds that case).
    spec = TORCH_ABI.replace('archs = ["75", "86"]', 'archs = ["86"]')
    _, workflow = generate(tmp_path, spec + '[ci]\nwindows_gpu_runner = "gpu-windows"\n')
    assert workflow["jobs"]["check"]["runs-on"] == "gpu-windows"


def test_publish_without_records_or_attestation_when_nothing_is_published(tmp_path: Path) -> None:
    _, workflow = generate(tmp_path, TORCH_ABI + GPU, publish="none")
    assert list(workflow["jobs"]) == ["build", "check"]
    text = (tmp_path / ".github" / "workflows" / "mamba-wheels.yml").read_text(encoding="utf-8")
    assert "attestations: write" not in text and "id-token" not in text


def test_a_check_over_githubs_matrix_limit_is_refused(tmp_path: Path) -> None:
    torches = "".join(f'[[torch]]\nversion = "2.10.{n}"\ncuda = "13.0"\n' for n in range(130))
    spec = TORCH_ABI.split("[[torch]]")[0] + torches + GPU  # 2 Pythons x 130 torches = 260
    out = tmp_path / "w.yml"
    result = ci_github(tmp_path, spec, "--out", str(out))
    assert result.exit_code == UsageError.exit_code, result.output
    assert "260 Python x torch pairs, over GitHub's 256" in " ".join(result.stderr.split())
    assert not out.exists()
