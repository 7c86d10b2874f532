"""`mambawin check --windows`: the compiler commands a Windows build would run, per-unit results
and the link's verdict. The programs are passed in, so these tests run no wine; the real compilers
run under the windows_toolchain marker (tests/test_windows_tag_matrix.py)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mambawin import proc
from mambawin.archs import parse_arch
from mambawin.builder import front
from mambawin.builder.configure import SetupConfig
from mambawin.builder.results import BuildResult
from mambawin.builder.setup_scan import scan_setup
from mambawin.check.pipeline import CheckOptions, check_windows, plan_check
from mambawin.cli import app
from mambawin.errors import CheckFailed, ToolchainError, UsageError
from mambawin.packages import get_package
from mambawin.toolchain import wine
from mambawin.toolchain.wine_server import WineTools
from mambawin.winbuild import closure, units
from mambawin.winbuild import flags as windows_flags
from tests.conftest import recorded
from tests.test_wine_toolchain import layout, toolchain

# The configure-only run of a Windows check imports this machine's torch before it takes
# setup.py's Windows branches.
TORCH_REASON = "needs torch: check --windows configures setup.py with torch imported"

# The shapes torch's cpp_extension.py and setuptools' MSVC compiler give their tables.
CPP_EXTENSION = """
COMMON_MSVC_FLAGS = ['/MD', '/wd4819', '/EHsc']

MSVC_IGNORE_CUDAFE_WARNINGS = [
    'base_class_has_different_dll_interface',
]

COMMON_NVCC_FLAGS = [
    '-D__CUDA_NO_HALF_OPERATORS__',
    '--expt-relaxed-constexpr'
]
"""
MSVC_COMPILER = """
class Compiler:
    def initialize(self):
        self.compile_options = ['/nologo', '/O2', '/W3', '/GL', '/DNDEBUG', '/MD']
        self.compile_options_debug = ['/nologo', '/Od']
"""


def flags(tmp_path: Path) -> windows_flags.WindowsFlags:
    (tmp_path / "cpp_extension.py").write_text(CPP_EXTENSION)
    (tmp_path / "msvc.py").write_text(MSVC_COMPILER)
    return windows_flags.read_flags(tmp_path / "cpp_extension.py", tmp_path / "msvc.py")


def config(**changes: object) -> SetupConfig:
    base = {
        "ext_name": "selective_scan_cuda",
        "sources": ("csrc/ss/ss.cpp", "csrc/ss/ss_fwd.cu"),
        "nvcc_flags": ("-O3", "-gencode", "arch=compute_90,code=sm_90", "-std=c++20"),
        "cxx_flags": ("/O2", "/std:c++20"),
        "gencode": ("arch=compute_90,code=sm_90",),
        "version": "2.3.2",
        "include_dirs": (),
        "define_macros": (),
    }
    return SetupConfig(**{**base, **changes})  # type: ignore[arg-type]


def test_the_tables_are_read_from_torch_and_setuptools_not_listed_by_us(tmp_path: Path) -> None:
    found = flags(tmp_path)
    assert found.msvc == ("/MD", "/wd4819", "/EHsc")
    assert found.cudafe_ignore == ("base_class_has_different_dll_interface",)
    assert found.nvcc == ("-D__CUDA_NO_HALF_OPERATORS__", "--expt-relaxed-constexpr")
    assert found.compile_options == ("/nologo", "/O2", "/W3", "/GL", "/DNDEBUG", "/MD")


def test_a_torch_without_the_tables_is_named(tmp_path: Path) -> None:
    (tmp_path / "cpp_extension.py").write_text("COMMON_MSVC_FLAGS = ['/MD']\n")
    (tmp_path / "msvc.py").write_text(MSVC_COMPILER)
    with pytest.raises(ToolchainError, match="COMMON_NVCC_FLAGS, MSVC_IGNORE_CUDAFE_WARNINGS"):
        windows_flags.read_flags(tmp_path / "cpp_extension.py", tmp_path / "msvc.py")


def test_the_installed_setuptools_has_an_msvc_compiler_with_compile_options() -> None:
    source = windows_flags.setuptools_msvc_source()
    options = windows_flags.list_literals(source, ("compile_options",))["compile_options"]
    assert "/MD" in options and "/nologo" in options


def test_nvcc_gets_torchs_windows_recipe_in_its_order(tmp_path: Path) -> None:
    args = windows_flags.nvcc_args(
        flags(tmp_path), config(), ["-IZ:\\inc"], "Z:\\a.cu", "Z:\\a.obj", "Z:\\t"
    )
    assert args[:7] == (
        "-std=c++17",
        "-Xcompiler",
        "/MD",
        "-Xcompiler",
        "/wd4819",
        "-Xcompiler",
        "/EHsc",
    )
    local_env = args.index("--use-local-env")
    assert args[local_env + 1 : local_env + 3] == (
        "-Xcudafe",
        "--diag_suppress=base_class_has_different_dll_interface",
    )
    assert args.index("-IZ:\\inc") < args.index("-c") < args.index("-o")
    post = args[args.index("-o") + 2 :]
    assert post[:2] == ("-D__CUDA_NO_HALF_OPERATORS__", "--expt-relaxed-constexpr")
    assert post[2:6] == ("-O3", "-gencode", "arch=compute_90,code=sm_90", "-std=c++20")
    assert post[-2:] == (
        "-DTORCH_API_INCLUDE_EXTENSION_H",
        "-DTORCH_EXTENSION_NAME=selective_scan_cuda",
    )


def test_cl_gets_setuptools_options_then_torchs_and_a_standard_only_when_none_is_named(
    tmp_path: Path,
) -> None:
    found = flags(tmp_path)
    args = windows_flags.cl_args(found, config(), ["-DX=1"], "Z:\\b.cpp", "Z:\\b.obj", "Z:\\t")
    assert args[:6] == found.compile_options and args[6] == "-DX=1"
    assert args[args.index("-c") + 2] == "/FoZ:\\b.obj"
    assert [a for a in args if "std" in a] == ["/std:c++20"]
    bare = windows_flags.cl_args(found, config(cxx_flags=("/O2",)), [], "b.cpp", "b.obj", "Z:\\t")
    assert bare[-1] == "/std:c++17"  # BuildExtension's append_std17_if_no_std_present
    assert "-DTORCH_EXTENSION_NAME=selective_scan_cuda" in bare


def test_units_take_upstreams_folders_then_torchs_cudas_and_the_extras(tmp_path: Path) -> None:
    tc = toolchain(layout(tmp_path / "tc"))
    tree = tmp_path / "src"
    own = tree / "csrc" / "ss"
    own.mkdir(parents=True)
    cfg = config(include_dirs=(str(own), "/usr/local/cuda/include"), define_macros=(("A", None),))
    commands = units.unit_commands(cfg, tree, tc, flags(tmp_path), tmp_path / "o", [tmp_path / "x"])
    assert [(c.source, c.compiler) for c in commands] == [
        ("csrc/ss/ss.cpp", "cl"),
        ("csrc/ss/ss_fwd.cu", "nvcc"),
    ]
    includes = [a[2:] for a in commands[1].args if a.startswith("-I")]
    assert includes == [
        wine.windows_path(own),  # the Linux CUDA folder the Linux configure added is not used
        wine.windows_path(tc.torch / "include"),  # type: ignore[operator]
        wine.windows_path(tc.torch / "include/torch/csrc/api/include"),  # type: ignore[operator]
        wine.windows_path(tc.cuda / "include"),
        wine.windows_path(tmp_path / "x"),
    ]
    assert "-DA" in commands[1].args
    assert commands[1].obj == tmp_path / "o" / "csrc__ss__ss_fwd.obj"


NVCC_OUTPUT = (
    "selective_scan_fwd_fp32.cu\n"
    'Z:\\w\\src\\csrc\\ss\\fwd_kernel.cuh(396): error: "#" not expected here\n'
    "      BOOL_SWITCH(x, kIsEvenLen, [&] {\n"
    'Z:\\w\\src\\csrc\\ss\\fwd_kernel.cuh(412): error: identifier "M_LOG2E" is undefined\n'
    '2 errors detected in the compilation of "selective_scan_fwd_fp32.cu".\n'
)
CL_OUTPUT = (
    "ss.cpp\nZ:\\w\\tc\\torch\\include\\torch/csrc/utils/pythoncapi_compat.h(1032): "
    "error C2065: 'SSIZE_MAX': undeclared identifier\n"
)


def test_the_first_error_is_named_with_its_file_and_line_relative_to_the_tree() -> None:
    tree = Path("/w/src")
    first, count = units.first_error(NVCC_OUTPUT, tree)
    assert str(first) == 'csrc/ss/fwd_kernel.cuh(396): error: "#" not expected here'
    assert count == 2
    first, count = units.first_error(CL_OUTPUT, tree)
    assert first is not None and first.code == "C2065" and first.line == 1032
    assert first.file.endswith("torch/csrc/utils/pythoncapi_compat.h") and count == 1
    first, _ = units.first_error("nvcc fatal   : Unsupported gpu architecture 'compute_53'\n", tree)
    assert str(first) == "nvcc: error: Unsupported gpu architecture 'compute_53'"


class FakeCompilers:
    """Stands in for wine: writes the object of a unit named ok, prints NVCC_OUTPUT otherwise."""

    def __init__(self, failing: Sequence[str] = ()) -> None:
        self.failing = failing
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> proc.Completed:
        self.calls.append(tuple(argv))
        assert env["WINEDEBUG"] == "-all" and "INCLUDE" in env
        out = next(a for a in argv if a.startswith("/Fo"))[3:] if "/Fo" in " ".join(argv) else None
        out = out or argv[list(argv).index("-o") + 1]
        linux = Path("/" + out[3:].replace("\\", "/"))
        if any(name in " ".join(argv) for name in self.failing):
            return proc.Completed(
                tuple(argv), 2, NVCC_OUTPUT.replace("Z:\\w\\src", wine.windows_path(cwd)), ""
            )
        linux.write_bytes(b"obj")
        return proc.Completed(tuple(argv), 0, "", "")


def test_units_compile_in_parallel_with_progress_and_results_in_setup_py_order(
    tmp_path: Path,
) -> None:
    tc = toolchain(layout(tmp_path / "tc"))
    tree = tmp_path / "src"
    tree.mkdir()
    cfg = config(sources=("a.cpp", "b_fwd.cu", "c_bwd.cu"))
    commands = units.unit_commands(cfg, tree, tc, flags(tmp_path), tmp_path / "o")
    seen: list[tuple[str, int, int]] = []
    fake = FakeCompilers(failing=["c_bwd.cu"])
    results = units.compile_all(
        commands,
        tc,
        tree,
        "wine",
        jobs=2,
        runner=fake,
        on_done=lambda r, done, total: seen.append((r.source, done, total)),
    )
    assert [(r.source, r.status) for r in results] == [
        ("a.cpp", "ok"),
        ("b_fwd.cu", "ok"),
        ("c_bwd.cu", "error"),
    ]
    assert sorted(d for _, d, _ in seen) == [1, 2, 3] and {t for _, _, t in seen} == {3}
    assert str(results[2].error) == 'csrc/ss/fwd_kernel.cuh(396): error: "#" not expected here'
    assert results[0].obj == tmp_path / "o" / "a.obj" and results[0].obj.is_file()
    assert {call[1].rsplit("/", 1)[-1] for call in fake.calls} == {"cl.exe", "nvcc.exe"}


def test_a_failing_compiler_with_no_error_line_still_says_why(tmp_path: Path) -> None:
    tc = toolchain(layout(tmp_path / "tc"))
    (tmp_path / "src").mkdir()
    command = units.unit_commands(
        config(sources=("a.cu",)), tmp_path / "src", tc, flags(tmp_path), tmp_path / "o"
    )[0]

    def crash(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> proc.Completed:
        return proc.Completed(
            tuple(argv), 53, "", "wine: could not load kernel32.dll, status c0000135\n"
        )

    result = units.compile_unit(command, tc, tmp_path / "src", "wine", {}, crash)
    assert result.status == "error" and "c0000135" in str(result.error)


# ---- the link -----------------------------------------------------------------------------------


def test_the_link_accepts_only_what_the_registries_cannot_give() -> None:
    verdict = closure.parse_link(
        recorded("link-force-unresolved-wine-mamba-v2.3.2.post1-binding-and-fwd-fp32.txt")
    )
    why = {u.symbol: u.accepted for u in verdict.unresolved}
    assert why["__imp_PyThread_tss_create"] == "Python's C API (python3XX.lib)"
    assert why["__imp_?GetDevice@cuda@c10@@YA?AW4cudaError@@PEAC@Z"].startswith("torch's CUDA")
    assert [u.readable for u in verdict.broken] == [
        "void __cdecl selective_scan_fwd_cuda<struct c10::BFloat16,float>"
        "(struct SSMParamsBase & __ptr64,struct CUstream_st * __ptr64)"
    ]
    assert verdict.broken[0].objects == ("csrc__selective_scan__selective_scan.obj",)
    assert not verdict.holds and verdict.fatal is None


def test_an_lnk2019_names_the_symbol_not_the_function_that_needs_it() -> None:
    line = (
        'conv.obj : error LNK2019: unresolved external symbol "__declspec(dllimport) void __cdecl '
        'c10::cuda::check(int)" (__imp_?check@cuda@c10@@YAXH@Z) referenced in function '
        '"void __cdecl launch<128>(struct P &)" (??$launch@$0IA@@@YAXAEAUP@@@Z)\n'
        "conv.obj : error LNK2019: unresolved external symbol __imp_PyErr_Occurred referenced "
        'in function "bool __cdecl f(void)" (?f@@YA_NXZ)\n'
    )
    verdict = closure.parse_link(line)
    assert [u.symbol for u in verdict.unresolved] == [
        "__imp_?check@cuda@c10@@YAXH@Z",
        "__imp_PyErr_Occurred",
    ]
    assert (
        verdict.unresolved[0].readable == "__declspec(dllimport) void __cdecl c10::cuda::check(int)"
    )
    assert verdict.holds


def test_a_link_that_stops_early_does_not_pass_for_a_closed_one() -> None:
    verdict = closure.parse_link("LINK : fatal error LNK1104: cannot open file 'python312.lib'\n")
    assert verdict.fatal is not None and not verdict.holds


def test_the_link_runs_setuptools_options_with_the_libraries_that_exist(tmp_path: Path) -> None:
    tc = toolchain(layout(tmp_path))
    pyconfig = tmp_path / "pyconfig.h"
    pyconfig.write_text(
        '#  pragma comment(lib,"python312.lib")\n#pragma comment(lib, "python3.lib")\n'
    )
    args = closure.link_args(
        tc,
        [tmp_path / "a.obj"],
        "pkg.selective_scan_cuda",
        tmp_path / "x.pyd",
        closure.python_libraries(pyconfig),
    )
    assert args[:5] == ["/nologo", "/INCREMENTAL:NO", "/LTCG", "/DLL", "/MANIFEST:EMBED,ID=2"]
    assert "/FORCE:UNRESOLVED" in args and "/EXPORT:PyInit_selective_scan_cuda" in args
    libs = [a for a in args if a.endswith(".lib") and not a.startswith("/")]
    assert libs == ["c10.lib", "torch.lib", "torch_cpu.lib", "torch_python.lib", "cudart.lib"]
    assert "/NODEFAULTLIB:python312.lib" in args and "/NODEFAULTLIB:python3.lib" in args
    assert args[-1] == wine.windows_path(tmp_path / "a.obj")


# ---- the command --------------------------------------------------------------------------------


@pytest.mark.parametrize("target", [[], ["--windows"]], ids=["no flag", "old --windows"])
def test_check_needs_no_flag_for_its_only_target(target: list[str], tmp_path: Path) -> None:
    """Windows is check's only target: with or without --windows it goes on to the toolchain
    (here absent: exit 5 naming the fix), never "pass --windows"."""
    args = ["check", *target, "--windows-root", str(tmp_path / "none"), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code in (UsageError.exit_code, ToolchainError.exit_code), result.output
    error = json.loads(result.stdout)["error"]
    assert "pass --windows" not in error and str(tmp_path / "none") in error


def test_the_old_root_name_still_works_and_both_names_are_refused(tmp_path: Path) -> None:
    old = CliRunner().invoke(app, ["check", "--root", str(tmp_path / "none"), "--json"])
    assert str(tmp_path / "none") in json.loads(old.stdout)["error"]
    both = ["check", "--root", str(tmp_path), "--windows-root", str(tmp_path), "--json"]
    result = CliRunner().invoke(app, both)
    assert result.exit_code == UsageError.exit_code
    assert "old name of --windows-root" in json.loads(result.stdout)["error"]


def test_a_toolchain_not_set_up_is_one_line_with_the_fix(tmp_path: Path) -> None:
    if proc.which("wine") is None and proc.which("wine64") is None:
        pytest.skip("the command first asks for wine itself")
    result = CliRunner().invoke(app, ["check", "--windows", "--root", str(tmp_path), "--json"])
    assert result.exit_code == ToolchainError.exit_code
    assert "mambawin toolchain windows --setup" in json.loads(result.stdout)["error"]


def test_a_cpython_folder_that_is_not_a_source_tree_is_refused(tmp_path: Path) -> None:
    from mambawin.check.pipeline import cpython_dirs

    (tmp_path / "Include").mkdir()
    (tmp_path / "Include" / "Python.h").write_text("")
    with pytest.raises(UsageError, match=r"PC/pyconfig\.h"):
        cpython_dirs(tmp_path)
    (tmp_path / "PC").mkdir()
    (tmp_path / "PC" / "pyconfig.h").write_text("")
    assert cpython_dirs(tmp_path) == [tmp_path / "Include", tmp_path / "PC"]


def test_a_failing_check_under_json_is_the_report_and_the_error_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `wine` on PATH whose compilers all fail: the report keeps its units and gains the keys
    every error document has."""
    pytest.importorskip("torch", reason=TORCH_REASON)
    root = layout(tmp_path / "toolchain")
    (root / "torch" / "utils" / "cpp_extension.py").write_text(CPP_EXTENSION)
    upstream = _tagged_upstream(tmp_path, "fake_upstream")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "wine").write_text(
        '#!/bin/sh\n[ "$1" = cmd ] && exit 0\n'  # the prefix's start: `wine cmd /c exit`
        "echo 'x.cu(3): error: identifier \"M_LOG2E\" is undefined'\nexit 2\n"
    )
    (bin_dir / "wine").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    args = ["check", "--windows", "--root", str(root), "--repo", str(upstream), "--ref", "v0.1.0"]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == CheckFailed.exit_code, result.output
    document = json.loads(result.stdout)
    assert document["exit_code"] == CheckFailed.exit_code and document["ok"] is False
    assert document["error"] == (
        "mamba-ssm v0.1.0 does not build on Windows as checked: "
        "csrc/selective_scan/selective_scan_fwd_fp32.cu and 1 more do not compile"
    )
    assert [u["status"] for u in document["units"]] == ["skipped", "error", "error"]
    assert set(document) == {f.name for f in fields(BuildResult)} | {"ok", "error", "exit_code"}
    assert document["status"] == "fail" and document["units"][1]["error_line"] == 3


def test_a_check_that_could_not_link_says_so_and_is_no_plain_ok(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every unit it compiled compiles, but without --cpython the binding and so the link were
    not checked: the report is "partial" and names both, in --json and on the terminal."""
    git = pytest.importorskip("git")
    pytest.importorskip("torch", reason=TORCH_REASON)
    root = layout(tmp_path / "toolchain")
    (root / "torch" / "utils" / "cpp_extension.py").write_text(CPP_EXTENSION)
    upstream = tmp_path / "upstream"
    shutil.copytree(Path(__file__).parent / "fixtures" / "fake_upstream", upstream)
    repo = git.Repo.init(upstream)
    files = [p for p in upstream.rglob("*") if p.is_file() and ".git" not in p.parts]
    repo.index.add([p.relative_to(upstream).as_posix() for p in files])
    actor = git.Actor("test", "test@example.invalid")
    repo.index.commit("fake upstream", author=actor, committer=actor)
    repo.create_tag("v0.1.0")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "wine").write_text(  # a compiler that writes the object it is asked for
        '#!/bin/sh\n[ "$1" = cmd ] && exit 0\nout=""; prev=""\n'
        'for a in "$@"; do\n'
        '  case "$a" in /Fo*) out="${a#/Fo}";; esac\n'
        '  [ "$prev" = "-o" ] && out="$a"\n'
        '  prev="$a"\n'
        "done\n"
        "out=$(printf '%s' \"$out\" | sed 's/^Z://' | tr '\\\\\\\\' '/')\n"
        '[ -n "$out" ] && printf obj > "$out"\nexit 0\n'
    )
    (bin_dir / "wine").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    args = ["check", "--windows", "--root", str(root), "--repo", str(upstream), "--ref", "v0.1.0"]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [u["status"] for u in document["units"]] == ["skipped", "ok", "ok"]
    assert document["status"] == "partial" and document["closure"] is None
    assert "needs --cpython" in document["not_checked"][0]
    assert document["not_checked"][-1].startswith("the link (the symbol closure) was not checked")
    # The one BuildResult shape every backend's --json prints (build --json's keys), no wheel,
    # with the shared front half's steps timed like a native build's.
    assert set(document) == {f.name for f in fields(BuildResult)} | {"ok"}
    assert document["backend"] == "windows-check" and document["wheel"] is None
    assert list(document["steps"]) == ["fetch", "patch", "configure", "compile"]
    # What the tree was made from, as a build's provenance names it (an sdist: its file and
    # sha256, where it has no commit).
    assert document["source"] == {"kind": "git", "commit": repo.head.commit.hexsha}
    shown = CliRunner().invoke(app, args)
    assert shown.exit_code == 0 and "not checked: the link" in shown.stdout


def test_cl_and_nvcc_trim_the_tree_as_wine_names_it(tmp_path: Path) -> None:
    """The compiler-flags patch ran setup.py (configure-only, on Linux) in the tree, so its
    /d1trimfile: names the POSIX folder; the commands check --windows and the cross build run
    must trim the Z:\\ spelling cl.exe sees, or __FILE__ keeps the build machine's path."""
    tc = toolchain(layout(tmp_path / "tc"))
    tree = tmp_path / "src"
    tree.mkdir()
    posix_trim = f"/d1trimfile:{tree}\\"
    cfg = config(
        sources=("a.cpp", "b_fwd.cu"),
        cxx_flags=("/O2", "/std:c++20", posix_trim),
        nvcc_flags=("-O3", "-std=c++20", "-Xcompiler", posix_trim),
    )
    commands = units.unit_commands(cfg, tree, tc, flags(tmp_path), tmp_path / "o")
    fake = FakeCompilers()
    units.compile_all(commands, tc, tree, "wine", jobs=1, runner=fake, on_done=lambda *_: None)
    trim = f"/d1trimfile:{wine.windows_path(tree)}\\"
    by_program = {call[1].rsplit("/", 1)[-1]: call for call in fake.calls}
    assert trim in by_program["cl.exe"]
    nvcc = list(by_program["nvcc.exe"])
    assert nvcc[nvcc.index(trim) - 1] == "-Xcompiler"
    assert not [a for call in fake.calls for a in call if a.startswith("/d1trimfile:/")]


def test_the_headers_outside_the_tree_are_trimmed_too(tmp_path: Path) -> None:
    """torch's headers (TORCH_CHECK's __FILE__) named the toolchain's Z:\\ folder in a cross-built
    .pyd (issue 29, docs/benchmarks.md section 18): each include folder outside the tree gets
    its own /d1trimfile:, for cl.exe and behind its own -Xcompiler for nvcc (cl.exe takes
    several, checked under wine with the real cl.exe)."""
    tc = toolchain(layout(tmp_path / "tc"))
    tree = tmp_path / "src"
    (tree / "csrc").mkdir(parents=True)
    posix_trim = f"/d1trimfile:{tree}\\"
    cfg = config(
        sources=("a.cpp", "b_fwd.cu"),
        include_dirs=(str(tree / "csrc"),),
        cxx_flags=("/O2", posix_trim),
        nvcc_flags=("-O3", "-Xcompiler", posix_trim),
    )
    commands = units.unit_commands(cfg, tree, tc, flags(tmp_path), tmp_path / "o")
    torch_include = wine.windows_path(tc.torch / "include")
    wanted = {f"/d1trimfile:{wine.windows_path(tree)}\\", f"/d1trimfile:{torch_include}\\"}
    for command in commands:
        trims = [a for a in command.args if a.startswith("/d1trimfile:")]
        assert wanted <= set(trims) and len(trims) == len(set(trims)), command.args
        assert not any("api" in t or t.startswith("/d1trimfile:/") for t in trims)
        if command.compiler == "nvcc":
            args = list(command.args)
            assert all(args[args.index(t) - 1] == "-Xcompiler" for t in trims)


# ---- --stock: upstream as it is ----------------------------------------------------------------


def _tagged_upstream(tmp_path: Path, fixture: str) -> Path:
    """A git repository of a fixture tree, tagged v0.1.0."""
    git = pytest.importorskip("git")
    upstream = tmp_path / fixture
    shutil.copytree(Path(__file__).parent / "fixtures" / fixture, upstream)
    repo = git.Repo.init(upstream)
    files = [p for p in upstream.rglob("*") if p.is_file() and ".git" not in p.parts]
    repo.index.add([p.relative_to(upstream).as_posix() for p in files])
    actor = git.Actor("test", "test@example.invalid")
    repo.index.commit("fake upstream", author=actor, committer=actor)
    repo.create_tag("v0.1.0")
    return upstream


def _check_options(tmp_path: Path, upstream: Path, package: str, stock: bool) -> CheckOptions:
    return CheckOptions(
        package=get_package(package),
        ref="v0.1.0",
        repo=str(upstream),
        archs=(parse_arch("120"),),
        toolchain=toolchain(layout(tmp_path / f"toolchain-{stock}")),
        wine="wine",
        stock=stock,
    )


def test_the_wine_backends_ask_the_front_for_their_own_patch_set() -> None:
    """The front builds each wine backend's request: the cross build forces the stable ABI, the
    check takes the build's, --stock applies none (so nothing in check/ or cross/ names one)."""
    archs = (parse_arch("120"),)
    mamba = get_package("mamba-ssm")

    def asked(patches: front.PatchSet) -> front.FrontRequest:
        return front.backend_request(mamba, "r", "v1", archs=archs, patches=patches)

    cross, check = asked(front.CROSS_PATCHES), asked(front.CHECK_PATCHES)
    assert cross.patch is not None and cross.patch.abi == "stable" and cross.patch.archs == archs
    assert check.patch is not None and check.patch.abi == "torch"
    assert asked(front.STOCK).patch is None


def test_a_stock_plan_is_upstreams_own_units_and_flags(tmp_path: Path) -> None:
    """--stock plans upstream's tree as it is: no patch runs, so its units are the files
    upstream has (not split-units' `_partN.cu`, which only the patched tree holds) and its
    -gencode list is upstream's own (the patched plan bakes the asked archs in)."""
    upstream = _tagged_upstream(tmp_path, "causal_conv1d")
    stock = plan_check(_check_options(tmp_path, upstream, "causal-conv1d", stock=True))
    patched = plan_check(_check_options(tmp_path, upstream, "causal-conv1d", stock=False))
    assert stock.patches == [] and stock.build_dir.name == "objs-stock"
    assert stock.units == list(scan_setup(upstream).sources)
    assert not any("_part" in unit for unit in stock.units)
    assert stock.gencode == list(scan_setup(upstream).upstream_gencode)
    assert stock.gencode != patched.gencode == ["arch=compute_120,code=sm_120"]
    split = [u for u in patched.units if "_part" in u]
    assert split and not any((upstream / unit).exists() for unit in split)
    assert {p["id"] for p in patched.patches if p["status"] == "applied"} >= {"split-units"}


def test_a_stock_check_compiles_the_tree_no_patch_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stock check configures and compiles a tree that is upstream's byte for byte (before,
    the stock sources were compiled with the patched setup.py's file list and flags)."""
    pytest.importorskip("torch", reason=TORCH_REASON)
    upstream = _tagged_upstream(tmp_path, "fake_upstream")
    options = _check_options(tmp_path, upstream, "mamba-ssm", stock=True)
    (options.toolchain.torch / "utils" / "cpp_extension.py").write_text(CPP_EXTENSION)
    seen: list[Sequence[str]] = []

    def compiler(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> proc.Completed:
        seen.append(argv)
        return proc.Completed(list(argv), 1, "x.cu(1): error: stop here", "")

    report = check_windows(options, tools=WineTools(runner=compiler))
    tree = Path(str(report.objects)).parent / "patched"
    assert not (tree / ".mambawin").exists(), "a patch ran on the stock tree"
    assert list(report.steps) == ["fetch", "configure", "compile"]  # no patch step
    for name in ("setup.py", "csrc/selective_scan/selective_scan_fwd_fp32.cu"):
        assert (tree / name).read_bytes() == (upstream / name).read_bytes()
    assert report.mode == "stock" and [u.source for u in report.units] == [
        "csrc/selective_scan/selective_scan.cpp",
        "csrc/selective_scan/selective_scan_fwd_fp32.cu",
        "csrc/selective_scan/selective_scan_bwd_fp32_real.cu",
    ]
    assert any("arch=compute_75,code=sm_75" in " ".join(argv) for argv in seen)
