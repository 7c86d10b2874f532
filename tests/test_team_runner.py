"""`build --spec`: environments per Python/torch, one build per cell, failures contained.

uv and each environment's python are fakes on PATH (POSIX scripts) that record how they were
called; the fake python "builds" by writing the wheel the real pipeline would name.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.stage import Status
from mambawin.team import envs, runner
from mambawin.team.runner import BUILT, ELSEWHERE, FAILED, SKIPPED, RunOptions, run_spec
from mambawin.team.spec_reader import parse_spec
from tests.fakes.reporter import RecordingReporter

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fake tools are POSIX scripts")

SPEC = """\
python = ["3.11", "3.12"]
archs = ["90"]
platforms = ["win_amd64", "linux_aarch64"]

[[package]]
name = "mamba-ssm"
ref = "v2.2.6"

[[package]]
name = "causal-conv1d"
ref = "v1.5.2"

[[torch]]
version = "2.11.0"
cuda = "13.0"
index = "https://download.pytorch.org/whl/cu130"
"""

FAKE_PYTHON = """#!@EXE@
import json, os, sys
from pathlib import Path
with open(os.environ["FAKE_LOG"], "a") as log:
    home = "CUDA_HOME=" + os.environ["CUDA_HOME"]
    log.write(json.dumps(["python@PY@", *sys.argv[1:], home]) + "\\n")
args = sys.argv[1:]
assert args[:3] == ["-m", "mambawin", "build"], args
opt = lambda name: args[args.index(name) + 1]
if "causal-conv1d" in opt("--repo"):
    print("doctor ok")
    print("error: compile failed: causal_conv1d_fwd.cu(12): error C2059")
    sys.exit(6)
dist, version = "mamba_ssm", opt("--ref")[1:]
tag = "cp" + "@PY@".replace(".", "")
name = f"{dist}-{version}+{opt('--local-version')}-{tag}-{tag}-win_amd64.whl"
Path(opt("--out")).mkdir(parents=True, exist_ok=True)
(Path(opt("--out")) / name).write_bytes(b"wheel")
print("built", name)
"""

FAKE_UV = """#!@EXE@
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(["uv", *args]) + "\\n")
if args[0] == "venv":
    root, py = Path(args[-1]), args[args.index("--python") + 1]
    (root / "bin").mkdir(parents=True)
    fake = root / "bin" / "python"
    fake.write_text(os.environ["FAKE_PYTHON"].replace("@PY@", py))
    fake.chmod(0o755)
elif any(a.startswith("torch==") for a in args) and "py3.12" in args[args.index("--python") + 1]:
    print("error: No solution found when resolving dependencies: torch==2.11.0 for cp312")
    sys.exit(1)
"""


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake uv on PATH; returns the log every fake writes its argv to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    uv = bin_dir / "uv"
    uv.write_text(FAKE_UV.replace("@EXE@", sys.executable))
    uv.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("FAKE_PYTHON", FAKE_PYTHON.replace("@EXE@", sys.executable))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    toolkit = tmp_path / "cuda-13.0"
    (toolkit / "include").mkdir(parents=True)
    (toolkit / "include" / "cuda_runtime.h").touch()
    (toolkit / "bin").mkdir()
    nvcc = toolkit / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("CUDA_PATH_V13_0", str(toolkit))
    return log


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_builds_what_it_can_and_contains_failures(fakes: Path, tmp_path: Path) -> None:
    spec = parse_spec(SPEC.replace('"3.12"]', '"3.12", "3.13"]'), tmp_path / "team.toml")
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    (wheelhouse / "mamba_ssm-2.2.6+cu130torch2.11-cp313-cp313-win_amd64.whl").write_bytes(b"old")
    options = RunOptions(platform="win_amd64", envs_root=tmp_path / "envs")
    reporter = RecordingReporter()
    results = {r.cell.id: r for r in run_spec(spec, options, reporter=reporter)}

    def outcome(package: str, python: str, platform: str = "win_amd64") -> str:
        ref = "v2.2.6" if package == "mamba-ssm" else "v1.5.2"
        return results[f"{package}-{ref}-py{python}-torch2.11.0-cu130-{platform}"].outcome

    assert outcome("mamba-ssm", "3.11") == BUILT
    assert outcome("mamba-ssm", "3.13") == SKIPPED  # already in the wheelhouse
    assert outcome("mamba-ssm", "3.11", "linux_aarch64") == ELSEWHERE
    assert outcome("causal-conv1d", "3.11") == FAILED  # and the next cells still ran
    assert outcome("mamba-ssm", "3.12") == FAILED  # its environment could not get torch
    conv = results["causal-conv1d-v1.5.2-py3.11-torch2.11.0-cu130-win_amd64"]
    assert conv.detail == "error: compile failed: causal_conv1d_fwd.cu(12): error C2059"
    assert conv.log is not None and "error C2059" in conv.log.read_text()
    env_failure = results["causal-conv1d-v1.5.2-py3.12-torch2.11.0-cu130-win_amd64"].detail
    assert env_failure.startswith("environment: uv exited with code 1")
    built = results["mamba-ssm-v2.2.6-py3.11-torch2.11.0-cu130-win_amd64"].wheel
    assert built == wheelhouse / "mamba_ssm-2.2.6+cu130torch2.11-cp311-cp311-win_amd64.whl"
    # Narrated through the one Reporter: each cell's verdict as it finishes, the builds' lines
    # as notes (a cell that failed is ✗, never a plain line among the build's output).
    verdicts = {d.name: d.status for d in reporter.done}
    assert verdicts["mamba-ssm-v2.2.6-py3.11-torch2.11.0-cu130-win_amd64"] is Status.OK
    assert verdicts["causal-conv1d-v1.5.2-py3.11-torch2.11.0-cu130-win_amd64"] is Status.FAIL
    assert any("error C2059" in note for note in reporter.notes)


def test_environments_come_from_the_spec_index_and_are_reused(fakes: Path, tmp_path: Path) -> None:
    spec = parse_spec(SPEC.replace(', "3.12"', ""), tmp_path / "team.toml")
    options = RunOptions(platform="win_amd64", envs_root=tmp_path / "envs", jobs=3)
    run_spec(spec, options, reporter=RecordingReporter())
    made = calls(fakes)
    assert made[0] == [
        "uv",
        "venv",
        "--allow-existing",  # the folder holds mambawin's ownership marker, made first
        "--python",
        "3.11",
        str(tmp_path / "envs" / "py3.11-torch2.11.0-cu130"),
    ]
    assert made[1][-3:] == [
        "torch==2.11.0",
        "--index-url",
        "https://download.pytorch.org/whl/cu130",
    ]
    assert made[2][-2:] == envs.mambawin_requirement()[-2:] and "ninja" in made[2]
    build = next(c for c in made if c[0] == "python3.11" and "state-spaces" in str(c))
    assert build[build.index("--local-version") + 1] == "cu130torch2.11"
    assert build[build.index("--arch") + 1] == "90"
    assert build[build.index("--jobs") + 1] == "3"
    assert build[build.index("--out") + 1] == str(tmp_path / "wheelhouse")
    assert build[-1] == f"CUDA_HOME={tmp_path / 'cuda-13.0'}"  # the toolkit of torch's CUDA
    fakes.unlink()
    second = run_spec(spec, options, reporter=RecordingReporter())
    assert not [c for c in calls(fakes) if c[0] == "uv"]  # the environment is ready: reused
    mamba = next(
        r for r in second if r.cell.package.name == "mamba-ssm" and r.cell.platform == "win_amd64"
    )
    assert mamba.outcome == SKIPPED  # built by the first run


def test_a_cuda_variant_without_its_toolkit_fails_before_any_environment(
    fakes: Path, tmp_path: Path
) -> None:
    text = SPEC.replace('cuda = "13.0"', 'cuda = "10.2"').replace('"90"', '"75"')
    spec = parse_spec(text.replace("/cu130", "/cu102"), tmp_path / "team.toml")
    options = RunOptions(platform="win_amd64", envs_root=tmp_path / "envs")
    results = [
        r for r in run_spec(spec, options, reporter=RecordingReporter()) if r.outcome != ELSEWHERE
    ]
    assert {r.outcome for r in results} == {FAILED}
    assert results[0].detail.startswith("no CUDA 10.x toolkit found for torch's cu102")
    assert not calls(fakes)  # no environment was made for cells that cannot build


def test_package_and_requirement_flags() -> None:
    from mambawin.team.spec import Options

    assert runner.package_args("causal-conv1d") == ["--package", "causal-conv1d"]
    assert runner.package_args("mamba-ssm") == []
    from mambawin.builder.backends import spec_args

    options = Options(drop=("tilelang",), keep=("x",))
    values = {f: getattr(options, f) for f in ("keep_complex", "skip_patches", "drop", "keep")}
    defaults = {"abi": "torch", "source_from": "auto", "arch_groups": "proven"}
    assert spec_args({**values, **defaults}) == ["--drop", "tilelang", "--keep", "x"]


def test_plan_spec_creates_installs_and_compiles_nothing(fakes: Path, tmp_path: Path) -> None:
    spec = parse_spec(SPEC, tmp_path / "team.toml")
    options = RunOptions(platform="win_amd64", envs_root=tmp_path / "envs")
    planned = runner.plan_spec(spec, options)
    assert not calls(fakes) and not (tmp_path / "envs").exists()
    building = [p for p in planned if p.outcome == "build"]
    assert building and all(p.argv[1:4] == ("-m", "mambawin", "build") for p in building)
    assert all(p.env is not None and p.env.parent == tmp_path / "envs" for p in building)
    assert {p.cell.id for p in planned} == {c.id for c in runner.expand(spec)}


def test_cli_build_spec_plan_runs_no_environment_tool(fakes: Path, tmp_path: Path) -> None:
    spec = tmp_path / "team.toml"
    spec.write_text(SPEC, encoding="utf-8")
    result = CliRunner().invoke(app, ["build", "--spec", str(spec), "--plan", "--json"])
    assert result.exit_code == 0, result.output
    assert not calls(fakes)
    assert all("argv" in row for row in json.loads(result.stdout))


def test_cli_exit_code_and_conflicting_options(
    fakes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "team.toml"
    spec.write_text(
        SPEC.replace(
            'platforms = ["win_amd64", "linux_aarch64"]',
            'platforms = ["linux_x86_64", "win_amd64"]',
        )
    )
    monkeypatch.setattr("mambawin.team.envs.envs_root", lambda: tmp_path / "envs")
    result = CliRunner().invoke(app, ["build", "--spec", str(spec), "--json"])
    assert result.exit_code == 6
    assert "cells failed" in result.output
    conflict = CliRunner().invoke(app, ["build", "--spec", str(spec), "--ref", "v2.3.0"])
    assert conflict.exit_code == 2 and "drop --ref" in conflict.output


@pytest.mark.slow
def test_real_venv_and_pip_install_torch_from_the_spec_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real environment (venv + pip, uv hidden) whose torch comes from the spec's index only."""
    import subprocess

    from wheel.wheelfile import WheelFile

    from mambawin.index.simple import build_index
    from mambawin.team.spec import TorchSpec

    monkeypatch.setattr(
        envs.proc,
        "which",
        lambda name, path=None: (
            None if name == "uv" else __import__("shutil").which(name, path=path)
        ),
    )
    house = tmp_path / "torch-wheels"
    house.mkdir()
    with WheelFile(house / "torch-2.11.0+cu130-py3-none-any.whl", "w") as wheel:
        wheel.writestr("torch/__init__.py", '__version__ = "2.11.0+cu130"\n')
        wheel.writestr(
            "torch-2.11.0+cu130.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0+cu130\n\n",
        )
        wheel.writestr(
            "torch-2.11.0+cu130.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
    build_index(house, tmp_path / "idx")
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    torch = TorchSpec("2.11.0", "13.0", (tmp_path / "idx" / "cu130" / "simple").as_uri())
    env = envs.ensure_env(python, torch, root=tmp_path / "envs")
    assert env.tool == "venv+pip"
    done = subprocess.run(
        [str(env.python), "-c", "import torch, mambawin, ninja; print(torch.__version__)"],
        capture_output=True,
        text=True,
        check=True,
        env=envs.child_environ(env),
    )
    assert done.stdout.strip() == "2.11.0+cu130"


@pytest.mark.skipif(sys.platform == "win32", reason="pyenv layout and a sh script: POSIX only")
def test_find_python_falls_back_to_pyenvs_own_installs(tmp_path: Path, monkeypatch) -> None:
    # pyenv's `python3.99` shim on PATH fails unless that version is selected: the finder must
    # still find the install under $PYENV_ROOT/versions, and prefer the newest patch release.
    from mambawin.team import envs

    for patch in ("1", "10"):
        python = tmp_path / "versions" / f"3.99.{patch}" / "bin" / "python3.99"
        python.parent.mkdir(parents=True)
        python.write_text("#!/bin/sh\necho 3.99\n")
        python.chmod(0o755)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert envs.find_python("3.99") == [str(tmp_path / "versions/3.99.10/bin/python3.99")]


def test_each_cell_builds_with_its_packages_left_out_patches(tmp_path: Path) -> None:
    from mambawin.team.matrix import expand

    text = (
        'python = ["3.12"]\narchs = "90"\n[[package]]\nname = "mamba-ssm"\nref = "v2.2.6"\n'
        '[[package]]\nname = "causal-conv1d"\nref = "v1.5.2"\n[[torch]]\nversion = "2.11.0"\n'
        'cuda = "13.0"\n[options]\nskip_patches = ["silu-bwd-tail", "math-defines"]\n'
    )
    spec = parse_spec(text, tmp_path / "team.toml")
    cells = expand(spec, resolve=lambda package: ("1.0.0", "pinned for the test"))
    argvs = {c.package.name: runner.build_argv(c, Path("py"), spec, RunOptions()) for c in cells}

    def skipped(argv: list[str]) -> list[str]:
        return [argv[i + 1] for i, arg in enumerate(argv) if arg == "--skip-patch"]

    assert skipped(argvs["mamba-ssm"]) == ["math-defines"]
    assert skipped(argvs["causal-conv1d"]) == ["silu-bwd-tail"]
    assert "silu-bwd-tail" not in argvs["mamba-ssm"]
