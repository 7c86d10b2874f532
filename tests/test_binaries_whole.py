"""Audits fail closed: a binary the PE/ELF readers cannot read whole (a cut file, a table outside
it, a limit pefile hits, a descriptor it drops) fails with what could not be read, never passes
as "no imports"; torch's export list is read whole; floors compare as versions. Every binary
here is made in the test (tests/binaries.py, or gcc from a few lines of C)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from packaging.version import Version

from mambawin import proc
from mambawin.cross import audit as cross_audit
from mambawin.errors import UpstreamError, WheelError
from mambawin.verify import static
from mambawin.verify.options import VerifyOptions
from mambawin.verify.tools import Tools
from mambawin.verify.wineload.torches import dll_exports
from mambawin.versions import at_least
from mambawin.wheel import abi_audit, stable_wheel
from mambawin.wheel.gpucode import GpuCode
from mambawin.wheel.imports import read_imports
from tests.binaries import pe_dll
from tests.test_verify import H100, make_wheel

STABLE = "aoti_torch_get_numel"  # a stable C symbol torch 2.10 exports
CXX = "?torchCheckFail@detail@c10@@YAXPEBD0IAEBV?$basic_string@DU?$char_traits@D@std@@@std@@@Z"
CLEAN = pe_dll([("torch_cpu.dll", [STABLE]), ("KERNEL32.dll", ["GetLastError"])])


def _audit(data: bytes, name: str = "ext.pyd") -> abi_audit.Audit:
    return abi_audit.audit_binary(name, read_imports(data, name), Version("2.10"))


def test_the_hand_made_dll_reads_and_passes() -> None:
    imports = read_imports(CLEAN, "ext.pyd")
    assert imports.libraries == ("torch_cpu.dll", "KERNEL32.dll")
    assert _audit(CLEAN).ok


# ---- PE ----------------------------------------------------------------------------------------

# Where the hand-made DLL is cut: inside the DOS header, before the PE signature, inside the COFF
# header, inside the optional header, inside the section table, before the section's bytes,
# inside them, and one byte short.
CUTS = [0x20, 0x60, 0x90, 0x120, 0x1B0, 0x200, 0x240, len(CLEAN) - 1]


@pytest.mark.parametrize("at", CUTS)
def test_a_pe_cut_anywhere_is_not_read(at: int) -> None:
    with pytest.raises(WheelError) as refused:
        read_imports(CLEAN[:at], "cut.pyd")
    assert "cut.pyd" in str(refused.value) and "\n" not in str(refused.value)


def test_8193_imports_from_one_dll_are_all_read() -> None:
    """pefile stops at 8,192 names by default: the C++ and Python names after them used to go
    unread, and the wheel passed as "fits torch >= 2.10, any Python"."""
    names = [STABLE] * 8193 + [CXX, "PyLong_FromLong"]
    imports = read_imports(pe_dll([("torch_cpu.dll", names)]), "many.pyd")
    assert len(imports.symbols) == 8195
    audit = _audit(pe_dll([("torch_cpu.dll", names)]))
    assert {CXX, "PyLong_FromLong"} <= {v.subject for v in audit.violations}


def test_an_import_directory_outside_the_file_is_not_no_imports() -> None:
    with pytest.raises(WheelError, match="import directory"):
        read_imports(pe_dll([("torch_cpu.dll", [STABLE])], import_rva=0x100000), "far.pyd")


def test_a_dll_whose_thunks_pefile_drops_silently_fails() -> None:
    """Fifteen thunks at one address: pefile returns no imports for that DLL and says nothing
    unless the table is counted again."""
    names = ["PyLong_FromLong"] * 20
    with pytest.raises(WheelError):
        read_imports(pe_dll([("python312.dll", names)], same_name_rva=True), "same.pyd")


def test_a_delay_loaded_python_dll_is_seen() -> None:
    dll = pe_dll([("torch_cpu.dll", [STABLE])], delay=[("python312.dll", ["PyLong_FromLong"])])
    audit = _audit(dll)
    assert not audit.ok
    assert {v.subject for v in audit.violations} >= {"python312.dll", "PyLong_FromLong"}


def test_torchs_exports_are_read_whole_past_pefiles_limit(tmp_path: Path) -> None:
    """A CUDA torch_cuda.dll exports tens of thousands of names; pefile's default stops at
    8,192, hiding the very names the stub is checked against."""
    names = [f"aoti_torch_cuda_op{i:05d}" for i in range(9000)]
    dll = tmp_path / "torch_cuda.dll"
    dll.write_bytes(pe_dll(exports=names))
    assert dll_exports(dll) == frozenset(names)


def test_a_cut_torch_dll_is_an_error_not_a_short_list(tmp_path: Path) -> None:
    dll = tmp_path / "torch_cuda.dll"
    dll.write_bytes(pe_dll(exports=[f"torch_x{i}" for i in range(50)])[:-100])
    with pytest.raises(UpstreamError, match=r"torch_cuda\.dll"):
        dll_exports(dll)


# ---- ELF ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def elf(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real shared library from two lines of C (gcc), importing one stable C symbol."""
    folder = tmp_path_factory.mktemp("elf")
    source = folder / "ext.c"
    source.write_text(
        f"extern int {STABLE}(void *, long *);\nextern double cos(double);\n"
        f"double f(double x) {{ long n; {STABLE}(0, &n); return cos(x); }}\n",
        encoding="utf-8",
    )
    out = folder / "ext.so"
    link = ["-Wl,--no-as-needed", "-lm"]  # a DT_NEEDED to read
    proc.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(source), *link], timeout=120)
    return out.read_bytes()


def test_the_gcc_library_reads_whole(elf: bytes) -> None:
    assert STABLE in {s.name for s in read_imports(elf, "ext.so").symbols}


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.25, 0.5, 0.9, 0.999])
def test_an_elf_cut_anywhere_is_not_read(elf: bytes, fraction: int) -> None:
    at = max(20, int(len(elf) * fraction))
    with pytest.raises(WheelError):
        read_imports(elf[:at] if fraction else elf[:20], "cut.so")


def _sections(elf: bytes) -> tuple[int, int, int]:
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
    return shoff, shentsize, shnum


SHT_DYNAMIC, SHT_DYNSYM, SHT_GNU_VERSYM = 6, 11, 0x6FFFFFFF


def _section_header(elf: bytes, kind: int) -> int:
    """The file offset of the header of the section of that sh_type."""
    shoff, size, count = _sections(elf)
    for index in range(count):
        at = shoff + index * size
        if struct.unpack_from("<I", elf, at + 4)[0] == kind:
            return at
    raise AssertionError(f"gcc wrote no section of type {kind:#x}")


def _dynamic_header(elf: bytes) -> int:
    return _section_header(elf, SHT_DYNAMIC)


def _section_bytes(elf: bytes, kind: int) -> tuple[int, int]:
    at = _section_header(elf, kind)
    return struct.unpack_from("<QQ", elf, at + 0x18)  # sh_offset, sh_size


def _patched(elf: bytes, at: int, fmt: str, value: int) -> bytes:
    data = bytearray(elf)
    struct.pack_into(fmt, data, at, value)
    return bytes(data)


def test_a_needed_library_named_outside_dynstr_fails(elf: bytes) -> None:
    offset, size = _section_bytes(elf, SHT_DYNAMIC)
    needed = next(
        offset + k for k in range(0, size, 16) if struct.unpack_from("<q", elf, offset + k)[0] == 1
    )  # DT_NEEDED
    with pytest.raises(WheelError, match="DT_NEEDED"):
        read_imports(_patched(elf, needed + 8, "<Q", 0xFFFFFF), "needed.so")


def test_an_import_named_outside_dynstr_is_not_dropped(elf: bytes) -> None:
    """pyelftools reads such a name as '': the import used to vanish from the audit."""
    offset, size = _section_bytes(elf, SHT_DYNSYM)
    names = [s.name for s in read_imports(elf, "ext.so").symbols]
    assert STABLE in names
    entries = (offset + k for k in range(0, size, 24))
    symbol = next(at for at in entries if _dynsym_name(elf, at) == STABLE)
    with pytest.raises(WheelError, match=r"outside \.dynstr"):
        read_imports(_patched(elf, symbol, "<I", 0xFFFFFF), "lost.so")


def _dynsym_name(elf: bytes, entry: int) -> str:
    """The name of the .dynsym entry at that offset, read from .dynstr (sh_link of .dynsym)."""
    link = struct.unpack_from("<I", elf, _section_header(elf, SHT_DYNSYM) + 0x28)[0]
    shoff, size, _ = _sections(elf)
    strtab = struct.unpack_from("<Q", elf, shoff + link * size + 0x18)[0]
    start = strtab + struct.unpack_from("<I", elf, entry)[0]
    return elf[start : elf.index(b"\0", start)].decode()


def test_a_version_table_of_another_length_fails(elf: bytes) -> None:
    """Without one version per symbol the glibc a binary needs is unknown: not "none"."""
    at = _section_header(elf, SHT_GNU_VERSYM) + 0x20
    half = struct.unpack_from("<Q", elf, at)[0] // 2
    with pytest.raises(WheelError, match=r"\.gnu\.version"):
        read_imports(_patched(elf, at, "<Q", half), "versions.so")


@pytest.mark.parametrize(
    ("field", "fmt", "value"),
    [(0x38, "<Q", 0), (0x28, "<I", 9999), (0x20, "<Q", 1 << 40)],
    ids=["dynsym-entsize-0", "dynsym-link-past-the-table", "dynsym-size-huge"],
)
def test_a_malformed_dynsym_header_fails(elf: bytes, field: int, fmt: str, value: int) -> None:
    with pytest.raises(WheelError):
        read_imports(_patched(elf, _section_header(elf, SHT_DYNSYM) + field, fmt, value), "x.so")


def test_a_section_name_table_index_past_the_table_fails(elf: bytes) -> None:
    with pytest.raises(WheelError):
        read_imports(_patched(elf, 0x3E, "<H", 9999), "names.so")


def test_a_dynamic_section_outside_the_file_fails(elf: bytes) -> None:
    data = bytearray(elf)
    struct.pack_into("<Q", data, _dynamic_header(elf) + 0x18, len(elf) + 4096)  # sh_offset
    with pytest.raises(WheelError, match="past the file"):
        read_imports(bytes(data), "far.so")


def test_a_dynamic_library_without_section_headers_is_not_no_imports(elf: bytes) -> None:
    """The loader needs no section headers; the imports are read from them: without them a
    reader that lists nothing would pass a binary it never read."""
    data = bytearray(elf)
    struct.pack_into("<Q", data, 0x28, 0)  # e_shoff
    struct.pack_into("<HHH", data, 0x3A, 0, 0, 0)  # e_shentsize, e_shnum, e_shstrndx
    with pytest.raises(WheelError, match=r"no \.dynamic and \.dynsym"):
        read_imports(bytes(data), "stripped.so")


# ---- the static step reads every binary whole ------------------------------------------------


def test_the_static_step_fails_a_cut_pyd_whatever_its_abi(tmp_path: Path) -> None:
    """It used to report the GPU code and pass: with `--skip load`, or on Linux without wine,
    nothing else read the binary."""
    so = "selective_scan_cuda.cp311-win_amd64.pyd"
    wheel = make_wheel(tmp_path, files={so: CLEAN[: len(CLEAN) // 2]})
    tools = Tools(wheel_gpu_code=lambda _a, _i: (GpuCode(("sm_90",), (), "fatbin"), "sm_90"))
    result = static.static_step(VerifyOptions(wheel=wheel, tools=tools), H100)[0]
    assert result.status == "fail"
    row = result.details["binaries"]
    assert not row["ok"] and so.split("/")[-1] in row["message"]


def test_the_static_step_passes_a_whole_pyd(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, files={"selective_scan_cuda.cp311-win_amd64.pyd": CLEAN})
    tools = Tools(wheel_gpu_code=lambda _a, _i: (GpuCode(("sm_90",), (), "fatbin"), "sm_90"))
    result = static.static_step(VerifyOptions(wheel=wheel, tools=tools), H100)[0]
    assert result.details["binaries"]["ok"], result.summary


# ---- floors compare as versions -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "floor", "fits"),
    [
        ("2.10", "2.10.0.0", True),  # trailing zeros are the same release
        ("2.10.0.0", "2.10", True),
        ("1!2.0", "2.99", True),  # an epoch outranks every release
        ("2.99", "1!2.0", False),
        ("2.10.0a0", "2.10", True),  # a pre-release of the floor's release: its symbols
        ("2.10.0+cu130", "2.10", True),  # a local label changes nothing
        ("2.9.9", "2.10", False),
        ("2.10.0.post1", "2.10", True),
    ],
)
def test_floors_compare_by_epoch_and_release(version: str, floor: str, fits: bool) -> None:
    assert at_least(version, floor) is fits


def test_a_floor_written_with_trailing_zeros_is_the_same_floor() -> None:
    check = stable_wheel.check_torch_floor(["torch>=2.10"], Version("2.10.0.0"))
    assert check.ok, check.message


def test_an_epoch_requirement_is_not_read_as_an_older_torch() -> None:
    check = stable_wheel.check_torch_floor(["torch>=1!2.0"], Version("2.10"))
    assert not check.ok and "refuses torch 2.10" in check.message


def test_verify_installed_reads_the_installed_library_whole(tmp_path: Path) -> None:
    library = tmp_path / "selective_scan_cuda.cp311-win_amd64.pyd"
    library.write_bytes(CLEAN[:-1])
    with pytest.raises(WheelError, match="past the file"):
        stable_wheel.check_files_whole([library])
    library.write_bytes(CLEAN)
    assert stable_wheel.check_files_whole([library, tmp_path / "stand_in.py"]).ok


def test_the_cross_builds_own_audit_reads_the_library_whole(tmp_path: Path) -> None:
    library = tmp_path / "ext.pyd"
    library.write_bytes(pe_dll([("torch_cpu.dll", [STABLE])], import_rva=0x100000))
    with pytest.raises(WheelError, match="import directory"):
        cross_audit.pe_imports(library)
    library.write_bytes(pe_dll([("torch_cpu.dll", [STABLE])], delay=[("python312.dll", ["Py_X"])]))
    imports = cross_audit.pe_imports(library)
    assert imports["python312.dll"] == ("Py_X",)
    assert cross_audit.import_problems(imports)  # a delay-loaded Python DLL is a problem too


def test_a_small_dll_loading_others_is_read_not_judged_packed() -> None:
    """pefile's "typical of packed executables" is a judgement of intent, not a read failure."""
    dll = pe_dll([("KERNEL32.dll", ["LoadLibraryA", "GetProcAddress"])])
    assert read_imports(dll, "loader.pyd").libraries == ("KERNEL32.dll",)


@pytest.mark.parametrize(
    ("characteristics", "entry"),
    [(0xE0000060, 0x1000), (0x40000040, 0)],
    ids=["writable-and-executable-section", "no-entry-point"],
)
def test_pefiles_judgements_of_intent_are_not_read_failures(
    characteristics: int, entry: int
) -> None:
    dll = pe_dll([("torch_cpu.dll", [STABLE])], characteristics=characteristics, entry=entry)
    assert read_imports(dll, "odd.pyd").libraries == ("torch_cpu.dll",)
