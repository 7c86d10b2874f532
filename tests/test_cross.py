"""The cross build's parts with fakes: symbol selection, .def files, link.exe/lib.exe arguments,
the import audit and the wheel packing. Outputs of the real tools are recorded in
tests/fixtures/windows (section 9 of its README); the real end to end run is
tests/test_cross_windows.py (-m windows_toolchain)."""

from __future__ import annotations

import os
import time
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mambawin import proc
from mambawin.archs import parse_archs
from mambawin.builder.configure import DistInfo, configure
from mambawin.builder.options import BuildOptions
from mambawin.cli import app
from mambawin.cross import audit, link, pack, pipeline, source
from mambawin.errors import BuildError, ToolchainError, UsageError, WheelError
from mambawin.fetch import upstream
from mambawin.toolchain import wine
from mambawin.toolchain.wine_server import WineTools
from mambawin.wheel.gpucode import GpuCode
from mambawin.wheel.info import read_wheel
from mambawin.wheel.provenance import Provenance, read_provenance, record
from mambawin.winbuild import torch_exports as symbols
from tests.conftest import recorded
from tests.fakes.reporter import RecordingReporter
from tests.test_check_windows import CPP_EXTENSION
from tests.test_cross_windows import FIXTURE, fixture_config
from tests.test_wine_toolchain import layout

CPU_EXPORTS = recorded("dumpbin-exports-wine-torch-2.11.0-win-cpu-torch_cpu-lib.txt")
LINK_OUTPUT = recorded("link-force-unresolved-wine-stable-fixture.txt")


class FakeTools:
    """Stands in for wine running dumpbin, link and lib: records each call, answers from a table
    keyed by the program's name, and writes the /out: or /OUT: file a real run would write."""

    def __init__(self, outputs: Mapping[str, str] | None = None, returncode: int = 0) -> None:
        self.outputs = dict(outputs or {})
        self.returncode = returncode
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> proc.Completed:
        self.calls.append(list(argv))
        name = Path(argv[1]).stem
        if self.returncode == 0:
            for arg in argv[2:]:
                if arg.lower().startswith("/out:"):
                    unix = arg[len("/out:") :].removeprefix("Z:").replace("\\", "/")
                    Path(unix).write_bytes(b"MZ fake")
        return proc.Completed(tuple(argv), self.returncode, self.outputs.get(name, ""), "")


def toolchain(tmp_path: Path) -> wine.WindowsToolchain:
    root = layout(tmp_path / "tc")
    return wine.toolchain_at(root)


# ---- which DLL exports which stable C name ------------------------------------------------------


def test_the_recorded_export_listing_gives_every_name_once() -> None:
    names = symbols.parse_exports(CPU_EXPORTS)
    assert names[0].startswith("?$TSS0@")  # a decorated C++ name: listed, never selected
    assert names[2:] == (
        "aoti_torch_abi_version",
        "aoti_torch_device_type_cuda",
        "aoti_torch_get_current_stream",
        "aoti_torch_get_numel",
        "torch_call_dispatcher",
        "torch_library_impl",
    )


@pytest.mark.parametrize(
    ("symbol", "stable"),
    [
        ("aoti_torch_get_numel", True),
        ("__imp_torch_library_impl", True),
        ("?numel@TensorImpl@c10@@QEBA_JXZ", False),
        ("__imp_PyErr_SetString", False),
        ("cudaLaunchKernel", False),
        ("torch_", True),
        ("__imp_?get@torch_x@@", False),
    ],
)
def test_only_bare_aoti_torch_and_torch_c_names_are_stable(symbol: str, stable: bool) -> None:
    assert symbols.is_stable_c_name(symbol) is stable


def test_the_table_takes_windows_listings_first_and_the_cuda_names_for_a_missing_torch_cuda() -> (
    None
):
    table = symbols.export_table({"torch_cpu.dll": symbols.parse_exports(CPU_EXPORTS)})
    assert table.dll_for("__imp_aoti_torch_get_numel") == "torch_cpu.dll"
    # torch_cpu exports the CUDA device-type constant itself: its listing wins
    assert table.dll_for("aoti_torch_device_type_cuda") == "torch_cpu.dll"
    assert table.dll_for("__imp_aoti_torch_get_current_cuda_stream") == "torch_cuda.dll"
    assert table.dll_for("aoti_torch_cuda_mm_out") == "torch_cuda.dll"  # torchgen's CUDA ops
    assert table.dll_for("torch_from_nowhere") is None
    assert table.dll_for("?$TSS0@?1??_allgather_base@ProcessGroup@c10d") is None
    assert "TORCH_CUDA_EXPORTS" in table.cuda_from


def test_a_real_torch_cuda_listing_replaces_the_built_in_names() -> None:
    table = symbols.export_table(
        {"torch_cpu.dll": ["torch_call_dispatcher"], "torch_cuda.dll": ["torch_only_here"]}
    )
    assert table.dll_for("torch_only_here") == "torch_cuda.dll"
    assert table.dll_for("aoti_torch_get_current_cuda_stream") is None
    assert table.cuda_from == "torch_cuda.lib"


def test_the_recorded_link_output_selects_each_torch_name_once_per_dll() -> None:
    unresolved = [u.symbol for u in link.parse_link(LINK_OUTPUT).unresolved]
    table = symbols.export_table(
        {"torch_cpu.dll": [*symbols.parse_exports(CPU_EXPORTS), "aoti_torch_library_def"]}
    )
    selection = symbols.select(unresolved, table)
    assert selection.imports["torch_cuda.dll"] == ("aoti_torch_get_current_cuda_stream",)
    assert "torch_library_impl" in selection.imports["torch_cpu.dll"]
    assert list(selection.imports) == ["torch_cpu.dll", "torch_cuda.dll"]
    # the excerpt of torch_cpu.lib lacks most names: they are reported, not guessed
    assert "aoti_torch_get_data_ptr" in selection.missing
    assert not selection.foreign


def test_cpp_and_python_symbols_are_foreign_to_a_stable_build() -> None:
    table = symbols.export_table({"torch_cpu.dll": ["torch_library_impl"]})
    selection = symbols.select(
        ["__imp_torch_library_impl", "__imp_?numel@TensorImpl@c10@@QEBA_JXZ", "__imp_PyLong_Type"],
        table,
    )
    assert selection.imports == {"torch_cpu.dll": ("torch_library_impl",)}
    assert selection.foreign == ("__imp_?numel@TensorImpl@c10@@QEBA_JXZ", "__imp_PyLong_Type")
    assert not selection.ok


def test_the_def_file_names_the_dll_and_its_exports() -> None:
    text = symbols.def_text("torch_cuda.dll", ["aoti_torch_get_current_cuda_stream"])
    assert text == "LIBRARY torch_cuda.dll\nEXPORTS\n    aoti_torch_get_current_cuda_stream\n"


def test_the_export_table_is_read_with_dumpbin_from_the_libraries_present(tmp_path: Path) -> None:
    tc = toolchain(tmp_path)
    assert tc.torch is not None
    (tc.torch / "lib" / "torch_cpu.lib").write_bytes(b"!<arch>\n")
    (tc.torch / "lib" / "torch_python.lib").write_bytes(b"!<arch>\n")  # never read
    tools = FakeTools({"dumpbin": CPU_EXPORTS})
    table = symbols.read_export_table(tc, wine="wine", env={}, runner=tools)
    read = [call[-1].rsplit("\\", 1)[-1] for call in tools.calls]
    assert read == ["torch_cpu.lib", "c10.lib"]  # the layout's c10.lib, then nothing else
    assert table.dll_for("torch_library_impl") == "torch_cpu.dll"


def test_a_toolchain_without_torch_cpu_lib_is_a_toolchain_error(tmp_path: Path) -> None:
    tools = FakeTools({"dumpbin": ""})
    with pytest.raises(ToolchainError, match=r"no torch_cpu\.lib"):
        symbols.read_export_table(toolchain(tmp_path), wine="wine", env={}, runner=tools)


# ---- link.exe and lib.exe ------------------------------------------------------------------------


def test_the_link_makes_a_dll_with_the_static_cuda_runtime_and_the_generated_libs(
    tmp_path: Path,
) -> None:
    tc = toolchain(tmp_path)
    objs = [tmp_path / "a.obj", tmp_path / "b.obj"]
    args = link.link_args(tc, objs, tmp_path / "x_stable.pyd", [tmp_path / "torch_cpu.lib"])
    assert args[:5] == ["/nologo", "/INCREMENTAL:NO", "/LTCG", "/DLL", "/MANIFEST:EMBED,ID=2"]
    assert {"/Brepro", "/NODEFAULTLIB:LIBCMT", "cudart_static.lib"} <= set(args)
    assert "cudart.lib" not in args and "/FORCE:UNRESOLVED" not in args
    assert not [a for a in args if a.startswith("/EXPORT")]  # no PyInit_: not a Python module
    assert args[-2:] == [wine.windows_path(o) for o in objs]
    assert wine.windows_path(tmp_path / "torch_cpu.lib") in args
    probe = link.link_args(tc, objs, tmp_path / "p.dll", force_unresolved=True)
    assert "/FORCE:UNRESOLVED" in probe


def test_the_unresolved_symbols_come_from_link_exe_under_force(tmp_path: Path) -> None:
    tools = FakeTools({"link": LINK_OUTPUT})
    found = link.unresolved_symbols(
        toolchain(tmp_path), [tmp_path / "a.obj"], tmp_path / "w", wine="wine", env={}, runner=tools
    )
    assert found[0] == "__imp_aoti_torch_abi_version" and len(found) == 15
    assert "/FORCE:UNRESOLVED" in tools.calls[0]


def test_a_link_that_stops_early_is_a_build_error(tmp_path: Path) -> None:
    tools = FakeTools({"link": "LINK : fatal error LNK1104: cannot open file 'Z:\\x\\a.obj'\n"})
    with pytest.raises(BuildError, match="LNK1104"):
        link.unresolved_symbols(
            toolchain(tmp_path), [tmp_path / "a.obj"], tmp_path, wine="wine", env={}, runner=tools
        )


def test_one_import_library_per_dll_from_its_def_file(tmp_path: Path) -> None:
    selection = symbols.Selection(
        {"torch_cpu.dll": ("torch_library_impl",), "torch_cuda.dll": ("torch_x",)}
    )
    tools = FakeTools()
    libs = link.make_import_libraries(
        toolchain(tmp_path), selection, tmp_path / "libs", wine="wine", env={}, runner=tools
    )
    assert [p.name for p in libs] == ["torch_cpu.lib", "torch_cuda.lib"]
    assert (tmp_path / "libs" / "torch_cuda.def").read_text().startswith("LIBRARY torch_cuda.dll")
    assert tools.calls[0][2:] == link.import_library_args(
        tmp_path / "libs" / "torch_cpu.def", tmp_path / "libs" / "torch_cpu.lib"
    )
    assert "/machine:x64" in tools.calls[0]


def test_a_failed_final_link_names_the_first_linker_error(tmp_path: Path) -> None:
    output = "a.obj : error LNK2019: unresolved external symbol __imp_torch_x referenced in f\n"
    tools = FakeTools({"link": output}, returncode=1120)
    with pytest.raises(BuildError, match="LNK2019: unresolved external symbol __imp_torch_x"):
        link.link_library(
            toolchain(tmp_path), [], [], tmp_path / "x.pyd", wine="wine", env={}, runner=tools
        )


# ---- the import audit ----------------------------------------------------------------------------

STABLE_IMPORTS = {
    "torch_cpu.dll": ("torch_library_impl", "aoti_torch_get_numel"),
    "torch_cuda.dll": ("aoti_torch_get_current_cuda_stream",),
    "MSVCP140.dll": ("?_Xlength_error@std@@YAXPEBD@Z",),
    "KERNEL32.dll": ("GetProcAddress",),
    "VCRUNTIME140_1.dll": ("__CxxFrameHandler4",),
    "api-ms-win-crt-heap-l1-1-0.dll": ("malloc",),
}


def test_torch_stable_names_and_the_runtime_pass_the_audit() -> None:
    assert audit.import_problems(STABLE_IMPORTS) == []


@pytest.mark.parametrize(
    ("dll", "names", "problem"),
    [
        ("python312.dll", ("PyLong_FromLong",), "imports python312.dll"),
        ("c10.dll", ("?numel@TensorImpl@c10@@QEBA_JXZ",), "imports c10.dll"),
        ("cudart64_13.dll", ("cudaLaunchKernel",), "imports cudart64_13.dll"),
        ("torch_cpu.dll", ("?empty@at@@YA?AVTensor@1@@Z",), "torch_cpu.dll: not torch's stable"),
    ],
)
def test_anything_else_breaks_the_audit(dll: str, names: tuple[str, ...], problem: str) -> None:
    problems = audit.import_problems({**STABLE_IMPORTS, dll: names})
    assert len(problems) == 1 and problems[0].startswith(problem)


def test_the_fatbin_must_hold_each_requested_arch() -> None:
    code = GpuCode(sass=("sm_90",), ptx=(), method="fatbin")
    assert audit.gpu_problems(code, parse_archs("90")) == []
    assert audit.gpu_problems(code, parse_archs("80;90+PTX")) == [
        "no sm_80 SASS in .nv_fatb",
        "no compute_90 PTX in .nv_fatb",
    ]


def test_a_file_that_is_no_pe_is_a_wheel_error(tmp_path: Path) -> None:
    (tmp_path / "x.pyd").write_bytes(b"\x7fELF not a PE")
    with pytest.raises(WheelError, match="not a PE file"):
        audit.pe_imports(tmp_path / "x.pyd")


# ---- packing ----------------------------------------------------------------------------------


def configured(tmp_path: Path, version: str | None = None) -> Path:
    """The fixture's .dist-info as the cross build asks configure for it (setuptools writes it)."""
    folder = tmp_path / f"dist-info-{version}"
    folder.mkdir(parents=True)
    config = configure(FIXTURE, dist_info=DistInfo(folder, "py3-none-win_amd64", version))
    assert config.dist_info is not None
    return config.dist_info


def packed(tmp_path: Path, out: str = "out", *, provenance: Provenance | None = None) -> Path:
    library = tmp_path / "stable_demo_cuda_stable.pyd"
    library.write_bytes(b"MZ a library")
    provenance = provenance or Provenance(
        abi="stable", torch_floor="2.10", archs=("sm_90",), cuda_version="13.0"
    )
    config = replace(fixture_config(), dist_info=configured(tmp_path / "dist-info" / out))
    return pack.pack_wheel(FIXTURE, config, library, tmp_path / out, provenance=provenance)


def test_the_wheel_holds_the_package_the_shim_and_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    wheel = packed(tmp_path)
    assert wheel.name == "stable_demo-0.1.0-py3-none-win_amd64.whl"
    info = read_wheel(wheel)  # checked: RECORD, tags against the name
    assert info.extensions == ("stable_demo_cuda_stable.pyd",)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        wheel_file = archive.read("stable_demo-0.1.0.dist-info/WHEEL").decode()
        metadata = archive.read("stable_demo-0.1.0.dist-info/METADATA").decode()
        dates = {entry.date_time for entry in archive.infolist()}
    assert names[:3] == [
        "stable_demo/__init__.py",
        "stable_demo_cuda.py",
        "stable_demo_cuda_stable.pyd",
    ]
    assert "Tag: py3-none-win_amd64" in wheel_file and "Root-Is-Purelib: false" in wheel_file
    requires = [ln for ln in metadata.splitlines() if ln.startswith("Requires-Dist")]
    assert requires == ["Requires-Dist: torch>=2.10", "Requires-Dist: numpy"]
    assert dates == {(2023, 11, 14, 22, 13, 20)}
    assert read_provenance(wheel).stored["torch_floor"] == "2.10"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [wheel.name]  # no leftovers


def test_two_packs_with_one_epoch_are_byte_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert packed(tmp_path, "a").read_bytes() == packed(tmp_path, "b").read_bytes()


def test_two_cross_builds_of_one_commit_are_byte_identical_without_source_date_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provenance's build_date is the commit's time (the wheel's date), not the clock's."""
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    checkout = upstream.Checkout(
        tmp_path, "https://example.invalid/x", "v0.1.0", "c0ffee", "0.1.0", "v0.1.0"
    )

    def build(out: str) -> Path:
        provenance = record(
            checkout,
            patches=(),
            archs=("sm_90",),
            cuda_version="13.0",
            compiler="cl.exe and nvcc.exe under wine",
            abi="stable",
            epoch=1700000000,
        )
        library = tmp_path / "stable_demo_cuda_stable.pyd"
        library.write_bytes(b"MZ a library")
        config = replace(fixture_config(), dist_info=configured(tmp_path / "dist-info" / out))
        return pack.pack_wheel(
            FIXTURE, config, library, tmp_path / out, provenance=provenance, date_epoch=1700000000
        )

    first = build("a")
    time.sleep(1.1)  # a build_date taken from the clock would now differ
    assert first.read_bytes() == build("b").read_bytes()
    assert read_provenance(first).stored["build_date"] == "2023-11-14T22:13:20+00:00"


def test_a_tree_not_patched_for_the_stable_abi_is_refused() -> None:
    with pytest.raises(UsageError, match="--abi stable"):
        pack.library_name(replace(fixture_config(), ext_name="stable_demo_cuda"))
    with pytest.raises(UsageError, match="stable patches add that shim"):
        pack.python_files(FIXTURE, replace(fixture_config(), py_modules=()))


def test_a_config_without_its_dist_info_is_refused(tmp_path: Path) -> None:
    library = tmp_path / "stable_demo_cuda_stable.pyd"
    library.write_bytes(b"MZ")
    with pytest.raises(BuildError, match=r"no \.dist-info"):
        pack.pack_wheel(FIXTURE, fixture_config(), library, tmp_path / "out")


def test_the_fetched_version_names_the_wheel_when_setup_py_says_less(tmp_path: Path) -> None:
    library = tmp_path / "stable_demo_cuda_stable.pyd"
    library.write_bytes(b"MZ")
    config = replace(fixture_config(), dist_info=configured(tmp_path, "0.1.0.post4"))
    wheel = pack.pack_wheel(FIXTURE, config, library, tmp_path / "out")
    assert wheel.name == "stable_demo-0.1.0.post4-py3-none-win_amd64.whl"
    assert read_wheel(wheel).version == "0.1.0.post4"


# ---- the pipeline's order, with every Windows program faked -------------------------------------


class FakeWine(FakeTools):
    """Also compiles: cl and nvcc write their object, or print an error for a named source."""

    def __init__(self, link_output: str, broken: str = "") -> None:
        super().__init__({"dumpbin": CPU_EXPORTS, "link": link_output})
        self.broken = broken

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> proc.Completed:
        name = Path(argv[1]).stem
        if name not in ("cl", "nvcc"):
            return super().__call__(argv, env, cwd)
        self.calls.append(list(argv))
        if self.broken and any(a.endswith(self.broken) for a in argv):
            error = f'{self.broken}(3): error: identifier "x" is undefined\n'
            return proc.Completed(tuple(argv), 2, error, "")
        if name == "nvcc":
            out = argv[argv.index("-o") + 1]
        else:
            out = next(a.removeprefix("/Fo") for a in argv if a.startswith("/Fo"))
        Path(out.removeprefix("Z:").replace("\\", "/")).write_bytes(b"obj")
        return proc.Completed(tuple(argv), 0, "", "")


def cross_options(tmp_path: Path) -> pipeline.CrossOptions:
    tc = toolchain(tmp_path)
    tc.cpp_extension.write_text(CPP_EXTENSION)
    assert tc.torch is not None
    (tc.torch / "lib" / "torch_cpu.lib").write_bytes(b"!<arch>\n")
    return pipeline.CrossOptions(
        tree=FIXTURE,
        config=fixture_config(),
        toolchain=tc,
        wine="wine",
        archs=tuple(parse_archs("90")),
        work=tmp_path / "work",
        out=tmp_path / "out",
    )


def test_a_unit_that_does_not_compile_stops_the_build_before_any_link(tmp_path: Path) -> None:
    fake = FakeWine(LINK_OUTPUT, broken="demo_kernel.cu")
    with pytest.raises(BuildError, match=r"csrc/demo_kernel\.cu does not compile .*1 of 2"):
        pipeline.cross_build(cross_options(tmp_path), tools=WineTools(runner=fake))
    assert not [c for c in fake.calls if Path(c[1]).stem == "link"]


class EnvWine(FakeWine):
    """Also keeps each compiler call's environment."""

    def __init__(self, link_output: str, broken: str = "") -> None:
        super().__init__(link_output, broken)
        self.envs: dict[str, Mapping[str, str]] = {}

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> proc.Completed:
        self.envs[Path(argv[1]).stem] = dict(env)
        return super().__call__(argv, env, cwd)


@pytest.mark.parametrize(
    ("cuda_version", "user", "appended"),
    [
        (13000, "", "--objdir-as-tempdir --frandom-seed=mambawin"),
        (13000, "-Xptxas=-O3", "-Xptxas=-O3 --objdir-as-tempdir --frandom-seed=mambawin"),
        (13000, "--frandom-seed=mine", "--frandom-seed=mine --objdir-as-tempdir"),  # the user's
        (12040, "", "--objdir-as-tempdir"),  # --frandom-seed came with nvcc 12.9
    ],
)
def test_nvcc_exe_gets_the_flags_for_the_same_object_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cuda_version: int, user: str, appended: str
) -> None:
    """Windows' nvcc.exe names internal device symbols `_INTERNAL_…_cu_<random>_<pid>` as
    Linux's does (two cross builds of causal-conv1d in two folders differed there,
    docs/benchmarks.md §31), and reads NVCC_APPEND_FLAGS under wine too."""
    options = cross_options(tmp_path)
    header = options.toolchain.cuda / "include" / "cuda.h"
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text(f"#define CUDA_VERSION {cuda_version}\n")
    monkeypatch.setenv("NVCC_APPEND_FLAGS", user)
    fake = EnvWine(LINK_OUTPUT, broken="demo.cpp")  # stop after the compile step
    with pytest.raises(BuildError, match="does not compile"):
        pipeline.cross_build(options, tools=WineTools(runner=fake))
    assert fake.envs["nvcc"]["NVCC_APPEND_FLAGS"] == appended
    assert os.environ["NVCC_APPEND_FLAGS"] == user  # mambawin's own environment is untouched


def test_a_cpp_symbol_in_the_objects_stops_the_build_before_the_import_libraries(
    tmp_path: Path,
) -> None:
    cpp = (
        "demo.obj : error LNK2001: unresolved external symbol "
        '"__declspec(dllimport) public: __int64 __cdecl c10::TensorImpl::numel(void)const " '
        "(__imp_?numel@TensorImpl@c10@@QEBA_JXZ)\n"
    )
    fake = FakeWine(LINK_OUTPUT + cpp)
    reporter = RecordingReporter()
    with pytest.raises(BuildError, match=r"1 symbol\(s\) outside torch's stable C ABI"):
        pipeline.cross_build(
            cross_options(tmp_path), tools=WineTools(runner=fake), reporter=reporter
        )
    assert reporter.steps == ["compile", "symbols"]
    # each unit's verdict as it finishes, counted (the pool finishes them in any order)
    assert sorted((d.name, d.status.value) for d in reporter.done) == [
        ("csrc/demo.cpp", "ok"),
        ("csrc/demo_kernel.cu", "ok"),
    ]
    assert [d.count for d in reporter.done] == [(1, 2), (2, 2)]
    assert not [c for c in fake.calls if Path(c[1]).stem == "lib"]


def test_a_stable_name_torch_does_not_export_is_named(tmp_path: Path) -> None:
    # the recorded torch_cpu.lib excerpt lacks most of what the fixture uses
    with pytest.raises(BuildError, match="torch's Windows libraries export no aoti_torch_delete"):
        pipeline.cross_build(cross_options(tmp_path), tools=WineTools(runner=FakeWine(LINK_OUTPUT)))


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--platform", "win_amd64", "--arch", "90"], "needs --abi stable"),
        (["--platform", "win_amd64", "--abi", "stable"], "--arch (no GPU to ask)"),
        (["--platform", "macosx_arm64", "--abi", "stable", "--arch", "90"], "win_amd64 only"),
    ],
)
def test_build_for_windows_on_linux_refuses_what_it_cannot_cross_build(
    tmp_path: Path, args: list[str], named: str
) -> None:
    """Checked before any fetch: the repository named does not even exist."""
    missing = tmp_path / "no-such-repo"
    result = CliRunner().invoke(
        app, ["build", "--package", "causal-conv1d", "--repo", str(missing), *args]
    )
    assert result.exit_code == UsageError.exit_code, result.output
    assert named in result.output and not (tmp_path / "no-such-repo").exists()


def test_the_windows_cuda_version_comes_from_its_cuda_h(tmp_path: Path) -> None:
    (tmp_path / "cu13" / "include").mkdir(parents=True)
    toolchain = wine.WindowsToolchain(msvc=tmp_path, cuda=tmp_path / "cu13", prefix=tmp_path)
    assert toolchain.cuda_version() is None
    (tmp_path / "cu13" / "include" / "cuda.h").write_text("#define CUDA_VERSION 13000\n")
    assert toolchain.cuda_version() == "13.0"


@pytest.mark.parametrize(("requested", "archs", "threads"), [(7, "90", "7"), (None, "80;90", "2")])
def test_the_cross_build_gives_nvcc_the_threads_a_native_build_would(
    requested: int | None, archs: str, threads: str
) -> None:
    """--nvcc-threads reaches setup.py's nvcc flags (it was always `--threads 4`)."""
    options = BuildOptions(ref="v0.1.0", archs=tuple(parse_archs(archs)), nvcc_threads=requested)
    config = configure(FIXTURE, source.configure_env_of(options))
    at = config.nvcc_flags.index("--threads")
    assert config.nvcc_flags[at + 1] == threads
