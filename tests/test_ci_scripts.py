"""Every `run:` script of the generated workflow, executed as GitHub would run it: in its declared
shell (GitHub's own command line for that shell), with the workflow's, job's and step's `env:`,
`${{ }}` expressions filled in from the matrix entry and the github context, against fakes of the
programs it calls. The fakes record their argv; the tests check what each program was asked, and
that `mambawin`'s argv parses with mambawin's real CLI."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer
from test_ci_github import ci_github

from mambawin.cli import app

yaml = pytest.importorskip("yaml")

# How GitHub runs a `run:` script for each `shell:` (its documented command lines).
SHELLS = {
    "bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail", "{0}"],
    "python": ["python3", "{0}"],
}
FAKES = ("python", "mambawin", "gh", "nvcc", "sccache", "pip", "sudo", "wine")
GITHUB = {
    "github.workspace": "/runner/work/wheels",
    "github.token": "fake-token",
    "github.repository": "team/wheels",
    "github.run_number": "7",
    "github.workflow": "mamba wheels",
    "github.ref": "refs/heads/main",
}
# What earlier steps left (an action's outputs), as a run would have them.
OUTPUTS = {"steps.attest.outputs.attestation-url": "https://github.com/team/wheels/attestations/42"}
_EXPRESSION = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")
# `inputs.NAME || 'default'`: a push run has no inputs, so the default is what the step gets.
_INPUT_OR = re.compile(r"inputs\.(\w+) \|\| '([^']*)'")
SOURCE = "mambawin @ git+https://example.invalid/team/mambawin@" + "a" * 40

SPEC = """\
python = ["3.12"]
archs = ["86", "90"]
[[package]]
name = "mamba-ssm"
ref = "feature/win-fix"
version = "2.2.6"
[[package]]
name = "causal-conv1d"
ref = "v1.5.2"
[[torch]]
version = "2.10.0"
cuda = "13.0"
[[torch]]
version = "2.10.0"
cuda = "cu130"
[options]
drop = ["tilelang"]
keep = ["einops"]
skip_patches = ["silu-bwd-tail"]
"""


def generate(tmp_path: Path, spec: str, publish: str) -> dict[str, Any]:
    out = tmp_path / "wheels.yml"
    result = ci_github(
        tmp_path, spec, "--out", str(out), "--publish", publish, "--mambawin", SOURCE
    )
    assert result.exit_code == 0, result.output
    workflow: dict[str, Any] = yaml.safe_load(out.read_text(encoding="utf-8"))
    return workflow


INPUTS: dict[str, str] = {}  # a push run's: none


def fill(text: str, matrix: dict[str, Any], env: dict[str, str]) -> str:
    """The text with every `${{ }}` replaced as GitHub would; an unknown one fails the test."""

    def value(match: re.Match[str]) -> str:
        name = match[1]
        if name.startswith("matrix."):
            found = matrix[name.removeprefix("matrix.")]
            return ("true" if found else "false") if isinstance(found, bool) else str(found)
        if name.startswith("env."):
            return env[name.removeprefix("env.")]
        if name in GITHUB:
            return GITHUB[name]
        if name in OUTPUTS:
            return OUTPUTS[name]
        given = _INPUT_OR.fullmatch(name)
        if given:
            return INPUTS.get(given[1]) or given[2]
        raise AssertionError(f"the test cannot evaluate ${{{{ {name} }}}}")

    return _EXPRESSION.sub(value, text)


def fake_tools(folder: Path, log: Path, then: dict[str, str] | None = None) -> None:
    """Programs that record their name and argv (one line, tab-separated) and succeed; then[name]
    is bash a fake runs after that (to leave what the real program leaves, or to check)."""
    folder.mkdir()
    for name in FAKES:
        tool = folder / name
        tool.write_text(
            '#!/bin/bash\n{ printf "%s" "$(basename "$0")"; for a in "$@"; do '
            'printf "\\t%s" "$a"; done; printf "\\n"; } >> "'
            + str(log)
            + '"\n'
            + (then or {}).get(name, ""),
            encoding="utf-8",
        )
        tool.chmod(0o755)


def run_step(
    step: dict[str, Any],
    env: dict[str, str],
    matrix: dict[str, Any],
    tmp_path: Path,
    then: dict[str, str] | None = None,
    files: tuple[str, ...] = (),
) -> list[list[str]]:
    """Run one step's script; the argv of every faked program it called (fake_tools' then).
    files: paths the job's earlier steps left in the working folder (downloaded wheels...)."""
    shell = step.get("shell", "bash")
    assert shell in SHELLS, f"step {step.get('name')!r}: the suite cannot run shell {shell!r}"
    work = tmp_path / "run"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    for name in files:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(name, encoding="utf-8")
    log = work / "calls.log"
    fake_tools(work / "bin", log, then)
    script = work / "script"
    script.write_text(step["run"], encoding="utf-8")
    step_env = {k: fill(str(v), matrix, env) for k, v in {**env, **step.get("env", {})}.items()}
    full_env = {
        **step_env,
        "PATH": f"{work / 'bin'}:/usr/bin:/bin",
        "HOME": str(work),
        "GITHUB_ENV": str(work / "github_env"),  # the file the runner reads variables from
    }
    argv = [part.replace("{0}", str(script)) for part in SHELLS[shell]]
    done = subprocess.run(
        argv, cwd=work, env=full_env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"{step.get('name')}: {done.stderr}"
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [line.split("\t") for line in lines]


def run_job(
    workflow: dict[str, Any],
    job_id: str,
    matrix: dict[str, Any],
    tmp_path: Path,
    then: dict[str, str] | None = None,
    files: tuple[str, ...] = (),
) -> dict[str, list[list[str]]]:
    """Every run step of one job for one matrix entry: step name → the calls it made."""
    job = workflow["jobs"][job_id]
    env = {
        k: fill(str(v), matrix, {})
        for k, v in {**workflow.get("env", {}), **job.get("env", {})}.items()
    }
    calls = {}
    for step in job["steps"]:
        if "run" in step:
            calls[fill(step["name"], matrix, env)] = run_step(
                step, env, matrix, tmp_path, then, files
            )
    return calls


def parses_as_mambawin(args: list[str]) -> None:
    """The argv parses with mambawin's real CLI: every option exists and takes its value."""
    group = typer.main.get_command(app)
    with group.make_context("mambawin", list(args), resilient_parsing=False) as ctx:
        name, command, rest = group.resolve_command(ctx, list(args))
        assert command is not None, name
        command.make_context(name, rest, parent=ctx)


def includes(workflow: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (job_id, entry)
        for job_id, job in workflow["jobs"].items()
        if "strategy" in job
        for entry in job["strategy"]["matrix"]["include"]
    ]


def test_every_build_script_runs_and_calls_the_tools_as_meant(tmp_path: Path) -> None:
    workflow = generate(tmp_path, SPEC, "none")
    cells = includes(workflow)
    assert len(cells) == 2  # the two spellings of cu130 are one torch: merged, one job each
    for job_id, entry in cells:
        calls = run_job(workflow, job_id, entry, tmp_path)
        install = calls["torch and mambawin"]
        assert [
            "python",
            "-m",
            "pip",
            "install",
            "torch==2.10.0",
            "--index-url",
            "https://download.pytorch.org/whl/cu130",
        ] in install
        assert install[-1][-1] == SOURCE
        setup, env = calls["the Windows toolchain (MSVC and CUDA from pip)"]
        parses_as_mambawin(setup[1:])
        parses_as_mambawin(env[1:])
        root = "/runner/work/wheels\\.windows-toolchain"
        assert setup[1:] == [
            "toolchain",
            "windows",
            "--setup",
            "--root",
            root,
            "--cuda",
            "13.0",
            "--torch",
            "2.10.0",
            "--accept-license",
            "--json",
        ]
        assert env[1:] == ["toolchain", "windows", "--root", root, "--env", "github"]
        (doctor,) = calls["mambawin doctor"]
        assert doctor[:3] == ["mambawin", "doctor", "--arch"]
        parses_as_mambawin(doctor[1:])
        (build,) = calls[f"build {entry['wheel']}"]
        parses_as_mambawin(build[1:])
        assert build[build.index("--ref") + 1] == entry["ref"]
        assert build[build.index("--drop") + 1] == "tilelang"
        assert build[build.index("--keep") + 1] == "einops"
        assert "--keep-complex" not in build  # keep_complex is for mamba-ssm alone: not set
        skips = build[build.index("--skip-patch") + 1] if "--skip-patch" in build else ""
        assert skips == ("silu-bwd-tail" if entry["package"] == "causal-conv1d" else "")


@pytest.mark.parametrize("publish", ["pages", "release"])
def test_the_publish_scripts_run(publish: str, tmp_path: Path) -> None:
    workflow = generate(tmp_path, SPEC, publish)
    # pip wheel leaves mambawin's wheel where it was asked to (the fake does the same).
    own = "mambawin-0.2.0-py3-none-any.whl"
    then = {"python": '[ "$3" = wheel ] && mkdir -p "$6" && : > "$6/' + own + '"\nexit 0\n'}
    calls = run_job(workflow, "publish", {}, tmp_path, then)
    index = calls["mambawin index"]
    assert index[0] == ["python", "-m", "pip", "install", SOURCE]
    assert index[1] == [
        "python",
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--wheel-dir",
        "mambawin-wheel",
        SOURCE,
    ]
    attestation = OUTPUTS["steps.attest.outputs.attestation-url"]
    assert index[2] == [
        "mambawin",
        "index",
        "wheelhouse",
        "--out",
        "site",
        "--attestation",
        attestation,
        "--with-mambawin",
        f"mambawin-wheel/{own}",
        "--torch",
        "2.10",
    ]
    parses_as_mambawin(index[2][1:])
    # Every wheel is attested before the index is made, by the job that alone may do it.
    job = workflow["jobs"]["publish"]
    names = [s.get("name") or s.get("uses", "").split("@")[0] for s in job["steps"]]
    attest = job["steps"][names.index("attest the wheels")]
    assert attest["uses"].startswith("actions/attest-build-provenance@")
    assert attest["with"] == {"subject-path": "wheelhouse/*.whl"}
    assert names.index("attest the wheels") < names.index("mambawin index")
    assert job["permissions"]["attestations"] == "write" == job["permissions"]["id-token"]
    for other, other_job in workflow["jobs"].items():
        if other != "publish":
            assert other_job["permissions"] == {"contents": "read"}, other
    if publish == "release":
        (release,) = calls["release"]
        assert release[:4] == ["gh", "release", "create", "wheels-7"]


def test_no_call_gets_an_unexpanded_variable(tmp_path: Path) -> None:
    workflow = generate(tmp_path, SPEC, "release")
    everything = [
        call
        for job_id, entry in [*includes(workflow), ("publish", {})]
        for calls in run_job(workflow, job_id, entry, tmp_path).values()
        for call in calls
    ]
    assert everything
    for call in everything:
        for arg in call:
            assert "$" not in arg and not arg.startswith(":"), call


def test_the_executor_catches_a_powershell_variable_under_bash(tmp_path: Path) -> None:
    # The first generated workflow's publish step: `"$env:MAMBAWIN_REQ"` under `shell: bash`.
    step = {
        "name": "old",
        "shell": "bash",
        "run": 'python -m pip install "$env:MAMBAWIN_REQ"\n',
        "env": {"MAMBAWIN_REQ": "mambawin==0.1.0"},
    }
    (call,) = run_step(step, {}, {}, tmp_path)
    assert call[-1] == ":MAMBAWIN_REQ"  # what pip got; test_no_call_gets_... refuses it
    with pytest.raises(AssertionError, match="cannot run shell 'pwsh'"):
        run_step({**step, "shell": "pwsh"}, {}, {}, tmp_path)


# What `toolchain windows --env github` prints (its lines reach $GITHUB_ENV).
ENV_LINES = """\
if [ "$3" = "--root" ] && [ "$5" = "--env" ]; then
  printf '%s\\n' 'CUDA_HOME=C:\\tc\\cu13' 'DISTUTILS_USE_SDK=1'
fi
"""


@pytest.mark.parametrize(("msvc", "flag"), [("", []), ("visual-studio", ["--no-msvc"])])
def test_the_toolchain_step_hands_its_variables_to_the_later_steps(
    msvc: str, flag: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workflow = generate(tmp_path, SPEC, "none")
    job = workflow["jobs"]["build"]
    (entry, *_) = job["strategy"]["matrix"]["include"]
    # No CUDA installer any more: CUDA comes from the toolchain's wheels, cached by its key.
    assert not any("cuda-toolkit" in str(s.get("uses", "")).lower() for s in job["steps"])
    cache = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/cache@"))
    assert cache["with"] == {
        "path": "${{ env.WINDOWS_ROOT }}",
        "key": "${{ matrix.toolchain_key }}",
    }
    assert job["env"]["WINDOWS_ROOT"].endswith(".windows-toolchain")
    step = next(s for s in job["steps"] if s.get("name", "").startswith("the Windows toolchain ("))
    monkeypatch.setitem(INPUTS, "msvc", msvc)  # a run started by hand, with its input
    env = {k: fill(str(v), entry, {}) for k, v in job["env"].items()}
    _, exported = run_step(step, env, entry, tmp_path, {"mambawin": ENV_LINES})
    assert exported[-len(flag) - 2 :] == ["--env", "github", *flag]
    written = (tmp_path / "run" / "github_env").read_text(encoding="utf-8")
    assert written == "CUDA_HOME=C:\\tc\\cu13\nDISTUTILS_USE_SDK=1\n"
