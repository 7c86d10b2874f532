"""What a compiled binary takes from other libraries: the libraries it names and the symbols it
imports, read from an ELF `.so` (pyelftools: DT_NEEDED, undefined `.dynsym` entries with the
version each needs, `GLIBC_2.38`) or a PE `.pyd`/`.dll` (pefile: the import table, per DLL).

An ELF undefined symbol does not say which library defines it, so `ImportedSymbol.library` is
None there; a PE import always names its DLL. Nothing here judges: `wheel.abi_audit` does.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NoReturn

import pefile
from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection
from elftools.elf.sections import SymbolTableSection

from mambawin.errors import WheelError

BinaryFormat = Literal["elf", "pe"]


@dataclass(frozen=True)
class ImportedSymbol:
    """One imported symbol: its name (`#N` for a PE import by ordinal), on PE its DLL, and on ELF
    the symbol version it needs (`GLIBC_2.38`), None when unversioned."""

    name: str
    library: str | None = None
    version: str | None = None


# The C++ runtime's exception entry points. A binary that defines (exports) them carries its own
# copy of libstdc++ (a compiler that links it statically): an exception it throws is then not one
# the process's shared libstdc++, and so torch, can catch.
CXX_RUNTIME = frozenset({"__cxa_throw", "__cxa_begin_catch", "__gxx_personality_v0"})


@dataclass(frozen=True)
class BinaryImports:
    """The libraries a binary needs and the symbols it imports, in file order; on ELF also which
    of CXX_RUNTIME it defines itself."""

    format: BinaryFormat
    libraries: tuple[str, ...]
    symbols: tuple[ImportedSymbol, ...]
    runtime_defined: tuple[str, ...] = ()


def read_imports(data: bytes, name: str) -> BinaryImports:
    """The imports of an ELF or PE binary held in data; WheelError naming `name` when unreadable."""
    if data[:4] == b"\x7fELF":
        return _elf_imports(data, name)
    if data[:2] == b"MZ":
        return _pe_imports(data, name)
    msg = f"{name} is neither an ELF (.so) nor a PE (.pyd/.dll) file: rebuild the wheel"
    raise WheelError(msg)


def _elf_imports(data: bytes, name: str) -> BinaryImports:
    try:
        elf = ELFFile(io.BytesIO(data))
        _check_elf_extent(elf, len(data), name)
        needed: list[str] = []
        symbols: list[ImportedSymbol] = []
        runtime: list[str] = []
        versions = _needed_versions(elf)
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                # pyelftools sets `needed` on each DT_NEEDED tag at run time, from .dynstr.
                needed += [str(vars(tag)["needed"]) for tag in section.iter_tags("DT_NEEDED")]
            if isinstance(section, SymbolTableSection) and section.name == ".dynsym":
                symbols += _undefined(section, _versym(elf, section), versions)
                runtime += [
                    s.name
                    for s in section.iter_symbols()
                    if s.name in CXX_RUNTIME and s["st_shndx"] != "SHN_UNDEF"
                ]
    except (ELFError, ValueError, KeyError, OSError, struct.error, AttributeError) as exc:
        _unreadable(name, f"its ELF headers cannot be read ({exc})")
    if any(not library for library in needed):
        _unreadable(name, "a DT_NEEDED entry names no library (its string lies outside .dynstr)")
    return BinaryImports("elf", tuple(needed), tuple(symbols), tuple(sorted(runtime)))


def _check_elf_extent(elf: ELFFile, size: int, name: str) -> None:
    """Every table and section the ELF header declares lies inside the file, and a binary the
    loader links dynamically has the .dynamic and .dynsym sections its imports are read from
    (without them pyelftools would list nothing, and an audit would pass "no imports")."""
    header = elf.header
    tables = (
        ("section header table", header["e_shoff"], header["e_shnum"] * header["e_shentsize"]),
        ("program header table", header["e_phoff"], header["e_phnum"] * header["e_phentsize"]),
    )
    for what, offset, length in tables:
        if length and offset + length > size:
            _unreadable(name, f"its {what} ends at byte {offset + length:,}, past its end")
    for section in elf.iter_sections():
        end = section["sh_offset"] + section["sh_size"]
        if section["sh_type"] != "SHT_NOBITS" and section["sh_size"] and end > size:
            what = section.name or f"section at {section['sh_offset']:#x}"
            _unreadable(name, f"{what} ends at byte {end:,}, past the file's {size:,} bytes")
    dynamic = False
    for segment in elf.iter_segments():
        end = segment["p_offset"] + segment["p_filesz"]
        if segment["p_filesz"] and end > size:
            _unreadable(name, f"a {segment['p_type']} segment ends at byte {end:,}, past its end")
        dynamic = dynamic or segment["p_type"] == "PT_DYNAMIC"
    if dynamic and not (
        any(isinstance(s, DynamicSection) for s in elf.iter_sections())
        and elf.get_section_by_name(".dynsym") is not None
    ):
        _unreadable(name, "it is linked dynamically but has no .dynamic and .dynsym sections")


def _needed_versions(elf: ELFFile) -> dict[int, str]:
    """Version index -> name (`GLIBC_2.38`) from .gnu.version_r, the versions the binary needs."""
    found: dict[int, str] = {}
    for section in elf.iter_sections():
        if isinstance(section, GNUVerNeedSection):
            for _, auxiliaries in section.iter_versions():
                found.update((int(aux["vna_other"]), str(aux.name)) for aux in auxiliaries)
    return found


def _versym(elf: ELFFile, dynsym: SymbolTableSection) -> GNUVerSymSection | None:
    """.gnu.version, which holds one entry per .dynsym symbol; None when the binary has none.
    One of another length cannot say which version each symbol needs: ValueError (unreadable),
    never a binary read as needing no glibc version."""
    section = elf.get_section_by_name(".gnu.version")
    if not isinstance(section, GNUVerSymSection):
        return None
    if section.num_symbols() != dynsym.num_symbols():
        msg = f".gnu.version has {section.num_symbols()} entries for {dynsym.num_symbols()} symbols"
        raise ValueError(msg)
    return section


def _undefined(
    dynsym: SymbolTableSection, versym: GNUVerSymSection | None, versions: dict[int, str]
) -> list[ImportedSymbol]:
    """The undefined .dynsym symbols; .gnu.version holds one version index per symbol, in order."""
    indexes = versym.iter_symbols() if versym is not None else iter(())
    found: list[ImportedSymbol] = []
    for symbol in dynsym.iter_symbols():
        index = next(indexes, None)
        if symbol["st_name"] and not symbol.name:  # pyelftools reads '' past .dynstr's end
            raise ValueError(f"a .dynsym name at {symbol['st_name']:#x} lies outside .dynstr")
        if not symbol.name or symbol["st_shndx"] != "SHN_UNDEF":
            continue
        ndx = index["ndx"] if index is not None else None
        # 0 and 1 (local, global) arrive as names; bit 15 marks a hidden version.
        version = versions.get(ndx & 0x7FFF) if isinstance(ndx, int) else None
        found.append(ImportedSymbol(symbol.name, version=version))
    return found


_IMPORT, _DELAY_IMPORT = 1, 13  # data directory indexes (IMAGE_DIRECTORY_ENTRY_*)
_DESCRIPTOR_SIZE = {_IMPORT: 20, _DELAY_IMPORT: 32}  # IMAGE_(DELAYLOAD_)IMPORT_DESCRIPTOR


def _pe_imports(data: bytes, name: str) -> BinaryImports:
    """The import and delay-import tables, read whole: anything pefile could not read (its
    limits, a table outside the file, a cut file) is a WheelError, never "no imports"."""
    pe = open_pe(data, name, directories=("IMAGE_DIRECTORY_ENTRY_IMPORT",
                                          "IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"))  # fmt: skip
    libraries: list[str] = []
    symbols: list[ImportedSymbol] = []
    for index, attribute in ((_IMPORT, "DIRECTORY_ENTRY_IMPORT"),
                             (_DELAY_IMPORT, "DIRECTORY_ENTRY_DELAY_IMPORT")):  # fmt: skip
        entries = list(getattr(pe, attribute, ()))
        _check_descriptors(pe, data, name, index, len(entries))
        for entry in entries:
            dll = entry.dll.decode("ascii", "replace")
            libraries.append(dll)
            symbols += [
                ImportedSymbol(
                    item.name.decode("ascii", "replace") if item.name else f"#{item.ordinal}", dll
                )
                for item in entry.imports
            ]
    return BinaryImports("pe", tuple(libraries), tuple(symbols))


# pefile warnings that judge a file's intent or whether Windows would run it, not whether it was
# read: a small DLL importing LoadLibrary and GetProcAddress, a section both writable and
# executable, one over 256 MiB or mapped past 0x10000000 (a CUDA torch_cuda.dll is over 1 GB),
# a section start off FileAlignment (pefile rounds it as the loader does), a Rich header not in
# Microsoft's form, an entry point outside the sections. A table it could not read warns in
# other words and fails.
_HEURISTICS = (
    "Imported symbols contain entries typical of packed executables",
    "Suspicious flags set for section",
    "Suspicious value found parsing section",
    "should normally be a multiple of FileAlignment",
    "Rich Header is",
    "SizeOfHeaders is smaller than AddressOfEntryPoint",
    "AddressOfEntryPoint lies outside the sections' boundaries",
)


def open_pe(
    data: bytes | Path, name: str, *, directories: tuple[str, ...], max_exports: int = 0x2000
) -> pefile.PE:
    """pefile's reading of data (bytes, or a file pefile maps: a CUDA torch DLL is over 1 GB)
    and the named data directories, checked whole: the headers and every section's bytes inside
    the file, and no warning (pefile warns, and reads on, where it hits a limit or a table it
    cannot follow: "Excessive number of imports", a bad RVA). WheelError naming what could not be
    read; a verdict is never drawn from part of a binary."""
    try:
        size = len(data) if isinstance(data, bytes) else data.stat().st_size
    except OSError as exc:
        _unreadable(name, f"it cannot be read ({exc.strerror or exc})")
    _allow_imports(size // 4)
    source = {"data": data} if isinstance(data, bytes) else {"name": str(data)}
    try:
        pe = pefile.PE(**source, fast_load=True, max_symbol_exports=max_exports)
        _check_pe_extent(pe, size, name)
        pe.parse_data_directories(directories=[pefile.DIRECTORY_ENTRY[d] for d in directories])
    except pefile.PEFormatError as exc:
        _unreadable(name, f"its PE headers cannot be read ({exc.value})")
    except (struct.error, ValueError, IndexError, AttributeError, TypeError, OSError) as exc:
        _unreadable(name, f"pefile could not parse it ({type(exc).__name__}: {exc})")
    warnings = [w for w in pe.get_warnings() if w and not any(h in w for h in _HEURISTICS)]
    if warnings:
        more = f" (and {len(warnings) - 1} more)" if len(warnings) > 1 else ""
        _unreadable(name, f"pefile could not read it whole: {warnings[0]}{more}")
    return pe


def _allow_imports(count: int) -> None:
    """Let pefile read as many imported names as the file can hold (a thunk is at least 4
    bytes). pefile stops at MAX_IMPORT_SYMBOLS (8,192) and warns; a torch-ABI extension may
    import more from torch's C++ API. The limit is pefile's one module setting and is only ever
    raised, so a parse running beside this one is never cut shorter."""
    if count > pefile.MAX_IMPORT_SYMBOLS:
        pefile.MAX_IMPORT_SYMBOLS = count


def _check_pe_extent(pe: pefile.PE, size: int, name: str) -> None:
    """Every header and section the file declares lies inside it (a cut file fails here)."""
    declared = pe.FILE_HEADER.NumberOfSections
    if len(pe.sections) != declared:
        _unreadable(name, f"it declares {declared} sections but {len(pe.sections)} could be read")
    headers = pe.OPTIONAL_HEADER.SizeOfHeaders
    table_end = pe.sections[-1].get_file_offset() + 40 if pe.sections else 0
    if headers > size or table_end > size:
        _unreadable(name, f"its headers end at byte {max(headers, table_end):,}, past its end")
    for section in pe.sections:
        end = section.PointerToRawData + section.SizeOfRawData
        if section.SizeOfRawData and end > size:
            label = section.Name.rstrip(b"\0").decode("ascii", "replace") or "?"
            _unreadable(
                name, f"section {label} ends at byte {end:,}, past the file's {size:,} bytes"
            )


def _check_descriptors(pe: pefile.PE, data: bytes, name: str, index: int, read: int) -> None:
    """The import table's descriptors as the file holds them, counted without pefile: pefile
    drops a descriptor whose names it cannot follow (and one past its repeated-address limit)
    without a warning, so its count must match."""
    directory = (
        pe.OPTIONAL_HEADER.DATA_DIRECTORY[index]
        if index < len(pe.OPTIONAL_HEADER.DATA_DIRECTORY)
        else None
    )
    if directory is None or not directory.VirtualAddress:
        if read:
            _unreadable(name, "pefile read imports from a directory the file does not have")
        return
    what = "delay-import" if index == _DELAY_IMPORT else "import"
    offset = pe.get_offset_from_rva(directory.VirtualAddress)
    if offset is None or not 0 <= offset < len(data):
        _unreadable(name, f"its {what} directory (RVA {directory.VirtualAddress:#x}) lies "
                          "outside the file")  # fmt: skip
    width = _DESCRIPTOR_SIZE[index]
    found = 0
    while True:
        entry = data[offset + found * width : offset + (found + 1) * width]
        if len(entry) < width:
            _unreadable(name, f"its {what} directory runs past the end of the file")
        if not any(entry):
            break
        found += 1
    if found != read:
        _unreadable(name, f"its {what} directory lists {found} DLLs but pefile could read "
                          f"{read} of them")  # fmt: skip


def _unreadable(name: str, problem: str) -> NoReturn:
    msg = f"{name}: {problem}: a binary that cannot be read whole is not passed; rebuild the wheel"
    raise WheelError(msg)
