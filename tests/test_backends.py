"""One contract for every backend: each option a backend does not apply is refused, named, before
any work; --plan compiles nothing; --json has one shape; a spec cell build would refuse is
impossible with build's own reason.

A fake `wine` on PATH records every call and refuses to compile, so a test that reached a
compiler fails; a missing --repo shows that nothing was fetched.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import fields, replace
from pathlib import Path

import pytest
from test_wine_toolchain import layout
from typer.testing import CliRunner

from mambawin import dispatch
from mambawin.builder import backends
from mambawin.builder.request import BY_FIELD, FIELD_OPTIONS, BuildRequest
from mambawin.builder.results import BuildPlan, BuildResult
from mambawin.cli import app
from mambawin.errors import ToolchainError, UsageError
from mambawin.team.matrix import IMPOSSIBLE, expand
from mambawin.team.spec import PackageSpec
from mambawin.team.spec_reader import parse_spec

runner = CliRunner()
FIELD_FLAGS = {o.flag for o in FIELD_OPTIONS}

# A value for every declared build option (None: a flag without a value). A new option must be
# added here, or test_every_declared_option_is_walked fails: the walk cannot miss one.
SAMPLES: dict[str, str | None] = {
    "--ref": "v1.5.3.post1",
    "--repo": "{tmp}/no-such-repo",
    "--package": "causal-conv1d",
    "--source-from": "git",
    "--arch": "90",
    "--jobs": "3",
    "--json": None,
    "--plan": None,
    "--abi": "stable",
    "--arch-groups": "off",
    "--out": "{tmp}/out",
    "--nvcc-threads": "2",
    "--platform": "win_amd64",
    "--windows-root": "{tmp}/tc",
    "--keep-complex": None,
    "--skip-patch": "nvcc-threads",
    "--drop": "triton",
    "--keep": "triton",
    "--local-version": "none",
    "--cache": None,
    "--force": None,
    "--source": "{tmp}/src",
    "--with": "causal-conv1d",
    "--with-repo": "{tmp}/no-such-conv",
    "--stock": None,
    "--cpython": "{tmp}/src",
    "--unit": "selective_scan.cpp",
}

# What each backend's command line is before the option under test is added.
BASE = {
    backends.NATIVE: ["build", "--repo", "{tmp}/no-such-repo"],
    backends.CROSS_WINDOWS: [
        "build",
        *("--platform", "win_amd64", "--abi", "stable", "--arch", "90"),
        *("--package", "causal-conv1d", "--repo", "{tmp}/no-such-repo"),
        *("--windows-root", "{tmp}/tc"),
    ],
    backends.WINDOWS_CHECK: ["check", "--windows", "--repo", "{tmp}/no-such-repo"],
}


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """cwd and HOME in tmp_path, a Windows toolchain's layout at tc/, a wine that refuses."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    layout(tmp_path / "tc")
    (tmp_path / "src").mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wine = bin_dir / "wine"
    wine.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/wine-calls\nexit 1\n')
    wine.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


@pytest.fixture
def causal_conv1d_repo() -> Path:
    """The real causal-conv1d mirror (MAMBAWIN_TEST_CAUSAL_CONV1D); skipped without it."""
    value = os.environ.get("MAMBAWIN_TEST_CAUSAL_CONV1D")
    if not value:
        pytest.skip("MAMBAWIN_TEST_CAUSAL_CONV1D is not set (a Dao-AILab/causal-conv1d git repo)")
    return Path(value)


def _line(args: list[str], tmp: Path) -> list[str]:
    return [a.format(tmp=tmp) for a in args]


def _with(flag: str, tmp: Path) -> list[str]:
    value = SAMPLES[flag]
    return [flag] if value is None else [flag, value.format(tmp=tmp)]


def _nothing_done(tmp: Path) -> None:
    assert not (tmp / "wine-calls").exists(), "a compiler ran under wine"
    cache = Path(os.environ["MAMBAWIN_CACHE_DIR"])
    assert not any(cache.iterdir()), f"work started: {sorted(cache.iterdir())}"
    assert not (tmp / "out").exists() and not (tmp / "dist").exists()


def test_every_declared_option_is_walked_and_each_command_declares_exactly_its_own() -> None:
    import typer.main

    from mambawin.builder.request import command_options

    assert set(SAMPLES) == set(backends.OPTIONS)
    command = typer.main.get_command(app)
    hidden = {"build": {"--spec", "--help"}, "check": {"--root", "--windows", "--help"}}
    for name in ("build", "check"):
        params = command.commands[name].params  # type: ignore[attr-defined]
        flags = {p.opts[0] for p in params} - hidden[name]
        assert flags == {o.flag for o in command_options(name)}, name
        helps = {p.opts[0]: p.help for p in params if p.opts[0] in backends.OPTIONS}
        assert helps == {flag: backends.OPTIONS[flag].help for flag in flags}


def _command_flags(backend: str) -> set[str]:
    from mambawin.builder.request import command_of, command_options

    return {o.flag for o in command_options(command_of(backend))}


@pytest.mark.parametrize(
    ("backend", "flag"),
    [
        (b, f)
        for b in backends.BACKEND_NAMES
        for f in backends.refused(b)
        if f != "--platform" and f in _command_flags(b)
    ],
)
def test_every_option_a_backend_does_not_apply_is_refused_before_any_work(
    sandbox: Path, backend: str, flag: str
) -> None:
    args = [*_line(BASE[backend], sandbox), *_with(flag, sandbox)]
    result = runner.invoke(app, args)
    assert result.exit_code == UsageError.exit_code, result.output
    assert flag in result.output
    assert "not apply" in result.output  # the validator's refusal, not click's
    _nothing_done(sandbox)


def _sample_request(backend: str, flags: Iterable[str], tmp: Path) -> BuildRequest:
    """The request the sample values of these flags make, on this backend."""
    from mambawin.builder.faces import from_params
    from mambawin.cli.options import param_name

    params: dict[str, object] = {}
    for flag in flags:
        declared = backends.OPTIONS[flag]
        value = SAMPLES[flag]
        raw: object = True if value is None else value.format(tmp=tmp)
        params[param_name(declared)] = [raw] if declared.cli == "list" else raw
    request = from_params("build", {k: v for k, v in params.items() if k != "platform"})
    values = {o.name: getattr(request, o.name) for o in backends.set_fields(request)}
    if "--platform" in flags:
        values["platform"] = SAMPLES["--platform"]
    for name in ("stock", "cpython", "units"):  # the check's own: parsed as `check` parses them
        if name in params:
            values[name] = BY_FIELD[name].parse(params[name])
    return BuildRequest(**values, backend=backend)


@pytest.mark.parametrize(
    ("backend", "flag"),
    [(b, f) for b in backends.BACKEND_NAMES for f in backends.refused(b) if f in FIELD_FLAGS],
)
def test_every_field_a_backend_does_not_apply_is_refused_by_the_validator(
    tmp_path: Path, backend: str, flag: str
) -> None:
    """On fields, not on what a command line typed: a spec cell or a test is judged the same."""
    base = {"--platform"} if backend == backends.CROSS_WINDOWS else set()
    request = _sample_request(backend, {*base, flag}, tmp_path)
    with pytest.raises(UsageError, match=re.escape(flag)):
        dispatch.validate(request)


@pytest.mark.parametrize("backend", backends.BACKEND_NAMES)
def test_the_validator_takes_every_option_a_backend_applies(sandbox: Path, backend: str) -> None:
    flags = [f for f in backends.applies(backend) if f in FIELD_FLAGS]
    flags = [f for f in flags if f not in {"--source", "--with", "--with-repo", "--keep-complex"}]
    request = _sample_request(backend, flags, sandbox)
    request = replace(request, windows_root=sandbox / "tc" if "--windows-root" in flags else None)
    if backend == backends.CROSS_WINDOWS:  # what the cross build needs: a tag and the stable ABI
        assert request.abi == "stable" and request.archs
    assert dispatch.validate(request).name == backend


def test_windows_root_is_checked_before_anything_is_fetched(sandbox: Path) -> None:
    args = _line(BASE[backends.CROSS_WINDOWS], sandbox)
    at = args.index("--windows-root") + 1
    for root, code, words in [
        (sandbox / "nope", UsageError.exit_code, "no such folder"),
        (sandbox / "src", ToolchainError.exit_code, "not a whole Windows toolchain"),
    ]:
        args[at] = str(root)
        result = runner.invoke(app, [*args, "--json"])
        assert result.exit_code == code, result.output
        assert words in json.loads(result.stdout)["error"]
    _nothing_done(sandbox)


def test_the_check_takes_the_same_windows_root_and_checks_it_first(sandbox: Path) -> None:
    args = [*_line(BASE[backends.WINDOWS_CHECK], sandbox), "--windows-root", str(sandbox / "src")]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == ToolchainError.exit_code, result.output
    assert "not a whole Windows toolchain" in json.loads(result.stdout)["error"]
    _nothing_done(sandbox)


def test_an_unapplied_option_is_refused_as_json_under_json(sandbox: Path) -> None:
    args = [*_line(BASE[backends.CROSS_WINDOWS], sandbox), "--drop", "triton", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == UsageError.exit_code
    error = json.loads(result.stdout)
    assert error["exit_code"] == UsageError.exit_code and "--drop" in error["error"]


def test_the_cross_plan_compiles_nothing_and_has_the_native_plans_shape(
    sandbox: Path, causal_conv1d_repo: Path
) -> None:
    args = _line(BASE[backends.CROSS_WINDOWS], sandbox)
    args[args.index("--repo") + 1] = str(causal_conv1d_repo)
    result = runner.invoke(app, [*args, "--ref", "v1.5.3.post1", "--plan", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert set(plan) == {f.name for f in fields(BuildPlan)}
    assert plan["package"] == "causal-conv1d" and plan["units"]
    assert not (sandbox / "wine-calls").exists(), "--plan started a compiler"


def test_the_cross_jobs_default_is_the_native_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from mambawin.builder.options import resolve_jobs

    monkeypatch.setenv("MAX_JOBS", "5")
    assert resolve_jobs(None, None) == 5  # was a fixed 2 for the cross build
    assert resolve_jobs(3, None) == 3


def test_build_result_json_has_one_shape_for_every_backend() -> None:
    """The cross build reports a BuildResult: no log file, so log is null, never a string."""
    result = BuildResult(
        wheel=Path("w.whl"),
        size=1,
        sha256="0",
        archs="90",
        log=None,
        version="1",
        commit=None,
        key="",
        build_dir=Path("b"),
        units_compiled=0,
        reused_objects=False,
    )
    assert result.to_json()["log"] is None
    assert set(result.to_json()) == {f.name for f in fields(BuildResult)} | {"ok"}


# ---- spec cells are judged by build's validator -------------------------------------------------

SPEC = """\
python = ["3.12"]
platforms = ["win_amd64"]
archs = ["90"]
[[package]]
name = "{package}"
ref = "{ref}"
[[torch]]
version = "2.11.0"
cuda = "13.0"
[options]
"""


def _pinned(package: PackageSpec) -> tuple[str | None, str]:
    return package.ref.removeprefix("v"), ""


@pytest.mark.parametrize(
    ("package", "ref", "options", "reason"),
    [
        ("mamba-ssm", "v2.2.2", 'abi = "stable"', "stable-ABI port supports"),
        ("causal-conv1d", "v1.4.0", 'abi = "stable"', "stable-ABI port supports"),
        ("mamba-ssm", "v2.2.6", 'abi = "stable"\nkeep_complex = true', "--abi stable"),
        ("causal-conv1d", "v1.5.3.post1", "keep_complex = true", "has none"),
    ],
)
def test_a_cell_build_would_refuse_is_impossible_with_builds_reason(
    tmp_path: Path, package: str, ref: str, options: str, reason: str
) -> None:
    text = SPEC.format(package=package, ref=ref) + options + "\n"
    cells = expand(parse_spec(text, tmp_path / "team.toml"), resolve=_pinned)
    assert cells and all(c.status == IMPOSSIBLE for c in cells)
    assert all(reason in c.reason for c in cells), [c.reason for c in cells]
    spec = tmp_path / "team.toml"
    spec.write_text(text)
    planned = runner.invoke(app, ["build", "--spec", str(spec), "--plan", "--json"])
    assert planned.exit_code == 0, planned.output
    assert {p["outcome"] for p in json.loads(planned.stdout)} == {"impossible"}
    workflow = runner.invoke(app, ["ci", "github", "--spec", str(spec), "--out", "w.yml"])
    assert workflow.exit_code == UsageError.exit_code and reason in workflow.output


# ---- the options are declared once: the CLI, the spec and the workflow agree by construction ----


def test_the_cli_the_spec_keys_the_runner_and_the_workflow_agree() -> None:
    from test_ci_scripts import parses_as_mambawin

    from mambawin.team import github_cross
    from mambawin.team.spec import TABLE_KEYS, Options

    keys = {o.spec_key for o in backends.SPEC_OPTIONS}
    assert set(TABLE_KEYS["options"]) == keys == {f.name for f in fields(Options)}
    changed = {
        "keep_complex": True,
        "skip_patches": ("silu-bwd-tail",),
        "drop": ("tilelang",),
        "keep": ("einops",),
        "abi": "stable",
        "source_from": "index",
        "arch_groups": "off",
    }
    assert set(changed) == keys  # a new spec key must get a non-default value here
    argv = backends.spec_args(changed)
    parses_as_mambawin(["build", *argv])  # each flag exists in the CLI and takes its value
    assert {a for a in argv if a.startswith("--")} == {o.flag for o in backends.SPEC_OPTIONS}
    assert backends.spec_args({**changed, **{k: getattr(Options(), k) for k in keys}}) == []
    from mambawin.builder.faces import shell_argv, spec_env, spec_words

    for backend in (backends.NATIVE, backends.CROSS_WINDOWS):
        env, lines = spec_env(backend), shell_argv(spec_words(backend))
        for option in backends.SPEC_OPTIONS:
            applied = backend in option.backends
            variable = str(option.spec_key).upper()
            assert (env.get(variable) == f"${{{{ matrix.{option.spec_key} }}}}") == applied
            assert (option.flag in lines) == applied
    assert set(github_cross._NOT_APPLIED) == {
        o.spec_key for o in backends.SPEC_OPTIONS if backends.CROSS_WINDOWS not in o.backends
    }


def test_the_generated_build_step_passes_every_spec_option(tmp_path: Path) -> None:
    from test_ci_scripts import SPEC as CI_SPEC
    from test_ci_scripts import generate, includes

    workflow = generate(tmp_path, CI_SPEC, "none")
    job_id, entry = includes(workflow)[0]
    (build,) = [
        s for s in workflow["jobs"][job_id]["steps"] if s.get("name", "").startswith("build")
    ]
    for option in backends.SPEC_OPTIONS:
        assert option.flag in build["run"]
        assert str(option.spec_key) in entry  # the matrix carries each key's value


@pytest.mark.parametrize("option", backends.SPEC_OPTIONS, ids=lambda o: o.flag)
def test_the_spec_reader_checks_each_declared_key_by_its_kind(
    tmp_path: Path, option: backends.BuildOption
) -> None:
    from mambawin.errors import SpecError

    wrong = {"flag": '"yes"', "list": "3", "value": "[1]"}[option.spec_kind]
    text = SPEC.format(package="mamba-ssm", ref="v2.2.6") + f"{option.spec_key} = {wrong}\n"
    with pytest.raises(SpecError, match=rf"options\.{option.spec_key}: must be"):
        parse_spec(text, tmp_path / "team.toml")


def test_the_check_plan_compiles_nothing_and_has_the_plan_shape(sandbox: Path) -> None:
    """`check --windows --plan` as `build --plan`: the front half, then a BuildPlan; wine (a
    refusing fake here) is never started."""
    git = pytest.importorskip("git")
    from test_check_windows import CPP_EXTENSION, TORCH_REASON

    pytest.importorskip("torch", reason=TORCH_REASON)

    (sandbox / "tc" / "torch" / "utils" / "cpp_extension.py").write_text(CPP_EXTENSION)
    upstream = sandbox / "upstream"
    shutil.copytree(Path(__file__).parent / "fixtures" / "fake_upstream", upstream)
    repo = git.Repo.init(upstream)
    files = [p for p in upstream.rglob("*") if p.is_file() and ".git" not in p.parts]
    repo.index.add([p.relative_to(upstream).as_posix() for p in files])
    actor = git.Actor("test", "test@example.invalid")
    repo.index.commit("fake upstream", author=actor, committer=actor)
    repo.create_tag("v0.1.0")
    args = ["check", "--windows", "--windows-root", str(sandbox / "tc"), "--repo", str(upstream)]
    result = runner.invoke(app, [*args, "--ref", "v0.1.0", "--plan", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert set(plan) == {f.name for f in fields(BuildPlan)}
    assert len(plan["units"]) == 3 and plan["package"] == "mamba-ssm"
    assert not (sandbox / "wine-calls").exists(), "--plan started wine"


# ---- one front half ------------------------------------------------------------------------------

FRONT_HALF = {  # the modules and functions that do the steps (their types may be imported)
    "mambawin.fetch.upstream",  # fetch
    "mambawin.fetch.upstream.checkout",
    "mambawin.fetch.upstream.describe",
    "mambawin.builder.workspace.copy_source",  # copy
    "mambawin.patch.engine",  # patch
    "mambawin.patch.engine.apply_patches",
    "mambawin.builder.configure",  # configure
    "mambawin.builder.configure.configure",
}


@pytest.mark.parametrize("module", ["builder/pipeline.py", "check", "cross"])
def test_no_backend_writes_its_own_front_half(module: str) -> None:
    """fetch → copy → patch → configure is builder/front.py's alone: the native pipeline and
    the wine backends import none of the functions that do those steps."""
    import ast

    root = Path(__file__).parent.parent / "mambawin"
    files = [root / module] if module.endswith(".py") else sorted((root / module).glob("*.py"))
    used: list[str] = []
    for file in files:
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                used += [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                used += [alias.name for alias in node.names]
    assert not FRONT_HALF & set(used), module
