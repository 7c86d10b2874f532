"""Doctor probes on a fake Linux toolchain: one test per failure mode checks status and hint."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from conftest import recorded
from fakes.toolchain import (
    GCC_GATE_15,
    FakeSystem,
    fixture,
    make_cuda,
    make_tool,
    torch_facts,
)

from mambawin.archs import Arch, parse_archs
from mambawin.doctor.checks import (
    Check,
    DoctorReport,
    DoctorTools,
    Gpu,
    TorchFacts,
    run_checks,
    summary,
)
from mambawin.doctor.probes import gpu as gpu_probe
from mambawin.doctor.probes import system
from mambawin.stage import Status
from mambawin.toolchain import cuda as cuda_probe
from mambawin.toolchain import pytorch

NVIDIA_SMI_CSV = "nvidia-smi-query-gpu-csv-win-rtx2080super-591.86.txt"
NVCC_13 = ("nvcc-version-linux-13.0.88.txt", "nvcc-list-gpu-code-13.0.txt")


@pytest.fixture(autouse=True)
def _no_machine_toolkits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the fake toolkits count: this machine's /usr/local/cuda must not leak in."""
    monkeypatch.setattr(cuda_probe, "default_toolkits", lambda ctx: [])


def world(
    tmp_path: Path,
    *,
    nvcc: tuple[str, str] = NVCC_13,
    gcc: str = "12.2.0",
    tools: tuple[str, ...] = ("ninja", "git"),
    smi: str | None = None,
    nvcc_sleep: float = 0.0,
) -> dict[str, str]:
    """An environment whose PATH holds only fake tools, with a CUDA toolkit in CUDA_HOME."""
    cuda = make_cuda(
        tmp_path / "cuda",
        fixture(nvcc[0]),
        fixture(nvcc[1]),
        host_config=GCC_GATE_15,
        sleep=nvcc_sleep,
    )
    bin_dir = tmp_path / "bin"
    make_tool(bin_dir / "g++", stdout=gcc + "\n")
    for name in tools:
        make_tool(bin_dir / name, stdout=f"{name} version 1.12.1\n")
    if smi is not None:
        make_tool(bin_dir / "nvidia-smi", stdout=smi)
    return {"PATH": str(bin_dir), "CUDA_HOME": str(cuda)}


def doctor(
    env: dict[str, str], archs: str = "", facts: TorchFacts | None = None, **kwargs: object
) -> DoctorReport:
    provided = facts or torch_facts()
    return run_checks(
        parse_archs(archs) if archs else (),
        env=env,
        platform="linux",
        tools=DoctorTools(torch_facts=lambda: provided, system=FakeSystem()),
        **kwargs,
    )  # type: ignore[arg-type]


def check(report: DoctorReport, name: str) -> Check:
    found = [c for c in report.checks if c.name == name]
    assert found, f"no check named {name!r} in {[c.name for c in report.checks]}"
    return found[0]


# ---- parsers on recorded outputs --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "version"),
    [
        (recorded("nvcc-version-win-11.1.74.txt"), "11.1.74"),
        (recorded("nvcc-version-win-12.4.99.txt"), "12.4.99"),
        (recorded("nvcc-version-win-12.6.85.txt"), "12.6.85"),
        (recorded("nvcc-version-win-13.0.txt"), "13.0.48"),
        (fixture("nvcc-version-win-11.8-synthetic.txt"), "11.8.89"),
        (fixture("nvcc-version-win-12.8-synthetic.txt"), "12.8.93"),
        (fixture("nvcc-version-win-12.9-synthetic.txt"), "12.9.86"),
        (fixture("nvcc-version-linux-13.0.88.txt"), "13.0.88"),
        ("release 11.0, no V part", "11.0"),
    ],
)
def test_nvcc_version_is_parsed(text: str, version: str) -> None:
    parsed = cuda_probe.parse_nvcc_version(text)
    assert parsed is not None and parsed.public == version


def test_gpu_codes_are_parsed_from_list_gpu_code() -> None:
    assert cuda_probe.parse_gpu_codes(recorded("nvcc-list-gpu-code-linux-11.2.txt"))[0] == "sm_35"
    assert "sm_101" in cuda_probe.parse_gpu_codes(recorded("nvcc-list-gpu-code-linux-12.8.txt"))
    codes13 = cuda_probe.parse_gpu_codes(fixture("nvcc-list-gpu-code-13.0.txt"))
    assert "sm_72" not in codes13 and {"sm_75", "sm_110", "sm_121"} <= set(codes13)


def test_nvidia_smi_csv_gives_name_and_capability() -> None:
    gpus = gpu_probe.parse_nvidia_smi_csv(recorded(NVIDIA_SMI_CSV))
    assert gpus == (Gpu("NVIDIA GeForce RTX 2080 SUPER", (7, 5)),)
    narrow = "name, compute_cap\nNVIDIA GeForce RTX 4090, 8.9\nNVIDIA RTX A6000, 8.6\n"
    assert [g.capability for g in gpu_probe.parse_nvidia_smi_csv(narrow)] == [(8, 9), (8, 6)]


@pytest.mark.parametrize(
    ("arch", "cap", "runs"),
    [
        (Arch(8, 0), (8, 6), True),  # SASS runs on a higher minor of the same major
        (Arch(8, 6), (8, 0), False),
        (Arch(8, 6), (9, 0), False),  # ... never on another major
        (Arch(7, 5, ptx=True), (8, 9), True),  # PTX JIT-compiles forward
        (Arch(9, 0, "a"), (9, 0), True),
        (Arch(9, 0, "a"), (10, 0), False),  # arch-specific targets are not portable
    ],
)
def test_arch_coverage_follows_cuda_binary_compatibility(
    arch: Arch, cap: tuple[int, int], runs: bool
) -> None:
    assert gpu_probe.covers(arch, cap) is runs


# ---- torch facts are read without importing torch ---------------------------------------------


def test_torch_facts_come_from_its_files_without_importing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "torch"
    (pkg / "include" / "ATen").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('torch must not be imported')\n")
    (pkg / "version.py").write_text(
        "from typing import Optional\n__version__ = '2.11.0'\ncuda: Optional[str] = None\n"
    )
    # Hand-written: only the guard construct the probe anchors on.
    (pkg / "include" / "ATen" / "ATen.h").write_text(
        "#if !defined(_MSVC_LANG) && __cplusplus < 202002L\n#error C++20 or later compatible "
        "compiler is required to use ATen.\n#endif\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    # Another test may have imported the real torch; find_spec would then answer from sys.modules.
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    facts = pytorch.read_torch_facts()
    assert (facts.installed, facts.version, facts.cuda, facts.cxx_std) == (True, "2.11.0", None, 20)
    assert facts.cpu_only


# ---- verdicts ---------------------------------------------------------------------------------


def test_cpu_only_torch_is_not_ready_and_names_the_cuda_torch_to_install(tmp_path: Path) -> None:
    report = doctor(world(tmp_path), facts=torch_facts(version="2.9.0", cuda=None))
    torch_cuda = check(report, "torch CUDA")
    assert torch_cuda.status is Status.FAIL and torch_cuda.blocking and not report.ready
    assert "--index-url https://download.pytorch.org/whl/cu130" in torch_cuda.hint


def test_cuda13_torch_with_nvcc13_is_ready_and_suggests_archs(tmp_path: Path) -> None:
    report = doctor(world(tmp_path))
    assert report.ready, [c for c in report.checks if c.stops_build]
    assert check(report, "torch CUDA").status is Status.OK
    # No GPU: nothing is picked for the user (a build asks for --arch), a portable list is hinted.
    assert report.recommended_archs == () == report.archs
    assert (
        "a build needs --arch, e.g. --arch '75;80;86;89;90;100;120+PTX'"
        in check(report, "GPU").hint
    )
    assert "ready to build with --arch" in summary(report)
    assert report.toolchain.cuda_version == "13.0.88" and report.toolchain.host_compiler == "gcc"


def test_arch_53_is_unsupported_by_nvcc13(tmp_path: Path) -> None:
    report = doctor(world(tmp_path), archs="53")
    arch = check(report, "nvcc archs")
    assert arch.status is Status.FAIL and arch.blocking and not report.ready
    assert "sm_53" in arch.hint and "CUDA 12.x" in arch.hint


def test_arch_86_89_is_accepted_by_nvcc13(tmp_path: Path) -> None:
    report = doctor(world(tmp_path), archs="86;89")
    assert check(report, "nvcc archs").status is Status.OK and report.ready


def test_arch_suffixes_are_checked_against_nvcc(tmp_path: Path) -> None:
    # --list-gpu-code lists sm_90 and sm_100, never sm_90a or sm_100f: the suffix needs a release.
    assert check(doctor(world(tmp_path / "13"), archs="90a;100f"), "nvcc archs").status is Status.OK
    old = ("nvcc-version-win-11.8-synthetic.txt", "nvcc-list-gpu-code-11.8.txt")
    report = doctor(
        world(tmp_path / "11", nvcc=old), archs="90a", facts=torch_facts("2.5.0+cu118", "11.8")
    )
    arch = check(report, "nvcc archs")
    assert arch.status is Status.FAIL and not report.ready
    assert "'a' needs CUDA 12.0+" in arch.hint and "--arch 90" in arch.hint
    nvcc_128 = ("nvcc-version-win-12.8-synthetic.txt", "nvcc-list-gpu-code-12.9.txt")
    report = doctor(
        world(tmp_path / "12", nvcc=nvcc_128),
        archs="100f",
        facts=torch_facts("2.7.0+cu128", "12.8"),
    )
    assert "'f' needs CUDA 12.9+" in check(report, "nvcc archs").hint


def test_doctor_reports_the_requested_archs_not_a_default_list(tmp_path: Path) -> None:
    report = doctor(world(tmp_path), archs="86;89")
    assert summary(report).startswith("ready to build: --arch 86;89,")
    assert "building for --arch 86;89" in check(report, "GPU").hint
    assert report.to_json()["archs"] == ["86", "89"]


def test_blackwell_needs_a_newer_nvcc_than_12_4(tmp_path: Path) -> None:
    nvcc = ("nvcc-version-win-12.8-synthetic.txt", "nvcc-list-gpu-code-12.4.txt")
    report = doctor(
        world(tmp_path, nvcc=nvcc), archs="120", facts=torch_facts("2.7.0+cu128", "12.8")
    )
    arch = check(report, "nvcc archs")
    assert arch.status is Status.FAIL and "12.8+" in arch.hint


def test_cuda_major_mismatch_blocks_and_minor_mismatch_warns(tmp_path: Path) -> None:
    major = doctor(world(tmp_path), facts=torch_facts("2.7.0+cu128", "12.8"))
    assert check(major, "torch CUDA").stops_build
    assert "cu130" in check(major, "torch CUDA").hint
    minor = doctor(world(tmp_path), facts=torch_facts("2.10.0+cu132", "13.2"))
    assert check(minor, "torch CUDA").status is Status.WARN and minor.ready


def test_missing_torch_blocks_with_an_install_command(tmp_path: Path) -> None:
    report = doctor(world(tmp_path), facts=TorchFacts())
    assert check(report, "torch").stops_build and "pip install" in check(report, "torch").hint
    # Nothing to replace: the hint a newcomer copies installs, it does not force a reinstall.
    assert "--force-reinstall" not in check(report, "torch").hint


def test_a_cpu_only_torch_gets_a_forced_reinstall_hint(tmp_path: Path) -> None:
    report = doctor(world(tmp_path), facts=torch_facts("2.11.0", None))
    assert "--force-reinstall" in check(report, "torch CUDA").hint


def test_missing_nvcc_blocks_with_a_download_hint(tmp_path: Path) -> None:
    env = world(tmp_path)
    env["CUDA_HOME"] = str(tmp_path / "nowhere")
    report = doctor(env)
    nvcc = check(report, "nvcc")
    assert nvcc.stops_build and "install the CUDA toolkit" in nvcc.hint
    assert str(tmp_path / "nowhere") in nvcc.hint


def test_a_hung_nvcc_is_reported_not_waited_for(tmp_path: Path) -> None:
    start = time.monotonic()
    report = doctor(world(tmp_path, nvcc_sleep=30), timeout=1.0)
    assert time.monotonic() - start < 15
    assert check(report, "nvcc").stops_build and "did not run" in check(report, "nvcc").hint


def test_cuda_home_beats_cuda_path_like_torch_and_the_disagreement_is_reported(
    tmp_path: Path,
) -> None:
    env = world(tmp_path)
    other = make_cuda(tmp_path / "other", fixture(NVCC_13[0]), fixture(NVCC_13[1]))
    env["CUDA_PATH"] = str(other)
    report = doctor(env)
    assert report.toolchain.cuda_home == env["CUDA_HOME"]
    home = check(report, "CUDA_HOME")
    assert home.status is Status.WARN and "torch uses CUDA_HOME" in home.hint


def test_a_gcc_newer_than_nvcc_allows_blocks(tmp_path: Path) -> None:
    report = doctor(world(tmp_path, gcc="16.1.0"))
    host = check(report, "host compiler")
    assert host.stops_build and "gcc 15" in host.hint and host.required == "gcc <= 15"


def test_missing_ninja_blocks_and_missing_cmake_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mambawin.doctor.probes.tools._in_scripts", lambda name, platform: None)
    report = doctor(world(tmp_path, tools=("git",)))
    assert check(report, "ninja").stops_build and "pip install ninja" in check(report, "ninja").hint
    assert check(report, "cmake").status is Status.SKIP and not check(report, "cmake").blocking


def test_the_gpu_is_found_with_nvidia_smi_and_uncovered_archs_warn(tmp_path: Path) -> None:
    env = world(tmp_path, smi=recorded(NVIDIA_SMI_CSV))
    report = doctor(env, archs="86")
    gpu = check(report, "GPU arch")
    assert gpu.status is Status.WARN and "add 75 to --arch" in gpu.hint
    assert report.recommended_archs == (Arch(7, 5),) and report.archs == (Arch(8, 6),)
    assert check(doctor(env, archs="75;86"), "GPU arch").status is Status.OK


def test_a_gpu_this_cuda_cannot_target_warns(tmp_path: Path) -> None:
    smi = "name, compute_cap\nNVIDIA GeForce GTX 1080, 6.1\n"
    report = doctor(world(tmp_path, smi=smi))
    gpu = check(report, "GPU arch")
    assert gpu.status is Status.WARN and "install CUDA 12.x" in gpu.hint
    assert report.recommended_archs == ()


def test_a_crashing_probe_becomes_a_failed_check(tmp_path: Path) -> None:
    def broken() -> TorchFacts:
        raise OSError("disk on fire")

    report = run_checks(
        env=world(tmp_path),
        platform="linux",
        tools=DoctorTools(torch_facts=broken, system=FakeSystem()),
    )
    torch = check(report, "torch")
    assert torch.status is Status.FAIL and "disk on fire" in torch.hint


def test_low_disk_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Usage:
        free = 1 * system.GIB

    monkeypatch.setattr(system.shutil, "disk_usage", lambda path: Usage())
    report = doctor(world(tmp_path), build_dir=tmp_path / "build")
    disk = check(report, "disk")
    assert disk.stops_build and "--build-dir" in disk.hint


@pytest.mark.parametrize(
    ("available", "cpus", "archs", "jobs"),
    [
        (48, 16, 1, 16),  # plenty of RAM: one job per CPU
        (48, 16, 4, 9),  # 4 archs per job (--threads 4): ~4 GiB a job
        (3, 16, 1, 2),
        (0.5, 8, 1, 1),  # never below one
    ],
)
def test_recommended_jobs_fit_in_memory(available: float, cpus: int, archs: int, jobs: int) -> None:
    memory = (64 * system.GIB, int(available * system.GIB))
    assert system.recommended_jobs(memory, cpus, archs) == jobs


def test_json_document_has_the_documented_shape(tmp_path: Path) -> None:
    data = doctor(world(tmp_path), archs="86").to_json()
    assert set(data) == {"ready", "checks", "recommended", "archs"}
    assert data["archs"] == ["86"]
    assert set(data["checks"][0]) == {"name", "status", "found", "version", "required", "hint"}
    assert set(data["recommended"]) == {"arch", "jobs"}
    assert isinstance(data["recommended"]["jobs"], int)
