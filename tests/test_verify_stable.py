"""verify of a stable-ABI wheel: the import audit (a real ELF built with gcc, PE import lists),
the static step's abi check, and the fit rule (any torch at or above the floor)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version
from typer.testing import CliRunner
from wheel.wheelfile import WheelFile

from mambawin import proc
from mambawin.builder.metadata import refuse_unstable
from mambawin.cli import app
from mambawin.errors import BuildError
from mambawin.patch.causal_conv1d.stable_shapes import SHAPES
from mambawin.patch.causal_conv1d.stable_shim import shim_text
from mambawin.patch.mamba.stable_shim import SOURCE as SHIM_SOURCE
from mambawin.verify import fit, pipeline, sandbox, static
from mambawin.verify.options import VerifyOptions
from mambawin.verify.packages import WheelRef, pair_problems
from mambawin.verify.report import Target
from mambawin.verify.tools import Tools
from mambawin.verify.workers import one_by_one
from mambawin.wheel import abi_audit
from mambawin.wheel.gpucode import GpuCode
from mambawin.wheel.imports import BinaryImports, ImportedSymbol, read_imports
from mambawin.wheel.provenance import PROVENANCE_NAME, Provenance
from tests.test_verify import make_wheel

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="builds a Linux shared library with gcc"
)

STABLE = {
    "schema": 1,
    "ref": "v2.2.6",
    "commit": "0123456789abcdef",
    "archs": ["90"],
    "torch_version": "2.10.0",
    "cuda_version": "13.0",
    "abi": "stable",
    "torch_floor": "2.10",
}
TAG = "py3-none-linux_x86_64"
LIBRARY = "selective_scan_cuda_stable.so"

# Undefined symbols a stable library may import: stable C symbols torch 2.10 exports, the CUDA
# runtime's C API, libc, and libstdc++'s operator delete (an Itanium-mangled std symbol).
GOOD_C = """
extern void *aoti_torch_get_data_ptr(void *, void **);
extern int torch_library_impl(void);
extern int cudaLaunchKernel(void);
extern void cxx_delete(void *) __asm__("_ZdlPv");
int stable_entry(void *t, void **p) {
    cxx_delete(p);
    return cudaLaunchKernel() + torch_library_impl() + (aoti_torch_get_data_ptr(t, p) != 0);
}
"""
# Each import breaks the stable form once: a torch C++ symbol (c10::detail::torchCheckFail), a
# Python C API symbol, and a stable C symbol added after the floor (torch_from_blob: 2.11).
BAD_C = """
extern void check_fail(void) __asm__("_ZN3c106detail14torchCheckFailEPKcS2_jRKSs");
extern void *PyLong_FromLong(long);
extern int torch_from_blob(void);
int bad_entry(void) { check_fail(); return torch_from_blob() + (PyLong_FromLong(1) != 0); }
"""


def _gcc(folder: Path, name: str, source: str, *extra: str) -> Path:
    """A real shared library from a tiny C file (undefined symbols stay undefined in a .so)."""
    c_file = folder / f"{name}.c"
    c_file.write_text(source, encoding="utf-8")
    out = folder / name
    proc.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(c_file), *extra], timeout=120)
    return out


@pytest.fixture(scope="module")
def libraries(tmp_path_factory) -> dict[str, Path]:
    """good.so (links libm) and bad.so (also needs a stand-in libpython3.12.so)."""
    folder = tmp_path_factory.mktemp("stable-elf")
    _gcc(folder, "libpython3.12.so", "int Py_IsInitialized(void) { return 1; }")
    good = _gcc(folder, "good.so", GOOD_C, "-Wl,--no-as-needed", "-lm")
    bad = _gcc(folder, "bad.so", BAD_C, "-Wl,--no-as-needed", f"-L{folder}", "-l:libpython3.12.so")
    return {"good": good, "bad": bad}


def _audit(path: Path, floor: str = "2.10") -> abi_audit.Audit:
    return abi_audit.audit_binary(
        path.name, read_imports(path.read_bytes(), path.name), Version(floor)
    )


# ---- reading imports ----------------------------------------------------------------------------


def test_elf_imports_list_needed_libraries_and_undefined_symbols(libraries):
    imports = read_imports(libraries["good"].read_bytes(), "good.so")
    names = {s.name for s in imports.symbols}
    assert imports.format == "elf"
    assert {"libm.so.6", "libc.so.6"} <= set(imports.libraries)
    assert {"aoti_torch_get_data_ptr", "torch_library_impl", "cudaLaunchKernel", "_ZdlPv"} <= names
    assert "stable_entry" not in names  # defined here, not imported


def test_neither_elf_nor_pe_is_one_line_with_the_fix():
    with pytest.raises(Exception, match=r"notes\.txt is neither an ELF .* rebuild the wheel"):
        read_imports(b"hello", "notes.txt")


# ---- the rules ----------------------------------------------------------------------------------


def test_the_floor_list_holds_torch_210s_stable_c_symbols_and_not_211s():
    assert Version("2.10") in abi_audit.known_floors()
    known = abi_audit.stable_symbols(Version("2.10"))
    assert {"aoti_torch_get_data_ptr", "torch_library_impl", "torch_parallel_for"} <= known
    assert "torch_from_blob" not in known  # added in 2.11 (pytorch's shim_function_versions.txt)
    assert all(abi_audit.TORCH_FAMILY.match(name) for name in known)


def test_a_clean_stable_library_passes(libraries):
    audit = _audit(libraries["good"])
    assert audit.ok, [v.line for v in audit.violations]
    assert set(audit.torch_symbols) == {"aoti_torch_get_data_ptr", "torch_library_impl"}


def test_each_violation_is_named_in_one_line_with_its_fix(libraries):
    lines = {v.subject: v.line for v in _audit(libraries["bad"]).violations}
    assert set(lines) == {
        "libpython3.12.so",
        "_ZN3c106detail14torchCheckFailEPKcS2_jRKSs",
        "PyLong_FromLong",
        "torch_from_blob",
    }
    assert "c10::detail::torchCheckFail" in lines["_ZN3c106detail14torchCheckFailEPKcS2_jRKSs"]
    assert "stable C API" in lines["_ZN3c106detail14torchCheckFailEPKcS2_jRKSs"]
    assert "Python C API" in lines["PyLong_FromLong"] and "--abi stable" in lines["PyLong_FromLong"]
    assert "not a stable C symbol torch 2.10 exports" in lines["torch_from_blob"]
    assert all("\n" not in line for line in lines.values())


def test_a_later_floor_is_checked_against_the_newest_list_at_or_below_it(libraries):
    audit = _audit(libraries["good"], floor="2.12")
    assert audit.ok and audit.checked_against == Version("2.10")


def test_a_floor_older_than_every_list_is_a_violation(libraries):
    (problem,) = _audit(libraries["good"], floor="2.9").violations
    assert problem.subject == "torch_floor 2.9" and "2.10" in problem.fix


@pytest.mark.parametrize(
    ("library", "allowed"),
    [
        ("libc.so.6", True),
        ("libstdc++.so.6", True),
        ("libgcc_s.so.1", True),
        ("ld-linux-x86-64.so.2", True),
        ("libcudart.so.13", True),
        ("libtorch_cpu.so", True),
        ("libc10.so", True),
        ("libtorch_python.so", False),
        ("libpython3.12.so.1.0", False),
        ("libcublas.so.13", False),
    ],
)
def test_elf_libraries(library, allowed):
    assert (abi_audit.library_problem(library, "elf") is None) is allowed


def _pe(*imports: tuple[str, str]) -> BinaryImports:
    return BinaryImports(
        "pe",
        tuple(dict.fromkeys(dll for dll, _ in imports)),
        tuple(ImportedSymbol(name, dll) for dll, name in imports),
    )


def test_pe_imports_are_judged_per_dll():
    imports = _pe(
        ("KERNEL32.dll", "GetLastError"),
        ("VCRUNTIME140.dll", "memcpy"),
        ("api-ms-win-crt-runtime-l1-1-0.dll", "_initterm"),
        ("cudart64_13.dll", "cudaLaunchKernel"),
        ("torch_cpu.dll", "aoti_torch_get_data_ptr"),
        ("torch_cpu.dll", "torch_from_blob"),
        ("torch_cpu.dll", "?numel@TensorBase@at@@QEBA_JXZ"),
        (
            "c10.dll",
            "?torchCheckFail@detail@c10@@YAXPEBD0IAEBV?$basic_string@DU?$char_traits@D@std@@V?$allocator@D@2@@std@@@Z",
        ),
        ("torch_cpu.dll", "#42"),
        ("python312.dll", "PyLong_FromLong"),
        ("cublas64_13.dll", "cublasCreate_v2"),
    )
    audit = abi_audit.audit_binary("x.pyd", imports, Version("2.10"))
    subjects = [v.subject for v in audit.violations]
    assert subjects == [
        "python312.dll",
        "cublas64_13.dll",
        "torch_from_blob",
        "?numel@TensorBase@at@@QEBA_JXZ",
        "?torchCheckFail@detail@c10@@YAXPEBD0IAEBV?$basic_string@DU?$char_traits@D@std@@V?$allocator@D@2@@std@@@Z",
        "#42",
        "PyLong_FromLong",
    ]
    assert "torch C++ symbol" in audit.violations[3].line


# ---- the C++ runtime: shared, or carried statically ------------------------------------------

THROWS_CPP = """
#include <stdexcept>
extern "C" int stable_check(int bad) {
    if (bad) throw std::runtime_error("selective_scan: u must be (batch, dim, seqlen)");
    return 0;
}
"""


def _gxx(folder: Path, name: str, *extra: str) -> Path:
    source = folder / "throws.cpp"
    source.write_text(THROWS_CPP, encoding="utf-8")
    out = folder / name
    proc.run(["g++", "-shared", "-fPIC", "-o", str(out), str(source), *extra], timeout=120)
    return out


def test_a_library_with_a_static_libstdcxx_is_refused_with_the_fix(tmp_path):
    # What the H100 image's CXX (/opt/gcc/bin/g++) did: every check the binding threw ended the
    # process with SIGSEGV on torch 2.11, where the same library linked with /usr/bin/g++ raised.
    audit = _audit(_gxx(tmp_path, "static.so", "-static-libstdc++"))
    (violation,) = audit.violations
    assert violation.subject == "__cxa_begin_catch, __cxa_throw, __gxx_personality_v0"
    assert "carries its own static C++ runtime" in violation.line
    assert "CXX=/usr/bin/g++" in violation.line


def test_a_library_linked_with_the_shared_libstdcxx_passes(tmp_path):
    library = _gxx(tmp_path, "shared.so")
    imports = read_imports(library.read_bytes(), "shared.so")
    assert imports.runtime_defined == ()
    assert any(name.startswith("libstdc++") for name in imports.libraries)
    assert _audit(library).violations == ()


def test_a_stable_build_writes_no_wheel_from_a_library_carrying_libstdcxx(tmp_path):
    # setup.py's own wheel, before the rewrite: the build stops there, naming the cause.
    files = {LIBRARY: _gxx(tmp_path, "static.so", "-static-libstdc++").read_bytes()}
    raw = make_wheel(tmp_path, tag="cp311-cp311-linux_x86_64", provenance=None, files=files)
    with pytest.raises(BuildError) as caught:
        refuse_unstable(raw)
    message = str(caught.value)
    assert message.startswith("the built library is no stable-ABI library, so no wheel was written")
    assert "carries its own static C++ runtime" in message
    files = {LIBRARY: _gxx(tmp_path, "shared.so").read_bytes()}
    (tmp_path / "ok").mkdir()
    refuse_unstable(
        make_wheel(tmp_path / "ok", tag="cp311-cp311-linux_x86_64", provenance=None, files=files)
    )


# ---- the static step ----------------------------------------------------------------------------

H200 = Target("2.12.0+cu130", "13.0", "NVIDIA H200", (9, 0))
FAKE_CODE = Tools(wheel_gpu_code=lambda archive, info: (GpuCode(("sm_90",), (), "fatbin"), "sm_90"))


def _stable_wheel(
    folder: Path,
    library: Path,
    *,
    tag: str = TAG,
    provenance: dict = STABLE,
    shim: str | None = SHIM_SOURCE,
    requires: tuple[str, ...] = ("torch>=2.10",),
) -> Path:
    """A stable wheel as `build --abi stable` writes it: the shim its patch writes, the library
    beside it and torch at the floor; `shim=None` leaves the shim out."""
    files: dict[str, str | bytes] = {LIBRARY: library.read_bytes()}
    if shim is not None:
        files["selective_scan_cuda.py"] = shim
    return make_wheel(folder, tag=tag, provenance=provenance, files=files, requires=requires)


def _static(wheel: Path):
    return static.static_step(VerifyOptions(wheel=wheel, tools=FAKE_CODE), H200)[0]


def test_static_step_passes_a_clean_stable_wheel(tmp_path, libraries):
    result = _static(_stable_wheel(tmp_path, libraries["good"]))
    assert result.status == "ok", result.summary
    assert result.details["abi"]["ok"] and result.details["abi"]["violations"] == []
    assert "fits torch >= 2.10, any Python" in result.details["abi"]["message"]


def test_static_step_fails_a_stable_wheel_importing_torch_cxx_and_python(tmp_path, libraries):
    result = _static(_stable_wheel(tmp_path, libraries["bad"]))
    assert result.status == "fail"
    assert "stable ABI broken" in result.summary and "--json lists each" in result.summary
    violations = result.details["abi"]["violations"]
    assert len(violations) == 4 and all(v.startswith(LIBRARY + ": ") for v in violations)


def test_a_py3_none_wheel_whose_provenance_is_not_stable_fails(tmp_path, libraries):
    provenance = {**STABLE, "abi": "torch"}
    result = _static(_stable_wheel(tmp_path, libraries["good"], provenance=provenance))
    assert result.status == "fail"
    assert "tagged py3-none (a stable wheel) but the provenance's abi is 'torch'" in result.summary


def test_a_stable_provenance_on_a_cpython_tag_fails(tmp_path, libraries):
    wheel = _stable_wheel(tmp_path, libraries["good"], tag="cp311-cp311-linux_x86_64")
    result = _static(wheel)
    assert result.status == "fail" and "a stable wheel is py3-none-<platform>" in result.summary


def test_a_torch_abi_wheel_gets_no_abi_check(tmp_path, libraries):
    provenance = {k: v for k, v in STABLE.items() if k not in ("abi", "torch_floor")}
    wheel = _stable_wheel(
        tmp_path, libraries["bad"], tag="cp311-cp311-linux_x86_64", provenance=provenance
    )
    assert "abi" not in _static(wheel).details


# A stable wheel passes its library's audit and still cannot work: upstream's `import
# selective_scan_cuda` needs the shim, and pip must refuse a torch below the floor.
CONV_SHIM = shim_text(SHAPES[-1])  # causal-conv1d's shim: it loads causal_conv1d_cuda_stable


@pytest.mark.parametrize(
    ("shim", "fragment"),
    [
        (None, "the wheel has no selective_scan_cuda.py, the shim that loads"),
        ("", "selective_scan_cuda.py is empty"),
        ("  \n\n", "selective_scan_cuda.py is empty"),
        ("import torch\n", "selective_scan_cuda.py loads none of selective_scan_cuda_stable"),
        pytest.param(
            CONV_SHIM,
            "(it loads causal_conv1d_cuda_stable.abi3.so: another package's shim)",
            id="causal-conv1d's shim",
        ),
        ("def (:\n", "selective_scan_cuda.py is not Python (SyntaxError"),
        ("x = '\0'\0\n", "selective_scan_cuda.py is not Python"),
        ('_C = ("selective_scan_cuda_stable.pyd",)\n', "loads selective_scan_cuda_stable.pyd"),
    ],
)
def test_a_stable_wheel_whose_shim_cannot_load_its_library_fails_static(
    tmp_path, libraries, shim, fragment
):
    result = _static(_stable_wheel(tmp_path, libraries["good"], shim=shim))
    assert result.status == "fail"
    row = result.details["shim"]
    assert not row["ok"] and fragment in row["message"]
    assert row["message"].endswith("rebuild it with `mambawin build --abi stable`")
    assert result.details["abi"]["ok"]  # the library itself is fine: only the shim is named
    assert fragment in result.summary


def _conv_wheel(folder: Path, library: Path, shim: str) -> Path:
    """A causal_conv1d stable wheel (make_wheel writes mamba_ssm only)."""
    path = folder / f"causal_conv1d-1.5.2-{TAG}.whl"
    dist = "causal_conv1d-1.5.2.dist-info"
    metadata = "Metadata-Version: 2.1\nName: causal_conv1d\nVersion: 1.5.2\n"
    with WheelFile(path, "w") as archive:
        archive.writestr("causal_conv1d_cuda.py", shim)
        archive.writestr("causal_conv1d_cuda_stable.abi3.so", library.read_bytes())
        archive.writestr(f"{dist}/METADATA", metadata + "Requires-Dist: torch>=2.10\n")
        archive.writestr(
            f"{dist}/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {TAG}\n",
        )
        archive.writestr(f"{dist}/{PROVENANCE_NAME}", json.dumps(STABLE))
    return path


@pytest.mark.parametrize(
    ("shim", "ok"), [(CONV_SHIM, True), (SHIM_SOURCE, False)], ids=["its own", "mamba-ssm's"]
)
def test_causal_conv1d_needs_its_own_shim(tmp_path, libraries, shim, ok):
    wheel = _conv_wheel(tmp_path, libraries["good"], shim)
    ref = WheelRef(wheel, "causal-conv1d", "1.5.2")
    result = static.static_step(VerifyOptions(wheel=wheel, tools=FAKE_CODE), H200, ref)[0]
    assert result.details["shim"]["ok"] is ok, result.details["shim"]["message"]
    if not ok:
        assert (
            "(it loads selective_scan_cuda_stable.abi3.so: another package's shim)"
            in (result.details["shim"]["message"])
        )


def test_the_real_shims_pass(tmp_path, libraries):
    result = _static(_stable_wheel(tmp_path, libraries["good"]))
    assert result.details["shim"] == {
        "ok": True,
        "message": f"selective_scan_cuda.py loads {LIBRARY}, which the wheel holds beside it",
    }
    assert result.details["torch_floor"]["ok"]


@pytest.mark.parametrize(
    ("requires", "fragment"),
    [
        ((), "METADATA requires no torch"),
        (("einops",), "METADATA requires no torch"),
        (("torch",), "Requires-Dist torch (no version) admits torch older than 2.10"),
        (("torch>=2.9",), "Requires-Dist torch>=2.9 admits torch older than 2.10"),
        (("torch<3",), "admits torch older than 2.10"),
        (("torch!=2.9.*",), "admits torch older than 2.10"),
        (("torch>2.9",), "admits torch older than 2.10"),
        (("torch==2.*",), "admits torch older than 2.10"),
        (('torch>=2.10; os_name == "nt"',), "holds only where its marker does"),
        (('torch>=2.10; extra == "dev"',), "holds only where its marker does"),
        (("torch>=2.11",), "Requires-Dist torch>=2.11 refuses torch 2.10, the floor"),
        (("torch>2.10",), "refuses torch 2.10"),
        (("torch>=2.10,<2.10",), "refuses torch 2.10"),
        (("torch", 'torch>=2.9; os_name == "nt"'), "Requires-Dist torch (no version) admits"),
    ],
)
def test_a_stable_wheel_without_the_torch_floor_fails_static(
    tmp_path, libraries, requires, fragment
):
    result = _static(_stable_wheel(tmp_path, libraries["good"], requires=requires))
    assert result.status == "fail"
    row = result.details["torch_floor"]
    assert not row["ok"] and fragment in row["message"], row["message"]
    assert row["message"].endswith(
        "a stable wheel requires torch>=2.10; rebuild it with `mambawin build --abi stable`"
    )
    assert result.details["metadata"]["ok"]  # METADATA itself parses and is rewritten


@pytest.mark.parametrize(
    "requires",
    [
        ("torch>=2.10",),
        ("torch>=2.10.0",),
        ("torch>=2.10,<3",),
        ("torch[opt-einsum]>=2.10",),
        ("torch~=2.10",),
        ("torch>=2.10.0rc1",),  # by release numbers, as fit compares a torch with the floor
        ("torch>=2.9", "torch>=2.10"),
        ("torch>=2.10", 'torch; os_name == "nt"'),
    ],
)
def test_a_torch_requirement_at_the_floor_passes(tmp_path, libraries, requires):
    result = _static(_stable_wheel(tmp_path, libraries["good"], requires=requires))
    assert result.details["torch_floor"]["ok"], result.details["torch_floor"]["message"]
    assert result.status == "ok", result.summary


def test_the_floor_is_the_one_the_provenance_records(tmp_path, libraries):
    later = {**STABLE, "torch_floor": "2.12"}
    result = _static(_stable_wheel(tmp_path, libraries["good"], provenance=later))
    assert "Requires-Dist torch>=2.10 admits torch older than 2.12" in result.summary
    assert "requires torch>=2.12" in result.summary
    bad = {**STABLE, "torch_floor": "two"}
    result = _static(_stable_wheel(tmp_path, libraries["good"], provenance=bad))
    assert "torch_floor 'two' is not a version" in result.details["torch_floor"]["message"]
    assert result.details["shim"]["ok"]


def test_a_torch_abi_wheel_gets_no_shim_or_floor_row(tmp_path, libraries):
    provenance = {k: v for k, v in STABLE.items() if k not in ("abi", "torch_floor")}
    wheel = _stable_wheel(
        tmp_path,
        libraries["good"],
        tag="cp311-cp311-linux_x86_64",
        provenance=provenance,
        shim=None,
        requires=("torch",),
    )
    assert not {"shim", "torch_floor"} & set(_static(wheel).details)


def test_cli_names_the_missing_shim_with_exit_8(tmp_path, libraries):
    wheel = _stable_wheel(tmp_path, libraries["good"], shim=None, requires=("torch",))
    env = {"MAMBAWIN_OFFLINE": "1"}
    args = ["verify", str(wheel), "--json", "--skip", "requirements,ops,smoke,calls,blocks"]
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 8, result.output
    report = json.loads(result.stdout)
    assert report["summary"].startswith("FAILED at static: ")
    assert "the wheel has no selective_scan_cuda.py, the shim" in report["summary"]
    static_step = report["steps"][0]["details"]
    assert not static_step["shim"]["ok"] and not static_step["torch_floor"]["ok"]


def test_cli_json_lists_every_violation(tmp_path, libraries):
    wheel = _stable_wheel(tmp_path, libraries["bad"])
    env = {"MAMBAWIN_OFFLINE": "1"}
    result = CliRunner().invoke(
        app, ["verify", str(wheel), "--json", "--skip", "requirements"], env=env
    )
    assert result.exit_code == 8
    report = json.loads(result.stdout)
    static_step = next(s for s in report["steps"] if s["name"] == "static")
    assert len(static_step["details"]["abi"]["violations"]) == 4


# ---- fit and pair -------------------------------------------------------------------------------


@pytest.mark.parametrize("torch", ["2.10.0+cu130", "2.11.1+cu130", "2.14.0", "2.10.0a0+git1234"])
def test_a_stable_wheel_fits_every_torch_at_or_above_its_floor(torch):
    ok, message = fit.check_torch(Provenance.from_dict(STABLE), Target(torch, "13.0", None, None))
    assert ok, message
    assert "floor (torch >= 2.10)" in message


def test_a_stable_wheel_refuses_a_torch_below_its_floor():
    ok, message = fit.check_torch(
        Provenance.from_dict(STABLE), Target("2.9.1+cu130", "13.0", None, None)
    )
    assert not ok
    assert message.startswith("stable wheel for torch >= 2.10 but torch 2.9.1+cu130")
    assert "install torch 2.10 or newer" in message


def test_a_stable_wheel_still_needs_its_cuda_major():
    ok, message = fit.check_torch(
        Provenance.from_dict(STABLE), Target("2.12.0+cu128", "12.8", None, None)
    )
    assert not ok and "built for CUDA 13" in message


def test_a_stable_pair_compares_cuda_but_not_torch_or_labels():
    stable = Provenance.from_dict(STABLE)
    conv = Provenance.from_dict({**STABLE, "torch_version": "2.11.0"})
    assert (
        pair_problems(("2.2.6+cu130.stable.torch2.10", stable), ("1.5.2+cu130torch2.11", conv))
        == []
    )
    other_cuda = Provenance.from_dict({**STABLE, "cuda_version": "12.8"})
    (problem,) = pair_problems(("2.2.6", stable), ("1.5.2", other_cuda))
    assert "different CUDA" in problem


def test_fit_step_with_a_gpu_passes_a_newer_torch():
    target = replace(H200, torch_version="2.13.0+cu130")
    result = fit.fit_step(
        GpuCode(("sm_90",), (), "fatbin"), Provenance.from_dict(STABLE), target, "mamba-ssm"
    )
    assert result.status == "ok", result.summary


def test_installed_stable_package_audits_the_library_beside_its_shim(tmp_path, libraries):
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "selective_scan_cuda.py").write_text("import torch\n", encoding="utf-8")
    (site / LIBRARY).write_bytes(libraries["bad"].read_bytes())
    row = {"extension": str(site / "selective_scan_cuda.py"), "provenance": STABLE}
    target = replace(H200, installed_packages={"mamba-ssm": row})
    result, _, _ = static.static_step(VerifyOptions(installed=True), target)
    assert not result.details["abi"]["ok"]
    assert len(result.details["abi"]["violations"]) == 4
    (site / LIBRARY).write_bytes(libraries["good"].read_bytes())
    result, _, _ = static.static_step(VerifyOptions(installed=True), target)
    assert result.details["abi"]["ok"], result.details["abi"]["message"]
    (site / LIBRARY).unlink()
    result, _, _ = static.static_step(VerifyOptions(installed=True), target)
    assert "not installed beside its Python shim" in result.details["abi"]["message"]


def test_a_stable_wheel_without_a_gpu_runs_ops_after_install_and_passes(tmp_path, libraries):
    report = {"passed": True, "torch": "2.12.0+cu130", "packages": []}
    asked = []

    def run_module(env, module, args, timeout):
        asked.append(module)
        return report

    tools = replace(
        FAKE_CODE,
        prepare_env=lambda wheels, python, scratch: sandbox.InstallEnv(sys.executable, None),
        import_check=lambda env, modules: {"extensions": {}, "torch": "2.12.0+cu130"},
        run_module=run_module,
        run_worker=one_by_one,
    )
    wheel = _stable_wheel(tmp_path, libraries["good"])
    no_gpu = replace(H200, gpu_name=None, capability=None)
    options = VerifyOptions(
        wheel=wheel, tools=tools, target=no_gpu, skip=frozenset({"requirements"})
    )
    names = [(s.name, s.status) for s in pipeline.verify(options).steps]
    assert names[names.index(("install", "ok")) + 1] == ("ops", "ok")
    assert asked == ["mambawin.verify.runners.ops"]  # the GPU steps skip: no GPU
    left_out = replace(options, skip=frozenset({"requirements", "ops"}))
    assert ("ops", "skip") in [(s.name, s.status) for s in pipeline.verify(left_out).steps]


def test_a_stable_wheels_requirements_resolve_for_this_python_on_its_own_platform() -> None:
    from mambawin.verify.resolve import target_from_tag

    target = target_from_tag("py3-none-win_amd64")
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert (target.platform, target.python_version, target.implementation) == (
        "win_amd64",
        here,
        "cp",
    )
    assert target.abi == f"cp{sys.version_info[0]}{sys.version_info[1]}"


def test_a_stable_wheel_without_torch_version_names_its_floor_not_a_question_mark(
    tmp_path, libraries
):
    """A cross-built stable wheel records no torch_version (no torch compiled it): verify says
    what it fits, `for torch >= 2.10`, where it printed `for torch ?`."""
    cross = {k: v for k, v in STABLE.items() if k != "torch_version"}
    result = _static(_stable_wheel(tmp_path, libraries["good"], provenance=cross))
    assert "for torch >= 2.10, CUDA 13.0" in json.dumps(result.details) + result.summary
    assert "for torch ?" not in json.dumps(result.details) + result.summary
