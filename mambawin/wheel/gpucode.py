"""List the GPU code (SASS cubins, PTX) compiled into an extension module or a wheel.

cuobjdump is asked first when it can be found (PATH, CUDA_HOME/CUDA_PATH, or the
`nvidia-cuda-cuobjdump` pip package). Without it the fatbin headers are read in pure Python from the
ELF section `.nv_fatbin` (Linux .so) or the PE section `.nv_fatb` (Windows .pyd; PE section names
are cut to 8 characters). The layout is reverse-engineered (docs/windows.md, "Fatbin layout"), so
cuobjdump wins whenever both are available, but for a PE image where it finds nothing: Linux's
cuobjdump reads ELF only, so a cross-built .pyd is read by the parser there.
"""

from __future__ import annotations

import importlib.util
import os
import re
import struct
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mambawin import proc
from mambawin.errors import CommandError, ToolchainError, WheelError
from mambawin.wheel.info import WheelInfo, open_wheel, read_member

Method = Literal["cuobjdump", "fatbin"]
_ELF_MAGIC, _PE_MAGIC = b"\x7fELF", b"MZ"

FATBIN_MAGIC = 0xBA55ED50
_MAGIC = struct.pack("<I", FATBIN_MAGIC)
_KIND_PTX, _KIND_ELF = 1, 2
# Seen in nvcc 13.0 output: 0x100000 marks arch-specific code (sm_90a, sm_100a) and cuobjdump
# prints the 'a'; family code (sm_120f) sets 0x200000 but cuobjdump prints plain sm_120, as we do.
_FLAG_ARCH_SPECIFIC = 0x100000
_ENTRY_MIN = 48  # the entry header is 64/80/96/112 bytes; we read up to `flags` at +40
_ELF_SECTION, _PE_SECTION = b".nv_fatbin", b".nv_fatb"
_NO_DEVICE_CODE = "does not contain device code"
_TOKEN = re.compile(r"\bsm_(\d+[a-z]?)\.(cubin|ptx)\b")
_PE_SECTION_SIZE = 40


@dataclass(frozen=True)
class GpuCode:
    """GPU code in one binary: SASS (`sm_90`), PTX (`compute_80`), sorted; and how it was read."""

    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    method: Method

    def to_json(self) -> dict[str, object]:
        """A stable JSON form for `--json` output."""
        return {"sass": list(self.sass), "ptx": list(self.ptx), "method": self.method}


def find_cuobjdump() -> str | None:
    """cuobjdump from PATH, CUDA_HOME/CUDA_PATH, or an installed nvidia-cuda-cuobjdump package."""
    found = proc.which("cuobjdump")
    if found:
        return found
    names = ("cuobjdump.exe", "cuobjdump") if os.name == "nt" else ("cuobjdump",)
    for root in _cuda_roots():
        for name in names:
            if (root / "bin" / name).is_file():
                return str(root / "bin" / name)
    return _cuobjdump_from_pip(names)


def list_gpu_code(
    binary: Path,
    *,
    method: Literal["auto", "cuobjdump", "fatbin"] = "auto",
) -> GpuCode:
    """The SASS and PTX targets inside one `.so`/`.pyd` (cuobjdump if found, else fatbin parse)."""
    binary = Path(binary)
    if not binary.is_file():
        msg = f"{binary} does not exist or is not a file: pass a built .so or .pyd"
        raise WheelError(msg)
    tool = find_cuobjdump() if method != "fatbin" else None
    if tool:
        code = _with_cuobjdump(tool, binary)
        if code.sass or code.ptx or method == "cuobjdump" or not _is_pe(binary):
            return code
        # Linux's cuobjdump reads ELF only: it says a cross-built .pyd "does not contain device
        # code" (cuobjdump 13.0). The parser reads a PE image's .nv_fatb sections.
        return read_fatbin(binary)
    if method == "cuobjdump":
        msg = (
            "cuobjdump not found (PATH, CUDA_HOME/bin or pip): install the CUDA toolkit's "
            "cuobjdump or `pip install nvidia-cuda-cuobjdump`"
        )
        raise ToolchainError(msg)
    return read_fatbin(binary)


def gpu_code_in_wheel(
    wheel: Path,
    *,
    method: Literal["auto", "cuobjdump", "fatbin"] = "auto",
) -> dict[str, GpuCode]:
    """GPU code of every extension module (`*.so`, `*.pyd`) in a wheel, by archive member."""
    with open_wheel(Path(wheel)) as (archive, info):
        return gpu_code_in_archive(archive, info, method=method)


def gpu_code_in_archive(
    archive: zipfile.ZipFile,
    info: WheelInfo,
    *,
    method: Literal["auto", "cuobjdump", "fatbin"] = "auto",
) -> dict[str, GpuCode]:
    """GPU code of every extension module of a wheel already opened (and checked) once."""
    result: dict[str, GpuCode] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for member in info.extensions:
            # cuobjdump needs a real file, so each module is unpacked under its own base name.
            copy = Path(scratch) / Path(member).name
            copy.write_bytes(read_member(info.path, archive, member))
            result[member] = list_gpu_code(copy, method=method)
            copy.unlink()
    return result


def parse_cuobjdump(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(sass, ptx) from `cuobjdump --list-elf --list-ptx` lines (`ELF file 1: x.1.sm_90.cubin`)."""
    sass: set[str] = set()
    ptx: set[str] = set()
    for arch, kind in _TOKEN.findall(text):
        (sass if kind == "cubin" else ptx).add(("sm_" if kind == "cubin" else "compute_") + arch)
    return _sorted(sass), _sorted(ptx)


def read_fatbin(binary: Path) -> GpuCode:
    """GpuCode from the fatbin headers in an ELF `.so` or PE `.pyd`, without any CUDA tool."""
    data = binary.read_bytes()
    sass: set[str] = set()
    ptx: set[str] = set()
    for blob in fatbin_sections(binary.name, data):
        for kind, arch, flags in fatbin_entries(blob):
            suffix = "a" if flags & _FLAG_ARCH_SPECIFIC else ""
            (sass if kind == _KIND_ELF else ptx).add(
                f"{'sm' if kind == _KIND_ELF else 'compute'}_{arch}{suffix}"
            )
    return GpuCode(_sorted(sass), _sorted(ptx), "fatbin")


def fatbin_sections(name: str, data: bytes) -> list[bytes]:
    """The bytes of the fatbin section(s); the whole file when a known binary has none by name."""
    try:
        if data[:4] == _ELF_MAGIC:
            sections = _elf_sections(data, _ELF_SECTION)
        elif data[:2] == _PE_MAGIC:
            sections = _pe_sections(data, _PE_SECTION)
        else:
            msg = f"{name} is neither an ELF (.so) nor a PE (.pyd) file: pass a built extension"
            raise WheelError(msg)
    except (struct.error, IndexError):
        msg = f"{name} is truncated (its headers run past the end of the file): rebuild it"
        raise WheelError(msg) from None
    # No section by that name: scan everything (the container header is validated field by field).
    return sections or [data]


def fatbin_entries(blob: bytes) -> Iterator[tuple[int, int, int]]:
    """(kind, arch, flags) of every entry in every fatbin container found in blob."""
    pos = blob.find(_MAGIC)
    while pos >= 0:
        end = _container_end(blob, pos)
        if end is None:
            pos = blob.find(_MAGIC, pos + 4)
            continue
        yield from _entries(blob, pos + 16, end)
        pos = blob.find(_MAGIC, end)


def _container_end(blob: bytes, pos: int) -> int | None:
    """End of the container at pos, or None when its header is not a real one (magic by chance)."""
    if pos + 16 > len(blob):
        return None
    _, version, header_size, payload_size = struct.unpack_from("<IHHQ", blob, pos)
    end: int = pos + header_size + payload_size
    if version != 1 or header_size != 16 or payload_size == 0 or end > len(blob):
        return None
    return end


def _entries(blob: bytes, pos: int, end: int) -> Iterator[tuple[int, int, int]]:
    while pos + _ENTRY_MIN <= end:
        kind, _, header_size, payload_size = struct.unpack_from("<HHIQ", blob, pos)
        if kind not in (_KIND_PTX, _KIND_ELF) or header_size < _ENTRY_MIN:
            return  # not an entry header: stop reading this container
        (arch,) = struct.unpack_from("<I", blob, pos + 28)
        (flags,) = struct.unpack_from("<Q", blob, pos + 40)
        yield kind, arch, flags
        pos += header_size + payload_size


def _elf_sections(data: bytes, wanted: bytes) -> list[bytes]:
    """Contents of the ELF64 little-endian sections named `wanted` (CUDA builds are x86-64)."""
    if data[4] != 2 or data[5] != 1:
        return []
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    entsize, count, strndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * entsize) for i in range(count)]
    if not headers or strndx >= count:
        return []
    names_at = headers[strndx][4]
    found = []
    for name_off, kind, _, _, offset, size in headers:
        end = data.find(b"\0", names_at + name_off)
        if data[names_at + name_off : end] == wanted and kind != 8:  # 8 = SHT_NOBITS
            found.append(data[offset : offset + size])
    return found


def _pe_sections(data: bytes, wanted: bytes) -> list[bytes]:
    """Raw data of the PE/COFF sections named `wanted` (names padded with NUL to 8 bytes)."""
    (pe_at,) = struct.unpack_from("<I", data, 0x3C)
    if data[pe_at : pe_at + 4] != b"PE\0\0":
        msg = "the file starts with MZ but has no PE header: it is not a Windows .pyd/.dll"
        raise WheelError(msg)
    (count,) = struct.unpack_from("<H", data, pe_at + 6)
    (optional_size,) = struct.unpack_from("<H", data, pe_at + 20)
    table = pe_at + 24 + optional_size
    found = []
    for index in range(count):
        name, _, _, raw_size, raw_at = struct.unpack_from(
            "<8sIIII", data, table + index * _PE_SECTION_SIZE
        )
        if name.rstrip(b"\0") == wanted:
            found.append(data[raw_at : raw_at + raw_size])
    return found


def _with_cuobjdump(tool: str, binary: Path) -> GpuCode:
    try:
        done = proc.run([tool, "--list-elf", "--list-ptx", str(binary)], check=False, timeout=300)
    except CommandError as exc:
        msg = f"cuobjdump could not be run on {binary.name}: {exc}"
        raise WheelError(msg) from None
    text = done.stdout + "\n" + done.stderr
    if done.returncode != 0 and _NO_DEVICE_CODE not in text:
        last = proc.last_line(text) or "(no output)"
        msg = (
            f"cuobjdump cannot read {binary.name} ({last}): check that it is a "
            "complete CUDA extension module"
        )
        raise WheelError(msg)
    sass, ptx = parse_cuobjdump(done.stdout)
    return GpuCode(sass, ptx, "cuobjdump")


def _is_pe(binary: Path) -> bool:
    try:
        with binary.open("rb") as file:
            return file.read(2) == _PE_MAGIC
    except OSError:
        return False


def _cuda_roots() -> Iterator[Path]:
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        value = os.environ.get(variable)
        if value:
            yield Path(value)


def _cuobjdump_from_pip(names: Iterable[str]) -> str | None:
    """cuobjdump from pip: nvidia/cu13/bin (CUDA 13 wheels) or nvidia/cuda_cuobjdump/bin (12)."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        for name in names:
            for candidate in sorted(Path(location).glob(f"*/bin/{name}")):
                if candidate.is_file():
                    return str(candidate)
    return None


def _sorted(names: Iterable[str]) -> tuple[str, ...]:
    """Sorted by arch number (sm_90 before sm_100), then suffix."""

    def key(name: str) -> tuple[int, str]:
        number = re.search(r"_(\d+)", name)
        return (int(number.group(1)) if number else 0, name)

    return tuple(sorted(set(names), key=key))
