"""Tiny hand-made binaries for the readers' tests: an ELF header with nothing behind it, and PE32+
DLLs whose import, delay-import and export tables are laid out here byte by byte (no upstream
binary, no compiler: each field is written where the PE format puts it)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

# An ELF64 shared object's header and nothing else: no program header, no section (a file
# pyelftools reads whole, with no imports).
_ELF_HEADER = (3, 0x3E, 1, 0, 0, 0, 0, 64, 56, 0, 64, 0, 0)  # ET_DYN, x86-64, no tables
MINIMAL_ELF = b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HHIQQQIHHHHHH", *_ELF_HEADER)

PE_AT = 0x80  # where the PE signature starts (e_lfanew)
OPTIONAL_SIZE = 240  # PE32+ optional header with 16 data directories
SECTION_RVA = 0x1000
FILE_ALIGN = 0x200
RAW_AT = 0x200  # the one section's bytes: right after the headers


@dataclass
class Layout:
    """A section's bytes, grown field by field; each `put` returns the RVA of what it placed."""

    body: bytearray = field(default_factory=bytearray)

    def put(self, data: bytes, align: int = 8) -> int:
        self.body += bytes(-len(self.body) % align)
        at = SECTION_RVA + len(self.body)
        self.body += data
        return at

    def patch(self, rva: int, data: bytes) -> None:
        offset = rva - SECTION_RVA
        self.body[offset : offset + len(data)] = data


def pe_dll(
    imports: Sequence[tuple[str, Sequence[str]]] = (),
    *,
    delay: Sequence[tuple[str, Sequence[str]]] = (),
    exports: Sequence[str] = (),
    same_name_rva: bool = False,
    import_rva: int | None = None,
    characteristics: int = 0x40000040,
    entry: int = SECTION_RVA,
) -> bytes:
    """A PE32+ DLL with one section holding its import table (DLL -> names), delay-import table
    and export directory. same_name_rva: every thunk of a DLL points at one hint/name entry (what
    pefile drops without a warning); import_rva: the import directory's RVA as written."""
    layout = Layout()
    directories = [(0, 0)] * 16
    if imports:
        directories[1] = _imports(layout, imports, same_name_rva)
    if delay:
        directories[13] = _delay_imports(layout, delay)
    if exports:
        directories[0] = _exports(layout, exports)
    if import_rva is not None:
        directories[1] = (import_rva, 40)
    return _image(bytes(layout.body) or bytes(8), directories, characteristics, entry)


def _thunks(layout: Layout, names: Sequence[str], same: bool) -> tuple[int, int]:
    """(ILT, IAT) RVAs: two arrays of 8-byte thunks, each the RVA of a hint/name entry."""
    name_rvas = []
    for index, name in enumerate(names):
        if same and index:
            name_rvas.append(name_rvas[0])
            continue
        name_rvas.append(layout.put(struct.pack("<H", 0) + name.encode() + b"\0", 2))
    table = b"".join(struct.pack("<Q", rva) for rva in name_rvas) + bytes(8)
    return layout.put(table), layout.put(table)


def _imports(
    layout: Layout, imports: Sequence[tuple[str, Sequence[str]]], same: bool
) -> tuple[int, int]:
    size = 20 * (len(imports) + 1)
    at = layout.put(bytes(size), 4)
    for index, (dll, names) in enumerate(imports):
        ilt, iat = _thunks(layout, names, same)
        dll_rva = layout.put(dll.encode() + b"\0", 2)
        layout.patch(at + 20 * index, struct.pack("<IIIII", ilt, 0, 0, dll_rva, iat))
    return at, size


def _delay_imports(layout: Layout, imports: Sequence[tuple[str, Sequence[str]]]) -> tuple[int, int]:
    size = 32 * (len(imports) + 1)
    at = layout.put(bytes(size), 4)
    for index, (dll, names) in enumerate(imports):
        ilt, iat = _thunks(layout, names, False)
        dll_rva = layout.put(dll.encode() + b"\0", 2)
        handle = layout.put(bytes(8))
        # IMAGE_DELAYLOAD_DESCRIPTOR: attributes (1: RVAs), DllNameRVA, ModuleHandleRVA,
        # ImportAddressTableRVA, ImportNameTableRVA, bound IAT, unload IAT, time stamp
        entry = struct.pack("<IIIIIIII", 1, dll_rva, handle, iat, ilt, 0, 0, 0)
        layout.patch(at + 32 * index, entry)
    return at, size


def _exports(layout: Layout, names: Sequence[str]) -> tuple[int, int]:
    ordered = sorted(names)
    count = len(ordered)
    at = layout.put(bytes(40), 4)
    code = layout.put(b"\xc3" * count, 16)  # one `ret` per function: distinct addresses
    functions = layout.put(b"".join(struct.pack("<I", code + i) for i in range(count)), 4)
    name_rvas = [layout.put(n.encode() + b"\0", 1) for n in ordered]
    pointers = layout.put(b"".join(struct.pack("<I", r) for r in name_rvas), 4)
    ordinals = layout.put(b"".join(struct.pack("<H", i) for i in range(count)), 2)
    dll_name = layout.put(b"fixture.dll\0", 1)
    header = struct.pack(
        "<IIHHIIIIIII", 0, 0, 0, 0, dll_name, 1, count, count, functions, pointers, ordinals
    )
    layout.patch(at, header)
    return at, 40


def _image(
    body: bytes, directories: Sequence[tuple[int, int]], characteristics: int, entry: int
) -> bytes:
    raw_size = -(-len(body) // FILE_ALIGN) * FILE_ALIGN
    virtual = -(-len(body) // 0x1000) * 0x1000
    dos = b"MZ" + bytes(0x3A) + struct.pack("<I", PE_AT) + bytes(PE_AT - 0x40)
    coff = b"PE\0\0" + struct.pack("<HHIIIHH", 0x8664, 1, 0, 0, 0, OPTIONAL_SIZE, 0x2022)
    optional = struct.pack(
        "<HBBIIIIIQIIHHHHHHIIIIHHQQQQII",
        0x20B,  # PE32+
        14,
        0,
        0,
        len(body),
        0,
        entry,  # AddressOfEntryPoint: inside the section, as a linked DLL's is
        0,
        0x180000000,  # ImageBase
        0x1000,  # SectionAlignment
        FILE_ALIGN,
        6,
        0,
        0,
        0,
        6,
        0,
        0,
        SECTION_RVA + virtual,  # SizeOfImage
        RAW_AT,  # SizeOfHeaders
        0,
        3,  # console subsystem
        0x160,
        0x100000,
        0x1000,
        0x100000,
        0x1000,
        0,
        16,
    ) + b"".join(struct.pack("<II", rva, size) for rva, size in directories)
    section = struct.pack(
        "<8sIIIIIIHHI",
        b".rdata",
        len(body),
        SECTION_RVA,
        raw_size,
        RAW_AT,
        0,
        0,
        0,
        0,
        characteristics,
    )
    head = dos + coff + optional + section
    return head + bytes(RAW_AT - len(head)) + body + bytes(raw_size - len(body))
