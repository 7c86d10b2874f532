"""The build pipeline end to end on a FAKE upstream (tests/fixtures/fake_upstream): no compiler.

The fake setup.py prints torch-style `[N/M]` ninja lines, keeps "objects" between runs, fails on
demand (FAKE_FAIL=1) and dumps the environment it saw (FAKE_ENV_DUMP); setuptools makes a real
tiny wheel from it. The doctor is replaced by a recorded report, so nothing here needs CUDA.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import sys
import time
import zipfile
from dataclasses import replace
from datetime import timezone
from pathlib import Path
from typing import Any

import git
import pytest
from typer.testing import CliRunner

from mambawin.archs import parse_archs
from mambawin.builder import kept
from mambawin.builder import pipeline as core
from mambawin.builder.compile import CompileFailed, compile_wheel
from mambawin.builder.key import build_key
from mambawin.builder.options import BuildOptions
from mambawin.builder.request import Tools
from mambawin.builder.workspace import Workspace, builds_root
from mambawin.cli import app
from mambawin.doctor.checks import Check, DoctorReport
from mambawin.errors import BuildError, ToolchainError, UsageError
from mambawin.fetch import upstream
from mambawin.stage import NinjaStatus, Status
from mambawin.toolchain.native import Toolchain
from mambawin.wheel.metadata import requirements
from mambawin.wheel.provenance import read_provenance
from tests.fakes.reporter import RecordingReporter as Recorder

FAKE = Path(__file__).parent / "fixtures" / "fake_upstream"
STEPS = ["doctor", "fetch", "patch", "build", "metadata", "record"]
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


@pytest.fixture
def fake_repo(tmp_path: Path) -> Path:
    """The fake upstream as a git repository with a v0.1.0 tag."""
    root = tmp_path / "upstream"
    shutil.copytree(FAKE, root)
    repo = git.Repo.init(root)
    repo.index.add(
        [
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and ".git" not in p.parts
        ]
    )
    actor = git.Actor("test", "test@example.invalid")
    repo.index.commit("fake upstream", author=actor, committer=actor)
    repo.create_tag("v0.1.0")
    return root


class RecordedDoctor(list[DoctorReport]):
    """A doctor that answers every build with reports[0] (tests may replace it), passed in as
    `doctor=` to the pipeline and as `obj={"doctor": ...}` to the CLI."""

    def __call__(self, archs: tuple[Any, ...]) -> DoctorReport:
        return self[0]


@pytest.fixture
def doctor() -> RecordedDoctor:
    """A recorded doctor report instead of the probes; tests may edit doctor[0]."""
    return RecordedDoctor([DoctorReport((), True, parse_archs("90"), 2, TOOLCHAIN)])


def _options(repo: Path, out: Path, **changes: Any) -> BuildOptions:
    options = BuildOptions(repo=str(repo), ref="v0.1.0", out=out)
    return replace(options, **changes)


def _record_matches(wheel: Path) -> bool:
    with zipfile.ZipFile(wheel) as archive:
        record_name = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
        for row in archive.read(record_name).decode().splitlines():
            name, digest, _size = row.rsplit(",", 2)
            if not digest:
                continue
            algorithm, expected = digest.split("=", 1)
            actual = (
                base64.urlsafe_b64encode(hashlib.new(algorithm, archive.read(name)).digest())
                .rstrip(b"=")
                .decode()
            )
            if actual != expected:
                return False
    return True


def test_build_puts_a_fixed_wheel_in_out(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    recorder = Recorder()
    result = core.build(
        _options(fake_repo, tmp_path / "out"), reporter=recorder, tools=Tools(doctor=doctor)
    )

    python = f"cp{sys.version_info[0]}{sys.version_info[1]}"  # the interpreter that built it
    assert (
        result.wheel == tmp_path / "out" / f"mamba_ssm-0.1.0+cu130torch2.15-{python}-{python}-"
        f"{result.wheel.name.rsplit('-', 1)[1]}"
    )
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [result.wheel.name]
    assert result.size == result.wheel.stat().st_size
    assert result.sha256 == hashlib.sha256(result.wheel.read_bytes()).hexdigest()
    assert result.archs == "90"
    # A Linux wheel keeps upstream's requirements (triton included: `import mamba_ssm` needs it).
    assert requirements(result.wheel) == ["torch", "triton", "einops"]
    assert _record_matches(result.wheel)
    provenance = read_provenance(result.wheel)
    assert provenance is not None
    assert provenance.stored["commit"] == git.Repo(fake_repo).head.commit.hexsha
    assert (
        provenance.stored["archs"] == ["90"]
        and provenance.stored["torch_version"] == "2.15.0+cu132"
    )
    assert recorder.steps == STEPS
    assert recorder.progressed[-1] == NinjaStatus(3, 3, "selective_scan_bwd_fp32_real.cu")
    assert "[1/3] /fake/cuda/bin/nvcc" in result.log.read_text()
    assert (result.units_compiled, result.reused_objects) == (3, False)


def test_setup_py_sees_the_build_environment(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor, monkeypatch: pytest.MonkeyPatch
) -> None:
    dump = tmp_path / "env.json"
    monkeypatch.setenv("FAKE_ENV_DUMP", str(dump))
    monkeypatch.setenv("MAMBA_SKIP_CUDA_BUILD", "TRUE")  # a stale shell setting must not leak
    monkeypatch.setenv("MAMBA_LOCAL_VERSION", "stale")
    options = _options(
        fake_repo, tmp_path / "out", archs=parse_archs("86;90+PTX"), jobs=3, nvcc_threads=2
    )
    result = core.build(options, reporter=Recorder(), tools=Tools(doctor=doctor))

    seen = json.loads(dump.read_text())
    assert seen["MAMBA_FORCE_BUILD"] == "TRUE" and seen["MAMBA_KEEP_CUDA_BUILD"] == "TRUE"
    assert "MAMBA_SKIP_CUDA_BUILD" not in seen and "MAMBA_LOCAL_VERSION" not in seen
    assert (seen["MAX_JOBS"], seen["NVCC_THREADS"]) == ("3", "2")
    assert seen["TORCH_CUDA_ARCH_LIST"] == "8.6;9.0+PTX"
    assert seen["CUDA_HOME"] == "/fake/cuda"
    # nvcc's temporary files beside the object: no tmpxft_<pid> names in it (reproducible)
    assert seen["NVCC_APPEND_FLAGS"] == "--objdir-as-tempdir --frandom-seed=mambawin"
    assert Path(seen["DIST_EXTRA_CONFIG"]).parent == result.build_dir
    # The build folder setuptools used is the workspace's, so objects outlive the run.
    assert (result.build_dir / "build").is_dir()


def test_jobs_default_to_the_doctors_advice(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor, monkeypatch: pytest.MonkeyPatch
) -> None:
    dump = tmp_path / "env.json"
    monkeypatch.setenv("FAKE_ENV_DUMP", str(dump))
    doctor[0] = replace(doctor[0], recommended_jobs=5)
    core.build(
        _options(fake_repo, tmp_path / "out"), reporter=Recorder(), tools=Tools(doctor=doctor)
    )
    seen = json.loads(dump.read_text())
    assert (seen["MAX_JOBS"], seen["NVCC_THREADS"]) == ("5", "1")


def test_identical_second_build_reuses_its_wheel_without_running_setup_py(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = core.build(
        _options(fake_repo, tmp_path / "out"), reporter=Recorder(), tools=Tools(doctor=doctor)
    )
    dump = tmp_path / "env.json"
    monkeypatch.setenv("FAKE_ENV_DUMP", str(dump))  # written whenever setup.py runs
    recorder = Recorder()
    second = core.build(
        _options(fake_repo, tmp_path / "o2"), reporter=recorder, tools=Tools(doctor=doctor)
    )

    assert (second.key, second.build_dir) == (first.key, first.build_dir)
    assert (second.units_compiled, second.reused_objects) == (0, True)
    assert not dump.exists() and second.log == first.log
    assert second.wheel.read_bytes() == first.wheel.read_bytes()
    assert recorder.progressed == []
    assert any("reusing the wheel it built" in note for note in recorder.notes)


def test_an_identical_rebuild_copies_its_rewritten_wheel_and_other_options_rewrite_anew(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    """The metadata rewrite is kept per set of inputs: the same inputs copy it, a new label or
    requirement choice writes a new wheel (the kept one never passes for it)."""
    first = core.build(
        _options(fake_repo, tmp_path / "a"), reporter=Recorder(), tools=Tools(doctor=doctor)
    )
    finals = first.build_dir / "dist" / "final"
    kept = sorted(finals.glob("*/*.whl"))
    assert [w.name for w in kept] == [first.wheel.name]
    kept[0].write_bytes(kept[0].read_bytes() + b"")  # untouched bytes, a new mtime
    again = core.build(
        _options(fake_repo, tmp_path / "b"), reporter=Recorder(), tools=Tools(doctor=doctor)
    )
    assert again.wheel.read_bytes() == first.wheel.read_bytes()
    assert sorted(finals.glob("*/*.whl")) == kept

    other = core.build(
        _options(fake_repo, tmp_path / "c", local_version="team1"),
        reporter=Recorder(),
        tools=Tools(doctor=doctor),
    )
    assert "+team1" in other.wheel.name and _record_matches(other.wheel)
    assert len(list(finals.glob("*/*.whl"))) == 2


def test_without_its_wheel_the_same_key_relinks_with_every_object_reused(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    first = core.build(
        _options(fake_repo, tmp_path / "out"), reporter=Recorder(), tools=Tools(doctor=doctor)
    )
    for wheel in (first.build_dir / "dist").glob("*.whl"):
        wheel.unlink()
    recorder = Recorder()
    second = core.build(
        _options(fake_repo, tmp_path / "out"), reporter=recorder, tools=Tools(doctor=doctor)
    )
    assert (second.units_compiled, second.reused_objects) == (0, True)
    log = second.log.read_text()
    assert "ninja: no work to do." in log and "[1/" not in log
    assert any("reusing its objects" in note for note in recorder.notes)


def test_a_rebuild_after_other_refs_reuses_its_kept_objects(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    """v0.1.0, then v0.2.0 in the same slot, then v0.1.0 again: no unit is compiled again, and
    v0.2.0's objects are kept in turn."""
    _tag_another_release(fake_repo)
    out = tmp_path / "out"
    first = core.build(_options(fake_repo, out), reporter=Recorder(), tools=Tools(doctor=doctor))
    other = core.build(
        _options(fake_repo, out, ref="v0.2.0"), reporter=Recorder(), tools=Tools(doctor=doctor)
    )
    assert other.build_dir == first.build_dir and other.units_compiled == 3
    assert core.plan(_options(fake_repo, out), tools=Tools(doctor=doctor)).reuses_objects
    recorder = Recorder()
    again = core.build(_options(fake_repo, out), reporter=recorder, tools=Tools(doctor=doctor))
    assert (again.units_compiled, again.reused_objects) == (0, True)
    assert any("reusing the wheel it built" in note for note in recorder.notes)
    assert [k.key for k in kept.listing()] == [other.key]
    assert again.wheel.read_bytes() == first.wheel.read_bytes()
    shown = json.loads(CliRunner().invoke(app, ["cache", "--json"]).stdout)
    assert [k["key"] for k in shown["kept"]] == [other.key] and shown["total_bytes"] > 0
    pruned = CliRunner().invoke(app, ["cache", "--prune", "--keep-mb", "0", "--json"])
    assert [k["key"] for k in json.loads(pruned.stdout)["removed"]] == [other.key]
    assert kept.listing() == [] and again.build_dir.is_dir()  # the slot's own build stays


def _tag_another_release(repo_path: Path) -> None:
    """v0.2.0: one kernel changed, so another build key in the same slot."""
    repo = git.Repo(repo_path)
    kernel = repo_path / "csrc/selective_scan/selective_scan_fwd_fp32.cu"
    kernel.write_text(kernel.read_text() + "// v0.2.0\n")
    repo.index.add([kernel.relative_to(repo_path).as_posix()])
    actor = git.Actor("test", "test@example.invalid")
    repo.index.commit("v0.2.0", author=actor, committer=actor)
    repo.create_tag("v0.2.0")


def test_kept_builds_stay_within_their_size_bound(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tag_another_release(fake_repo)
    monkeypatch.setenv("MAMBAWIN_KEEP_MB", "0")
    core.build(
        _options(fake_repo, tmp_path / "out"), reporter=Recorder(), tools=Tools(doctor=doctor)
    )
    core.build(
        _options(fake_repo, tmp_path / "out", ref="v0.2.0"),
        reporter=Recorder(),
        tools=Tools(doctor=doctor),
    )
    assert kept.listing() == []  # bound 0: v0.1.0's objects were not kept
    again = core.build(
        _options(fake_repo, tmp_path / "out"), reporter=Recorder(), tools=Tools(doctor=doctor)
    )
    assert again.units_compiled == 3
    monkeypatch.setenv("MAMBAWIN_KEEP_MB", "lots")
    with pytest.raises(UsageError, match="MAMBAWIN_KEEP_MB='lots' is not a whole number"):
        core.build(
            _options(fake_repo, tmp_path / "out"), reporter=Recorder(), tools=Tools(doctor=doctor)
        )


def test_two_builds_of_one_key_give_byte_identical_wheels(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reproducible: again in the same folder (only relinked, at a later time) and in another
    cache (another machine), the wheel's bytes are the same; dated by the upstream commit."""
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    first = core.build(
        _options(fake_repo, tmp_path / "a"), reporter=Recorder(), tools=Tools(doctor=doctor)
    )
    time.sleep(2.1)  # ZIP dates have 2-second steps: a date taken from the clock would differ
    again = core.build(
        _options(fake_repo, tmp_path / "b"), reporter=Recorder(), tools=Tools(doctor=doctor)
    )
    monkeypatch.setenv("MAMBAWIN_CACHE_DIR", str(tmp_path / "other-machine"))
    elsewhere = core.build(
        _options(fake_repo, tmp_path / "c"), reporter=Recorder(), tools=Tools(doctor=doctor)
    )
    assert again.reused_objects and not elsewhere.reused_objects
    assert first.wheel.read_bytes() == again.wheel.read_bytes() == elsewhere.wheel.read_bytes()
    committed = git.Repo(fake_repo).head.commit.committed_datetime.astimezone(timezone.utc)
    provenance = read_provenance(first.wheel)
    assert provenance is not None and provenance.stored["build_date"] == committed.isoformat()
    # the tree's files are dated at the commit too (nvcc -lineinfo records their mtimes)
    kernel = first.build_dir / "src/csrc/selective_scan/selective_scan_fwd_fp32.cu"
    assert int(kernel.stat().st_mtime) == int(committed.timestamp())
    zip_date = committed.replace(second=committed.second // 2 * 2)  # ZIP's 2-second steps
    with zipfile.ZipFile(first.wheel) as archive:
        assert {i.date_time for i in archive.infolist()} == {zip_date.timetuple()[:6]}


def test_interrupted_build_resumes_where_it_stopped(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_FAIL", "1")  # unit 1 is compiled, unit 2 fails
    with pytest.raises(BuildError):
        core.build(
            _options(fake_repo, tmp_path / "out"), reporter=Recorder(), tools=Tools(doctor=doctor)
        )
    monkeypatch.delenv("FAKE_FAIL")
    result = core.build(
        _options(fake_repo, tmp_path / "out"), reporter=Recorder(), tools=Tools(doctor=doctor)
    )
    assert result.units_compiled == 2


def test_failed_build_names_the_error_and_keeps_the_previous_wheel(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    previous = core.build(
        _options(fake_repo, out), reporter=Recorder(), tools=Tools(doctor=doctor)
    ).wheel
    before = previous.read_bytes()
    monkeypatch.setenv("FAKE_FAIL", "1")
    recorder = Recorder()
    # Another arch: a new build folder, the same wheel name in --out.
    with pytest.raises(CompileFailed) as failure:
        core.build(
            _options(fake_repo, out, archs=parse_archs("89")),
            reporter=recorder,
            tools=Tools(doctor=doctor),
        )

    error = failure.value
    assert error.exit_code == 6
    assert error.diagnostic is not None and error.diagnostic.code == "C2975"
    assert "selective_scan_fwd_fp32.cu(493): error C2975: 'kIsEvenLen_'" in str(error)
    assert str(error.log) in str(error) and error.log.is_file()
    assert recorder.steps == ["doctor", "fetch", "patch", "build"]
    assert sorted(p.name for p in out.iterdir()) == [previous.name]
    assert previous.read_bytes() == before
    assert not [p for p in builds_root().iterdir() if p.name.startswith(".")]


def test_build_key_follows_what_decides_the_binary(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    base = core.plan(
        _options(fake_repo, tmp_path / "out"), reporter=Recorder(), tools=Tools(doctor=doctor)
    ).key
    other_arch = core.plan(
        _options(fake_repo, tmp_path / "out", archs=parse_archs("89")), tools=Tools(doctor=doctor)
    )
    complex_kept = core.plan(
        _options(fake_repo, tmp_path / "out", keep_complex=True), tools=Tools(doctor=doctor)
    )
    doctor[0] = replace(doctor[0], toolchain=replace(TOOLCHAIN, torch_version="2.16.0+cu132"))
    other_torch = core.plan(_options(fake_repo, tmp_path / "out"), tools=Tools(doctor=doctor))
    doctor[0] = replace(doctor[0], toolchain=replace(TOOLCHAIN, host_compiler_version="13.1"))
    other_compiler = core.plan(_options(fake_repo, tmp_path / "out"), tools=Tools(doctor=doctor))
    doctor[0] = replace(doctor[0], toolchain=replace(TOOLCHAIN, cuda_version="13.1"))
    other_cuda = core.plan(_options(fake_repo, tmp_path / "out"), tools=Tools(doctor=doctor))
    keys = {
        base,
        other_arch.key,
        complex_kept.key,
        other_torch.key,
        other_compiler.key,
        other_cuda.key,
    }
    assert len(keys) == 6
    # Jobs, threads and the output folder do not change the binary, so not the key either.
    doctor[0] = replace(doctor[0], toolchain=TOOLCHAIN)
    same = core.plan(
        _options(fake_repo, tmp_path / "elsewhere", jobs=7, nvcc_threads=3),
        tools=Tools(doctor=doctor),
    )
    assert same.key == base


def test_a_left_out_patch_is_recorded_in_the_provenance(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    base = core.build(
        _options(fake_repo, tmp_path / "a"), reporter=None, tools=Tools(doctor=doctor)
    )
    result = core.build(
        _options(fake_repo, tmp_path / "b", skip_patches=("math-defines",)),
        reporter=None,
        tools=Tools(doctor=doctor),
    )
    assert read_provenance(result.wheel).stored["left_out"] == ["math-defines"]
    assert read_provenance(base.wheel).stored["left_out"] == []


def test_a_left_out_patch_leaves_its_file_and_changes_the_key(tmp_path: Path) -> None:
    from mambawin.packages import CAUSAL_CONV1D
    from mambawin.patch.engine import apply_patches

    trees = []
    for name, skip in (("full", ()), ("left-out", ("silu-bwd-tail",))):
        root = tmp_path / name
        shutil.copytree(Path(__file__).parent / "fixtures" / "causal_conv1d", root)
        (root / "causal_conv1d" / "__init__.py").write_text('__version__ = "1.6.1"\n')
        options = BuildOptions(package=CAUSAL_CONV1D, skip_patches=skip)
        chosen = core.patch_options(options, parse_archs("90"), TOOLCHAIN)
        report = apply_patches(root, chosen, skip=skip, package=CAUSAL_CONV1D)
        checkout = upstream.Checkout(root, "repo", "v1.6.1", "c0ffee", "1.6.1", "v1.6.1")
        trees.append(
            (
                root,
                report,
                core._key_inputs(checkout, report, parse_archs("90"), TOOLCHAIN, options),
            )
        )
    (_, _, full_key), (left, report, left_key) = trees
    assert {r.id: r.reason for r in report.results}["silu-bwd-tail"] == "named by --skip"
    assert (
        "if (chunk * kChunkSize + i < params.seqlen)"
        in (left / "csrc" / "causal_conv1d_bwd.cu").read_text()
    )
    assert "silu-bwd-tail" in full_key.patches and "silu-bwd-tail" not in left_key.patches
    assert build_key(full_key) != build_key(left_key)


def test_an_unknown_left_out_patch_fails_before_any_work(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "build",
            "--with",
            "none",
            "--repo",
            str(fake_repo),
            "--ref",
            "v0.1.0",
            "--out",
            str(out),
            "--skip-patch",
            "silu-bwd-tail",
            "--json",
        ],
        obj={"doctor": doctor},
    )
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert error.startswith("--skip-patch: unknown patch id 'silu-bwd-tail' for mamba-ssm")
    assert not out.exists()


def test_source_folder_is_copied_and_its_edits_change_the_key(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    first = core.plan(
        _options(fake_repo, tmp_path / "out", ref=None, source=fake_repo),
        tools=Tools(doctor=doctor),
    )
    unit = fake_repo / "csrc" / "selective_scan" / "selective_scan.cpp"
    unit.write_text(unit.read_text() + "// a local edit\n")
    second = core.plan(
        _options(fake_repo, tmp_path / "out", ref=None, source=fake_repo),
        tools=Tools(doctor=doctor),
    )
    assert first.key != second.key
    assert not (fake_repo / ".mambawin").exists()  # the user's tree is never patched in place


def test_plan_reads_the_patched_setup_py_and_compiles_nothing(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    recorder = Recorder()
    plan = core.plan(
        _options(fake_repo, tmp_path / "out", jobs=4), reporter=recorder, tools=Tools(doctor=doctor)
    )

    assert recorder.steps == ["doctor", "fetch", "patch", "configure"]
    assert plan.upstream["version"] == "0.1.0" and plan.upstream["tag"] == "v0.1.0"
    assert plan.ext_name == "selective_scan_cuda"
    assert [Path(u).name for u in plan.units] == [
        "selective_scan.cpp",
        "selective_scan_fwd_fp32.cu",
        "selective_scan_bwd_fp32_real.cu",
    ]
    assert plan.gencode == ["arch=compute_75,code=sm_75", "arch=compute_80,code=sm_80"]
    assert {p["status"] for p in plan.patches} <= {"not-applicable", "skipped"}
    assert (plan.jobs, plan.local_version, plan.reuses_objects) == (4, "cu130torch2.15", False)
    assert not (tmp_path / "out").exists()
    assert not plan.build_dir.exists()
    assert json.loads(json.dumps(plan.to_json()))["key"] == plan.key


def test_no_arch_and_no_gpu_asks_for_arch(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    doctor[0] = replace(doctor[0], recommended_archs=())
    with pytest.raises(UsageError, match="pass --arch"):
        core.build(
            _options(fake_repo, tmp_path / "out"), reporter=Recorder(), tools=Tools(doctor=doctor)
        )


def test_cli_with_no_gpu_and_no_arch_refuses_with_a_hint(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    doctor[0] = replace(doctor[0], recommended_archs=())  # what doctor says without a GPU
    result = CliRunner().invoke(
        app,
        [
            "build",
            "--with",
            "none",
            "--repo",
            str(fake_repo),
            "--ref",
            "v0.1.0",
            "--out",
            str(tmp_path / "out"),
            "--json",
        ],
        obj={"doctor": doctor},
    )
    assert result.exit_code == UsageError.exit_code
    assert "pass --arch" in json.loads(result.stdout)["error"]
    assert not (tmp_path / "out").exists()


def test_failed_blocking_check_stops_the_build_unless_forced(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    broken = Check("ninja", Status.FAIL, hint="pip install ninja", blocking=True)
    doctor[0] = replace(doctor[0], checks=(broken,), ready=False)
    recorder = Recorder()
    with pytest.raises(ToolchainError, match="ninja failed: pip install ninja"):
        core.build(
            _options(fake_repo, tmp_path / "out"), reporter=recorder, tools=Tools(doctor=doctor)
        )
    assert recorder.steps == ["doctor"]
    result = core.build(
        _options(fake_repo, tmp_path / "out", force=True),
        reporter=Recorder(),
        tools=Tools(doctor=doctor),
    )
    assert result.wheel.is_file()


@pytest.mark.parametrize(
    ("choice", "version"),
    [("none", "0.1.0"), ("mine.2", "0.1.0+mine.2"), ("+cu130", "0.1.0+cu130")],
)
def test_local_version_choices(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor, choice: str, version: str
) -> None:
    result = core.build(
        _options(fake_repo, tmp_path / "out", local_version=choice),
        reporter=Recorder(),
        tools=Tools(doctor=doctor),
    )
    assert result.wheel.name.startswith(f"mamba_ssm-{version}-")


def test_invalid_local_version_fails_before_any_work(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    recorder = Recorder()
    with pytest.raises(UsageError, match="--local-version"):
        core.build(
            _options(fake_repo, tmp_path / "out", local_version="cu 13!"),
            reporter=recorder,
            tools=Tools(doctor=doctor),
        )
    assert recorder.steps == []


def test_source_and_ref_together_are_refused(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    with pytest.raises(UsageError, match="--source and --ref"):
        core.plan(
            _options(fake_repo, tmp_path / "out", source=fake_repo), tools=Tools(doctor=doctor)
        )


def test_guard_refuses_a_real_upstream_tree(tmp_path: Path) -> None:
    src = tmp_path / "ws" / "src"
    shutil.copytree(FAKE, src)
    (src / "MAMBAWIN_FAKE_UPSTREAM").unlink()  # now it looks like a real tree
    with pytest.raises(RuntimeError, match=r"mark the test @pytest\.mark\.slow"):
        compile_wheel(Workspace(tmp_path / "ws"), {}, lambda status: None)
    assert not list((tmp_path / "ws").rglob("*.whl"))  # setup.py never ran


def test_cli_plan_json_and_failure_exit_code(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    args = [
        "build",
        "--with",
        "none",
        "--repo",
        str(fake_repo),
        "--ref",
        "v0.1.0",
        "--arch",
        "8.6",
        "--out",
        str(tmp_path / "out"),
    ]
    planned = runner.invoke(app, [*args, "--plan", "--json"], obj={"doctor": doctor})
    assert planned.exit_code == 0, planned.output
    assert json.loads(planned.stdout)["archs"] == "86"
    shown = runner.invoke(
        app, [*args, "--plan"], obj={"doctor": doctor}
    )  # the plan is the result: stdout
    assert "archs   86: nvcc gets -gencode" in shown.stdout, shown.stdout
    assert "doctor" in shown.stderr and "doctor" not in shown.stdout  # steps are narration

    monkeypatch.setenv("FAKE_FAIL", "1")
    failed = runner.invoke(app, args, obj={"doctor": doctor})
    assert failed.exit_code == 6
    assert "error C2975" in failed.output


def _planned_build_dir(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> tuple[BuildOptions, Path]:
    """The options of a build into tmp_path/out and its build folder, made (empty)."""
    options = _options(fake_repo, tmp_path / "out")
    build_dir = core.plan(options, reporter=Recorder(), tools=Tools(doctor=doctor)).build_dir
    build_dir.mkdir(parents=True)
    return options, build_dir


def test_a_second_build_into_the_same_build_folder_fails_clearly(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    options, build_dir = _planned_build_dir(fake_repo, tmp_path, doctor)
    (build_dir / core.LOCK_NAME).write_text("pid 4242 on elsewhere\n")  # a build in progress
    with pytest.raises(BuildError, match=r"is in use by another mambawin run \(pid 4242"):
        core.build(options, reporter=Recorder(), tools=Tools(doctor=doctor))
    assert (build_dir / core.LOCK_NAME).exists()  # not ours to remove
    assert not (build_dir / "src").exists() and not (tmp_path / "out").exists()
    (build_dir / core.LOCK_NAME).unlink()
    core.build(options, reporter=Recorder(), tools=Tools(doctor=doctor))
    assert not (build_dir / core.LOCK_NAME).exists()  # the build removed its own lock


@pytest.mark.parametrize(
    ("env", "extra", "said"),
    [
        ({"MAMBAWIN_KEEP_MB": "abc"}, [], "MAMBAWIN_KEEP_MB='abc' is not a whole number"),
        ({"SOURCE_DATE_EPOCH": "1.5e9"}, [], "SOURCE_DATE_EPOCH='1.5e9' is not a whole number"),
        ({}, ["--out", "a-file"], "is a file: pass a folder for the wheel"),
        ({}, ["--windows-root", "wr"], "--windows-root does not apply to the native backend"),
    ],
)
def test_plan_refuses_what_the_build_would_before_any_work(
    env: dict[str, str],
    extra: list[str],
    said: str,
    fake_repo: Path,
    tmp_path: Path,
    doctor: RecordedDoctor,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("mine\n")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = ["build", "--with", "none", "--repo", str(fake_repo), "--ref", "v0.1.0", "--arch", "8.6"]
    args += extra
    planned = CliRunner().invoke(app, [*args, "--plan", "--json"], obj={"doctor": doctor})
    assert planned.exit_code == 2, planned.output  # the plan said exit 0, the build then refused
    assert said in json.loads(planned.stdout)["error"]
    assert not (builds_root().parent / "mirrors").exists()  # refused before the fetch
    assert (tmp_path / "a-file").read_text() == "mine\n" and not (tmp_path / "wr").exists()


def test_a_killed_builds_lock_is_taken_over(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    """A build killed with SIGKILL leaves its lock; the next run on this machine finds its pid
    gone and takes the lock (the cross build of issue 29 was refused until it was deleted)."""
    import os
    import socket
    import subprocess
    import sys

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    options = _options(fake_repo, tmp_path / "out")
    build_dir = core.plan(options, reporter=Recorder(), tools=Tools(doctor=doctor)).build_dir
    build_dir.mkdir(parents=True)
    (build_dir / core.LOCK_NAME).write_text(f"pid {gone} on {socket.gethostname()}\n")
    core.build(options, reporter=Recorder(), tools=Tools(doctor=doctor))
    assert not (build_dir / core.LOCK_NAME).exists()  # taken, then released
    assert not (build_dir / f"{core.LOCK_NAME}.takeover").exists()
    # a live holder on this machine (this test's own process) still refuses
    (build_dir / core.LOCK_NAME).write_text(f"pid {os.getpid()} on {socket.gethostname()}\n")
    with pytest.raises(BuildError, match=r"is in use by another mambawin run"):
        core.build(options, reporter=Recorder(), tools=Tools(doctor=doctor))
    (build_dir / core.LOCK_NAME).unlink()


def test_a_fifo_at_the_locks_name_is_busy_not_a_hang(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    import os

    options, build_dir = _planned_build_dir(fake_repo, tmp_path, doctor)
    os.mkfifo(build_dir / core.LOCK_NAME)
    with pytest.raises(BuildError, match=r"in use by another mambawin run \(unknown\)"):
        core.build(options, reporter=Recorder(), tools=Tools(doctor=doctor))
    (build_dir / core.LOCK_NAME).unlink()
