"""What a stable-ABI wheel must be, beside its binaries passing the audit (abi_audit.py).

Its tags and its provenance agree (py3-none-<platform> and abi "stable"), every compiled library
passes the audit against the floor, the shim upstream's Python imports names the library, METADATA
requires torch at or above the floor, and the torch headers it was compiled against are the
floor's. Every wheel's libraries are read whole (a cut `.pyd` fails even where nothing loads it).
These are the static step's rows and the stable build's check before it writes its wheel.
"""

from __future__ import annotations

import ast
import re
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import Specifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from mambawin.abi import (
    STABLE_ABI_TAG,
    STABLE_PYTHON_TAG,
    stable_library,
    stable_library_files,
    stable_shim,
    torch_requirement,
)
from mambawin.errors import WheelError
from mambawin.versions import at_least, release
from mambawin.wheel.abi_audit import Audit, audit_binary
from mambawin.wheel.imports import read_imports
from mambawin.wheel.info import WheelInfo, read_member, read_text_member
from mambawin.wheel.naming import WheelFileName
from mambawin.wheel.provenance import Provenance

BINARY_SUFFIXES = (".so", ".pyd", ".dll")


@dataclass(frozen=True)
class StableCheck:
    """The static step's `abi` check of a stable wheel: its verdict, one line, every violation."""

    ok: bool
    message: str
    violations: tuple[str, ...] = ()


def is_stable(provenance: Provenance | None) -> bool:
    """Whether a wheel's provenance (None: it has none) says a stable-ABI build."""
    return provenance is not None and provenance.is_stable


def stable_tagged(file: WheelFileName) -> bool:
    """Whether the file name is tagged the way a stable wheel is: py3-none-<platform>."""
    return (
        file.python == STABLE_PYTHON_TAG and file.abi == STABLE_ABI_TAG and file.platform != "any"
    )


def floor_of(provenance: Provenance | None) -> Version:
    """A wheel's floor (`Provenance.floor`; STABLE_FLOOR when it has no provenance)."""
    return (provenance or Provenance()).floor


def check_stable_wheel(
    archive: zipfile.ZipFile, info: WheelInfo, provenance: Provenance | None
) -> StableCheck | None:
    """The stable-ABI audit of a wheel opened once; None for a wheel built against torch's C++
    ABI and tagged as one (the check does not apply)."""
    record = provenance or Provenance()
    stable, tagged = record.is_stable, stable_tagged(info.file)
    if not stable and not tagged:
        return None
    recorded = record.abi if record.stored.get("abi") else "missing"
    if not stable:
        return StableCheck(False, (
            f"tagged {info.file.python}-{info.file.abi} (a stable wheel) but the provenance's abi "
            f"is {recorded!r}: rebuild it with `mambawin build --abi stable`, or build a "
            "cpXY-tagged wheel for one torch"
        ))  # fmt: skip
    if not tagged:
        return StableCheck(False, (
            f"the provenance says abi 'stable' but the wheel is tagged {info.file.python}-"
            f"{info.file.abi}: a stable wheel is py3-none-<platform>; rebuild it with "
            "`mambawin build --abi stable`"
        ))  # fmt: skip
    return audit_libraries(archive, info, record.floor)


def audit_libraries(archive: zipfile.ZipFile, info: WheelInfo, floor: Version) -> StableCheck:
    """Every compiled library of a wheel opened once, against the floor: what verify's static step
    and the stable build (before it writes its wheel) both judge."""
    binaries = [m for m in info.members if m.lower().endswith(BINARY_SUFFIXES)]
    if not binaries:
        return StableCheck(False, "a stable wheel with no compiled library: rebuild it")
    audits = [
        audit_binary(
            PurePosixPath(m).name,
            read_imports(read_member(info.path, archive, m), m),
            floor,
        )
        for m in binaries
    ]
    return summarize(audits)


def check_binaries_whole(archive: zipfile.ZipFile, info: WheelInfo) -> StableCheck:
    """Every compiled library of the wheel read whole (headers, sections and import tables
    inside the file, nothing pefile or pyelftools gave up on): what the static step requires of
    every wheel, so a cut or malformed `.pyd` fails even where nothing loads it (`--skip load`,
    a Linux machine without wine)."""
    binaries = [m for m in info.members if m.lower().endswith(BINARY_SUFFIXES)]
    for member in binaries:
        read_imports(read_member(info.path, archive, member), PurePosixPath(member).name)
    if not binaries:
        return StableCheck(True, "no compiled library in the wheel")
    return StableCheck(True, f"{len(binaries)} compiled libraries read whole")


def check_files_whole(paths: Iterable[Path]) -> StableCheck:
    """check_binaries_whole for installed files (verify --installed): each compiled library
    among paths read whole; a Python stand-in is no binary and is not read."""
    binaries = [p for p in paths if p.name.lower().endswith(BINARY_SUFFIXES)]
    for path in binaries:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise WheelError(f"{path} cannot be read ({exc}): reinstall the wheel") from None
        read_imports(data, path.name)
    return StableCheck(True, f"{len(binaries)} compiled libraries read whole")


def check_headers(provenance: Provenance | None) -> StableCheck | None:
    """Which torch headers a stable binary was compiled against, beside its floor (the static
    step's advisory `headers` row). The floor is proven by compiling against the floor's own
    headers; newer ones warn: the audit checked every import against the floor's exports, but an
    inline function or macro of the newer headers is compiled in, where no import shows it.
    None for a record written before the headers were kept, or with a floor that is no version
    (the abi row reports that)."""
    record = provenance or Provenance()
    if not record.torch_headers:
        return None
    try:
        floor = record.floor
    except WheelError:
        return None
    if release(record.torch_headers, 2) == release(floor, 2):
        return StableCheck(True, f"compiled against torch {record.torch_headers}'s headers: the "
                                 "floor's own")  # fmt: skip
    return StableCheck(False, (
        f"compiled against torch {record.torch_headers}'s headers, not the floor {floor}'s: each "
        f"import was checked against torch {floor}'s exports, but what those headers compile in "
        f"(inline functions, macros) is unproven on {floor}; rebuild against torch {floor}'s "
        f"headers (`mambawin toolchain windows --setup --torch {floor}.0`)"
    ))  # fmt: skip


_REBUILD = "rebuild it with `mambawin build --abi stable`"


# Any stable library's file name, to say which one a foreign shim loads instead.
_ANY_LIBRARY = re.compile(r"[\w.]+_stable(\.abi3)?\.(so|pyd)")


def check_shim(archive: zipfile.ZipFile, info: WheelInfo, extension: str) -> StableCheck:
    """The shim a stable wheel needs: `<extension>.py` at its top level, Python that names a
    library file (abi.stable_library_files) the wheel holds beside it. Without it upstream's
    `import <extension>` fails, or loads nothing, only once the wheel is installed."""
    shim, files = stable_shim(extension), stable_library_files(extension)
    if shim not in info.members:
        return StableCheck(False, (
            f"the wheel has no {shim}, the shim that loads {stable_library(extension)}: "
            f"upstream's `import {extension}` would fail; {_REBUILD}"
        ))  # fmt: skip
    named, problem = _shim_names(read_text_member(info.path, archive, shim), shim, files)
    if problem is not None:
        return StableCheck(False, f"{problem}; {_REBUILD}")
    beside = [f for f in files if f in named and f in info.members]
    if not beside:
        wanted = " or ".join(f for f in files if f in named)
        return StableCheck(False, (
            f"{shim} loads {wanted} from its own folder, but the wheel holds none at its top "
            f"level; {_REBUILD}"
        ))  # fmt: skip
    return StableCheck(True, f"{shim} loads {beside[0]}, which the wheel holds beside it")


def _shim_names(raw: bytes, shim: str, files: Sequence[str]) -> tuple[set[str], str | None]:
    """The shim's string literals, and why it cannot load the library (None: it names one of
    `files`). The text is parsed, never run."""
    if not raw.strip():
        return set(), f"{shim} is empty: it loads no library and binds none of upstream's functions"
    try:
        named = _string_constants(raw)
    except (SyntaxError, ValueError, RecursionError) as exc:
        return set(), f"{shim} is not Python ({type(exc).__name__}: {exc})".splitlines()[0]
    if any(f in named for f in files):
        return named, None
    others = sorted(n for n in named if _ANY_LIBRARY.fullmatch(n))
    instead = f" (it loads {others[0]}: another package's shim)" if others else ""
    return named, f"{shim} loads none of {', '.join(files)}{instead}"


def _string_constants(raw: bytes) -> set[str]:
    """Every string literal in a Python source (bytes: ast honours its coding cookie and BOM)."""
    tree = ast.parse(raw)
    return {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def check_torch_floor(requires: Sequence[str], floor: Version) -> StableCheck:
    """Whether Requires-Dist holds a stable wheel to its floor: an unconditional torch
    requirement that admits the floor and no older torch (compared by epoch and release numbers,
    as the fit step compares them: versions.at_least). Without it pip installs the wheel beside
    a torch it cannot load in."""
    fix = f"a stable wheel requires {torch_requirement(floor)}; {_REBUILD}"
    torch = [r for r in _parsed(requires) if canonicalize_name(r.name) == "torch"]
    if not torch:
        return StableCheck(False, f"METADATA requires no torch: {fix}")
    plain = [r for r in torch if r.marker is None]
    if not plain:
        return StableCheck(False, (
            f"Requires-Dist {torch[0]} holds only where its marker does, so elsewhere any torch "
            f"is accepted: {fix}"
        ))  # fmt: skip
    specifier = SpecifierSet()
    for requirement in plain:
        specifier &= requirement.specifier
    shown = ", ".join(str(r) for r in plain) + ("" if specifier else " (no version)")
    bound = lowest_admitted(specifier)
    if bound is None or not at_least(bound, floor):
        return StableCheck(False, (
            f"Requires-Dist {shown} admits torch older than {floor}, where the stable library "
            f"does not load: {fix}"
        ))  # fmt: skip
    if not specifier.contains(floor, prereleases=True):
        return StableCheck(False, (
            f"Requires-Dist {shown} refuses torch {floor}, the floor the wheel records: {fix}"
        ))  # fmt: skip
    return StableCheck(True, f"requires {shown}: the stable floor, torch >= {floor}")


def _parsed(requires: Sequence[str]) -> list[Requirement]:
    """The requirements that parse (the metadata check reports the others)."""
    found = []
    for text in requires:
        try:
            found.append(Requirement(text))
        except InvalidRequirement:
            continue
    return found


def lowest_admitted(specifier: SpecifierSet) -> Version | None:
    """The lowest version the specifiers together may admit, or None when nothing bounds them
    from below (`<3`, `!=2.9`, no specifier): the intersection starts at the highest bound."""
    bounds = [b for spec in specifier if (b := _lower_bound(spec)) is not None]
    return max(bounds) if bounds else None


def _lower_bound(spec: Specifier) -> Version | None:
    if spec.operator not in (">=", ">", "~=", "==", "==="):
        return None  # <, <=, != admit every older version
    try:
        return Version(spec.version.removesuffix(".*"))
    except InvalidVersion:
        return None  # `===` with text that is no version: nothing to compare


def stable_libraries(shim: Path, extension: str) -> list[Path]:
    """The stable library (`<extension>_stable*.so|.pyd|.dll`) beside its installed Python shim."""
    prefix = stable_library(extension)
    try:
        found = [p for p in shim.parent.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return []
    return sorted(p for p in found if p.suffix.lower() in BINARY_SUFFIXES and p.is_file())


def check_stable_files(paths: Iterable[Path], floor: Version) -> StableCheck:
    """The stable-ABI audit of installed libraries (verify --installed)."""
    audits = [audit_binary(p.name, read_imports(p.read_bytes(), p.name), floor) for p in paths]
    if not audits:
        return StableCheck(False, "the stable library is not installed beside its Python shim")
    return summarize(audits)


def summarize(audits: Sequence[Audit]) -> StableCheck:
    """One line for the static step, and every violation's line."""
    lines = tuple(f"{a.binary}: {v.line}" for a in audits for v in a.violations)
    if lines:
        more = f" (and {len(lines) - 1} more: --json lists each)" if len(lines) > 1 else ""
        return StableCheck(False, f"stable ABI broken: {lines[0]}{more}", lines)
    first = audits[0]
    symbols = sorted({s for a in audits for s in a.torch_symbols})
    names = ", ".join(a.binary for a in audits)
    return StableCheck(True, (
        f"stable ABI: {names} imports {len(symbols)} stable C symbols of torch "
        f"{first.checked_against}, no torch C++ and no Python: fits torch >= {first.floor}, "
        "any Python"
    ))  # fmt: skip
