"""`build --plan` says which archs share an nvcc front-end pass and why the others do not, in its
text and its --json; `--arch-groups off` gives one pass per arch (a causal-conv1d tree shaped
like upstream's: tests/fixtures/causal_conv1d)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_build import TOOLCHAIN, RecordedDoctor
from typer.testing import CliRunner

from mambawin.archs import parse_archs
from mambawin.builder import pipeline as core
from mambawin.builder.front import CROSS_PATCHES, FrontEndChoice, backend_request
from mambawin.builder.options import BuildOptions
from mambawin.builder.request import Tools
from mambawin.builder.results import BuildPlan
from mambawin.cli import app
from mambawin.doctor.checks import DoctorReport
from mambawin.packages import CAUSAL_CONV1D
from mambawin.patch.arch_groups import ProofTable, parse_proofs, proof_entry
from mambawin.wheel.naming import platform_tag
from tests.fakes.reporter import RecordingReporter as Recorder

FIXTURE = Path(__file__).parent / "fixtures" / "causal_conv1d"
FOUR = "80;86;89;90"
PER_ARCH = [f"arch=compute_{n},code=sm_{n}" for n in ("80", "86", "89", "90")]
UNPROVEN = (
    "causal_conv1d_bwd, causal_conv1d_fwd, causal_conv1d_update keep a pass per arch: no SASS "
    "proof for them (causal-conv1d 1.6.0, torch ABI, CUDA 13.0"
)
GROUPED = ["arch=compute_80,code=[sm_80,sm_86,sm_89]", "arch=compute_90,code=sm_90"]
SAID = [
    "front end (SASS proven identical: causal-conv1d 1.6.0, CUDA 13.0, torch ABI): compute_80 for "
    "sm_80, sm_86, sm_89 in 2 units (causal_conv1d_bwd, causal_conv1d_fwd); every other unit one "
    "pass per arch",
    "causal_conv1d_update keeps a pass per arch: no SASS proof for it (causal-conv1d 1.6.0, torch "
    "ABI, CUDA 13.0)",
    "causal_conv1d_bwd, causal_conv1d_fwd: sm_90 keeps its own pass: no SASS proof for it "
    "(causal-conv1d 1.6.0, torch ABI, CUDA 13.0)",
]
runner = CliRunner()


@pytest.fixture
def doctor() -> RecordedDoctor:
    return RecordedDoctor([DoctorReport((), True, parse_archs("90"), 2, TOOLCHAIN)])


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "causal-conv1d"
    shutil.copytree(FIXTURE, root)
    return root


def proven(platform: str = platform_tag()) -> ProofTable:
    """compute_80 proven for sm_80/86/89 in the fixture's fwd and bwd units (not update) of its
    release with the doctor's nvcc."""
    entry = proof_entry(
        "causal-conv1d",
        "1.6.0",
        "torch",
        "13.0",
        platform,
        "80",
        ["80", "86", "89"],
        9,
        "§ t",
        units=["causal_conv1d_bwd", "causal_conv1d_fwd"],
    )
    return parse_proofs(json.dumps({"schema": 1, "proofs": [entry]}))


def plan_of(
    source: Path,
    out: Path,
    doctor: RecordedDoctor,
    proofs: ProofTable | None = None,
    arch_groups: str = "proven",
) -> BuildPlan:
    options = BuildOptions(
        package=CAUSAL_CONV1D,
        source=source,
        archs=parse_archs(FOUR),
        out=out,
        arch_groups=arch_groups,
    )
    return core.plan(options, tools=Tools(doctor=doctor, proofs=proofs))


def test_the_plan_groups_proven_units_and_says_so(
    source: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    plan = plan_of(source, tmp_path / "out", doctor, proofs=proven())
    assert plan.gencode == PER_ARCH  # setup.py's: one pass per arch, every unit
    assert plan.nvcc_threads == 4  # ptxas still runs per arch
    assert plan.front_end is not None
    assert plan.front_end["said"] == SAID
    units = plan.front_end["units"]
    assert sorted(units) == ["causal_conv1d_bwd", "causal_conv1d_fwd"]
    assert [p["gencode"][0] for p in units["causal_conv1d_bwd"]] == GROUPED
    assert [p["archs"] for p in units["causal_conv1d_fwd"]] == [["80", "86", "89"], ["90"]]
    # a proven unit's two passes: bwd splits as for one or two archs (9 parts, the unit included)
    assert sum("causal_conv1d_bwd" in u for u in plan.units) == 9


def test_without_a_proof_each_arch_keeps_its_pass_and_the_plan_says_why(
    source: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    for proofs in (None, proven("win_amd64")):  # the shipped (empty) table; another platform
        plan = plan_of(source, tmp_path / "out", doctor, proofs=proofs)
        assert plan.gencode == PER_ARCH
        assert plan.front_end is not None and plan.front_end["said"][1].startswith(UNPROVEN)
        assert plan.front_end["units"] == {}
        assert sum("causal_conv1d_bwd" in u for u in plan.units) == 3


def test_the_build_narrates_the_passes_where_it_patches(
    source: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    """The note comes from the front half every native build and plan share (_prepare_with)."""
    recorder = Recorder()
    options = BuildOptions(
        package=CAUSAL_CONV1D, source=source, archs=parse_archs(FOUR), out=tmp_path / "out"
    )
    core.plan(options, tools=Tools(doctor=doctor, proofs=proven()), reporter=recorder)
    assert [n for n in recorder.notes if n.startswith("front end")] == SAID[:1]
    assert SAID[1] in recorder.notes


def test_arch_groups_off_is_one_pass_per_arch_whatever_is_proven(
    source: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    plan = plan_of(source, tmp_path / "out", doctor, proofs=proven(), arch_groups="off")
    assert plan.gencode == PER_ARCH
    assert plan.front_end is not None and plan.front_end["unshared"] == []
    assert plan.front_end["units"] == {}


def test_the_plan_prints_the_passes_and_its_json_carries_them(
    source: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    args = ["build", "--package", "causal-conv1d", "--source", str(source), "--arch", FOUR]
    args += ["--out", str(tmp_path / "out"), "--plan"]
    shown = runner.invoke(app, args, obj={"doctor": doctor})
    assert shown.exit_code == 0, shown.output
    assert "front end: compute_80 for sm_80; compute_86 for sm_86" in shown.stdout
    assert UNPROVEN in " ".join(shown.stdout.split())
    as_json = runner.invoke(app, [*args, "--json"], obj={"doctor": doctor})
    plan = json.loads(as_json.stdout)
    assert [p["gencode"] for p in plan["front_end"]["passes"]] == [[g] for g in PER_ARCH]
    off = runner.invoke(app, [*args, "--json", "--arch-groups", "off"], obj={"doctor": doctor})
    assert json.loads(off.stdout)["front_end"]["unshared"] == []


@pytest.mark.parametrize("as_json", [False, True])
def test_an_unknown_arch_groups_value_is_a_usage_error(
    tmp_path: Path, doctor: RecordedDoctor, as_json: bool
) -> None:
    args = ["build", "--arch-groups", "always", "--plan", "--out", str(tmp_path / "out")]
    result = runner.invoke(app, args + (["--json"] if as_json else []), obj={"doctor": doctor})
    assert result.exit_code == 2
    if as_json:
        assert (
            "--arch-groups 'always': use one of proven, off" in json.loads(result.stdout)["error"]
        )
    else:
        assert "--arch-groups 'always': use one of proven, off" in result.output
    assert not (tmp_path / "out").exists()


def test_the_cross_build_asks_for_groups_but_windows_has_no_proof_yet() -> None:
    """The cross build's patch options carry its nvcc and win_amd64: a proof made on Linux does
    not hold there, so every arch keeps its own pass and the plan says why."""
    choice = FrontEndChoice("proven", "13.0", "win_amd64", proven("linux_x86_64"))
    request = backend_request(
        CAUSAL_CONV1D,
        "repo",
        "v1.6.0",
        archs=parse_archs(FOUR),
        patches=CROSS_PATCHES,
        groups=choice,
    )
    assert request.patch is not None and request.patch.groups is not None
    front = request.patch.front_end("causal-conv1d", "1.6.0")
    assert front.gencode() == tuple(PER_ARCH) and front.table() == {}
    assert front.unshared == (
        "sm_86, sm_89, sm_90 keep their own pass: no SASS proof for causal-conv1d 1.6.0 (stable "
        "ABI, CUDA 13.0, win_amd64)",
    )
    choice = FrontEndChoice("off", "13.0", "win_amd64")
    off = backend_request(
        CAUSAL_CONV1D,
        "repo",
        "v1.6.0",
        archs=parse_archs(FOUR),
        patches=CROSS_PATCHES,
        groups=choice,
    )
    assert off.patch is not None and off.patch.groups is None
