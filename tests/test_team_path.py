"""The team path as docs/team.md writes it: init → matrix → build --spec --plan → ci github →
(the wheels built) → index, on the spec `init` writes, unchanged; and spec refusals that name the
file, line and key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner
from wheel.wheelfile import WheelFile

from mambawin.cli import app
from mambawin.errors import UsageError
from mambawin.team.example import EXAMPLE
from mambawin.team.spec_reader import parse_spec

runner = CliRunner()


def built_wheel(folder: Path, name: str) -> Path:
    """A small valid wheel under the file name a cell's build writes (the build is not what this
    path tests: tests/test_plan_pure.py builds one and compares its name)."""
    dist, version = name.split("-")[:2]
    path = folder / name
    tag = name.removesuffix(".whl").split("-", 2)[2]
    with WheelFile(path, "w") as wheel:
        wheel.writestr(f"{dist}/__init__.py", "")
        info = f"{dist}-{version}.dist-info"
        wheel.writestr(
            f"{info}/METADATA",
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\nRequires-Python: >=3.10\n",
        )
        wheel.writestr(
            f"{info}/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n",
        )
    return path


def test_init_matrix_plan_workflow_index_run_unchanged(tmp_path: Path) -> None:
    spec = tmp_path / "mambawin.toml"
    assert runner.invoke(app, ["init", "--out", str(spec)]).exit_code == 0

    matrix = runner.invoke(app, ["matrix", "--spec", str(spec)])
    assert matrix.exit_code == 0, matrix.output
    cells = json.loads(runner.invoke(app, ["matrix", "--spec", str(spec), "--json"]).stdout)
    wheels = [c["wheel"] for c in cells if c["status"] == "todo"]
    assert len(wheels) == len(cells) == 8
    assert all(w in "".join(matrix.stdout.split()) for w in wheels)  # the result: stdout
    assert "of 8 cells" in matrix.stdout and "of 8 cells" not in matrix.stderr

    plan = runner.invoke(app, ["build", "--spec", str(spec), "--plan"])
    assert plan.exit_code == 0, plan.output
    assert "of 8 cells would be built" in plan.stdout

    out = tmp_path / ".github" / "workflows" / "mamba-wheels.yml"
    workflow = runner.invoke(
        app, ["ci", "github", "--spec", str(spec), "--no-check", "--out", str(out)]
    )
    assert workflow.exit_code == 0, workflow.output
    named = [
        entry["wheel"]
        for job in yaml.safe_load(out.read_text(encoding="utf-8"))["jobs"].values()
        for entry in job.get("strategy", {}).get("matrix", {}).get("include", [])
        if "wheel" in entry
    ]
    assert sorted(named) == sorted(wheels)  # the workflow builds the wheels matrix names

    wheelhouse = tmp_path / "wheelhouse"  # the spec's: its wheels, as the CI jobs leave them
    wheelhouse.mkdir()
    for name in wheels:
        built_wheel(wheelhouse, name)
    again = json.loads(runner.invoke(app, ["matrix", "--spec", str(spec), "--json"]).stdout)
    assert {c["status"] for c in again} == {"built"}

    site = tmp_path / "site"
    index = runner.invoke(app, ["index", str(wheelhouse), "--out", str(site), "--spec", str(spec)])
    assert index.exit_code == 0, index.output
    pages = "".join(p.read_text(encoding="utf-8") for p in site.rglob("*.html"))
    assert all(name in pages for name in wheels)


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        # ci github: no Windows CUDA 12.8 toolchain; the refusal points at that [[torch]]'s cuda.
        (
            'version = "2.9.1"\ncuda = "13.0"',
            'version = "2.9.1"\ncuda = "12.8"',
            "torch[1].cuda: CUDA 12.8 has no Windows wheel set",
        ),
        (
            "[options]",
            '[ci]\nwindows_gpu_runner = "gpu"\nwindows_gpu_arch = "7.0"\n\n[options]',
            "ci.windows_gpu_arch: 7.0",
        ),
    ],
)
def test_ci_github_refusals_name_file_line_and_key(
    tmp_path: Path, old: str, new: str, said: str
) -> None:
    assert old in EXAMPLE
    text = EXAMPLE.replace(old, new)
    spec = tmp_path / "mambawin.toml"
    spec.write_text(text, encoding="utf-8")
    key = said.split(":")[0].split(".")[-1]
    line = max(n for n, ln in enumerate(text.splitlines(), 1) if ln.startswith(f"{key} ="))
    result = runner.invoke(
        app, ["ci", "github", "--spec", str(spec), "--no-check", "--out", str(tmp_path / "w")]
    )
    assert result.exit_code == UsageError.exit_code, result.output
    assert f"mambawin.toml:{line}: {said}" in " ".join(result.stderr.split())


def test_spec_at_names_the_key_else_its_table_else_the_file(tmp_path: Path) -> None:
    spec = parse_spec(EXAMPLE, tmp_path / "team.toml")
    lines = EXAMPLE.splitlines()
    cuda = [n for n, ln in enumerate(lines, 1) if ln.startswith("cuda =")]
    assert spec.at("torch", 1, "cuda") == f"{tmp_path / 'team.toml'}:{cuda[1]}: torch[1].cuda"
    options = lines.index("[options]") + 1
    assert spec.at("options", "abi") == f"{tmp_path / 'team.toml'}:{options}: options.abi"
    assert spec.at("ci", "windows_gpu_arch") == f"{tmp_path / 'team.toml'}: ci.windows_gpu_arch"
