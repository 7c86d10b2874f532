"""What a compiled binary takes from other libraries: the libraries it names and the symbols it
imports, read from an ELF `.so` (pyelftools: DT_NEEDED, undefined `.dynsym` entries with the
version each needs, `GLIBC_2.38`) or a PE `.pyd`/`.dll` (pefile: the import table, per DLL).

An ELF undefined symbol does not say which library defines it, so `ImportedSymbol.library` is
None there; a PE import always names its DLL. Nothing here judges: `wheel.abi_audit` does.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Literal

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
    except (ELFError, ValueError, KeyError, OSError) as exc:
        msg = f"{name}: its ELF headers cannot be read ({exc}): rebuild the wheel"
        raise WheelError(msg) from None
    return BinaryImports("elf", tuple(needed), tuple(symbols), tuple(sorted(runtime)))


def _needed_versions(elf: ELFFile) -> dict[int, str]:
    """Version index -> name (`GLIBC_2.38`) from .gnu.version_r, the versions the binary needs."""
    found: dict[int, str] = {}
    for section in elf.iter_sections():
        if isinstance(section, GNUVerNeedSection):
            for _, auxiliaries in section.iter_versions():
                found.update((int(aux["vna_other"]), str(aux.name)) for aux in auxiliaries)
    return found


def _versym(elf: ELFFile, dynsym: SymbolTableSection) -> GNUVerSymSection | None:
    """.gnu.version, when it holds one entry per .dynsym symbol (else no versions are read)."""
    section = elf.get_section_by_name(".gnu.version")
    if isinstance(section, GNUVerSymSection) and section.num_symbols() == dynsym.num_symbols():
        return section
    return None


def _undefined(
    dynsym: SymbolTableSection, versym: GNUVerSymSection | None, versions: dict[int, str]
) -> list[ImportedSymbol]:
    """The undefined .dynsym symbols; .gnu.version holds one version index per symbol, in order."""
    indexes = versym.iter_symbols() if versym is not None else iter(())
    found: list[ImportedSymbol] = []
    for symbol in dynsym.iter_symbols():
        index = next(indexes, None)
        if not symbol.name or symbol["st_shndx"] != "SHN_UNDEF":
            continue
        ndx = index["ndx"] if index is not None else None
        # 0 and 1 (local, global) arrive as names; bit 15 marks a hidden version.
        version = versions.get(ndx & 0x7FFF) if isinstance(ndx, int) else None
        found.append(ImportedSymbol(symbol.name, version=version))
    return found


def _pe_imports(data: bytes, name: str) -> BinaryImports:
    try:
        pe = pefile.PE(data=data, fast_load=True)
        pe.parse_data_directories(
            directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"]]
        )
    except pefile.PEFormatError as exc:
        msg = f"{name}: its PE headers cannot be read ({exc.value}): rebuild the wheel"
        raise WheelError(msg) from None
    libraries: list[str] = []
    symbols: list[ImportedSymbol] = []
    for entry in getattr(pe, "DIRECTORY_ENTRY_IMPORT", ()):
        dll = entry.dll.decode("ascii", "replace")
        libraries.append(dll)
        symbols += [
            ImportedSymbol(
                item.name.decode("ascii", "replace") if item.name else f"#{item.ordinal}", dll
            )
            for item in entry.imports
        ]
    return BinaryImports("pe", tuple(libraries), tuple(symbols))
