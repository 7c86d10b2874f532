"""A spec with `abi = "stable"`: the Python and torch axes collapse into one py3-none wheel per
package × CUDA major × platform; `build --spec` and the workflow build each cell once with
`--abi stable` and the matrix's label."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_ci_scripts import generate, includes, parses_as_mambawin, run_job
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.errors import SpecError
from mambawin.team import runner
from mambawin.team.example import EXAMPLE
from mambawin.team.matrix import IMPOSSIBLE, TODO, expand
from mambawin.team.runner import RunOptions
from mambawin.team.spec import PackageSpec
from mambawin.team.spec_reader import parse_spec
from mambawin.toolchain.wine_setup import CUDA_WHEELS

STABLE = '[options]\nabi = "stable"\n'
SPEC = """\
python = ["3.10", "3.11", "3.12"]
platforms = ["win_amd64", "linux_x86_64"]
archs = ["90"]
[[package]]
name = "mamba-ssm"
ref = "v2.2.6"
[[torch]]
version = "2.11.0"
cuda = "12.8"
[[torch]]
version = "2.10.0"
cuda = "12.6"
[[torch]]
version = "2.12.0"
cuda = "13.0"
[[torch]]
version = "2.12.0"
cuda = "cu130"
[[torch]]
version = "2.9.1"
cuda = "12.8"
"""


def pinned(package: PackageSpec) -> tuple[str | None, str]:
    return package.ref.removeprefix("v"), ""


def cells_of(text: str, tmp_path: Path) -> list:
    return expand(parse_spec(text, tmp_path / "team.toml"), resolve=pinned)


def test_abi_is_an_option_and_a_bad_one_names_the_key(tmp_path: Path) -> None:
    assert parse_spec(SPEC + STABLE, tmp_path / "t.toml").options.abi == "stable"
    assert parse_spec(SPEC, tmp_path / "t.toml").options.abi == "torch"
    with pytest.raises(SpecError, match=r"t\.toml:\d+: options\.abi: must be one of torch, stable"):
        parse_spec(SPEC + '[options]\nabi = "abi3"\n', tmp_path / "t.toml")


def test_one_cell_per_package_cuda_major_and_platform(tmp_path: Path) -> None:
    cells = cells_of(SPEC + STABLE, tmp_path)
    todo = [c for c in cells if c.status == TODO]
    assert [c.wheel for c in todo] == [
        "mamba_ssm-2.2.6+cu126.stable.torch2.10-py3-none-win_amd64.whl",
        "mamba_ssm-2.2.6+cu130.stable.torch2.10-py3-none-win_amd64.whl",
        "mamba_ssm-2.2.6+cu126.stable.torch2.10-py3-none-linux_x86_64.whl",
        "mamba_ssm-2.2.6+cu130.stable.torch2.10-py3-none-linux_x86_64.whl",
    ]
    cuda12 = todo[0]
    # Built against the oldest torch at or above the floor for CUDA 12, serving both.
    assert (cuda12.torch.version, cuda12.python) == ("2.10.0", "3.10")
    assert cuda12.serves == ("2.11.0 cu128", "2.10.0 cu126")
    assert todo[1].serves == ("2.12.0 cu130",)  # "13.0" and "cu130" are one torch
    row = cuda12.to_json()
    assert (row["abi"], row["torch_floor"], row["serves"]) == (
        "stable",
        "2.10",
        list(cuda12.serves),
    )


def test_a_torch_below_the_floor_is_impossible_with_the_fix(tmp_path: Path) -> None:
    below = [c for c in cells_of(SPEC + STABLE, tmp_path) if c.status == IMPOSSIBLE]
    assert [(c.torch.version, c.platform) for c in below] == [
        ("2.9.1", "win_amd64"),
        ("2.9.1", "linux_x86_64"),
    ]
    assert below[0].reason == (
        "torch 2.9.1 is older than the stable floor 2.10: drop it, or build it in a spec "
        'with abi = "torch"'
    )


def test_the_init_example_goes_from_8_cells_to_2(tmp_path: Path) -> None:
    assert len(cells_of(EXAMPLE, tmp_path)) == 8
    stable = EXAMPLE.replace("[options]\n", STABLE)
    cells = cells_of(stable, tmp_path)
    assert [c.status for c in cells] == [IMPOSSIBLE, TODO, IMPOSSIBLE, TODO]  # 2.9.1: below
    newer = stable.replace('version = "2.9.1"', 'version = "2.11.0"')
    cells = cells_of(newer, tmp_path)
    assert [c.wheel for c in cells] == [
        "mamba_ssm-2.2.6+cu130.stable.torch2.10-py3-none-win_amd64.whl",
        "causal_conv1d-1.5.2+cu130.stable.torch2.10-py3-none-win_amd64.whl",
    ]
    assert all(c.serves == ("2.10.0 cu130", "2.11.0 cu130") for c in cells)


def test_a_built_stable_wheel_marks_its_cell(tmp_path: Path) -> None:
    (tmp_path / "wheelhouse").mkdir()
    (
        tmp_path / "wheelhouse" / "mamba_ssm-2.2.6+cu130.stable.torch2.10-py3-none-win_amd64.whl"
    ).touch()
    cells = cells_of(SPEC + STABLE, tmp_path)
    assert [c.status for c in cells if c.torch.variant == "cu130"] == ["built", TODO]


def test_build_spec_builds_each_cell_once_with_abi_stable(tmp_path: Path) -> None:
    spec = parse_spec(SPEC + STABLE, tmp_path / "team.toml")
    options = RunOptions(platform="linux_x86_64", envs_root=tmp_path / "envs")
    building = [p for p in runner.plan_spec(spec, options) if p.outcome == "build"]
    assert [p.cell.torch.variant for p in building] == ["cu126", "cu130"]
    for planned in building:
        argv = list(planned.argv)
        assert argv[argv.index("--abi") + 1] == "stable"
        label = argv[argv.index("--local-version") + 1]
        assert label == f"{planned.cell.torch.variant}.stable.torch2.10"
        assert planned.cell.wheel is not None and f"+{label}-py3-none-" in planned.cell.wheel
    assert not (tmp_path / "envs").exists()


def test_matrix_cli_shows_any_python_and_the_floor(tmp_path: Path) -> None:
    spec = tmp_path / "team.toml"
    spec.write_text(SPEC.replace('ref = "v2.2.6"', 'ref = "v2.2.6"\nversion = "2.2.6"') + STABLE)
    result = CliRunner().invoke(app, ["matrix", "--spec", str(spec), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert {r["abi"] for r in rows} == {"stable"} and len(rows) == 6
    shown = CliRunner().invoke(app, ["matrix", "--spec", str(spec)], env={"COLUMNS": "200"})
    assert ">=2.10 cu130" in shown.output and " any " in shown.output


CUDA_12 = any(k.startswith("12.") for k in CUDA_WHEELS)


def windows_buildable(text: str) -> str:
    """The spec without its CUDA 12 torches while the pip-fetched toolchain, which the Windows
    build jobs take CUDA from, has no CUDA 12 wheel set (ci github refuses those cells)."""
    if CUDA_12:
        return text
    return re.sub(r'\[\[torch\]\]\nversion = "[^"]+"\ncuda = "12\.\d"\n', "", text)


def test_the_workflow_passes_abi_stable_and_the_label(tmp_path: Path) -> None:
    text = SPEC.replace('ref = "v2.2.6"', 'ref = "v2.2.6"\nversion = "2.2.6"') + STABLE
    wheels = [
        "mamba_ssm-2.2.6+cu126.stable.torch2.10-py3-none-win_amd64.whl",
        "mamba_ssm-2.2.6+cu130.stable.torch2.10-py3-none-win_amd64.whl",
    ]
    if not CUDA_12:
        wheels = wheels[1:]
    workflow = generate(tmp_path, windows_buildable(text), "none")
    cells = includes(workflow)
    assert [entry["wheel"] for _, entry in cells] == wheels
    for job_id, entry in cells:
        (build,) = run_job(workflow, job_id, entry, tmp_path)[f"build {entry['wheel']}"]
        at = build.index("--abi")
        assert build[at : at + 2] == ["--abi", "stable"]
        label = build.index("--local-version")
        assert build[label + 1] == entry["local_version"]
        # `build --abi` comes with the build side of the stable ABI; the rest parses today.
        parses_as_mambawin([*build[1:at], *build[at + 2 :]])


def test_a_torch_abi_workflow_passes_no_abi(tmp_path: Path) -> None:
    text = SPEC.replace('ref = "v2.2.6"', 'ref = "v2.2.6"\nversion = "2.2.6"')
    workflow = generate(tmp_path, windows_buildable(text), "none")
    job_id, entry = includes(workflow)[0]
    (build,) = run_job(workflow, job_id, entry, tmp_path)[f"build {entry['wheel']}"]
    assert "--abi" not in build and "--local-version" not in build
