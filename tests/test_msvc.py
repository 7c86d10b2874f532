"""MSVC discovery and vcvars capture, on recorded Windows outputs and fake tools (runs on Linux)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import recorded
from fakes.toolchain import (
    make_cmd,
    make_cuda,
    make_tool,
    make_vs_instance,
    make_vswhere,
    set_dump,
    vswhere_json,
)
from packaging.version import Version

from mambawin.errors import ToolchainError
from mambawin.toolchain import msvc, vcvars

VSWHERE_2022 = "vswhere-2022-community-17.5-requires-vctools-flutter.json.txt"
VSWHERE_MULTI = "vswhere-2019-2017-community-multi-polish.json.txt"
VSWHERE_NO_VC = "vswhere-2022-buildtools-17.14-no-vctools.json.txt"
HOST_CONFIG_126 = "cuda-host-config-msc-ver-check-12.6.3-win-crlf.txt"
NVCC_126 = "nvcc-version-win-12.6.85.txt"


def test_vswhere_json_lists_every_instance_with_its_product() -> None:
    multi = msvc.parse_vswhere_json(recorded(VSWHERE_MULTI))
    assert [i.name for i in multi] == [
        "Visual Studio Community 2019",
        "Visual Studio Community 2017",
    ]
    assert multi[0].path.endswith(r"2019\Community")
    build_tools = msvc.parse_vswhere_json(recorded(VSWHERE_NO_VC))
    assert build_tools[0].product == "Microsoft.VisualStudio.Product.BuildTools"
    assert msvc.parse_vswhere_json("[]") == []


@pytest.mark.parametrize(
    ("name", "window"),
    [
        ("cuda-host-config-msc-ver-check-11.4.txt", (1910, 1930)),
        ("cuda-host-config-msc-ver-check-11.8.txt", (1910, 1940)),
        (HOST_CONFIG_126, (1910, 1950)),
        ("cuda-host-config-msc-ver-check-13.0.txt", (1920, 1951)),
    ],
)
def test_msc_window_is_read_from_host_config(name: str, window: tuple[int, int]) -> None:
    parsed = msvc.parse_msc_window(recorded(name))
    assert parsed is not None and (parsed.low, parsed.high) == window
    assert parsed.accepts(window[0]) and not parsed.accepts(window[1])


def test_msc_window_of_a_header_without_the_check_is_unknown() -> None:
    assert msvc.parse_msc_window("#if defined(__GNUC__)\n#endif\n") is None


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("cl-banner-19.41-en-x64-with-d9002-vcpkg-issue41139.txt", "19.41.34120"),
        ("cl-banner-19.16-zh-cn-x64.txt", "19.16.27035"),
        ("cl-banner-19.10-zh-cn-x86.txt", "19.10.25019"),
        ("cl-banner-19.27-ko-x64.txt", "19.27.29111"),
        ("cl-banner-19.23-it-x64-meson-pr6153.txt", "19.23.28106"),
        ("cl-banner-19.15-en-x64-in-ninja-step-vcpkg-issue4654.txt", "19.15.26730"),
    ],
)
def test_cl_version_is_found_in_any_language(name: str, version: str) -> None:
    assert msvc.parse_cl_version(recorded(name)) == version


def test_toolsets_are_listed_newest_first_with_their_msc_ver(tmp_path: Path) -> None:
    root = make_vs_instance(tmp_path / "vs", ["14.29.30133", "14.44.35207", "14.38.33130"])
    (root / "VC" / "Tools" / "MSVC" / "not-a-toolset").mkdir()
    toolsets = msvc.list_toolsets(msvc.VsInstance(str(root), "17.14", "VS"))
    assert [t.version for t in toolsets] == ["14.44.35207", "14.38.33130", "14.29.30133"]
    assert [t.msc_ver for t in toolsets] == [1944, 1938, 1929]
    assert toolsets[0].cl_version == "19.44.35207"


def test_stl_minimum_cuda_comes_from_the_toolsets_header_else_the_table(tmp_path: Path) -> None:
    root = make_vs_instance(
        tmp_path / "vs", ["14.44.35207", "14.51.36014"], stl_cuda={"14.44.35207": "12.4"}
    )
    instance = msvc.VsInstance(str(root), "18.0", "VS")
    by_version = {t.version: t for t in msvc.list_toolsets(instance)}
    assert msvc.stl_min_cuda(by_version["14.44.35207"]) == Version("12.4")
    assert msvc.stl_min_cuda(by_version["14.51.36014"]) == Version("13.2")  # table: STL 14.51


def test_the_newest_toolset_inside_nvccs_window_is_chosen(tmp_path: Path) -> None:
    # VS 2026 (14.50, _MSC_VER 1950) next to the 14.44 toolset; CUDA 12.6 accepts < 1950.
    root = make_vs_instance(tmp_path / "vs", ["14.50.35717", "14.44.35207"])
    toolsets = msvc.list_toolsets(msvc.VsInstance(str(root), "18.0", "VS 2026"))
    window = msvc.parse_msc_window(recorded(HOST_CONFIG_126))
    chosen = msvc.choose_toolset(toolsets, window, Version("12.6.85"))
    assert chosen is not None and chosen.toolset.version == "14.44.35207"
    assert msvc.choose_toolset(toolsets[:1], window, Version("12.6.85")) is None


def test_a_toolset_whose_stl_wants_a_newer_cuda_is_not_usable(tmp_path: Path) -> None:
    root = make_vs_instance(tmp_path / "vs", ["14.41.34120"], stl_cuda={"14.41.34120": "12.4"})
    toolset = msvc.list_toolsets(msvc.VsInstance(str(root), "17.11", "VS"))[0]
    verdict = msvc.judge(toolset, msvc.MscWindow(1910, 1950), Version("12.3.107"))
    assert verdict.nvcc_ok and verdict.stl_ok is False and not verdict.usable


def test_a_toolset_without_the_x64_hosted_compiler_is_not_usable(tmp_path: Path) -> None:
    root = make_vs_instance(tmp_path / "vs", ["14.44.35207"], x64=False)
    toolset = msvc.list_toolsets(msvc.VsInstance(str(root), "17.14", "VS"))[0]
    assert not msvc.judge(toolset, msvc.MscWindow(1910, 1950), Version("12.6")).usable


def test_path_lists_are_deduplicated_keeping_the_first(tmp_path: Path) -> None:
    value = r"C:\A;c:\a\;C:\B;;C:\A;C:\B\ "
    assert vcvars.dedupe_path_list(value) == r"C:\A;C:\B"


def test_merge_is_case_insensitive_and_sets_distutils_use_sdk() -> None:
    merged = vcvars.merge_environment(
        {"Path": r"C:\old", "Keep": "1"}, {"PATH": r"C:\vc;C:\vc;C:\old", "INCLUDE": "x"}
    )
    assert merged["Path"] == r"C:\vc;C:\old" and "PATH" not in merged
    assert merged["DISTUTILS_USE_SDK"] == "1" and merged["Keep"] == "1"


def test_a_utf16_set_dump_is_parsed_and_hidden_drive_variables_dropped(tmp_path: Path) -> None:
    root = make_vs_instance(tmp_path / "vs", ["14.44.35207"])
    cl_dir = root / "VC/Tools/MSVC/14.44.35207/bin/Hostx64/x64"
    captured = vcvars.parse_set_dump(set_dump(cl_dir))
    assert captured["VSCMD_ARG_TGT_ARCH"] == "x64"
    assert captured["VCToolsVersion"] == "14.44.35207"
    assert "=C:" not in captured and "" not in captured


def test_a_set_dump_without_an_x64_target_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match="VSCMD_ARG_TGT_ARCH"):
        vcvars.parse_set_dump(set_dump(tmp_path, drop=["VSCMD_ARG_TGT_ARCH"]))


def test_a_set_dump_without_cl_on_its_path_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match=r"cl\.exe is not on its PATH"):
        vcvars.parse_set_dump(set_dump(tmp_path / "empty"))


# ---- end to end: vswhere -> vcvars64.bat under cmd /u -> merged environment ---------------------


@pytest.fixture
def windows_box(tmp_path: Path) -> dict[str, Path]:
    """VS 2026 with toolsets 14.50 and 14.44, CUDA 12.6, vswhere at its fixed place."""
    vs = make_vs_instance(tmp_path / "VS" / "18" / "Community", ["14.50.35717", "14.44.35207"])
    make_vswhere(tmp_path / "PF86", vswhere_json(recorded(VSWHERE_2022), [vs]))
    cuda = make_cuda(
        tmp_path / "CUDA" / "v12.6", recorded(NVCC_126), "", host_config=recorded(HOST_CONFIG_126)
    )
    return {
        "root": tmp_path,
        "vs": vs,
        "cuda": cuda,
        "cl_dir": vs / "VC" / "Tools" / "MSVC" / "14.44.35207" / "bin" / "Hostx64" / "x64",
    }


def _env(box: dict[str, Path], cmd: Path) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "ProgramFiles(x86)": str(box["root"] / "PF86"),
        "COMSPEC": str(cmd),
        "Path_extra": "unchanged",
    }


def test_capture_picks_a_toolset_nvcc_accepts_and_returns_the_merged_env(
    windows_box: dict[str, Path],
) -> None:
    banner = "[vcvarsall.bat] Environment initialized for: 'x64'\r\n".encode("utf-16-le")
    cmd = make_cmd(
        windows_box["root"] / "cmd.exe", env_dump=set_dump(windows_box["cl_dir"]), stdout=banner
    )
    env = vcvars.capture_msvc_environment(windows_box["cuda"], env=_env(windows_box, cmd))
    bat = Path(str(cmd) + ".last.bat").read_text(encoding="utf-8")
    assert "-vcvars_ver=14.44.35207" in bat and "vcvars64.bat" in bat
    assert env["VCToolsVersion"] == "14.44.35207" and env["DISTUTILS_USE_SDK"] == "1"
    assert env["Path_extra"] == "unchanged"
    path_entries = env["PATH"].split(";") if "PATH" in env else env["Path"].split(";")
    assert path_entries.count(str(windows_box["cl_dir"])) == 1


def test_capture_fails_on_error_lines_even_when_vcvars_exits_zero(
    windows_box: dict[str, Path],
) -> None:
    output = recorded("vcvars-error-vcvars-ver-not-installed-cpp-client-telemetry-issue923.txt")
    cmd = make_cmd(
        windows_box["root"] / "cmd.exe",
        stdout=output.encode("utf-16-le"),
        env_dump=set_dump(windows_box["cl_dir"]),
    )
    with pytest.raises(ToolchainError, match=r"\[ERROR:vcvars\.bat\] Version '14\.29\.30133'"):
        vcvars.capture_msvc_environment(windows_box["cuda"], env=_env(windows_box, cmd))


def test_capture_fails_when_vcvars_exits_nonzero(windows_box: dict[str, Path]) -> None:
    output = recorded("vcvarsall-exit-255-vs2022-17.6-vcpkg-issue38831.txt")
    cmd = make_cmd(
        windows_box["root"] / "cmd.exe", stdout=output.encode("utf-16-le"), exit_code=255
    )
    with pytest.raises(ToolchainError, match="exited with code 255"):
        vcvars.capture_msvc_environment(windows_box["cuda"], env=_env(windows_box, cmd))


def test_capture_names_the_toolset_to_install_when_none_fits(tmp_path: Path) -> None:
    vs = make_vs_instance(tmp_path / "VS" / "18" / "Community", ["14.50.35717"])
    make_vswhere(tmp_path / "PF86", vswhere_json(recorded(VSWHERE_2022), [vs]))
    cuda = make_cuda(
        tmp_path / "cuda", recorded(NVCC_126), "", host_config=recorded(HOST_CONFIG_126)
    )
    env = {"PATH": os.environ["PATH"], "ProgramFiles(x86)": str(tmp_path / "PF86")}
    with pytest.raises(ToolchainError, match=r"found 14\.50\.35717.*v14\.44"):
        vcvars.capture_msvc_environment(cuda, env=env)


def test_capture_without_vswhere_says_what_to_install(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "ProgramFiles(x86)": str(tmp_path / "none")}
    with pytest.raises(ToolchainError, match="Build Tools"):
        vcvars.capture_msvc_environment(tmp_path, cuda_version="12.6", env=env)


def test_vswhere_is_asked_for_every_product_and_the_vc_component(tmp_path: Path) -> None:
    log = tmp_path / "argv.txt"
    script = make_tool(
        tmp_path / "PF86" / "Microsoft Visual Studio" / "Installer" / "vswhere.exe", stdout="[]"
    )
    script.write_text(
        script.read_text().replace(
            "import sys, time\n",
            f"import sys, time\nopen({str(log)!r}, 'w').write(' '.join(sys.argv[1:]))\n",
        )
    )
    env = {"PATH": os.environ["PATH"], "ProgramFiles(x86)": str(tmp_path / "PF86")}
    assert msvc.list_instances(env) == []
    argv = log.read_text()
    assert "-products *" in argv and f"-requires {msvc.VC_TOOLS}" in argv and "-utf8" in argv
