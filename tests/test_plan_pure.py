"""`build --plan` without torch, CUDA or a GPU, and one wheel name across matrix, plan, build and
the generated workflow (fake upstreams: tests/fixtures/fake_upstream, fake_causal_conv1d)."""

from __future__ import annotations

import importlib.abc
import json
import shutil
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import yaml
from test_build import TOOLCHAIN, RecordedDoctor
from test_build_causal_conv1d import FIXTURES, git_repo
from typer.testing import CliRunner

from mambawin.archs import parse_archs
from mambawin.builder import estimate
from mambawin.builder import pipeline as core
from mambawin.builder.front import Configure, Front, configure_front
from mambawin.builder.options import BuildOptions
from mambawin.builder.pair import pair_estimate
from mambawin.builder.plan_facts import ASSUMED_CUDA, ASSUMED_TORCH
from mambawin.builder.request import Tools
from mambawin.builder.setup_scan import scan_setup
from mambawin.cli import app
from mambawin.doctor.checks import Check, DoctorReport
from mambawin.errors import BuildError
from mambawin.fetch.upstream import Checkout
from mambawin.packages import CAUSAL_CONV1D, MAMBA
from mambawin.patch.arch_groups import FrontEnd, FrontPass
from mambawin.patch.base import PatchOptions
from mambawin.patch.record import PatchReport
from mambawin.stage import Status
from mambawin.wheel.naming import platform_tag, wheel_name

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
HERE = platform_tag()
runner = CliRunner()


def fake_repo(tmp_path: Path, name: str, tag: str = "v0.1.0") -> Path:
    """A fake upstream as a git repo whose release tag is tag and whose version file says 0.1.0:
    upstream's own disagreement (causal-conv1d v1.6.1.post4's file says 1.6.1)."""
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    init = next(p for p in root.glob("*/__init__.py")).relative_to(root).as_posix()
    return git_repo(root, {tag: "0.1.0"}, init)


@pytest.fixture
def doctor() -> RecordedDoctor:
    return RecordedDoctor([DoctorReport((), True, parse_archs("90"), 2, TOOLCHAIN)])


@pytest.fixture
def bare_doctor() -> RecordedDoctor:
    """What doctor reports on a laptop: no torch, no nvcc, no GPU, a failed blocking check."""
    bare = replace(TOOLCHAIN, torch_version=None, torch_cuda=None, cuda_version=None, nvcc=None)
    torch_check = Check("torch", Status.FAIL, hint="pip install torch", blocking=True)
    return RecordedDoctor([DoctorReport((torch_check,), False, (), 4, bare)])


class _NoTorch(importlib.abc.MetaPathFinder):
    """Records every attempt to import torch (or a submodule) and refuses it."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> None:
        if name == "torch" or name.startswith("torch."):
            self.asked.append(name)
            raise ImportError(f"the plan imported {name}")


@pytest.fixture
def no_torch(monkeypatch: pytest.MonkeyPatch) -> Iterator[_NoTorch]:
    """The guard, with a torch another test imported taken out of sys.modules for this test (an
    import of a module already loaded never reaches a finder); it is put back afterwards."""
    for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, name)
    guard = _NoTorch()
    sys.meta_path.insert(0, guard)
    try:
        yield guard
    finally:
        sys.meta_path.remove(guard)


def test_the_plan_needs_no_torch_cuda_or_gpu_and_says_what_it_assumed(
    tmp_path: Path, bare_doctor: RecordedDoctor, no_torch: _NoTorch
) -> None:
    repo = fake_repo(tmp_path, "fake_upstream")
    options = BuildOptions(repo=str(repo), ref="v0.1.0", out=tmp_path / "out")
    plan = core.plan(options, tools=Tools(doctor=bare_doctor))

    assert no_torch.asked == [] and "torch" not in sys.modules
    facts = {f["name"]: f for f in plan.facts}
    assert (facts["torch"]["value"], facts["torch"]["source"]) == (ASSUMED_TORCH, "assumed")
    assert (facts["cuda"]["value"], facts["cuda"]["source"]) == (ASSUMED_CUDA, "assumed")
    assert facts["archs"]["source"] == "assumed" and "--arch" in facts["archs"]["note"]
    assert (facts["python"]["value"], facts["platform"]["value"]) == (PY, HERE)
    assert plan.unchecked == ["torch: pip install torch (the build stops here)"]
    assert plan.wheel == wheel_name(MAMBA, "0.1.0", "cu130torch2.11", PY, "torch", HERE)
    assert plan.estimate is not None and plan.estimate["seconds"] > 0
    assert not (tmp_path / "out").exists() and not plan.build_dir.exists()


def test_the_plan_json_says_units_gencode_wheel_and_time(
    tmp_path: Path, doctor: RecordedDoctor
) -> None:
    repo = fake_repo(tmp_path, "fake_upstream")
    args = ["build", "--with", "none", "--repo", str(repo), "--ref", "v0.1.0", "--arch", "90"]
    result = runner.invoke(app, [*args, "--plan", "--json"], obj={"doctor": doctor})

    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["wheel"] == f"mamba_ssm-0.1.0+cu130torch2.15-cp{PY.replace('.', '')}-" + (
        f"cp{PY.replace('.', '')}-{HERE}.whl"
    )
    # The fake setup.py has no arch block for arch-list: its own literal list is what nvcc gets.
    assert plan["gencode"] == ["arch=compute_75,code=sm_75", "arch=compute_80,code=sm_80"]
    assert Path(plan["units"][0]).name == "selective_scan.cpp"
    assert plan["estimate"]["jobs"] == 2 and plan["estimate"]["archs"] == 1
    shown = runner.invoke(app, [*args, "--plan"], obj={"doctor": doctor})
    assert f"wheel   {plan['wheel']}" in shown.stdout
    assert "time    about" in shown.stdout


def test_the_default_plan_is_the_pair_each_under_its_own_name(
    tmp_path: Path, doctor: RecordedDoctor
) -> None:
    mamba = fake_repo(tmp_path, "fake_upstream")
    conv = fake_repo(tmp_path, "fake_causal_conv1d", tag="v0.1.0.post4")
    args = ["build", "--repo", str(mamba), "--ref", "v0.1.0", "--with-repo", str(conv)]
    result = runner.invoke(app, [*args, "--plan", "--json"], obj={"doctor": doctor})

    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [b["package"] for b in data["builds"]] == ["mamba-ssm", "causal-conv1d"]
    # causal-conv1d's tag says 0.1.0.post4, its file 0.1.0: the wheel is named by the file.
    assert data["builds"][1]["upstream"]["version"] == "0.1.0.post4"
    assert data["builds"][1]["wheel"].startswith("causal_conv1d-0.1.0+cu130torch2.15-")
    assert data["estimate"]["seconds"] > 0
    shown = runner.invoke(app, [*args, "--plan"], obj={"doctor": doctor})
    assert "causal-conv1d 0.1.0.post4 from" in shown.stdout
    assert "mamba 0.1.0.post4" not in shown.stdout
    assert "the pair compiles at once: about" in shown.stderr


def spec_text(repo: Path, ref: str) -> str:
    return f"""\
python = ["{PY}"]
platforms = ["{HERE}", "win_amd64"]
archs = ["90"]
[[package]]
name = "mamba-ssm"
repo = "{repo.as_posix()}"
ref = "{ref}"
[[torch]]
version = "2.15.0"
cuda = "13.0"
index = "https://download.pytorch.org/whl/cu130"
"""


def test_matrix_plan_build_and_workflow_name_one_wheel(
    tmp_path: Path, doctor: RecordedDoctor
) -> None:
    repo = fake_repo(tmp_path, "fake_upstream", tag="v0.1.0.post2")  # its file says 0.1.0
    spec = tmp_path / "team" / "mambawin.toml"
    spec.parent.mkdir()
    spec.write_text(spec_text(repo, "v0.1.0.post2"), encoding="utf-8")

    matrix = runner.invoke(app, ["matrix", "--spec", str(spec), "--json"])
    assert matrix.exit_code == 0, matrix.output
    named = {c["platform"]: c["wheel"] for c in json.loads(matrix.stdout)}

    args = ["build", "--with", "none", "--repo", str(repo), "--ref", "v0.1.0.post2"]
    args += ["--arch", "90", "--out", str(tmp_path / "out"), "--json"]
    planned = runner.invoke(app, [*args, "--plan"], obj={"doctor": doctor})
    assert planned.exit_code == 0, planned.output
    assert json.loads(planned.stdout)["wheel"] == named[HERE]

    built = runner.invoke(app, args, obj={"doctor": doctor})
    assert built.exit_code == 0, built.output
    assert Path(json.loads(built.stdout)["wheel"]).name == named[HERE]
    assert "where `build --plan` names" not in built.stderr  # the build's own check agrees

    out = tmp_path / "w.yml"
    workflow = runner.invoke(
        app, ["ci", "github", "--spec", str(spec), "--no-check", "--out", str(out)]
    )
    assert workflow.exit_code == 0, workflow.output
    entries = _matrix_entries(yaml.safe_load(out.read_text(encoding="utf-8")))
    assert [e["wheel"] for e in entries] == [named["win_amd64"]]


def _matrix_entries(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        entry
        for job in workflow["jobs"].values()
        for entry in job.get("strategy", {}).get("matrix", {}).get("include", [])
        if "wheel" in entry
    ]


def test_setup_scan_reads_literal_sources_and_refuses_computed_ones(tmp_path: Path) -> None:
    scan = scan_setup(FIXTURES / "fake_causal_conv1d")
    assert scan.ext_name == "causal_conv1d_cuda" and scan.sources[0] == "csrc/causal_conv1d.cpp"
    assert scan_setup(FIXTURES / "fake_upstream").threads == 4  # append_nvcc_threads' "4"
    (tmp_path / "setup.py").write_text(
        "from torch.utils.cpp_extension import CUDAExtension\n"
        "ext = CUDAExtension(name='x', sources=glob.glob('csrc/*.cu'))\n",
        encoding="utf-8",
    )
    with pytest.raises(BuildError, match=r"setup.py:2: the extension's sources are no literal"):
        scan_setup(tmp_path)


def test_the_estimate_meets_the_measured_pair_and_scales_with_jobs() -> None:
    both = [(MAMBA, False), (CAUSAL_CONV1D, False)]
    # docs/benchmarks.md §22: 62.6 s at one arch, 161.7 s at four (16 jobs): within 10 %.
    assert estimate.expected(both, 1, 16, 16).seconds == pytest.approx(62.6, rel=0.1)
    assert estimate.expected(both, 4, 16, 16).seconds == pytest.approx(161.7, rel=0.1)
    two = estimate.expected(both, 1, 2, 16).seconds
    assert two > 5 * estimate.expected(both, 1, 16, 16).seconds
    assert estimate.expected(both, 1, 16, 2).seconds == two  # 16 jobs on 2 cores: 2 at a time


def test_archs_sharing_a_front_end_pass_count_as_less_work() -> None:
    a80, a86, a89, a90 = parse_archs("80;86;89;90")
    one_pass = (FrontPass(a80, (a80, a86, a89, a90), emits_ptx=False),)
    two_passes = (FrontPass(a80, (a80, a86, a89), False), FrontPass(a90, (a90,), False))
    front = FrontEnd(
        passes=tuple(FrontPass(a, (a,), False) for a in (a80, a86, a89, a90)),
        units=(("u", one_pass), ("w", two_passes)),
    )
    sources = ["csrc/x.cpp", "csrc/u_part1.cu", "csrc/u_part2.cu", "csrc/v.cu", "csrc/w.cu"]
    share = estimate.PTXAS_SHARE
    # u's parts: one pass serving 4 archs; v: unproven, one pass per arch; w: 2 passes, 4 archs.
    assert estimate.arch_passes(front, sources, 4) == pytest.approx(
        ((1 + 3 * share) * 2 + 4 + (2 + 2 * share)) / 4
    )
    assert estimate.arch_passes(None, sources, 4) == 4.0  # grouping off or not in effect
    assert estimate.arch_passes(front, ["csrc/v.cu"], 4) == 4.0  # no proven unit in the build
    both = [(MAMBA, False), (CAUSAL_CONV1D, False)]
    grouped = estimate.expected(both, 4, 16, 16, passes=[2.5, 2.1])
    assert grouped.seconds < estimate.expected(both, 4, 16, 16).seconds
    assert grouped.to_json()["arch_passes"] == 2.5 and grouped.to_json()["archs"] == 4
    # the pair's plan: each package's own work, from its plan's estimate
    plans = [
        SimpleNamespace(package=p.name, archs="80;86;89;90", jobs=16, estimate={"arch_passes": n})
        for p, n in ((MAMBA, 2.5), (CAUSAL_CONV1D, 2.1))
    ]
    paired = pair_estimate(plans)  # type: ignore[arg-type]
    assert paired.seconds == estimate.expected(both, 4, 16, passes=[2.5, 2.1]).seconds


def test_a_build_whose_name_differs_from_the_plan_says_so(
    tmp_path: Path, doctor: RecordedDoctor
) -> None:
    root = tmp_path / "fake_upstream"
    shutil.copytree(FIXTURES / "fake_upstream", root)
    # Its version file says 0.2.0, its setup.py's literal 0.1.0: the plan cannot know the wheel.
    repo = git_repo(root, {"v0.2.0": "0.2.0"}, "mamba_ssm/__init__.py")
    args = ["build", "--with", "none", "--repo", str(repo), "--arch", "90", "--json"]
    built = runner.invoke(app, [*args, "--out", str(tmp_path / "out")], obj={"doctor": doctor})

    assert built.exit_code == 0, built.output
    assert "mamba_ssm-0.1.0+cu130torch2.15" in json.loads(built.stdout)["wheel"]
    said = " ".join(built.stderr.split())  # the note wraps at the width like any other
    assert "where `build --plan` names mamba_ssm-0.2.0+cu130torch2.15-" in said


def test_build_with_no_options_builds_the_pair_into_wheelhouse(
    tmp_path: Path, doctor: RecordedDoctor, monkeypatch: pytest.MonkeyPatch
) -> None:
    mamba = fake_repo(tmp_path, "fake_upstream")
    conv = fake_repo(tmp_path, "fake_causal_conv1d")
    monkeypatch.chdir(tmp_path)
    # Only where the fakes come from is said: the package, the pair and --out are the defaults.
    args = ["build", "--repo", str(mamba), "--with-repo", str(conv), "--json"]
    result = runner.invoke(app, args, obj={"doctor": doctor})

    assert result.exit_code == 0, result.output
    built = [Path(b["wheel"]) for b in json.loads(result.stdout)["builds"]]
    assert [w.parent.resolve() for w in built] == [(tmp_path / "wheelhouse").resolve()] * 2
    assert sorted(p.name for p in (tmp_path / "wheelhouse").glob("*.whl")) == sorted(
        w.name for w in built
    )
    assert built[1].name.startswith("causal_conv1d-0.1.0+cu130torch2.15-")


def test_the_cross_builds_dist_info_carries_the_version_files_version(tmp_path: Path) -> None:
    """A cross-built wheel is named as a native one: by the version file (0.1.0), not the release
    tag the checkout was trusted to (v0.1.0.post4)."""
    tree = tmp_path / "tree"
    shutil.copytree(FIXTURES / "fake_causal_conv1d", tree)
    checkout = Checkout(tree, "repo", "v0.1.0.post4", None, "0.1.0.post4", "v0.1.0.post4")
    report = PatchReport(tree, "0.1.0.post4", None, PatchOptions(), (), "")
    (tmp_path / "work").mkdir()
    front = Front(checkout, report, tree, None, tmp_path / "work", None)
    asked = Configure(wheel_tag="py3-none-win_amd64")
    configured = configure_front(front, asked, CAUSAL_CONV1D).setup

    assert configured.dist_info is not None
    assert configured.dist_info.name == "causal_conv1d-0.1.0.dist-info"
