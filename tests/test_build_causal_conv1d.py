"""causal-conv1d through the build pipeline, alone and as mamba-ssm's pair, on FAKE upstreams.

tests/fixtures/fake_causal_conv1d and fake_upstream are hand-written trees whose setup.py prints
ninja-style lines and makes a tiny real wheel; the doctor is a recorded report. The pair rules
are checked on small git repos holding only a version file, with the real tag names.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from dataclasses import replace
from pathlib import Path

import git
import pytest
from packaging.version import Version
from test_build import RecordedDoctor
from typer.testing import CliRunner

from mambawin.archs import parse_archs
from mambawin.builder import pair
from mambawin.builder import pipeline as core
from mambawin.builder.key import KeyInputs, build_key
from mambawin.builder.options import BuildOptions
from mambawin.builder.request import Tools
from mambawin.cli import app
from mambawin.doctor.checks import DoctorReport
from mambawin.errors import UpstreamError, UsageError
from mambawin.packages import CAUSAL_CONV1D, MAMBA, get_package, pair_problem
from mambawin.toolchain.native import Toolchain
from mambawin.wheel.guard import GUARD_BEGIN
from mambawin.wheel.metadata import requirements
from mambawin.wheel.provenance import read_provenance

FIXTURES = Path(__file__).parent / "fixtures"
TOOLCHAIN = Toolchain(
    python_version="3.11.7",
    torch_version="2.15.0+cu132",
    torch_cuda="13.2",
    torch_cxx_std="201703",
    nvcc="/fake/cuda/bin/nvcc",
    cuda_version="13.0",
    cuda_home="/fake/cuda",
    host_compiler="gcc",
    host_compiler_version="12.2.0",
    msvc_toolset=None,
    ninja="/usr/bin/ninja",
)
runner = CliRunner()


def git_repo(root: Path, tags: dict[str, str], init: str) -> Path:
    """A repo with one commit per tag whose version file `init` says that version."""
    repo = git.Repo.init(root)
    actor = git.Actor("test", "test@example.invalid")
    for tag, version in tags.items():
        (root / init).parent.mkdir(parents=True, exist_ok=True)
        (root / init).write_text(f'__version__ = "{version}"\n')
        (root / "setup.py").touch()
        repo.index.add(
            [
                p.relative_to(root).as_posix()
                for p in root.rglob("*")
                if p.is_file() and ".git" not in p.parts
            ]
        )
        repo.index.commit(tag, author=actor, committer=actor)
        repo.create_tag(tag)
    return root


def fake(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    init = next(p for p in root.glob("*/__init__.py"))
    return git_repo(root, {"v0.1.0": "0.1.0"}, init.relative_to(root).as_posix())


@pytest.fixture
def doctor() -> RecordedDoctor:
    return RecordedDoctor([DoctorReport((), True, parse_archs("90"), 2, TOOLCHAIN)])


def test_package_names_and_unknown_ones() -> None:
    assert get_package("causal_conv1d") is CAUSAL_CONV1D and get_package("Mamba-SSM") is MAMBA
    with pytest.raises(UsageError, match="mamba-ssm, causal-conv1d"):
        get_package("flash-attn")


@pytest.mark.parametrize(
    ("mamba", "conv", "fits"),
    [
        ("2.3.2.post1", "1.6.1.post4", True),
        ("2.3.2.post1", "1.6.2.post1", True),  # the index's releases past the git tags
        ("2.3.2.post1", "1.7.0", True),
        ("2.2.4", "1.7.0", True),
        ("2.3.2.post1", "1.5.0.post8", False),  # no causal_conv1d.cpp_functions before 1.5.1
        ("2.2.4", "1.4.0", True),
        ("2.0.0", "1.3.0.post1", False),
        ("1.1.4", "1.2.0", False),
        ("1.1.4", "1.1.3.post1", True),
        ("1.0.1", "1.0.0", True),
    ],
)
def test_pair_rules(mamba: str, conv: str, fits: bool) -> None:
    problem = pair_problem(Version(mamba), Version(conv))
    assert (problem is None) == fits
    if problem:  # structured: each caller words the fix for its own input
        assert (problem.mamba, problem.conv) == (Version(mamba), Version(conv))
        assert not problem.needed.contains(Version(conv)) and problem.why


CONV_TAGS = {
    "v1.3.0": "1.3.0",
    "v1.4.0": "1.4.0",
    "v1.5.0.post8": "1.5.0.post8",
    "v1.6.1.post4": "1.6.1",
}


def test_newest_fitting_release() -> None:
    tags = [*CONV_TAGS, "nightly"]
    assert pair.newest_fitting(tags, Version("2.3.2.post1")) == "v1.6.1.post4"
    assert (
        pair.newest_fitting(["v1.3.0", "v1.4.0", "v1.5.0.post8"], Version("2.1.0"))
        == "v1.5.0.post8"
    )
    with pytest.raises(UpstreamError, match=r"causal-conv1d>=1\.5\.1"):
        pair.newest_fitting(["v1.3.0", "v1.4.0"], Version("2.3.0"))


@pytest.fixture
def mirrors(tmp_path: Path) -> tuple[Path, Path]:
    mamba = git_repo(
        tmp_path / "mamba", {"v2.2.4": "2.2.4", "v2.3.2.post1": "2.3.1"}, "mamba_ssm/__init__.py"
    )
    conv = git_repo(tmp_path / "conv", CONV_TAGS, "causal_conv1d/__init__.py")
    return mamba, conv


def test_choose_pair_defaults_to_the_newest_fitting_release(mirrors: tuple[Path, Path]) -> None:
    mamba, conv = mirrors
    options = BuildOptions(repo=str(mamba), ref="v2.3.2.post1")
    choice = pair.choose_pair(options, pair.Companion(repo=str(conv)))
    assert (choice.mamba_version, choice.conv_ref) == (Version("2.3.2.post1"), "v1.6.1.post4")
    # Without --ref, mamba's newest release decides.
    choice = pair.choose_pair(BuildOptions(repo=str(mamba)), pair.Companion(repo=str(conv)))
    assert choice.mamba_version == Version("2.3.2.post1")


def test_cli_refuses_an_incompatible_pair_before_building(
    mirrors: tuple[Path, Path], tmp_path: Path
) -> None:
    mamba, conv = mirrors
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "build",
            "--repo",
            str(mamba),
            "--ref",
            "v2.2.4",
            "--with",
            "causal-conv1d==v1.3.0",
            "--with-repo",
            str(conv),
            "--arch",
            "90",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 2
    assert "causal-conv1d 1.3.0 does not fit mamba-ssm 2.2.4" in result.output
    assert "causal-conv1d>=1.4.0" in result.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--with", "flash-attn"], "unknown package"),
        (["--with", "causal-conv1d=="], "only causal-conv1d"),
        (["--with", "mamba-ssm"], "only causal-conv1d"),
        (
            ["--package", "causal-conv1d", "--with", "causal-conv1d"],
            "drop --package or drop --with",
        ),
        (["--with", "none", "--with-repo", "x"], "drop --with none"),
        (["--package", "causal-conv1d", "--with-repo", "x"], "--with-repo names the causal-conv1d"),
        (["--package", "causal-conv1d", "--keep-complex", "--ref", "v1"], "drop --keep-complex"),
    ],
)
def test_cli_rejects_bad_pair_options(args: list[str], message: str, tmp_path: Path) -> None:
    result = runner.invoke(app, ["build", "--out", str(tmp_path / "out"), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_causal_conv1d_alone(
    tmp_path: Path, doctor: RecordedDoctor, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = fake(tmp_path, "fake_causal_conv1d")
    dump = tmp_path / "env.json"
    monkeypatch.setenv("FAKE_ENV_DUMP", str(dump))
    monkeypatch.setenv("CAUSAL_CONV1D_SKIP_CUDA_BUILD", "TRUE")  # stale shell settings
    monkeypatch.setenv("CAUSAL_CONV1D_LOCAL_VERSION", "stale")
    options = BuildOptions(
        repo=str(repo), ref="v0.1.0", out=tmp_path / "out", package=CAUSAL_CONV1D
    )
    result = core.build(options, reporter=None, tools=Tools(doctor=doctor))

    seen = json.loads(dump.read_text())
    assert seen["CAUSAL_CONV1D_FORCE_BUILD"] == "TRUE"
    assert "CAUSAL_CONV1D_SKIP_CUDA_BUILD" not in seen
    assert "CAUSAL_CONV1D_LOCAL_VERSION" not in seen and "MAMBA_FORCE_BUILD" not in seen
    assert result.package == "causal-conv1d"
    assert result.wheel.name.startswith("causal_conv1d-0.1.0+cu130torch2.15-")
    assert result.build_dir.name.startswith("cc1d-")  # a slot of its own, apart from mamba
    assert requirements(result.wheel) == ["torch", "packaging", "ninja"]
    provenance = read_provenance(result.wheel)
    # a --repo folder is recorded as "a local repository" (its commit says which sources): the
    # user's path never ships inside the wheel
    assert provenance is not None and provenance.stored["upstream_repo"] == "a local repository"
    assert str(repo) not in json.dumps(provenance.stored)
    assert provenance.stored["torch_headers"] == provenance.stored["torch_version"] != ""
    with zipfile.ZipFile(result.wheel) as archive:
        init = archive.read("causal_conv1d/__init__.py").decode()
    assert GUARD_BEGIN in init and 'built_torch, built_cuda = "2.15", "13"' in init
    assert "mambawin build --package causal-conv1d" in init


def test_pair_builds_both_wheels_into_one_out(tmp_path: Path, doctor: RecordedDoctor) -> None:
    mamba, conv = fake(tmp_path, "fake_upstream"), fake(tmp_path, "fake_causal_conv1d")
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "build",
            "--repo",
            str(mamba),
            "--ref",
            "v0.1.0",
            "--with",
            "causal-conv1d",
            "--with-repo",
            str(conv),
            "--out",
            str(out),
            "--json",
        ],
        obj={"doctor": doctor},
    )
    assert result.exit_code == 0, result.output
    builds = json.loads(result.stdout)["builds"]
    assert [b["package"] for b in builds] == ["mamba-ssm", "causal-conv1d"]
    names = sorted(p.name for p in out.iterdir())
    assert [n.split("-")[0] for n in names] == ["causal_conv1d", "mamba_ssm"]
    dirs = {Path(b["build_dir"]).name.split("-")[0] for b in builds}
    assert dirs == {"mamba", "cc1d"}
    assert builds[0]["key"] != builds[1]["key"]


def test_pair_hands_each_left_out_patch_to_its_package(
    tmp_path: Path, doctor: RecordedDoctor
) -> None:
    mamba, conv = fake(tmp_path, "fake_upstream"), fake(tmp_path, "fake_causal_conv1d")
    base = [
        "build",
        "--repo",
        str(mamba),
        "--ref",
        "v0.1.0",
        "--with",
        "causal-conv1d",
        "--with-repo",
        str(conv),
        "--json",
    ]
    result = runner.invoke(
        app,
        [*base, "--out", str(tmp_path / "out"), "--skip-patch", "silu-bwd-tail,math-defines"],
        obj={"doctor": doctor},
    )
    assert result.exit_code == 0, result.output
    wheels = {p.name.split("-")[0]: p for p in (tmp_path / "out").iterdir()}
    assert read_provenance(wheels["mamba_ssm"]).stored["left_out"] == ["math-defines"]
    assert read_provenance(wheels["causal_conv1d"]).stored["left_out"] == ["silu-bwd-tail"]
    wrong = runner.invoke(
        app,
        [*base, "--out", str(tmp_path / "out2"), "--skip-patch", "nope"],
        obj={"doctor": doctor},
    )
    assert wrong.exit_code == 2
    assert (
        "unknown patch id 'nope' for mamba-ssm or causal-conv1d"
        in json.loads(wrong.stdout)["error"]
    )
    assert not (tmp_path / "out2").exists()


def test_the_build_key_separates_packages() -> None:
    inputs = KeyInputs(
        "c0ffee", (), "tree", "90", "2.15", "13.0", "gcc", "cp311", "linux-x86_64", False
    )
    other = replace(inputs, package="causal-conv1d")
    assert build_key(inputs) != build_key(other)


def test_pair_plan_shows_both_packages(tmp_path: Path, doctor: RecordedDoctor) -> None:
    mamba, conv = fake(tmp_path, "fake_upstream"), fake(tmp_path, "fake_causal_conv1d")
    result = runner.invoke(
        app,
        [
            "build",
            "--repo",
            str(mamba),
            "--ref",
            "v0.1.0",
            "--plan",
            "--with",
            "causal-conv1d==v0.1.0",
            "--with-repo",
            str(conv),
            "--json",
        ],
        obj={"doctor": doctor},
    )
    assert result.exit_code == 0, result.output
    plans = json.loads(result.stdout)["builds"]
    assert [(p["package"], p["ext_name"]) for p in plans] == [
        ("mamba-ssm", "selective_scan_cuda"),
        ("causal-conv1d", "causal_conv1d_cuda"),
    ]
    assert plans[1]["upstream"]["ref"] == "v0.1.0"
