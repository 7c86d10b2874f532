"""What a compiled binary takes from other libraries: the libraries it names and the symbols it
imports, read from an ELF `.so` (pyelftools: DT_NEEDED, undefined `.dynsym` entries) or a PE
`.pyd`/`.dll` (pefile: the import table, per DLL).

An ELF undefined symbol does not say which library defines it, so `ImportedSymbol.library` is
None there; a PE import always names its DLL. Nothing here judges: `verify.abi_audit` does.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Literal

import pefile
from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from mambawin.errors import WheelError

BinaryFormat = Literal["elf", "pe"]


@dataclass(frozen=True)
class ImportedSymbol:
    """One imported symbol: its name (`#N` for a PE import by ordinal) and, on PE, its DLL."""

    name: str
    library: str | None = None


@dataclass(frozen=True)
class BinaryImports:
    """The libraries a binary needs and the symbols it imports, in file order."""

    format: BinaryFormat
    libraries: tuple[str, ...]
    symbols: tuple[ImportedSymbol, ...]


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
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                # pyelftools sets `needed` on each DT_NEEDED tag at run time, from .dynstr.
                needed += [str(vars(tag)["needed"]) for tag in section.iter_tags("DT_NEEDED")]
            if isinstance(section, SymbolTableSection) and section.name == ".dynsym":
                symbols += [
                    ImportedSymbol(symbol.name)
                    for symbol in section.iter_symbols()
                    if symbol.name and symbol["st_shndx"] == "SHN_UNDEF"
                ]
    except (ELFError, ValueError, KeyError, OSError) as exc:
        msg = f"{name}: its ELF headers cannot be read ({exc}): rebuild the wheel"
        raise WheelError(msg) from None
    return BinaryImports("elf", tuple(needed), tuple(symbols))


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
