"""The matrix: exact wheel names, what exists already, and one-line reasons for impossible cells."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.team.matrix import BUILT, IMPOSSIBLE, INDEXED, TODO, expand
from mambawin.team.spec import PackageSpec
from mambawin.team.spec_reader import parse_spec

SPEC = """\
python = ["3.10", "3.12"]
archs = ["90"]
wheelhouse = "wh"

[[package]]
name = "mamba-ssm"
ref = "v2.2.6"

[[torch]]
version = "2.11.0"
cuda = "13.0"
index = "https://download.pytorch.org/whl/cu130"
"""


def pinned(package: PackageSpec) -> tuple[str | None, str]:
    """Versions as the tags say, without looking for a mirror."""
    return package.ref.removeprefix("v"), ""


def cells_of(text: str, tmp_path: Path) -> list:
    return expand(parse_spec(text, tmp_path / "team.toml"), resolve=pinned)


def test_each_cell_names_the_exact_wheel(tmp_path: Path) -> None:
    cells = cells_of(SPEC, tmp_path)
    assert [c.wheel for c in cells] == [
        "mamba_ssm-2.2.6+cu130torch2.11-cp310-cp310-win_amd64.whl",
        "mamba_ssm-2.2.6+cu130torch2.11-cp312-cp312-win_amd64.whl",
    ]
    assert {c.status for c in cells} == {TODO}


def test_wheelhouse_and_index_mark_cells(tmp_path: Path) -> None:
    (tmp_path / "wh").mkdir()
    (tmp_path / "wh" / "mamba_ssm-2.2.6+cu130torch2.11-cp310-cp310-win_amd64.whl").touch()
    (tmp_path / "site" / "files").mkdir(parents=True)
    (
        tmp_path / "site" / "files" / "mamba_ssm-2.2.6+cu130torch2.11-cp312-cp312-win_amd64.whl"
    ).touch()
    cells = cells_of('index = "site"\n' + SPEC, tmp_path)
    assert [c.status for c in cells] == [BUILT, INDEXED]


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (
            ('python = ["3.10", "3.12"]', 'python = ["3.10"]'),
            "torch 2.11.0 has no wheel for Python 3.10",
        ),
        (('archs = ["90"]', 'archs = ["70", "90"]'), "CUDA 13.0 cannot compile sm_70 (removed in"),
        (('cuda = "13.0"', 'cuda = "12.4"'), "CUDA 12.4 cannot compile sm_120 (needs CUDA 12.8+)"),
    ],
)
def test_impossible_cells_say_why(tmp_path: Path, edit: tuple[str, str], reason: str) -> None:
    text = SPEC.replace('version = "2.11.0"', 'version = "2.15.0"') if "3.10" in edit[1] else SPEC
    text = text.replace('archs = ["90"]', 'archs = ["90", "120"]') if "12.4" in edit[1] else text
    cell = cells_of(text.replace(*edit), tmp_path)[0]
    assert cell.status == IMPOSSIBLE
    assert reason.replace("2.11.0", "2.15.0") in cell.reason
    assert "\n" not in cell.reason


def test_old_causal_conv1d_with_mamba_2_is_impossible(tmp_path: Path) -> None:
    text = SPEC + '\n[[package]]\nname = "causal-conv1d"\nref = "v1.2.0"\n'
    cells = cells_of(text, tmp_path)
    conv = [c for c in cells if c.package.name == "causal-conv1d"]
    assert conv and all(c.status == IMPOSSIBLE for c in conv)
    assert "mamba-ssm 2.2.6 needs causal-conv1d>=1.5.1" in conv[0].reason
    fixed = cells_of(text.replace("v1.2.0", "v1.5.2"), tmp_path)
    assert {c.status for c in fixed} == {TODO}


def test_version_is_read_at_the_ref_from_a_local_clone(tmp_path: Path) -> None:
    repo = tmp_path / "conv"
    (repo / "causal_conv1d").mkdir(parents=True)
    (repo / "causal_conv1d" / "__init__.py").write_text('__version__ = "1.6.1"\n')
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    for argv in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"], ["tag", "v1.6.1.post4"]):
        subprocess.run(["git", "-C", str(repo), *argv], check=True, env=env)
    text = SPEC.replace(
        'name = "mamba-ssm"\nref = "v2.2.6"',
        f'name = "causal-conv1d"\nref = "v1.6.1.post4"\nrepo = "{repo}"',
    )
    cell = expand(parse_spec(text, tmp_path / "t.toml"))[0]
    # The tag says .post4, but upstream's setup.py takes the wheel's version from the file.
    assert cell.wheel == "causal_conv1d-1.6.1+cu130torch2.11-cp310-cp310-win_amd64.whl"
    assert cell.note == ""


def test_unfetched_branch_has_no_name_until_pinned(tmp_path: Path) -> None:
    text = SPEC.replace('ref = "v2.2.6"', 'ref = "main"')
    spec = parse_spec(text, tmp_path / "t.toml")
    cell = expand(spec)[0]
    assert cell.wheel is None and "set version in the spec" in cell.note
    pinned_spec = replace(spec, packages=(replace(spec.packages[0], version="2.3.2"),))
    assert expand(pinned_spec)[0].wheel == (
        "mamba_ssm-2.3.2+cu130torch2.11-cp310-cp310-win_amd64.whl"
    )


@pytest.mark.upstream
def test_versions_of_real_tags(upstream_repo: Path, tmp_path: Path) -> None:
    text = SPEC.replace('ref = "v2.2.6"', f'ref = "v2.3.2"\nrepo = "{upstream_repo}"')
    cell = expand(parse_spec(text, tmp_path / "t.toml"))[0]
    assert cell.version == "2.3.1"  # v2.3.2's mamba_ssm/__init__.py still says 2.3.1


def test_matrix_cli_json_is_the_cells(tmp_path: Path) -> None:
    spec = tmp_path / "team.toml"
    spec.write_text(SPEC, encoding="utf-8")
    result = CliRunner().invoke(app, ["matrix", "--spec", str(spec), "--json"])
    assert result.exit_code == 0, result.output
    cells = json.loads(result.stdout)
    assert [c["python"] for c in cells] == ["3.10", "3.12"]
    assert cells[1]["wheel"] == "mamba_ssm-2.2.6+cu130torch2.11-cp312-cp312-win_amd64.whl"
    assert cells[1]["torch_index"] == "https://download.pytorch.org/whl/cu130"


def test_matrix_cli_bad_spec_is_exit_2_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "team.toml"
    spec.write_text(SPEC.replace("wheelhouse", "wheelhuose"), encoding="utf-8")
    result = CliRunner().invoke(app, ["matrix", "--spec", str(spec)])
    assert result.exit_code == 2
    assert "team.toml:3: wheelhuose: unknown key" in " ".join(result.output.split())


def test_init_cli_refuses_to_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "m.toml"
    assert CliRunner().invoke(app, ["init", "--out", str(target)]).exit_code == 0
    again = CliRunner().invoke(app, ["init", "--out", str(target)])
    assert again.exit_code == 2 and "already exists" in again.output
