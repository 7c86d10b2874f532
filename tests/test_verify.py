"""verify: static checks, the fit rule, the install step (real venv) and the CLI, without a GPU."""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.tags import sys_tags
from typer.testing import CliRunner
from wheel.wheelfile import WheelFile

from mambawin import proc
from mambawin.archs import parse_arch
from mambawin.cli import app
from mambawin.packages import MAMBA
from mambawin.verify import fit, gpu, packages, pipeline, sandbox, static, steps
from mambawin.verify.options import VerifyOptions, skipped
from mambawin.verify.report import StepResult, Target, VerifyReport
from mambawin.verify.tools import Tools
from mambawin.verify.workers import one_by_one
from mambawin.wheel.gpucode import GpuCode
from mambawin.wheel.provenance import PROVENANCE_NAME, Provenance
from tests.binaries import MINIMAL_ELF
from tests.fakes.reporter import RecordingReporter

H100 = Target("2.8.0+cu128", "12.8", "NVIDIA H100", (9, 0))
PROVENANCE = {
    "schema": 1,
    "ref": "v2.2.6",
    "commit": "0123456789abcdef",
    "archs": ["80"],
    "torch_version": "2.8.0",
    "cuda_version": "12.8",
}
RECORD = Provenance.from_dict(PROVENANCE)  # as the static step parses it
STANDIN = "import sys\nprint('stand-in loaded', file=sys.stderr)\n"


def make_wheel(
    folder: Path,
    *,
    tag: str = "py3-none-any",
    requires: tuple[str, ...] = ("torch",),
    provenance: dict | None = PROVENANCE,
    files: dict[str, str | bytes] | None = None,
) -> Path:
    """A small real wheel (RECORD written by `wheel`) holding just what a test needs."""
    path = folder / f"mamba_ssm-2.2.6-{tag}.whl"
    dist = "mamba_ssm-2.2.6.dist-info"
    metadata = "Metadata-Version: 2.1\nName: mamba_ssm\nVersion: 2.2.6\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    wheel_file = f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n"
    with WheelFile(path, "w") as archive:
        for name, text in (files or {"mamba_ssm/__init__.py": ""}).items():
            archive.writestr(name, text)
        archive.writestr(f"{dist}/METADATA", metadata)
        archive.writestr(f"{dist}/WHEEL", wheel_file)
        if provenance is not None:
            archive.writestr(f"{dist}/{PROVENANCE_NAME}", json.dumps(provenance))
    return path


def code(*names: str) -> GpuCode:
    return GpuCode(
        tuple(n for n in names if n.startswith("sm_")),
        tuple(n for n in names if n.startswith("compute_")),
        "fatbin",
    )


# ---- fit rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arch", "cc", "runs"),
    [
        ("sm_86", (8, 6), True),
        ("sm_86", (8, 9), True),
        ("sm_86", (9, 0), False),
        ("sm_80", (8, 6), True),
        ("sm_89", (8, 6), False),
        ("sm_90a", (9, 0), True),
        ("sm_90a", (10, 0), False),
        ("compute_80", (9, 0), True),
        ("compute_80", (12, 0), True),
        ("compute_90", (8, 9), False),
    ],
)
def test_runs_on(arch, cc, runs):
    parsed = fit._as_arch(arch, ptx=arch.startswith("compute_"))
    assert fit.runs_on(parsed, cc) is runs


def test_sm80_only_wheel_fails_on_a_90_gpu_before_any_kernel():
    result = fit.fit_step(code("sm_80"), RECORD, H100, project=MAMBA.name)
    assert result.status == "fail"
    assert "rebuild with --arch 90" in result.summary
    assert "mambawin build --arch 90" in result.summary
    assert "sm_80" in result.summary


def test_a_t4_runner_without_sm75_code_is_named_by_the_fit_step():
    # A GPU runner the spec does not describe (no [ci] windows_gpu_arch): the generator cannot
    # refuse it, so the check job's verify must say which arch the wheels lack.
    t4 = Target("2.8.0+cu128", "12.8", "Tesla T4", (7, 5))  # the torch PROVENANCE names
    result = fit.fit_step(code("sm_86", "sm_90"), RECORD, t4, project=MAMBA.name)
    assert result.status == "fail"
    assert "Tesla T4 (compute capability 7.5)" in result.summary
    assert "rebuild with --arch 75" in result.summary


def test_sm86_sass_fits_an_89_gpu():
    target = Target("2.8.0", "12.8", "RTX 4090", (8, 9))
    result = fit.fit_step(code("sm_80", "sm_86"), RECORD, target, project=MAMBA.name)
    assert result.status == "ok"
    assert "SASS sm_86" in result.summary


def test_ptx_80_fits_a_90_gpu_by_jit():
    result = fit.fit_step(code("sm_80", "compute_80"), RECORD, H100, project=MAMBA.name)
    assert result.status == "ok"
    assert "PTX compute_80" in result.summary and "JIT" in result.summary


def test_archs_fall_back_to_the_provenance_record():
    prov = Provenance.from_dict(dict(PROVENANCE, archs=["80", "90"]))
    result = fit.fit_step(None, prov, H100, project=MAMBA.name)
    assert result.status == "ok"
    assert result.details["archs"]["source"] == "the provenance record"


def test_no_gpu_skips_the_arch_check_with_a_reason():
    result = fit.fit_step(code("sm_80"), RECORD, Target("2.8.1", "12.8"), project=MAMBA.name)
    assert result.status == "skip"
    assert "no CUDA GPU" in result.summary


@pytest.mark.parametrize(
    ("torch_version", "cuda", "fragment"),
    [
        ("2.9.0+cu128", "12.8", "built for torch 2.8"),
        ("2.8.0+cu130", "13.0", "built for CUDA 12"),
        ("2.8.0+cpu", None, "CPU-only"),
        (None, None, "not importable"),
    ],
)
def test_torch_mismatch_fails(torch_version, cuda, fragment):
    target = Target(torch_version, cuda, "NVIDIA H100", (9, 0))
    result = fit.fit_step(code("sm_90"), RECORD, target, project=MAMBA.name)
    assert result.status == "fail"
    assert fragment in result.summary


def test_torch_patch_and_cuda_minor_differences_are_fine():
    ok, message = fit.check_torch(RECORD, Target("2.8.1+cu126", "12.6"))
    assert ok, message


# ---- static checks ------------------------------------------------------------------------------


def test_tags_must_fit_this_python(tmp_path):
    here = str(next(iter(sys_tags())))
    assert static.check_tags(make_wheel(tmp_path, tag=here))[0]
    platform = next(iter(sys_tags())).platform
    ok, message = static.check_tags(make_wheel(tmp_path, tag=f"cp27-cp27m-{platform}"))
    assert not ok and "do not fit this Python" in message
    # A wheel for another platform (cross-built): its files are what this machine can check.
    (tmp_path / "w").mkdir()
    ok, message = static.check_tags(make_wheel(tmp_path / "w", tag="py3-none-win_amd64"))
    assert ok and "a win_amd64 wheel, checked here as files" in message


def test_a_windows_wheel_still_requiring_triton_fails(tmp_path):
    wheel = make_wheel(tmp_path, requires=("torch", "triton>=3.0"), tag="cp311-cp311-win_amd64")
    ok, message = static.check_requirements(wheel)
    assert not ok and "triton>=3.0 (triton publishes no Windows wheel" in message
    assert "mambawin metadata" in message
    other = tmp_path / "other"
    other.mkdir()
    assert static.check_requirements(
        make_wheel(other, requires=("torch", "triton-windows>=3.0"), tag="cp311-cp311-win_amd64")
    )[0]
    linux = tmp_path / "linux"
    linux.mkdir()
    assert static.check_requirements(
        make_wheel(linux, requires=("torch", "triton>=3.0"), tag="cp311-cp311-linux_x86_64")
    )[0]


def test_static_step_reports_every_check(tmp_path, monkeypatch):
    wheel = make_wheel(
        tmp_path, files={"selective_scan_cuda.cpython-311-x86_64-linux-gnu.so": MINIMAL_ELF}
    )
    monkeypatch.setattr(
        "mambawin.wheel.gpucode.gpu_code_in_archive",
        lambda archive, info: {
            "selective_scan_cuda.cpython-311-x86_64-linux-gnu.so": code("sm_90")
        },
    )
    result, found, provenance = static.static_step(VerifyOptions(wheel=wheel), H100)
    assert result.status == "ok", result.summary
    assert found.sass == ("sm_90",) and provenance.ref == "v2.2.6"
    assert set(result.details) == {
        "integrity",
        "tags",
        "metadata",
        "provenance",
        "binaries",
        "gpu_code",
        "build_paths",
    }
    assert result.details["build_paths"]["ok"]


SO = "selective_scan_cuda.cpython-311-x86_64-linux-gnu.so"


def _static_of(folder: Path, so: bytes) -> StepResult:
    wheel = make_wheel(folder, files={SO: MINIMAL_ELF + so})  # strings after a whole ELF
    tools = Tools(wheel_gpu_code=lambda _archive, _info: (code("sm_90"), "GPU code sm_90"))
    return static.static_step(VerifyOptions(wheel=wheel, tools=tools), H100)[0]


def test_a_build_path_in_the_extension_is_a_warning_naming_it(tmp_path):
    """__FILE__ of an unmapped build: the message names the path, verify still passes (a wheel
    built before the mapping works; rebuilding is the fix)."""
    leaked = b"/home/ci/.cache/mambawin/builds/k/src/csrc/selective_scan/selective_scan.cpp"
    so = b"\0\0Expected x to be contiguous\0" + leaked + b"\0/usr/lib/x.so\0"
    result = _static_of(tmp_path, so)
    assert result.status == "warn", result.summary
    row = result.details["build_paths"]
    assert not row["ok"] and row["advisory"]
    assert row["paths"] == {SO: [leaked.decode()]}
    assert leaked.decode() in result.summary and "rebuild" in result.summary


def test_mapped_paths_and_system_folders_are_not_build_paths(tmp_path):
    so = (
        b"\0./csrc/selective_scan/selective_scan.cpp\0torch/include/c10/util/Exception.h"
        b"\0/usr/local/cuda/lib64\0/proc/self/maps\0/var/tmp/x\0C:\\Windows\\System32\0"
    )
    result = _static_of(tmp_path, so)
    assert result.status == "ok", result.summary
    assert result.details["build_paths"]["paths"] == {}


def test_static_step_fails_without_provenance_or_extension(tmp_path):
    wheel = make_wheel(tmp_path, provenance=None)
    result, found, _ = static.static_step(VerifyOptions(wheel=wheel), H100)
    assert result.status == "fail"
    assert "no mambawin provenance" in result.summary
    assert "no compiled selective_scan_cuda" in result.summary
    assert found is None


def tamper(wheel: Path, how: str) -> Path:
    """The same wheel with one member's bytes changed behind RECORD, or an extra escaping path."""
    with zipfile.ZipFile(wheel) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    if how == "hash":
        members["mamba_ssm/__init__.py"] = b"import os; os.system('evil')\n"
    else:
        members["../../evil.py"] = b"import os\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return wheel


@pytest.mark.parametrize(
    ("how", "reason"),
    [("hash", "does not match its RECORD hash"), ("escape", "unsafe path '../../evil.py'")],
)
def test_a_tampered_wheel_is_never_installed(tmp_path, monkeypatch, how, reason):
    wheel = tamper(
        make_wheel(
            tmp_path, files={"mamba_ssm/__init__.py": "", "selective_scan_cuda.py": STANDIN}
        ),
        how,
    )
    tools = Tools(
        prepare_env=lambda *a: pytest.fail("pip was asked to install it"),
        run_module=lambda *a: pytest.fail("a kernel ran"),
    )
    report = pipeline.verify(VerifyOptions(wheel=wheel, target=H100, bench=True, tools=tools))
    assert [(s.name, s.status) for s in report.steps] == [
        ("static", "fail"),
        ("fit", "skip"),
        ("install", "skip"),
        ("smoke", "skip"),
        ("bench", "skip"),
    ]
    assert reason in report.step("static").summary
    assert report.summary().startswith("FAILED at static")


# ---- install step: a real venv with a pure-Python stand-in extension ---------------------------


def test_install_step_imports_the_wheel_in_a_fresh_venv(tmp_path):
    pytest.importorskip("torch")  # the venv must see this environment's torch
    wheel = make_wheel(tmp_path, files={"selective_scan_cuda.py": STANDIN})
    options = VerifyOptions(wheel=wheel)
    result, env = steps.install_step(options, tmp_path / "scratch")
    assert result.status == "ok", result.summary
    assert env is not None and env.venv is not None
    assert Path(result.details["extension"]).resolve().is_relative_to(env.venv.resolve())
    # The venv also runs mambawin's own modules (the smoke runner needs this).
    done = proc.run([env.python, "-c", "import mambawin.verify.runners.smoke"], env=env.env)
    assert done.returncode == 0


def test_install_step_reports_a_wheel_pip_refuses(tmp_path):
    wheel = make_wheel(tmp_path, tag="cp27-cp27m-win32", files={"selective_scan_cuda.py": ""})
    result, env = steps.install_step(VerifyOptions(wheel=wheel), tmp_path / "scratch")
    assert result.status == "fail" and env is None
    assert "pip could not install" in result.summary


def test_verify_without_gpu_passes_but_says_not_verified(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    wheel = make_wheel(tmp_path, files={"selective_scan_cuda.py": STANDIN})
    tools = Tools(wheel_gpu_code=lambda archive, info: (code("sm_90"), "GPU code sm_90"))
    target = Target("2.8.0", "12.8")
    reporter = RecordingReporter()
    report = pipeline.verify(
        VerifyOptions(wheel=wheel, target=target, bench=True, tools=tools), reporter=reporter
    )
    seen = [item.name for item in reporter.done]
    # requirements is skipped: unit tests run offline (MAMBAWIN_OFFLINE, tests/conftest.py)
    assert seen == [
        "static",
        "fit",
        "requirements",
        "install",
        "smoke",
        "calls",
        "blocks",
        "compile",
        "bench",
    ]
    assert report.passed and not report.gpu_verified
    assert "not verified on a GPU" in report.summary()
    assert [s.status for s in report.steps] == [
        "ok",
        "skip",
        "skip",
        "ok",
        "skip",
        "skip",
        "skip",
        "skip",
        "skip",
    ]
    assert json.loads(json.dumps(report.to_json()))["passed"] is True


def test_smoke_never_runs_when_the_wheel_does_not_fit(tmp_path, monkeypatch):
    wheel = make_wheel(tmp_path, files={"selective_scan_cuda.py": STANDIN})
    tools = replace(
        INSTALLED,
        wheel_gpu_code=lambda archive, info: (code("sm_80"), "GPU code sm_80"),
        run_module=lambda *a: pytest.fail("a kernel ran"),
    )
    report = pipeline.verify(VerifyOptions(wheel=wheel, target=H100, tools=tools))
    assert not report.passed
    assert report.step("smoke").status == "skip"
    assert report.summary().startswith("FAILED at fit")


def test_smoke_failure_fails_verify(tmp_path, monkeypatch):
    tools = Tools(
        run_module=lambda *a: {
            "passed": False,
            "seed": 5,
            "device": "H100",
            "per_dtype": {
                "float32": {
                    "cases": 1,
                    "failed": 1,
                    "max_abs": 1.0,
                    "max_rel": 1.0,
                    "worst_ratio": 99.0,
                }
            },
            "cases": [
                {
                    "name": "float32 L=7 fixB fixC",
                    "passed": False,
                    "error": None,
                    "errors": {"out": {"max_abs": 1.0, "max_rel": 1.0, "ratio": 99.0}},
                }
            ],
            "block": {"status": "skip", "reason": "no mamba_ssm"},
        },
    )
    fit = StepResult("fit", "ok", "")
    install = StepResult("install", "ok", "")
    result = gpu.smoke_step(
        VerifyOptions(wheel=tmp_path, tools=tools),
        H100,
        fit,
        install,
        sandbox.InstallEnv(sys.executable, None),
    )
    assert result.status == "fail"
    assert "1 of 1 cases failed" in result.summary and "out off by" in result.summary


# ---- CLI -------------------------------------------------------------------------------------


def test_cli_verify_exits_8_and_prints_json(tmp_path, monkeypatch):
    wheel = make_wheel(tmp_path, provenance=None, files={"mamba_ssm/__init__.py": ""})
    tools = replace(INSTALLED, probe_target=lambda python: Target("2.8.0", "12.8"))
    real = pipeline.verify
    # The CLI builds the options with the real tools; its core gets fakes of the sandbox.
    monkeypatch.setattr(
        pipeline,
        "verify",
        lambda options, reporter=None: real(replace(options, tools=tools), reporter=reporter),
    )
    result = CliRunner().invoke(app, ["verify", str(wheel), "--json"])
    assert result.exit_code == 8
    data = json.loads(result.stdout)  # one document: the report, with the error and exit code
    assert data["passed"] is False and data["exit_code"] == 8 and "FAILED at" in data["error"]
    # `mambawin index` shows a record only beside the wheel whose bytes it names.
    assert data["sha256"] == {wheel.name: hashlib.sha256(wheel.read_bytes()).hexdigest()}
    assert [s["name"] for s in data["steps"]] == [
        "static",
        "fit",
        "requirements",
        "install",
        "smoke",
        "calls",
        "blocks",
        "compile",
    ]


def test_cli_verify_needs_a_wheel_or_installed():
    result = CliRunner().invoke(app, ["verify"])
    assert result.exit_code == 2


def test_parse_arch_accepts_fatbin_names():
    assert fit._as_arch("sm_90a", ptx=False) == parse_arch("90a")
    assert fit._as_arch("compute_80", ptx=True).ptx


# ---- GPU steps after install (runner output recorded, no GPU needed) ------------------------


# The sandbox as if pip had installed the wheel and its extension imported (no venv, no pip);
# each runner through the run_module fake, in its own "process" (no real worker).
INSTALLED = Tools(
    run_worker=one_by_one,
    prepare_env=lambda wheels, python, scratch: sandbox.InstallEnv(sys.executable, None),
    import_check=lambda env, modules: {
        "extensions": {m: "site-packages" for m in modules},
        "torch": "2.8.0",
    },
)


def _env():
    return sandbox.InstallEnv(sys.executable, None)


def test_calls_step_fails_when_an_api_bypasses_its_kernel(monkeypatch):
    tools = Tools(
        run_module=lambda *a: {
            "passed": False,
            "probes": [
                {
                    "api": "selective_scan_fn",
                    "status": "fail",
                    "reason": "selective_scan_fn ran without calling selective_scan_cuda.fwd",
                },
                {"api": "causal_conv1d_fn", "status": "skip", "reason": "not installed"},
            ],
        },
    )
    step = gpu.runner_step("calls", VerifyOptions(wheel=Path("x"), tools=tools), None, _env())
    assert step.status == "fail" and "ran without calling selective_scan_cuda.fwd" in step.summary


def test_blocks_step_skips_when_every_block_skipped(monkeypatch):
    tools = Tools(
        run_module=lambda *a: {
            "passed": True,
            "blocks": [
                {"block": "Mamba", "status": "skip", "reason": "no triton"},
                {"block": "Mamba2", "status": "skip", "reason": "no triton"},
            ],
        },
    )
    step = gpu.runner_step("blocks", VerifyOptions(wheel=Path("x"), tools=tools), None, _env())
    assert step.status == "skip" and "Mamba skip: no triton" in step.summary
    blocked = gpu.runner_step(
        "blocks", VerifyOptions(wheel=Path("x"), tools=tools), "no CUDA GPU", _env()
    )
    assert blocked.status == "skip" and blocked.summary == "no CUDA GPU"


def test_upstream_tests_step_reports_each_package(monkeypatch, tmp_path):
    from mambawin.verify import upstream_tests as ut

    runs = [
        ut.TestRun(
            "mamba-ssm",
            ut.TEST_FILES["mamba-ssm"],
            "v2.3.2.post1",
            passed=12,
            expected_failures=8,
            complex_removed=True,
        ),
        ut.TestRun(
            "causal-conv1d",
            ut.TEST_FILES["causal-conv1d"],
            "v1.6.1.post4",
            passed=3,
            failed=1,
            failures=["test_x[a]: AssertionError"],
        ),
    ]
    tools = Tools(run_upstream_tests=lambda *a, **k: runs)
    options = VerifyOptions(wheel=tmp_path, upstream_tests=True, tools=tools)
    step = gpu.upstream_tests_step(options, None, _env(), [], tmp_path)
    assert step.status == "fail"
    assert "12 passed, 0 failed, 0 skipped, 8 expected failures (complex cases" in step.summary
    assert "causal_conv1d tests/test_causal_conv1d.py @ v1.6.1.post4: 3 passed, 1 failed" in (
        step.summary
    )
    assert step.details["mamba-ssm"]["ok"] is True


def test_cli_passes_upstream_tests_and_k(monkeypatch, tmp_path):
    seen = {}

    def fake_verify(options, reporter=None):
        seen["options"] = options
        return VerifyReport(None, Target(), ())

    monkeypatch.setattr(pipeline, "verify", fake_verify)
    result = CliRunner().invoke(
        app, ["verify", "--installed", "--upstream-tests", "-k", "test_selective_scan and 128"]
    )
    assert result.exit_code == 0, result.output
    assert seen["options"].upstream_tests
    assert seen["options"].test_keyword == "test_selective_scan and 128"


def test_upstream_tests_step_skips_when_the_filter_selects_nothing(monkeypatch, tmp_path):
    from mambawin.verify import upstream_tests as ut

    none = ut.TestRun("causal-conv1d", ut.TEST_FILES["causal-conv1d"], "v1.6.1", keyword="zzz")
    ran = ut.TestRun(
        "mamba-ssm",
        ut.TEST_FILES["mamba-ssm"],
        "v2.3.2",
        passed=2,
        keyword="zzz",
        note="subset -k 'zzz'",
    )
    options = VerifyOptions(wheel=tmp_path, upstream_tests=True, test_keyword="zzz")
    options = replace(options, tools=Tools(run_upstream_tests=lambda *a, **k: [none]))
    assert gpu.upstream_tests_step(options, None, _env(), [], tmp_path).status == "skip"
    options = replace(options, tools=Tools(run_upstream_tests=lambda *a, **k: [ran, none]))
    step = gpu.upstream_tests_step(options, None, _env(), [], tmp_path)
    assert step.status == "ok" and "no test matches -k 'zzz'" in step.summary


def test_skip_leaves_out_the_named_steps_and_times_the_rest(tmp_path, monkeypatch):
    wheel = make_wheel(tmp_path, files={"selective_scan_cuda.py": STANDIN})
    ran: list[str] = []

    def runner(env, module, args, timeout):
        ran.append(module.rsplit(".", 1)[-1])
        return {
            "passed": True,
            "probes": [{"api": "selective_scan_fn", "status": "ok", "reason": "called"}],
        }

    tools = replace(
        INSTALLED,
        wheel_gpu_code=lambda archive, info: (code("sm_90"), "GPU code sm_90"),
        run_module=runner,
    )
    options = VerifyOptions(
        wheel=wheel, target=H100, skip=frozenset({"smoke", "blocks"}), tools=tools
    )
    report = pipeline.verify(options)
    assert ran == ["calls"]
    assert report.step("smoke").status == "skip"
    assert report.step("smoke").summary == "left out (--skip smoke)"
    assert report.step("blocks").summary == "left out (--skip blocks)"
    assert all(s.seconds is not None and s.seconds >= 0 for s in report.steps)
    assert all("seconds" in s for s in report.to_json()["steps"])
    assert not report.gpu_verified  # calls alone compares nothing with a reference


def test_skipped_requirements_are_named_per_wheel(tmp_path):
    ref = packages.WheelRef(tmp_path / "c.whl", "causal-conv1d", "1.6.1")
    options = VerifyOptions(wheel=tmp_path, skip=frozenset({"requirements"}))
    assert skipped("requirements", options, ref).name == "requirements causal_conv1d"
    assert skipped("smoke", options) is None


def test_passing_upstream_tests_count_as_verified_on_the_gpu():
    steps = (
        StepResult("smoke", "skip", "left out (--skip smoke)"),
        StepResult("upstream-tests", "ok", "20 passed"),
    )
    report = VerifyReport("w", H100, steps)
    assert report.gpu_verified and report.summary().startswith("verified on")


def test_cli_skip_names_an_unknown_step_in_one_line(tmp_path):
    wheel = make_wheel(tmp_path, files={"selective_scan_cuda.py": STANDIN})
    result = CliRunner().invoke(app, ["verify", str(wheel), "--skip", "smoke,install", "--json"])
    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert "--skip: unknown step 'install'" in data["error"] and "requirements" in data["error"]


def test_conv_summary_names_a_known_upstream_bug():
    report = {
        "device": "H100",
        "seed": 1,
        "modes": ["plain"],
        "per_dtype": {},
        "cases": [
            {
                "name": "float16 plain w=2 L=1025 bias silu",
                "passed": False,
                "error": None,
                "note": "the known causal-conv1d SiLU backward bug",
                "errors": {"dx": {"max_abs": 3.4, "max_rel": 9.0, "ratio": 400.0}},
            }
        ],
    }
    summary = gpu.conv_summary(report)
    assert summary.startswith(
        "1 of 1 cases failed, first float16 plain w=2 L=1025 bias silu: "
        "dx off by 3.4 (400x tolerance) (the known causal-conv1d SiLU"
    )


def test_the_static_step_opens_and_hashes_each_wheel_once(tmp_path, monkeypatch):
    from mambawin.wheel import info as wheel_info

    wheel = make_wheel(tmp_path, files={"selective_scan_cuda.cpython-311-x86_64-linux-gnu.so": ""})
    checked: list[str] = []
    real = wheel_info._check_record

    def counting(info, archive):
        checked.append(info.path.name)
        return real(info, archive)

    monkeypatch.setattr(wheel_info, "_check_record", counting)  # counts, changes nothing
    result, _, provenance = static.static_step(VerifyOptions(wheel=wheel), H100)
    assert checked == [wheel.name]  # every RECORD hash checked once, not once per check
    assert provenance is not None and set(result.details) == {
        "integrity",
        "tags",
        "metadata",
        "provenance",
        "binaries",
        "gpu_code",
        "build_paths",
    }


@pytest.mark.parametrize("kind", ["device", "fifo", "folder"])
def test_a_wheel_that_is_no_regular_file_is_refused_unopened(kind: str, tmp_path: Path) -> None:
    wheel = tmp_path / "mamba_ssm-2.2.6-cp312-cp312-linux_x86_64.whl"
    if kind == "device":
        wheel.symlink_to("/dev/zero")  # its sha256 never ended: verify hung
    elif kind == "fifo":
        import os

        os.mkfifo(wheel)  # the open blocked forever
    else:
        wheel.mkdir()
    named = () if kind == "folder" else (wheel,)  # a folder named is a folder of wheels
    for target in (*named, tmp_path):  # named, or found in a folder of wheels
        result = CliRunner().invoke(app, ["verify", str(target), "--json"])
        assert result.exit_code == 2, result.output
        assert json.loads(result.stdout)["error"].endswith(", not a wheel: pass a .whl file")
