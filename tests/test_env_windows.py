"""Windows-only doctor probes, on Linux with platform="win32", fake tools and a fake registry."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import recorded
from fakes.toolchain import (
    FakeSystem,
    make_cuda,
    make_tool,
    make_vs_instance,
    make_vswhere,
    torch_facts,
    vswhere_json,
)

from mambawin.doctor.checks import Check, DoctorReport, DoctorTools, run_checks
from mambawin.doctor.probes.tools import ToolFacts, tool_checks
from mambawin.stage import Status
from mambawin.toolchain import cuda as cuda_probe
from mambawin.toolchain.winreg import HKLM, MappingRegistry

VSWHERE_2022 = "vswhere-2022-community-17.5-requires-vctools-flutter.json.txt"
FILESYSTEM = r"SYSTEM\CurrentControlSet\Control\FileSystem"
LONG_PATHS_ON = MappingRegistry({(HKLM, FILESYSTEM, "LongPathsEnabled"): 1})


@pytest.fixture(autouse=True)
def _no_machine_toolkits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_probe, "default_toolkits", lambda ctx: [])


def box(
    tmp_path: Path,
    toolsets: tuple[str, ...] = ("14.44.35207",),
    *,
    vswhere: str | None = None,
    git_longpaths: str = "true",
) -> dict[str, str]:
    """A Windows machine: VS at a fake path, CUDA 12.6 in CUDA_PATH, tools on PATH."""
    vs = make_vs_instance(tmp_path / "VS" / "2022" / "BuildTools", toolsets)
    if vswhere is None:
        vswhere = vswhere_json(recorded(VSWHERE_2022), [vs])
    make_vswhere(tmp_path / "PF86", vswhere)
    cuda = make_cuda(
        tmp_path / "CUDA" / "v12.6",
        recorded("nvcc-version-win-12.6.85.txt"),
        recorded("nvcc-list-gpu-code-linux-12.8.txt"),
        exe="nvcc.exe",
        host_config=recorded("cuda-host-config-msc-ver-check-12.6.3-win-crlf.txt"),
    )
    bin_dir = tmp_path / "bin"
    for name in ("ninja", "cmake"):
        make_tool(bin_dir / name, stdout="1.12.1\n")
    make_tool(
        bin_dir / "git",
        stdout=git_longpaths + "\n",
        by_arg={"--version": "git version 2.47.1.windows.1\n"},
    )
    make_tool(
        bin_dir / "nvidia-smi",
        stdout=recorded("nvidia-smi-query-gpu-csv-win-rtx2080super-591.86.txt"),
    )
    return {
        "PATH": str(bin_dir),
        "CUDA_PATH": str(cuda),
        "ProgramFiles(x86)": str(tmp_path / "PF86"),
    }


def doctor(
    env: dict[str, str],
    *,
    registry: MappingRegistry = LONG_PATHS_ON,
    build_dir: Path | None = None,
    codepage: int | None = 65001,
    archs: tuple = (),
) -> DoctorReport:
    return run_checks(
        archs,
        build_dir,
        platform="win32",
        env=env,
        tools=DoctorTools(
            registry=registry,
            torch_facts=lambda: torch_facts("2.6.0+cu126", "12.6"),
            system=FakeSystem(codepage=codepage),
        ),
    )


def check(report: DoctorReport, name: str) -> Check:
    found = [c for c in report.checks if c.name == name]
    assert found, f"no check named {name!r} in {[c.name for c in report.checks]}"
    return found[0]


def test_vs2022_with_cuda126_is_ready_and_suggests_the_gpus_arch(tmp_path: Path) -> None:
    report = doctor(box(tmp_path))
    assert report.ready, [c for c in report.checks if c.stops_build]
    gate = check(report, "MSVC for nvcc")
    assert gate.status is Status.OK and "14.44.35207" in gate.found
    assert gate.required == "1910 <= _MSC_VER < 1950"  # read from the recorded host_config.h
    assert [a.number for a in report.recommended_archs] == ["75"]  # RTX 2080 SUPER via nvidia-smi
    assert report.toolchain.msvc_toolset == "14.44.35207"
    assert report.toolchain.host_compiler_version == "19.44.35207"


def test_only_vs2026_msvc_is_rejected_by_cuda126_with_the_toolset_to_add(tmp_path: Path) -> None:
    report = doctor(box(tmp_path, ("14.50.35717",)))
    gate = check(report, "MSVC for nvcc")
    assert gate.stops_build and not report.ready
    assert "14.50.35717 (1950)" in gate.hint and "v14.44" in gate.hint


def test_build_tools_without_the_cpp_workload_is_reported(tmp_path: Path) -> None:
    empty = tmp_path / "BuildTools"
    empty.mkdir()
    json_text = vswhere_json(recorded("vswhere-2022-buildtools-17.14-no-vctools.json.txt"), [empty])
    report = doctor(box(tmp_path, vswhere=json_text))
    vs = check(report, "Visual Studio")
    assert vs.stops_build and "Build Tools 2022" in vs.hint and "MSVC v143" in vs.hint


def test_no_visual_studio_at_all_is_reported(tmp_path: Path) -> None:
    report = doctor(box(tmp_path, vswhere="[]"))
    vs = check(report, "Visual Studio")
    assert vs.stops_build and "Desktop development with C++" in vs.hint


def test_several_instances_are_all_listed(tmp_path: Path) -> None:
    a = make_vs_instance(tmp_path / "2019", ["14.29.30133"])
    b = make_vs_instance(tmp_path / "2017", ["14.16.27023"])
    json_text = vswhere_json(recorded("vswhere-2019-2017-community-multi-polish.json.txt"), [a, b])
    report = doctor(box(tmp_path, vswhere=json_text))
    vs = check(report, "Visual Studio")
    assert "Community 2019" in vs.found and "Community 2017" in vs.found
    assert "14.29.30133" in check(report, "MSVC for nvcc").found


def test_missing_vswhere_is_reported(tmp_path: Path) -> None:
    env = box(tmp_path)
    env["ProgramFiles(x86)"] = str(tmp_path / "elsewhere")
    vs = check(doctor(env), "Visual Studio")
    assert vs.stops_build and "vswhere.exe not found" in vs.found


def test_a_32_bit_hosted_developer_prompt_warns(tmp_path: Path) -> None:
    env = box(tmp_path)
    cl = make_tool(tmp_path / "bin" / "cl", stdout=recorded("cl-banner-19.10-zh-cn-x86.txt"))
    env.update(
        {
            "VSCMD_ARG_TGT_ARCH": "x64",
            "VSCMD_ARG_HOST_ARCH": "x86",
            "VCToolsVersion": "14.44.35207",
            "DISTUTILS_USE_SDK": "1",
        }
    )
    prompt = check(doctor(env), "developer prompt")
    assert prompt.status is Status.WARN and "C1060" in prompt.hint
    assert prompt.version == "19.10.25019" and cl.exists()


def test_an_activated_prompt_with_a_toolset_nvcc_rejects_warns(tmp_path: Path) -> None:
    env = box(tmp_path)
    banner = recorded("cl-banner-19.41-en-x64-with-d9002-vcpkg-issue41139.txt")
    make_tool(tmp_path / "bin" / "cl", stdout=banner)
    env.update(
        {"VSCMD_ARG_TGT_ARCH": "x64", "VSCMD_ARG_HOST_ARCH": "x64", "VCToolsVersion": "14.50.35717"}
    )
    prompt = check(doctor(env), "developer prompt")
    assert prompt.status is Status.WARN and "outside nvcc's" in prompt.hint


def test_distutils_use_sdk_without_cl_on_path_fails(tmp_path: Path) -> None:
    env = box(tmp_path)
    env["DISTUTILS_USE_SDK"] = "1"
    sdk = check(doctor(env), "DISTUTILS_USE_SDK")
    assert sdk.stops_build and "cl.exe is not on PATH" in sdk.hint


def test_long_paths_disabled_warns_with_the_registry_fix(tmp_path: Path) -> None:
    report = doctor(box(tmp_path), registry=MappingRegistry(), build_dir=Path("C:/mw"))
    paths = check(report, "path length")
    assert paths.status is Status.WARN and "LongPathsEnabled /t REG_DWORD /d 1" in paths.hint


def test_a_build_dir_too_deep_for_cl_fails_even_with_long_paths(tmp_path: Path) -> None:
    deep = Path("C:/Users/USER/AppData/Local/mambawin/Cache/" + "x" * 120)
    paths = check(doctor(box(tmp_path), build_dir=deep), "path length")
    assert paths.stops_build and "C1081" in paths.hint


def test_git_without_core_longpaths_warns(tmp_path: Path) -> None:
    git = check(doctor(box(tmp_path, git_longpaths="")), "git core.longpaths")
    assert git.status is Status.WARN and "core.longpaths true" in git.hint


def test_git_bash_link_first_on_path_warns(tmp_path: Path) -> None:
    env = box(tmp_path)
    usr_bin = tmp_path / "Git" / "usr" / "bin"
    make_tool(usr_bin / "link.exe")
    env["PATH"] = f"{usr_bin}:{env['PATH']}"
    link = check(doctor(env), "link.exe")
    assert link.status is Status.WARN and "Git Bash" in link.hint


def test_a_non_utf8_oem_code_page_warns(tmp_path: Path) -> None:
    page = check(doctor(box(tmp_path), codepage=936), "code page")
    assert page.status is Status.WARN and "936" in page.found and "English" in page.hint
    assert check(doctor(box(tmp_path), codepage=65001), "code page").status is Status.OK


@pytest.mark.parametrize(
    ("version", "status"),
    [
        ("75.8.2", Status.OK),
        ("75.9.0", Status.WARN),
        ("78.0.2", Status.WARN),
        ("78.1.0", Status.OK),
    ],
)
def test_setuptools_that_breaks_torchs_msvc_activation_warns_on_windows(
    version: str, status: Status
) -> None:
    checks = tool_checks(ToolFacts(setuptools=version, wheel="0.45.1"), windows=True)
    setuptools = next(c for c in checks if c.name == "setuptools")
    assert setuptools.status is status
    if status is Status.WARN:
        assert "pytorch#148877" in setuptools.hint
    linux = next(
        c
        for c in tool_checks(ToolFacts(setuptools=version, wheel="1"), windows=False)
        if c.name == "setuptools"
    )
    assert linux.status is Status.OK


def test_vswhere_printing_junk_is_a_failed_check_not_a_crash(tmp_path: Path) -> None:
    vs = check(doctor(box(tmp_path, vswhere="this is not json")), "Visual Studio")
    assert vs.stops_build and "vswhere failed" in vs.found
